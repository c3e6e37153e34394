import Foundation
import JSON
import Log
import Query
import RevTree
import StoreTestSupport
import Synchronization
import Testing
import Wiki

@testable import Projections

/// A projection that refuses one document after the store has appended its event.
final class RefusingProjection: Projection {
  let name = "refusing"
  let databaseNames = ["seen"]
  let refused: String

  init(refusing id: String) { refused = id }

  func apply(_ event: RecordedEvent, to storage: ProjectionStorage, in txn: WriteTransaction) throws
  {
    if event.stream == refused { throw StoreError.forbidden("refused by the projection") }
    try txn.put([1], forKey: Array(event.stream.utf8), in: storage["seen"])
  }
}

/// The shortcuts of the write and read hot paths give the answers of the slow ways.
@Suite struct FastPathTests {
  func docs(_ ids: [String]) -> [JSONValue] {
    ids.map { json(#"{"_id":"\#($0)","v":1}"#) }
  }

  @Test("a bulk write whose document fails after its event was appended keeps only the others")
  func bulkFallsBackToSavepoints() async throws {
    let t = try TestStore(projections: [RefusingProjection(refusing: "boom")])
    let s = t.store!
    let results = try s.bulkDocs(docs(["a", "boom", "b"]), actor: "alice")
    #expect(results.map(\.ok) == [true, false, true])
    #expect(results[1].error?.error == "forbidden")
    #expect(try s.log.committedPosition == 2)
    #expect(try s.log.read(after: .start, limit: 10).map(\.stream) == ["a", "b"])
    #expect(try s.verify("docs").isEmpty)
    #expect(try s.verify("refusing").isEmpty)

    let more = try await s.bulkDocsAsync(docs(["c", "boom", "d"]), actor: "alice")
    #expect(more.map(\.ok) == [true, false, true])
    #expect(try s.log.committedPosition == 4)
    #expect(try s.changes().results.map(\.id) == ["a", "b", "c", "d"])
    #expect(try s.verify("docs").isEmpty)
  }

  @Test("documents refused before writing need no second attempt, and fail alone")
  func bulkRefusalsBeforeWriting() throws {
    let t = try TestStore()
    let s = t.store!
    let first = try s.bulkDocs(docs(["a", "b"]), actor: "alice")
    let results = try s.bulkDocs(
      [
        json(#"{"_id":"a","_rev":"\#(first[0].rev!)","v":2}"#),
        json(#"{"_id":"b","v":2}"#),  // conflict: no _rev
        json(#"{"_id":"_bad","v":2}"#),  // bad id
        json(#"{"_id":"c","v":2}"#),
        json(#"{"_id":"c","v":3}"#),  // conflict with the c just written
      ], actor: "alice")
    #expect(results.map(\.ok) == [true, false, false, true, false])
    #expect(results[1].error == StoreError.conflict)
    #expect(results[4].error == StoreError.conflict)
    #expect(try s.log.committedPosition == 4)
    #expect(try s.verify("docs").isEmpty)
  }

  @Test("pending is the number of rows after last_seq, for every since and limit")
  func pending() throws {
    let t = try TestStore()
    let s = t.store!
    var revs: [String: String] = [:]
    for i in 0..<40 {
      revs["d\(i)"] = try s.put(#"{"_id":"d\#(i)","v":0}"#, actor: "a").rev
    }
    // Updates and deletions move rows to the end and leave gaps in the seqs.
    for i in stride(from: 0, to: 40, by: 3) {
      revs["d\(i)"] = try s.put(#"{"v":1}"#, id: "d\(i)", rev: revs["d\(i)"], actor: "a").rev
    }
    for i in stride(from: 1, to: 40, by: 7) {
      _ = try s.delete("d\(i)", rev: revs["d\(i)"]!, actor: "a")
    }
    let all = try s.changes().results.map(\.seq)
    let last = try s.log.committedPosition
    for since in 0...last.rawValue {
      for limit in [0, 1, 2, 5, 17, nil] as [Int?] {
        var o = ChangesOptions()
        o.since = LogPosition(since)
        o.limit = limit
        let page = try s.changes(o)
        let expected = all.filter { $0 > page.lastSeq }.count
        #expect(page.pending == expected, "since \(since) limit \(String(describing: limit))")
      }
    }
  }

  @Test("ChangeRow.serializeJSON writes the bytes json.serialized() writes")
  func rowJSON() throws {
    let rows = [
      ChangeRow(seq: 0, id: "a", changes: ["1-abc"], deleted: false),
      ChangeRow(
        seq: LogPosition(UInt64(Int64.max)), id: "w1:Quote \" back\\slash é \u{1}\n",
        changes: ["2-x", "2-y"],
        deleted: true, doc: json(#"{"_id":"x","n":[1,2.50,{"k":null}]}"#), actor: "alice",
        timestampMicroseconds: 17, origin: "https://peer/db"),
      ChangeRow(
        seq: 12_345_678_901, id: "", changes: [], deleted: false, actor: "", origin: ""),
    ]
    for row in rows {
      var out: [UInt8] = [7]
      row.serializeJSON(into: &out)
      #expect(out == [7] + row.json.serialized())
    }
    let t = try TestStore()
    let s = t.store!
    let a = try s.put(#"{"_id":"d","v":1}"#, actor: "a")
    _ = try s.delete("d", rev: a.rev!, actor: "a")
    var o = ChangesOptions()
    o.includeDocs = true
    o.style = .allDocs
    for row in try s.changes(o).results + s.changes(ChangesOptions.history()).results {
      var out: [UInt8] = []
      row.serializeJSON(into: &out)
      #expect(out == row.json.serialized())
      #expect(row.changes.allSatisfy { $0.hasPrefix("1-") || $0.hasPrefix("2-") })
    }
  }

  /// A store with the wiki (its projection and its TouchWiki validation), two wikis and a few
  /// pages in each (untimed set-up for the tests below), written one document per call.
  func wikiStore(_ name: String = #function) throws -> TestStore {
    let t = try TestStore(name, projections: [WikiProjection()], validation: .touchWiki)
    for w in ["w1", "w2"] {
      _ = try t.store.put(
        #"{"_id":"\#(w)","type":"wiki","title":"W","owner_id":"ann","members":["bob"]}"#,
        actor: "ann")
    }
    return t
  }

  /// The state two stores' readers see: every change with its revisions, every wiki with its
  /// pages and their links.
  func visibleState(_ s: DocumentStore) throws -> [String] {
    var options = ChangesOptions()
    options.style = .allDocs
    var lines = try s.changes(options).results.map {
      "\($0.id) \($0.changes) \($0.deleted)"
    }
    let wiki = try WikiQueries(s)
    for w in try wiki.wikis() {
      lines.append("wiki \(w.id) \(w.rev) \(w.pageCount)")
      for page in try wiki.pages(in: w.id) {
        lines.append(
          "page \(page.title) \(page.rev) \(page.length) \(page.updatedBy ?? "-") "
            + "\(try wiki.links(from: page.title, in: w.id)) "
            + "\(try wiki.backlinks(to: page.title, in: w.id))")
      }
    }
    return lines
  }

  @Test(
    "a bulk call prepared on the helper thread answers as the same documents written one by one")
  func preparedBulkMatchesOneByOne() throws {
    let a = try wikiStore()
    let b = try wikiStore()
    // Revisions both stores share, for the updates below.
    var setup: [JSONValue] = []
    for i in 0..<6 {
      setup.append(
        json(
          #"{"_id":"w1:P\#(i)","type":"page","wiki_id":"w1","markdown":"[[P\#(i + 1)]] [[Home]]"}"#
        ))
    }
    let ra = try a.store.bulkDocs(setup, actor: "ann")
    let rb = try b.store.bulkDocs(setup, actor: "ann")
    #expect(ra == rb)
    let rev = ra.map { $0.rev! }
    // P0 deleted, so that writing it again without _rev extends the deleted leaf: the parent
    // the helper guessed (none) is wrong and the writer works the revision out again.
    _ = try a.store.delete("w1:P0", rev: rev[0], actor: "ann")
    _ = try b.store.delete("w1:P0", rev: rev[0], actor: "ann")

    var docs: [JSONValue] = [
      json(#"{"_id":"w1:P0","type":"page","wiki_id":"w1","markdown":"back, [[P2]]"}"#),
      json(
        #"{"_id":"w1:P1","_rev":"\#(rev[1])","type":"page","wiki_id":"w1","markdown":"[[Home]] only","updated_by":"bob"}"#
      ),
      // A stale _rev with a body the schema refuses: the conflict comes first, as in CouchDB.
      json(#"{"_id":"w1:P2","_rev":"1-00000000000000000000000000000000","type":"page"}"#),
      json(#"{"_id":"w1:P3","_rev":"\#(rev[3])","_deleted":true}"#),
      json(#"{"_id":"_bad","v":1}"#),
      json(#"{"_id":"w1:P4","_rev":"nonsense","v":1}"#),
      json(#"{"_id":"w9:P","type":"page","wiki_id":"w9","markdown":"no such wiki"}"#),
      json(#"{"_id":"w1:P5","_rev":"\#(rev[5])","type":"note","text":"no longer a page"}"#),
      json(#"[1, 2]"#),
      json(#"{"_id":"w3","type":"wiki","title":"Three","owner_id":"cy","members":[]}"#),
      json(#"{"_id":"w1:Bad","type":"page","wiki_id":"w2","markdown":"wrong wiki"}"#),
    ]
    for i in 0..<30 {
      docs.append(
        json(
          #"{"_id":"w\#(i % 2 + 1):New \#(i)","type":"page","wiki_id":"w\#(i % 2 + 1)","markdown":"[[New \#(i + 1)]] [[P1]]"}"#
        ))
    }
    docs.append(json(#"{"_id":"w1:New 0","type":"page","wiki_id":"w1","markdown":"twice"}"#))
    #expect(docs.count >= DocumentStore.bulkHelperThreshold)

    let together = try a.store.bulkDocs(docs, actor: "ann")
    var alone: [DocumentWriteResult] = []
    for doc in docs { alone += try b.store.bulkDocs([doc], actor: "ann") }
    #expect(together == alone)
    #expect(together.filter(\.ok).count == docs.count - 7)
    #expect(together[2].error?.error == "conflict")
    #expect(together[4].error?.error == "illegal_docid")
    #expect(together[5].error?.reason == "Invalid rev format")
    #expect(together[6].error?.error == "forbidden")
    #expect(together[8].error?.error == "bad_request")
    #expect(together[10].error?.error == "forbidden")
    #expect(together.last?.error?.error == "conflict")
    #expect(try visibleState(a.store) == visibleState(b.store))
    #expect(try a.store.verify("docs").isEmpty)
    #expect(try a.store.verify("wiki").isEmpty)
  }

  @Test("replicated revisions prepared ahead keep their canonical ids in the wiki projection")
  func preparedReplicatedWrites() throws {
    let a = try wikiStore()
    let b = try wikiStore()
    var docs: [JSONValue] = []
    for i in 0..<20 {
      // Upper-case hex: the tree (like CouchDB) keeps the 16 bytes, so the revision reads back
      // in lower case, and so must the page row.
      let hash = String(repeating: "AB", count: 15) + String(format: "%02X", i)
      docs.append(
        json(
          #"{"_id":"w1:R\#(i)","_rev":"2-\#(hash)","_revisions":{"start":2,"ids":["\#(hash)","\#(String(repeating: "c", count: 32))"]},"type":"page","wiki_id":"w1","markdown":"[[R\#(i + 1)]]"}"#
        ))
    }
    docs.append(json(#"{"_id":"w1:NoRev","type":"page","wiki_id":"w1","markdown":"x"}"#))
    docs.append(json(#"{"_id":"w1:Odd","_rev":"2-aa","_revisions":{"start":2,"ids":["bb"]}}"#))
    let together = try a.store.bulkDocs(docs, newEdits: false, actor: "sync", origin: "peer")
    var alone: [DocumentWriteResult] = []
    for doc in docs {
      alone += try b.store.bulkDocs([doc], newEdits: false, actor: "sync", origin: "peer")
    }
    #expect(together == alone)
    // Only `NoRev` fails: `Odd`'s `_revisions` names 2-bb, which CouchDB takes over `_rev`.
    #expect(together.count == 1)
    #expect(try a.store.get("w1:Odd")["_rev"]?.stringValue == "2-bb")
    let page = try WikiQueries(a.store).page("R3", in: "w1")
    #expect(page?.rev == "2-" + String(repeating: "ab", count: 15) + "03")
    #expect(try visibleState(a.store) == visibleState(b.store))
    #expect(try a.store.verify("wiki").isEmpty)
    try a.store.rebuildAll()
    #expect(try visibleState(a.store) == visibleState(b.store))
  }
}

/// The helper of a bulk call hands its values over in order, whether the caller is ahead of it
/// or behind, and without a helper computes them as asked.
@Suite struct LookaheadTests {
  @Test("values come in order from the helper, and passed ones can be asked for again")
  func helper() {
    for count in [1, 7, 8, 9, 100, 1000] {
      let ahead = Lookahead(count: count, helper: true) { i in [i, i * i] }
      var seen: [[Int]] = []
      for i in 0..<count {
        // Slow down now and then, so that both sides wait for the other at some point.
        if i % 97 == 0 { usleep(200) }
        seen.append(ahead.value(i))
      }
      #expect(seen == (0..<count).map { [$0, $0 * $0] })
      #expect(ahead.value(0) == [0, 0])
      #expect(ahead.value(count - 1) == [count - 1, (count - 1) * (count - 1)])
    }
  }

  /// Counts the instances alive.
  final class Tracked: Sendable {
    static let alive = Mutex(0)
    init() { Self.alive.withLock { $0 += 1 } }
    deinit { Self.alive.withLock { $0 -= 1 } }
  }

  @Test("discard frees every value, after waiting for the helper, and only once")
  func discard() {
    let before = Tracked.alive.withLock { $0 }
    let ahead = Lookahead(count: 500, helper: true) { _ in Tracked() }
    _ = ahead.value(0)
    ahead.discard()  // the helper may still be making values: discard waits for them
    #expect(Tracked.alive.withLock { $0 } == before)
    ahead.discard()
    let inline = Lookahead(count: 3, helper: false) { _ in Tracked() }
    _ = inline.value(0)
    _ = inline.value(1)
    inline.discard()
    #expect(Tracked.alive.withLock { $0 } == before)
  }

  @Test("without a helper, each value is made once, when first asked for")
  func inline() {
    let made = Mutex(0)
    let inline = Lookahead(count: 5, helper: false) { i in
      made.withLock { $0 += 1 }
      return "v\(i)"
    }
    #expect(made.withLock { $0 } == 0)
    #expect(inline.value(0) == "v0")
    #expect(inline.value(1) == "v1")
    #expect(inline.value(0) == "v0")
    #expect(made.withLock { $0 } == 2)
  }
}
