import CouchTestSupport
import Formats
import Foundation
import JSON
import Projections
import RevTree
import TestSupport
import Testing

@testable import Replication

/// Replication between stores of this process with no HTTP server: ``StorePeer`` on both sides,
/// as `wikilog replicate` between local databases and an app's sync use it.
@Suite struct StorePeerTests {
  static func peer(_ fixture: AccessFixture, _ name: String, user: String? = nil) throws
    -> CouchEndpoint
  {
    CouchEndpoint(
      peer: StorePeer(
        store: fixture.store, identity: "file://\(fixture.dir.path)/\(name)",
        user: user.map { UserContext(name: $0, roles: []) }, actor: user ?? "owner"))
  }

  /// The documents `user` reads in `fixture`'s store (its owner: every one).
  static func ids(_ store: DocumentStore) throws -> Set<String> {
    Set(try store.allDocs(AllDocsOptions()).rows.compactMap { $0["id"]?.stringValue })
  }

  @Test(
    "as the stores' owner: everything arrives with its history, checkpointed on both sides; a second run reads nothing"
  )
  func owner() async throws {
    let a = try AccessFixture("storePeerOwner-a")
    let b = try AccessFixture("storePeerOwner-b")
    // A conflict in a's store: both leaves go.
    _ = try a.store.bulkDocs(
      [
        try JSONValue(
          parsing: Array(
            #"{"_id":"w1:Home","_rev":"1-ffff","type":"page","wiki_id":"w1","markdown":"theirs"}"#
              .utf8))
      ], newEdits: false, actor: "alice")
    let replicator = Replicator(source: try Self.peer(a, "a"), target: try Self.peer(b, "b"))
    let report = try await replicator.replicate()
    #expect(report.docWriteFailures == 0)
    #expect(try Self.ids(b.store) == Self.ids(a.store))
    let leaves = try b.store.record("w1:Home")?.tree.leaves.count
    #expect(leaves == (try a.store.record("w1:Home")?.tree.leaves.count))
    #expect((leaves ?? 0) >= 2)
    let rev = try a.store.get("w1:Home")["_rev"]
    #expect(try b.store.get("w1:Home")["_rev"] == rev)
    // The checkpoint is on both sides: a second run starts where the first ended.
    let again = try await replicator.replicate()
    #expect(again.docsRead == 0 && again.docsWritten == 0)
    #expect(again.startSeq == report.endSeq)
  }

  @Test(
    "as a user: reads what the rules let them, writes through the checked path (pages before their wiki held and admitted, another's wiki refused and reported)"
  )
  func asUser() async throws {
    let a = try AccessFixture("storePeerUser-a")
    let b = try AccessFixture("storePeerUser-b")
    // On a: alice's t1, its pages first in the feed (the wiki edited after them); and x9, hers
    // on a, carol's on b.
    try OutOfOrderReplicationTests.seed(a, b, never: true)
    let source = try Self.peer(a, "a", user: "alice")
    let target = try Self.peer(b, "b", user: "alice")
    var options = ReplicationOptions()
    options.batchSize = 1  // one document per batch: the pages are written before their wiki
    let report = try await Replicator(source: source, target: target, options: options)
      .replicate()
    for id in ["t1", "t1:P1", "t1:P2", "t1:P3"] {
      #expect((try? b.store.get(id)) != nil, "\(id) did not arrive")
    }
    // x9 and x9:Q: carol's wiki does not let alice in; reported, not written.
    #expect(Set(report.refused.map(\.id)) == ["x9", "x9:Q"])
    #expect(report.refused.allSatisfy { $0.error == "forbidden" })
    #expect(try b.store.get("x9")["owner_id"] == .string("carol"))
    #expect((try? b.store.get("x9:Q")) == nil)
    // bob, a member of w1 on a (the fixture's), reads only what he may: none of alice's t1.
    let bobs = try AccessFixture("storePeerUser-c")
    let bobReport = try await Replicator(
      source: try Self.peer(a, "a", user: "bob"), target: try Self.peer(bobs, "c")
    ).replicate()
    #expect(bobReport.docWriteFailures == 0)
    let copied = try Self.ids(bobs.store)
    #expect(!copied.contains("t1") && !copied.contains("t1:P1"))
    #expect(copied.contains("w1"))
  }

