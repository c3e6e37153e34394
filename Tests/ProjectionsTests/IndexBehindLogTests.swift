import Foundation
import JSON
import Log
import Projections
import StoreTestSupport
import Synchronization
import TestSupport
import Testing

/// An index defined here, on the public seam only: each document's `type` (`byDoc`) and the
/// number of live documents of each type (`counts`). It notes whether a catch-up it is part of
/// shows in ``IndexTasks``.
final class TypeCounts: IndexBehindLog {
  let name = "types"
  let databaseNames = ["byDoc", "counts"]
  /// Whether an `update` ran while this index's build was listed in ``IndexTasks``.
  let sawTask = Mutex(false)
  /// The store's index tasks (its ``DirectoryState``), once it is open.
  let tasks = Mutex<IndexTasks?>(nil)

  func update(
    _ docID: String, winner: JSONValue?, storage: ProjectionStorage, txn: WriteTransaction
  )
    throws
  {
    if tasks.withLock({ $0 })?.running.contains(where: { $0.index == name }) == true {
      sawTask.withLock { $0 = true }
    }
    let key = Array(docID.utf8)
    if let old = try txn.get(key, in: storage["byDoc"]) {
      try add(-1, to: old, storage: storage, txn: txn)
      _ = try txn.delete(key, in: storage["byDoc"])
    }
    if let type = winner?["type"]?.stringValue {
      try txn.put(Array(type.utf8), forKey: key, in: storage["byDoc"])
      try add(1, to: Array(type.utf8), storage: storage, txn: txn)
    }
  }

  private func add(_ n: Int, to type: [UInt8], storage: ProjectionStorage, txn: WriteTransaction)
    throws
  {
    let now =
      try txn.get(type, in: storage["counts"]).flatMap { Int(String(decoding: $0, as: UTF8.self)) }
      ?? 0
    if now + n == 0 {
      _ = try txn.delete(type, in: storage["counts"])
    } else {
      try txn.put(Array(String(now + n).utf8), forKey: type, in: storage["counts"])
    }
  }

  /// The counts, read from the index (caught up first).
  static func counts(_ store: DocumentStore) throws -> [String: Int] {
    let follower = try #require(store.index(named: "types"))
    try follower.catchUp()
    return try follower.read { txn in
      var out: [String: Int] = [:]
      try txn.scan(follower.storage["counts"]) { key, value in
        out[String(decoding: key, as: UTF8.self)] = Int(String(decoding: value, as: UTF8.self))
        return true
      }
      return out
    }
  }
}

@Suite struct IndexBehindLogTests {
  @Test(
    "an index defined outside the store follows the log: caught up, listed while it builds, rebuilt and verified"
  )
  func typeCounts() async throws {
    let index = TypeCounts()
    let t = try TestStore(indexes: [index], validation: .couchDB)
    index.tasks.withLock { $0 = t.store.state.indexTasks }
    // Enough changes at once for the catch-up to show in the index tasks.
    let docs = (0..<1_500).map { i in
      json(#"{"_id":"d\#(i)","type":"\#(i % 3 == 0 ? "fizz" : "plain")"}"#)
    }
    _ = try t.store.bulkDocs(docs, actor: "test")
    #expect(try TypeCounts.counts(t.store) == ["fizz": 500, "plain": 1_000])
    #expect(index.sawTask.withLock { $0 })
    // Once the catch-up that listed it has ended (a reader that finds the index caught up
    // returns while that thread is still leaving).
    #expect(
      try await eventually { t.store.state.indexTasks.running.allSatisfy { $0.index != "types" } })
    // Edits and deletions move the counts; a deleted document leaves its type.
    let d0 = try #require(t.store.get("d0")["_rev"]?.stringValue)
    try t.store.put(#"{"type":"plain"}"#, id: "d0", rev: d0, actor: "test")
    let d1 = try #require(t.store.get("d1")["_rev"]?.stringValue)
    try t.store.put(#"{"_deleted":true}"#, id: "d1", rev: d1, actor: "test")
    #expect(try TypeCounts.counts(t.store) == ["fizz": 499, "plain": 1_000])
    // Listed with the projections; its checkpoint is the log's end once caught up.
    #expect(t.store.projectionNames.last == "types")
    let checkpoint = try #require(try t.store.projectionCheckpoints().first { $0.name == "types" })
    #expect(checkpoint.position == t.store.position)
    #expect(try t.store.verify("types") == [])
    // A damaged row is found by verify and mended by a rebuild.
    let follower = try #require(t.store.index(named: "types"))
    try follower.write { txn in
      try txn.put(Array("7".utf8), forKey: Array("fizz".utf8), in: follower.storage["counts"])
    }
    let found = try t.store.verify("types")
    #expect(found.count == 1 && found[0].hasPrefix("types.counts: "), "\(found)")
    try t.store.rebuild("types")
    #expect(try t.store.verify("types") == [])
    #expect(try TypeCounts.counts(t.store) == ["fizz": 499, "plain": 1_000])
    // Reopened, it goes on from its checkpoint.
    try t.reopen(indexes: [TypeCounts()])
    try t.store.put(#"{"type":"new"}"#, id: "n", actor: "test")
    #expect(try TypeCounts.counts(t.store) == ["fizz": 499, "plain": 1_000, "new": 1])
  }

  /// ``TypeCounts`` waiting an hour for the writes to pause, and passing over ids that start
  /// with `skip`.
  final class QuietTypeCounts: IndexBehindLog {
    let inner = TypeCounts()
    let handed = Mutex<[String]>([])
    var name: String { inner.name }
    var databaseNames: [String] { inner.databaseNames }
    var quietPeriod: Duration? { .seconds(3600) }
    func mayIndex(_ docID: String) -> Bool { !docID.hasPrefix("skip") }
    func update(
      _ docID: String, winner: JSONValue?, storage: ProjectionStorage, txn: WriteTransaction
    ) throws {
      handed.withLock { $0.append(docID) }
      try inner.update(docID, winner: winner, storage: storage, txn: txn)
    }
  }

  @Test(
    "a quiet index waits for the writes to pause, catches up when its store closes, and never sees what it may not index"
  )
  func quietIndexCatchesUpAtClose() throws {
    let index = QuietTypeCounts()
    let t = try TestStore(indexes: [index], validation: .couchDB)
    for id in ["a", "skip1", "b"] {
      try t.store.put(#"{"type":"t"}"#, id: id, actor: "test")
    }
    // With an hour's quiet period nothing follows these writes (only the catch-up that the
    // open started, which is over by now); the close catches up what they left.
    t.store.close()
    #expect(index.handed.withLock { $0 } == ["a", "b"])
    // What it wrote at the close is there when the store opens again.
    try t.reopen(indexes: [TypeCounts()])
    #expect(try TypeCounts.counts(t.store) == ["t": 2])
  }
}
