import CouchAPI
import CouchTestSupport
import Foundation
import HTTPTypes
import HummingbirdTesting
import JSON
import NIOCore
import Projections
import Query
import Replication
import Testing

/// Ways around the access rules that a hostile sweep found, each closed (the fixture:
/// alice owns `w1` with bob a member, carol owns `w2`, `note` is admin-only).
@Suite struct AccessHoleTests {
  static func headers(_ who: String?) -> HTTPFields { AccessFixture.headers(who) }

  @Test("a document that exists or existed, and never was a wiki, cannot be made one's own wiki")
  func existingDocumentIsNoNewWiki() async throws {
    try await withAccessServer { client, fixture in
      let mine = #"{"type":"wiki","title":"mine","owner_id":"carol","members":[]}"#
      // A live admin-only document, by a local edit of its winner and by a replicated branch.
      let rev = try fixture.store.get("note")["_rev"]!.stringValue!
      let edit = try await client.call(
        .put, "/wiki/note",
        #"{"_rev":"\#(rev)","type":"wiki","title":"mine","owner_id":"carol","members":[]}"#,
        headers: Self.headers("carol"))
      #expect(edit.code == 403)
      let branch = try await client.call(
        .post, "/wiki/_bulk_docs",
        #"{"new_edits":false,"docs":[{"_id":"note","_rev":"9-eeee","type":"wiki","title":"mine","owner_id":"carol","members":[]}]}"#,
        headers: Self.headers("carol"))
      #expect(branch.json?[0]?["error"]?.stringValue == "forbidden")
      #expect(try fixture.store.get("note")["type"]?.stringValue == "note")
      #expect(try fixture.store.get("note")["_conflicts"] == nil)
      // A deleted one: its old revisions stay out of reach.
      _ = try fixture.store.put(#"{"text":"SECRET"}"#, id: "secret", actor: "admin")
      let secretRev = try fixture.store.get("secret")["_rev"]!.stringValue!
      _ = try fixture.store.delete("secret", rev: secretRev, actor: "admin")
      let recreate = try await client.call(
        .put, "/wiki/secret", mine, headers: Self.headers("carol"))
      #expect(recreate.code == 403)
      let old = try await client.call(
        .get, "/wiki/secret?rev=\(secretRev)", headers: Self.headers("carol"))
      #expect(old.code == 404)
      // A new id is still a new wiki of carol's.
      #expect(
        try await client.call(.put, "/wiki/w3", mine, headers: Self.headers("carol")).code == 201)
    }
  }

