import CouchAPI
import CouchTestSupport
import Foundation
import HTTPTypes
import JSON
import Log
import Projections
import Testing

/// `_purge` and `_redact`: the bytes leave every file, the proofs stay.
@Suite struct PurgeTests {
  static let secrets = [
    "ZEBRA-SECRET-PAGE", "ZEBRA-SECRET-MANGO", "ZEBRA-SECRET-ATTACHMENT", "ZEBRA-SECRET-OLD",
  ]

  /// Which of `needles` some file under `path` holds.
  static func filesHolding(_ needles: [String], under path: String) -> [String] {
    var found: [String] = []
    let fm = FileManager.default
    guard let walker = fm.enumerator(atPath: path) else { return [] }
    while let name = walker.nextObject() as? String {
      let file = path + "/" + name
      var isDirectory: ObjCBool = false
      guard fm.fileExists(atPath: file, isDirectory: &isDirectory), !isDirectory.boolValue,
        let data = fm.contents(atPath: file)
      else { continue }
      for needle in needles where data.range(of: Data(needle.utf8)) != nil {
        found.append("\(needle) in \(name)")
      }
    }
    return found
  }

  @Test func purgedAndRedactedBytesAreInNoFileAndProofsHold() async throws {
    try await withServer { client, dir in
      #expect(try await client.call(.put, "/wiki").code == 201)
      let store = try dir.data.open("wiki")
      try await client.call(
        .put, "/wiki/w1", #"{"type":"wiki","title":"W","owner_id":"admin","members":[]}"#)
      // A page whose first revision held a secret, then was edited.
      let page1 = try await client.call(
        .put, "/wiki/w1:Secret",
        #"{"type":"page","wiki_id":"w1","markdown":"the password is ZEBRA-SECRET-OLD"}"#)
      let rev1 = try #require(page1["rev"]?.stringValue)
      let page2 = try await client.call(
        .put, "/wiki/w1:Secret",
        #"{"_rev":"\#(rev1)","type":"page","wiki_id":"w1","markdown":"nothing to see"}"#)
      let rev2 = try #require(page2["rev"]?.stringValue)
      // A page whose current revision holds one (searched), a Mango-indexed field, and an
      // attachment.
      let leak = try await client.call(
        .put, "/wiki/w1:Leak",
        #"{"type":"page","wiki_id":"w1","markdown":"ZEBRA-SECRET-PAGE is here"}"#)
      #expect(
        try await client.call(.post, "/wiki/_index", #"{"index":{"fields":["code"]}}"#).code
          == 200)
      let mango = try await client.call(.put, "/wiki/m", #"{"code":"ZEBRA-SECRET-MANGO"}"#)
      let blob = Data("ZEBRA-SECRET-ATTACHMENT".utf8).base64EncodedString()
      let attached = try await client.call(
        .put, "/wiki/a",
        #"{"_attachments":{"f.bin":{"content_type":"application/octet-stream","data":"\#(blob)"}}}"#
      )
      try store.index(named: "search")?.catchUp()
      // Every secret is somewhere now (the search finds them where they are).
      #expect(Self.filesHolding(Self.secrets, under: dir.path).count >= Self.secrets.count)
      let before = try store.log.treeHead()
      let firstProof = try store.log.inclusionProof(position: 1)

      // Redact the old revision; the current one cannot be.
      let redacted = try await client.call(
        .post, "/wiki/_redact?reason=leak", #"{"w1:Secret":["\#(rev1)"]}"#)
      #expect(redacted.code == 201)
      #expect(redacted["redacted"]?["w1:Secret"] == .array([.string(rev1)]))
      let current = try await client.call(.post, "/wiki/_redact", #"{"w1:Secret":["\#(rev2)"]}"#)
      #expect(current.code == 409)
      let gone = try await client.call(.get, "/wiki/w1:Secret?rev=\(rev1)")
      #expect(gone.code == 404 && gone["reason"] == .string("redacted"))
      #expect(
        try await client.call(.get, "/wiki/w1:Secret")["markdown"] == .string("nothing to see"))
      let revs = try await client.call(.get, "/wiki/w1:Secret?revs=true")
      #expect(revs["_revisions"]?["ids"]?.arrayValue?.count == 2)

      // Purge the rest.
      let body = """
        {"w1:Leak":["\(leak["rev"]!.stringValue!)"],"m":["\(mango["rev"]!.stringValue!)"],
         "a":["\(attached["rev"]!.stringValue!)"],"nothing":["1-abc"]}
        """
      let purged = try await client.call(.post, "/wiki/_purge", body)
      #expect(purged.code == 201)
      #expect(purged["purge_seq"] == .null)
      #expect(purged["purged"]?["m"]?.arrayValue?.count == 1)
      #expect(purged["purged"]?["nothing"] == .array([]))
      #expect(try await client.call(.get, "/wiki/m").code == 404)
      #expect(try await client.call(.get, "/wiki/a/f.bin").code == 404)
      let found = try await client.call(
        .post, "/wiki/_find", #"{"selector":{"code":{"$gt":null}}}"#)
      #expect(found["docs"] == .array([]))
      let all = try await client.call(.get, "/wiki/_all_docs")
      let ids = all["rows"]?.arrayValue?.compactMap { $0["id"]?.stringValue } ?? []
      #expect(ids.filter { !$0.hasPrefix("_design/") } == ["w1", "w1:Secret"])
      let infos = try await client.call(.get, "/wiki/_purged_infos")
      // Every document named is recorded, as CouchDB records them, with the revisions asked.
      #expect(infos["purged_infos"]?.arrayValue?.count == 4)
      #expect(
        infos["purged_infos"]?.arrayValue?.contains {
          $0["id"] == .string("nothing") && $0["revs"] == .array([.string("1-abc")])
        } == true)
      #expect(try await client.call(.get, "/wiki")["purge_seq"]?.seq == 4)

      // Gone from every file of the data directory: the log, its free pages, the indexes,
      // the attachment files.
      #expect(Self.filesHolding(Self.secrets, under: dir.path) == [])

      // The proofs: heads and proofs taken before still check; verify is clean.
      let reopened = try dir.data.open("wiki")
      #expect(try reopened.log.treeRoot(size: before.size) == before.root)
      #expect(
        try reopened.log.inclusionProof(position: 1, treeSize: before.size).root == before.root)
      #expect(firstProof.root == before.root)
      #expect(try reopened.log.verify(head: before).problems == [])
      for name in reopened.projectionNames {
        let differences = try reopened.verify(name)
        #expect(differences == [], "\(name): \(differences)")
      }
      let erased = try reopened.log.erasedEvents()
      #expect(erased.count == 4)
      let proof = try reopened.log.inclusionProof(position: erased[0].position)
      #expect(proof.erasedBy == erased[0].erasedBy && proof.erasedLeafHash != nil)
      #expect(proof.root == (try reopened.log.treeHead()).root)
    }
  }

  @Test func redactedConflictLeavesAreMissingToReplication() async throws {
    try await withServer { client, dir in
      #expect(try await client.call(.put, "/db").code == 201)
      let base = try await client.call(.put, "/db/d", #"{"v":1}"#)
      let rev1 = try #require(base["rev"]?.stringValue)
      let hash1 = String(rev1.dropFirst(2))
      try await client.call(.put, "/db/d", #"{"_rev":"\#(rev1)","v":2}"#)
      let conflict = "2-ffffffffffffffffffffffffffffffff"
      let replicated = try await client.call(
        .post, "/db/_bulk_docs",
        #"{"new_edits":false,"docs":[{"_id":"d","_rev":"\#(conflict)","v":"SECRET-BRANCH","_revisions":{"start":2,"ids":["ffffffffffffffffffffffffffffffff","\#(hash1)"]}}]}"#
      )
      #expect(replicated.code == 201)
      let winner = try await client.call(.get, "/db/d")
      let losing = winner["_rev"]?.stringValue == conflict ? nil : conflict
      guard let losing else { return }
      #expect(try await client.call(.post, "/db/_redact", #"{"d":["\#(losing)"]}"#).code == 201)
      let open = try await client.call(.get, "/db/d?open_revs=all")
      let rows = open.json?.arrayValue ?? []
      #expect(rows.contains { $0["missing"] == .string(losing) })
      #expect(!open.text.contains("SECRET-BRANCH"))
      #expect(Self.filesHolding(["SECRET-BRANCH"], under: dir.path) == [])
    }
  }

  @Test func purgeChecksItsRequestAndLimit() async throws {
    try await withServer { client, _ in
      #expect(try await client.call(.put, "/db").code == 201)
      #expect(try await client.call(.post, "/db/_purge", "[]").code == 400)
      let notAList = try await client.call(.post, "/db/_purge", #"{"a":"1-x"}"#)
      #expect(notAList.code == 400 && notAList["reason"] == .string("Invalid list of revisions"))
      let many = (0..<101).map { #""d\#($0)":[]"# }.joined(separator: ",")
      let tooMany = try await client.call(.post, "/db/_purge", "{\(many)}")
      #expect(
        tooMany.code == 400 && tooMany["reason"] == .string("Exceeded maximum number of documents.")
      )
      #expect(try await client.call(.get, "/db/_purge").code == 405)
      let odd = try await client.call(.post, "/db/_purge", #"{"_local/x":["1-abc"],"":[]}"#)
      #expect(odd.code == 201 && odd["purged"]?["_local/x"] == .array([]))
      #expect(try await client.call(.get, "/db/_purged_infos")["purged_infos"] == .array([]))
      #expect(try await client.call(.get, "/db/_purged_infos_limit").json == .number(1000))
      #expect(try await client.call(.put, "/db/_purged_infos_limit", "5").code == 200)
      #expect(try await client.call(.get, "/db/_purged_infos_limit").json == .number(5))
      #expect(try await client.call(.put, "/db/_purged_infos_limit", "-1").code == 400)
      let dry = try await client.call(.put, "/db/x", #"{"v":1}"#)
      let rev = try #require(dry["rev"]?.stringValue)
      let plan = try await client.call(.post, "/db/_redact?dry_run=true", #"{"x":["\#(rev)"]}"#)
      #expect(plan.code == 409)  // the current revision
      let purgePlan = try await client.call(.post, "/db/_purge?dry_run=true", #"{"x":["\#(rev)"]}"#)
      #expect(purgePlan["purged"]?["x"] == .array([.string(rev)]))
      #expect(try await client.call(.get, "/db/x").code == 200)
    }
  }

  @Test func onlyDatabaseAdminsPurgeOrRedact() async throws {
    try await withAccessServer { client, fixture in
      let page = try fixture.store.get("w1:Home")
      let rev = try #require(page["_rev"]?.stringValue)
      for who in ["alice", "bob"] {
        let refused = try await client.call(
          .post, "/wiki/_purge", #"{"w1:Home":["\#(rev)"]}"#, headers: AccessFixture.basic(who))
        #expect(refused.code == 403, "\(who)")
        let redact = try await client.call(
          .post, "/wiki/_redact", #"{"w1:Home":["\#(rev)"]}"#, headers: AccessFixture.basic(who))
        #expect(redact.code == 403, "\(who)")
      }
      #expect(try fixture.store.get("w1:Home")["_rev"]?.stringValue == rev)
      // The store checks it again in the transaction that writes (a caller demoted after the
      // server's check, an embedding app's user): refused, nothing written.
      let events = try fixture.store.log.read { try $0.lastPosition }
      await #expect(throws: StoreError.self) {
        try await WriteAccess.$user.withValue(UserContext(name: "alice", roles: [])) {
          _ = try await fixture.dir.data.erase(
            .purge, [("w1:Home", [rev])], in: "wiki", actor: "alice")
        }
      }
      #expect(try fixture.store.log.read { try $0.lastPosition } == events)
      let done = try await client.call(
        .post, "/wiki/_purge", #"{"w1:Home":["\#(rev)"]}"#, headers: AccessFixture.basic("admin"))
      #expect(done.code == 201)
    }
  }
}