  @Test("continuous: a write on the source arrives while the run waits for changes")
  func continuous() async throws {
    let a = try AccessFixture("storePeerLive-a")
    let b = try AccessFixture("storePeerLive-b")
    var options = ReplicationOptions()
    options.continuous = true
    let replicator = Replicator(
      source: try Self.peer(a, "a"), target: try Self.peer(b, "b"), options: options)
    let (idle, idleSignal) = AsyncStream<Void>.makeStream()
    let run = Task {
      try await replicator.replicate { status in
        if status.state == .idle { idleSignal.yield() }
      }
    }
    for await _ in idle { break }
    try await a.store.putAsync(
      #"{"type":"page","wiki_id":"w1","markdown":"later"}"#, id: "w1:Later", actor: "alice")
    #expect(try await eventually(20) { (try? b.store.get("w1:Later")) != nil })
    run.cancel()
    _ = try? await run.value
  }

  @Test(
    "between two stores revisions go as stored (no JSON in between): bodies, deletions, histories cut to the source's revs_limit; a batch with attachments goes as JSON, data included"
  )
  func storedRevisions() async throws {
    let a = try AccessFixture("storePeerStored-a")
    let b = try AccessFixture("storePeerStored-b")
    try a.store.setRevsLimit(3, actor: "owner")
    // Five edits of one document, a body with escapes and non-ASCII text, a deletion.
    var rev = try a.store.put(#"{"n":0,"text":"caf\u00e9 \"q\" \n"}"#, id: "plain", actor: "o").rev
    for n in 1..<5 {
      rev = try a.store.put(#"{"n":\#(n),"text":"é \"q\""}"#, id: "plain", rev: rev, actor: "o").rev
    }
    let gone = try a.store.put(#"{"n":1}"#, id: "gone", actor: "o").rev
    _ = try a.store.delete("gone", rev: gone ?? "", actor: "o")
    // What the source reads: stored, the history cut to 3, and as JSON what open_revs gives.
    let reads = try a.store.read { txn in
      try a.store.storedRevisions(
        "plain", .revs([rev ?? ""]), options: GetOptions(revs: true, latest: true), txn: txn)
    }
    guard case .stored(let stored) = reads.first else {
      Issue.record("plain was not read as stored: \(reads)")
      return
    }
    #expect(stored.path.ids.count == 3 && stored.path.start == 5)
    let openRevs = try a.store.openRevs(
      "plain", .revs([rev ?? ""]), options: GetOptions(revs: true, latest: true))
    #expect(openRevs.first?["ok"] == (try stored.json()))
    let replicator = Replicator(source: try Self.peer(a, "a"), target: try Self.peer(b, "b"))
    let report = try await replicator.replicate()
    #expect(report.docWriteFailures == 0)
    let options = GetOptions(revs: true)
    #expect(try b.store.get("plain", options: options) == a.store.get("plain", options: options))
    #expect(try b.store.get("plain")["text"] == .string("é \"q\""))
    #expect(try b.store.record("plain")?.tree.revisions(of: RevID(rev ?? ""))?.ids.count == 3)
    #expect(throws: StoreError.self) { try b.store.get("gone") }
    #expect(try b.store.record("gone")?.tree.winner?.status == .deleted)
    // An attachment: that document comes as JSON with its data, the batch written as JSON.
    let data = Array("attached bytes".utf8)
    _ = try a.store.put(
      #"{"_attachments":{"a.txt":{"content_type":"text/plain","data":"\#(Base64.encode(data))"}}}"#,
      id: "att", actor: "o")
    _ = try a.store.put(#"{"beside":true}"#, id: "beside", actor: "o")
    let second = try await replicator.replicate()
    #expect(second.docsWritten == 2 && second.docWriteFailures == 0)
    let copied = try b.store.get("att", options: GetOptions(attachments: true))
    #expect(copied["_attachments"]?["a.txt"]?["data"] == .string(Base64.encode(data)))
    #expect(try b.store.get("beside")["beside"] == .bool(true))
  }
}
