import Foundation
import JSON
import Log
import StoreTestSupport
import Testing
import Wiki

@testable import Projections
@testable import Query

/// The full-text index kept behind the log, in its own environment (an `IndexFollower`).
@Suite struct SearchIndexerTests {
  static let schema = TextSearchSchema.wikiPages

  func wikiStore(_ name: String = #function) throws -> TestStore {
    let t = try TestStore(name, indexes: [TextSearchProjection(schema: Self.schema)])
    try t.store.put(
      #"{"type":"wiki","title":"w1","owner_id":"ann","members":[]}"#, id: "w1", actor: "ann")
    return t
  }

  func ids(_ store: DocumentStore, _ q: String, update: Bool = true) throws -> [String] {
    try store.search(SearchQuery(q), groups: ["w1"], update: update).hits.map(\.docID).sorted()
  }

  @Test("the index catches up on its own after writes, without a search asking")
  func followsTheLog() throws {
    let t = try wikiStore()
    let store = t.store!
    for i in 0..<50 { try store.putPage("w1:P\(i)", "word\(i) common") }
    let end = try store.log.committedPosition
    let deadline = Date().addingTimeInterval(20)
    while try store.searchCheckpoint()! < end, Date() < deadline {
      Thread.sleep(forTimeInterval: 0.01)
    }
    #expect(try store.searchCheckpoint() == end)
    // Taken as it stands, it has them all.
    #expect(
      try store.search(SearchQuery("common"), groups: ["w1"], update: false).total == 50)
  }

  @Test("a search sees every write acknowledged before it, edits and deletions included")
  func readsItsWrites() throws {
    let t = try wikiStore()
    let store = t.store!
    for i in 0..<30 {
      try store.putPage("w1:P\(i)", "fresh\(i)")
      #expect(try ids(store, "fresh\(i)") == ["w1:P\(i)"])
    }
    let doc = try store.get("w1:P3")
    try store.put(
      #"{"_rev":"\#(doc["_rev"]!.stringValue!)","type":"page","wiki_id":"w1","markdown":"changed"}"#,
      id: "w1:P3", actor: "ann")
    #expect(try ids(store, "fresh3") == [])
    #expect(try ids(store, "changed") == ["w1:P3"])
    let again = try store.get("w1:P3")
    try store.delete("w1:P3", rev: again["_rev"]!.stringValue!, actor: "ann")
    #expect(try ids(store, "changed") == [])
  }

  @Test("writes from many tasks while searches run: the index ends equal to a rebuild")
  func concurrentWritesAndSearches() async throws {
    let t = try wikiStore()
    let store = t.store!
    try await withThrowingTaskGroup(of: Void.self) { group in
      for w in 0..<4 {
        group.addTask {
          for i in 0..<100 {
            _ = try store.bulkDocs(
              [
                .object(
                  JSONObject([
                    "_id": .string("w1:T\(w)-\(i)"), "type": .string("page"),
                    "wiki_id": .string("w1"), "markdown": .string("task\(w) item\(i) shared"),
                  ]))
              ], actor: "ann")
          }
        }
      }
      group.addTask {
        for _ in 0..<20 { _ = try store.search(SearchQuery("shared"), groups: ["w1"]) }
      }
      try await group.waitForAll()
    }
    #expect(try store.search(SearchQuery("shared"), groups: ["w1"]).total == 400)
    #expect(try store.verify("search") == [])
  }