  @Test("pages that arrived before their wiki: only an administrator may create the wiki")
  func pagesBeforeTheirWiki() async throws {
    try await withAccessServer { client, fixture in
      _ = try fixture.store.bulkDocs(
        [
          json(
            #"{"_id":"ghost:Plan","_rev":"1-aaaa","type":"page","wiki_id":"ghost","markdown":"the plan"}"#
          )
        ],
        newEdits: false, actor: "admin")
      let claim = #"{"type":"wiki","title":"ghost","owner_id":"carol","members":[]}"#
      let r = try await client.call(.put, "/wiki/ghost", claim, headers: Self.headers("carol"))
      #expect(r.code == 403)
      #expect(r["reason"]?.stringValue?.contains("only an administrator") == true)
      #expect(
        try await client.call(.get, "/wiki/ghost:Plan", headers: Self.headers("carol")).code == 404)
      let byAdmin = try await client.call(
        .put, "/wiki/ghost", claim.replacingOccurrences(of: "carol", with: "alice"),
        headers: Self.headers("admin"))
      #expect(byAdmin.code == 201)
      #expect(
        try await client.call(.get, "/wiki/ghost:Plan", headers: Self.headers("alice")).code == 200)
    }
  }

  @Test("a member cannot undo, on a losing leaf, the membership an owner wrote there")
  func memberCannotWidenALosingLeaf() async throws {
    try await withAccessServer { client, fixture in
      // w1: alice owns it, bob and now carol are members; a conflicting leaf drops carol.
      let current = try fixture.store.get("w1")
      let rev = current["_rev"]!.stringValue!
      let widened = try await client.call(
        .put, "/wiki/w1",
        #"{"_rev":"\#(rev)","type":"wiki","title":"Secret w1","owner_id":"alice","members":["bob","carol"]}"#,
        headers: Self.headers("alice"))
      #expect(widened.code == 201)
      let start = Int(rev.split(separator: "-")[0])!
      _ = try fixture.store.bulkDocs(
        [
          json(
            #"{"_id":"w1","_rev":"\#(start + 1)-0000","_revisions":{"start":\#(start + 1),"ids":["0000","\#(rev.split(separator: "-")[1])"]},"type":"wiki","title":"Secret w1","owner_id":"alice","members":["bob"]}"#
          )
        ], newEdits: false, actor: "alice")
      #expect(
        try await client.call(.get, "/wiki/w1:Home", headers: Self.headers("carol")).code == 404)
      // bob extends the narrower leaf with carol back in: refused, he is no owner.
      let leaves = try fixture.store.openRevs("w1", .all).compactMap { $0["ok"] }
      let narrow = leaves.first { $0["members"]?.strings == ["bob"] }!["_rev"]!.stringValue!
      let undo = try await client.call(
        .put, "/wiki/w1",
        #"{"_rev":"\#(narrow)","type":"wiki","title":"Secret w1","owner_id":"alice","members":["bob","carol"]}"#,
        headers: Self.headers("bob"))
      #expect(undo.code == 403)
      #expect(
        try await client.call(.get, "/wiki/w1:Home", headers: Self.headers("carol")).code == 404)
      // The owner resolves it.
      let resolved = try await client.call(
        .put, "/wiki/w1",
        #"{"_rev":"\#(narrow)","type":"wiki","title":"Secret w1","owner_id":"alice","members":["bob","carol"]}"#,
        headers: Self.headers("alice"))
      #expect(resolved.code == 201)
    }
  }

  @Test("_users: no replicated revisions by users, no deletion that leaves another leaf winning")
  func usersCannotPlantRevisions() async throws {
    try await withAccessServer { client, fixture in
      let id = "org.couchdb.user:bob"
      let path = "/_users/" + encodeID(id)
      let doc = try await client.call(.get, path, headers: Self.headers("bob"))
      #expect(doc.code == 200)
      guard case .object(var body) = doc.json else { return }
      body["_rev"] = .string("1-ffff")
      let planted = try await client.call(
        .put, path + "?new_edits=false",
        String(decoding: JSONValue.object(body).serialized(), as: UTF8.self),
        headers: Self.headers("bob"))
      #expect(planted.code == 403)
      // A conflicting leaf made by an administrator (while bob was one, say): bob may not
      // delete the winner to let it win.
      body["_rev"] = .string("1-" + String(repeating: "0", count: 32))  // loses to bob's
      body["roles"] = .array([.string("_admin")])
      let byAdmin = try await client.call(
        .put, path + "?new_edits=false",
        String(decoding: JSONValue.object(body).serialized(), as: UTF8.self),
        headers: Self.headers("admin"))
      #expect(byAdmin.code == 201)
      let winner = try await client.call(.get, path, headers: Self.headers("bob"))
      let winnerRev = winner["_rev"]!.stringValue!
      #expect(winner["roles"]?.strings == [])
      let delete = try await client.call(
        .delete, path + "?rev=\(winnerRev)", headers: Self.headers("bob"))
      #expect(delete.code == 403)
      // Nor by a PUT that deletes it.
      let putDeleted = try await client.call(
        .put, path, #"{"_rev":"\#(winnerRev)","_deleted":true}"#, headers: Self.headers("bob"))
      #expect(putDeleted.code == 403)
      // Still not an administrator.
      let allDbs = try await client.call(.get, "/_all_dbs", headers: Self.headers("bob"))
      #expect(allDbs.code == 401 && allDbs.error == "unauthorized")
    }
  }

  @Test("writes to documents one may not see answer as writes to missing ones do")
  func noExistenceOracleInWrites() async throws {
    try await withAccessServer { client, fixture in
      let rev = try fixture.store.get("w1:Home")["_rev"]!.stringValue!
      var attachment = Self.headers("carol")
      attachment[.contentType] = "text/plain"
      for (id, query) in [
        ("w1:Home", ""), ("w1:Nope", ""), ("w1:Home", "?rev=\(rev)"), ("w1:Home", "?rev=2-0000"),
      ] {
        let put = try await client.execute(
          uri: "/wiki/\(encodeID(id))/probe.txt\(query)", method: .put, headers: attachment,
          body: .init(string: "x")
        ) { $0.status.code }
        #expect(put == 403, "PUT attachment \(id)\(query)")
      }
      for id in ["w1:Home", "w1:Nope"] {
        let delete = try await client.call(
          .delete, "/wiki/\(encodeID(id))?rev=\(rev)", headers: Self.headers("carol"))
        #expect(delete.code == 403, "DELETE \(id)")
        let deleteAttachment = try await client.call(
          .delete, "/wiki/\(encodeID(id))/probe.txt?rev=\(rev)", headers: Self.headers("carol"))
        #expect(deleteAttachment.code == 403, "DELETE attachment of \(id)")
      }
      #expect(try fixture.store.get("w1:Home")["_rev"]?.stringValue == rev)
    }
  }

  @Test("_security and _explain are for the security object's members, not every wiki user")
  func securityAndExplainNeedMembership() async throws {
    try await withAccessServer { client, _ in
      let security = try await client.call(.get, "/wiki/_security", headers: Self.headers("carol"))
      #expect(security.code == 403)
      let explain = try await client.call(
        .post, "/wiki/_explain", #"{"selector":{"type":"page"}}"#, headers: Self.headers("carol"))
      #expect(explain.code == 403)
      #expect(
        try await client.call(.get, "/wiki/_security", headers: Self.headers("admin")).code == 200)
      // _find still serves carol her own pages.
      let find = try await client.call(
        .post, "/wiki/_find", #"{"selector":{"type":"page"}}"#, headers: Self.headers("carol"))
      #expect(find["docs"]?.arrayValue?.compactMap { $0["_id"]?.stringValue } == ["w2:Home"])
    }
  }

  @Test("_local documents are each user's own in a wiki database; administrators share theirs")
  func localDocumentsPerUser() async throws {
    try await withAccessServer { client, fixture in
      let put = try await client.call(
        .put, "/wiki/_local/checkpoint", #"{"last_seq":7}"#, headers: Self.headers("bob"))
      #expect(put.code == 201)
      #expect(put["id"]?.stringValue == "_local/checkpoint")
      let read = try await client.call(
        .get, "/wiki/_local/checkpoint", headers: Self.headers("bob"))
      #expect(read["_id"]?.stringValue == "_local/checkpoint")
      #expect(read["last_seq"]?.seq == 7)
      // carol neither reads, overwrites nor deletes it: her _local/checkpoint is her own.
      #expect(
        try await client.call(.get, "/wiki/_local/checkpoint", headers: Self.headers("carol")).code
          == 404)
      let hers = try await client.call(
        .put, "/wiki/_local/checkpoint", #"{"last_seq":999}"#, headers: Self.headers("carol"))
      #expect(hers.code == 201 && hers["rev"]?.stringValue == "0-1")
      let delete = try await client.call(
        .delete, "/wiki/_local/checkpoint?rev=0-1", headers: Self.headers("carol"))
      #expect(delete.code == 200)
      let again = try await client.call(
        .get, "/wiki/_local/checkpoint", headers: Self.headers("bob"))
      #expect(again["last_seq"]?.seq == 7)
      // Nor through _bulk_docs, which writes her own too.
      let bulk = try await client.call(
        .post, "/wiki/_bulk_docs", #"{"docs":[{"_id":"_local/checkpoint","last_seq":-1}]}"#,
        headers: Self.headers("carol"))
      #expect(bulk.code == 201 && bulk.json?[0]?["id"]?.stringValue == "_local/checkpoint")
      #expect(
        try await client.call(.get, "/wiki/_local/checkpoint", headers: Self.headers("bob"))[
          "last_seq"]?.seq == 7)
      #expect(
        try await client.call(.get, "/wiki/_local/checkpoint", headers: Self.headers("carol"))[
          "last_seq"]?.seq == -1)
      // _local_docs lists each one's own.
      let bobs = try await client.call(.get, "/wiki/_local_docs", headers: Self.headers("bob"))
      #expect(
        bobs["rows"]?.arrayValue?.map { $0["id"]?.stringValue } == ["_local/checkpoint"])
      let carols = try await client.call(
        .get, "/wiki/_local_docs?include_docs=true", headers: Self.headers("carol"))
      #expect(carols["rows"]?[0]?["doc"]?["last_seq"]?.seq == -1)
      // Administrators read and write the shared namespace, CouchDB's.
      #expect(
        try await client.call(.get, "/wiki/_local/checkpoint", headers: Self.headers("admin")).code
          == 404)
      _ = try fixture.store.putLocal("shared", Array(#"{"a":1}"#.utf8), actor: "admin")
      #expect(
        try await client.call(.get, "/wiki/_local/shared", headers: Self.headers("admin"))["a"]?.int
          == 1)
      #expect(
        try await client.call(.get, "/wiki/_local/shared", headers: Self.headers("bob")).code == 404
      )
      // Their listing shows the shared ones, never a user's nor wikilog's reserved ones.
      let admins = try await client.call(.get, "/wiki/_local_docs", headers: Self.headers("admin"))
      #expect(admins["rows"]?.arrayValue?.map { $0["id"]?.stringValue } == ["_local/shared"])
    }
  }

  @Test("_changes?history=true keeps the request's own filter within the user's documents")
  func historyKeepsTheFilter() async throws {
    try await withAccessServer { client, fixture in
      // alice is in w1 (owner) and w3 (a wiki of her own made here).
      _ = try fixture.store.put(
        #"{"type":"wiki","title":"Third","owner_id":"alice","members":[]}"#, id: "w3",
        actor: "alice")
      _ = try fixture.store.put(
        #"{"type":"page","wiki_id":"w3","markdown":"x"}"#, id: "w3:Home", actor: "alice")
      let feed = try await client.call(
        .get, "/wiki/_changes?history=true&filter=wiki&wiki=w3", headers: Self.headers("alice"))
      let ids = Set(feed["results"]?.arrayValue?.compactMap { $0["id"]?.stringValue } ?? [])
      #expect(ids == ["w3", "w3:Home"])
      let all = try await client.call(
        .get, "/wiki/_changes?history=true", headers: Self.headers("alice"))
      let allIDs = Set(all["results"]?.arrayValue?.compactMap { $0["id"]?.stringValue } ?? [])
      #expect(allIDs == ["w1", "w1:Home", "w3", "w3:Home"])
    }
  }
}