  @Test("documents whose ids no page has are passed over unread; the index equals a rebuild")
  func passesOverOtherDocuments() throws {
    let t = try wikiStore()
    let store = t.store!
    let long = String(repeating: "n", count: 600)  // a hashed key: the record names it
    for (i, id) in ["note1", "note2", long, "w1:Page"].enumerated() {
      try store.put(#"{"type":"page","markdown":"shared word\#(i)"}"#, id: id, actor: "ann")
    }
    #expect(try ids(store, "shared") == ["w1:Page"])
    #expect(try store.searchCheckpoint() == store.log.committedPosition)
    #expect(try store.verify("search") == [])
    #expect(TextSearchSchema.wikiPages.mayIndex("w1:Page"))
    #expect(!TextSearchSchema.wikiPages.mayIndex("note1"))
    #expect(!TextSearchSchema.wikiPages.mayIndex(":x"))
  }

  @Test("verify finds a live index that differs from a rebuild; rebuilding mends it")
  func verifyFindsDamage() throws {
    let t = try wikiStore()
    let store = t.store!
    for i in 0..<10 { try store.putPage("w1:P\(i)", "alpha beta\(i)") }
    #expect(try store.verify("search") == [])
    // A posting row lost, and a document's forward record changed.
    try store.writeSearchIndex { txn, storage in
      var key: [UInt8]? = nil
      try txn.scan(storage["postings"]) { k, _ in
        key = k
        return false
      }
      try txn.delete(try #require(key), in: storage["postings"])
      var forward: ([UInt8], [UInt8])? = nil
      try txn.scan(storage["records"]) { k, v in
        forward = (k, v)
        return false
      }
      let (k, v) = try #require(forward)
      try txn.put(v + [0], forKey: k, in: storage["records"])
    }
    let problems = try store.verify("search")
    #expect(problems.contains { $0.hasPrefix("search.postings") })
    #expect(problems.contains { $0.hasPrefix("search.records") })
    try store.rebuild("search")
    #expect(try store.verify("search") == [])
    #expect(try ids(store, "alpha").count == 10)
  }

  @Test("an index file that cannot be opened is built again when the store opens")
  func damagedIndexRebuilt() throws {
    let t = try wikiStore()
    for i in 0..<5 { try t.store.putPage("w1:P\(i)", "gamma") }
    try t.store.updateSearchIndex()
    t.store.close()
    let file = t.path + "/search/data.mdb"
    try Data(repeating: 0x5A, count: 64 * 1024).write(to: URL(fileURLWithPath: file))
    try t.reopen(indexes: [TextSearchProjection(schema: Self.schema)])
    #expect(try ids(t.store, "gamma").count == 5)
    #expect(try t.store.verify("search") == [])
  }

  @Test("damaged pages inside the index, found by the page check at open: built again")
  func damagedPagesRebuilt() throws {
    let t = try wikiStore()
    for i in 0..<300 {
      try t.store.putPage("w1:P\(i)", "zeta word\(i) " + String(repeating: "x ", count: 50))
    }
    try t.store.updateSearchIndex()
    t.store.close()
    let file = t.path + "/search/data.mdb"
    let handle = try #require(FileHandle(forUpdatingAtPath: file))
    let size = try handle.seekToEnd()
    #expect(size > 6 * 4096)
    try handle.seek(toOffset: 3 * 4096)
    handle.write(Data(repeating: 0xFF, count: Int(size) - 3 * 4096))
    try handle.close()
    let options = EventLog.Options(durability: .synced)
    t.store = try DocumentStore(
      directory: t.path, options: options,
      indexes: [TextSearchProjection(schema: Self.schema)], validation: .touchWiki)
    #expect(try t.store.search(SearchQuery("zeta"), groups: ["w1"]).total == 300)
    #expect(try t.store.verify("search") == [])
  }

  @Test("an index ahead of the log (a database restored from an older backup) is built again")
  func indexAheadRebuilt() throws {
    let t = try wikiStore()
    for i in 0..<3 { try t.store.putPage("w1:Old\(i)", "delta") }
    let backup = t.path + "-backup"
    defer { try? FileManager.default.removeItem(atPath: backup) }
    _ = try t.store.log.backup(to: backup)
    for i in 0..<3 { try t.store.putPage("w1:New\(i)", "delta") }
    try t.store.updateSearchIndex()
    t.store.close()
    // The backup, with the index of the later store beside it.
    try FileManager.default.copyItem(atPath: t.path + "/search", toPath: backup + "/search")
    let restored = try DocumentStore(
      directory: backup, indexes: [TextSearchProjection(schema: Self.schema)])
    defer { restored.close() }
    #expect(try ids(restored, "delta") == ["w1:Old0", "w1:Old1", "w1:Old2"])
    #expect(try restored.verify("search") == [])
  }

  @Test("a read-only store brings the index up to date itself for a search")
  func readOnlyCatchesUp() throws {
    let t = try wikiStore()
    try t.store.updateSearchIndex()
    let before = try #require(try t.store.searchCheckpoint())
    t.store.close()
    // Writes made by a store without search: the index is behind them.
    let plain = try DocumentStore(directory: t.path)
    for i in 0..<4 {
      try plain.put(
        #"{"type":"page","wiki_id":"w1","markdown":"epsilon"}"#, id: "w1:E\(i)", actor: "ann")
    }
    plain.close()
    let reader = try DocumentStore(
      directory: t.path, options: EventLog.Options(durability: .synced, readOnly: true),
      indexes: [TextSearchProjection(schema: Self.schema)])
    defer { reader.close() }
    #expect(try reader.searchCheckpoint() == before)
    #expect(try ids(reader, "epsilon", update: false) == [])
    #expect(try ids(reader, "epsilon").count == 4)
  }
}
