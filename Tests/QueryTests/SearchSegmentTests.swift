import Foundation
import JSON
import Log
import StoreTestSupport
import Synchronization
import TestSupport
import Testing

@testable import Projections
@testable import Query

/// The search index's segments: many small catch-ups make many segments, merged as they come;
/// edits, deletions and moves between groups leave dead documents in them; the answers are
/// those of an index built in one go, and the work per page does not grow with the index.
@Suite struct SearchSegmentTests {
  static let schema = TextSearchLayoutTests.schema

  func store(_ name: String = #function) throws -> (TestStore, TextSearchProjection) {
    let projection = TextSearchProjection(schema: Self.schema)
    return (try TestStore(name, indexes: [projection]), projection)
  }

  static let words = [
    "apple", "apply", "apricot", "banana", "band", "bandit", "cherry", "chess", "delta", "dune",
    "echo", "ember", "fig", "fjord", "grape", "gravel", "honey", "husk", "iris", "ivy",
  ]

  func text(_ rng: inout SplitMix64, words count: Int) -> String {
    (0..<count).map { _ in Self.words[Int(rng.next() % UInt64(Self.words.count))] }
      .joined(separator: " ")
  }

  func doc(_ group: String, _ title: String, _ text: String, rev: String? = nil) -> String {
    var fields: [JSONObject.Member] = [
      .init(key: "g", value: .string(group)), .init(key: "t", value: .string(title)),
      .init(key: "x", value: .string(text)),
    ]
    if let rev { fields.insert(.init(key: "_rev", value: .string(rev)), at: 0) }
    return String(decoding: JSONValue.object(JSONObject(fields)).serialized(), as: UTF8.self)
  }

  static let queries = [
    "apple", "band*", "ap*", "\"cherry chess\"", "delta echo", "fig grape honey", "iris*",
    "\"ember fig\" dune", "bandit", "zzz", "gr*", "ap* \"apple apricot\"",
  ]

  /// Every query's hits (id, group, score) over `groups`, all of them.
  func answers(_ store: DocumentStore, groups: [String]) throws -> [[String]] {
    try Self.queries.map { q in
      var query = try SearchQuery(q)
      query.limit = 1000
      let result = try store.search(query, groups: groups)
      return ["total \(result.total)"]
        + result.hits.map { "\($0.docID) \($0.group) \(String(format: "%.9f", $0.score))" }
    }
  }

  @Test(
    "edits, deletions and moves over many small catch-ups: merged segments answer as an index built at once"
  )
  func segmentsAnswerAsARebuild() throws {
    let (t, projection) = try store()
    let store = t.store!
    var rng = SplitMix64(seed: 56)
    var revs: [String: String] = [:]
    let groups = ["g1", "g2", "g3"]
    for step in 0..<260 {
      let id = "d\(rng.next() % 70)"
      let roll = rng.next() % 10
      if let rev = revs[id], roll == 0 {
        let r = try store.delete(id, rev: rev, actor: "ann")
        revs[id] = nil
        _ = r
      } else {
        let group = groups[Int(rng.next() % 3)]
        let body = doc(
          group, "T\(step)", text(&rng, words: 1 + Int(rng.next() % 12)), rev: revs[id])
        revs[id] = try #require(try store.put(body, id: id, actor: "ann").rev)
      }
      // A catch-up per write: one segment each, merged as they come.
      try store.updateSearchIndex()
    }
    let segments = try store.readSearchIndex { txn, storage in
      try SearchSegment.all(storage, txn)
    }
    // 260 catch-ups made at most a handful of segments per level.
    #expect(segments.count < 3 * SearchWrites.mergeFactor)
    #expect(segments.contains { $0.level >= 2 })
    #expect(try store.verify("search") == [])
    let live = try answers(store, groups: groups)
    let one = try answers(store, groups: ["g2"])
    #expect(live[0][0] != "total 0")
    try store.rebuild("search")
    let rebuiltSegments = try store.readSearchIndex { txn, storage in
      try SearchSegment.all(storage, txn)
    }
    #expect(rebuiltSegments.count == 1)
    #expect(try answers(store, groups: groups) == live)
    #expect(try answers(store, groups: ["g2"]) == one)
    _ = projection
  }

  @Test("a phrase's words read first as a prefix or a word still have their positions")
  func phraseAfterPrefix() throws {
    let (t, _) = try store()
    _ = try t.store.put(doc("g1", "", "apple pie with cream"), id: "a", actor: "a")
    _ = try t.store.put(doc("g1", "", "pie apple with cream"), id: "b", actor: "a")
    for q in [#"app* "apple pie""#, #"apple "apple pie""#, #""apple pie" pie"#, #""apple pie""#] {
      let hits = try t.store.search(SearchQuery(q), groups: ["g1"]).hits.map(\.docID)
      #expect(hits == ["a"], "\(q)")
    }
    #expect(
      try t.store.search(SearchQuery(#""pie apple" cre*"#), groups: ["g1"]).hits.map(\.docID)
        == ["b"])
  }

  @Test("the bytes written per page (merges included) do not grow with the index")
  func workPerPageStaysFlat() throws {
    let (t, projection) = try store()
    let store = t.store!
    var rng = SplitMix64(seed: 7)
    var perBatch: [Int] = []
    let batch = 2_000
    var next = 0
    for _ in 0..<2 {
      let before = projection.work.bytes.load(ordering: .relaxed)
      for _ in 0..<(batch / 100) {
        var docs: [JSONValue] = []
        for _ in 0..<100 {
          let body = doc("g\(next % 7)", "Page \(next)", text(&rng, words: 40))
          docs.append(json(String(body.dropLast()) + #","_id":"p\#(next)"}"#))
          next += 1
        }
        _ = try store.bulkDocs(docs, actor: "ann")
        // Small catch-ups, so that segments are merged within each batch.
        try store.updateSearchIndex()
      }
      perBatch.append(projection.work.bytes.load(ordering: .relaxed) - before)
    }
    #expect(perBatch[0] > 0)
    // The second batch's work per page against the first's (the index twice as large).
    #expect(Double(perBatch[1]) <= 1.3 * Double(perBatch[0]), "\(perBatch)")
  }

  @Test("before a compaction, segments are written again without their dead documents")
  func compactingPurgesDead() throws {
    let (t, projection) = try store()
    let store = t.store!
    var revs: [String: String] = [:]
    for i in 0..<40 {
      revs["d\(i)"] = try store.put(doc("g1", "", "secretword\(i) common"), id: "d\(i)", actor: "a")
        .rev
    }
    try store.updateSearchIndex()
    // Fewer than a quarter deleted: their postings stay in the segment, dead.
    for i in 0..<5 { _ = try store.delete("d\(i)", rev: revs["d\(i)"]!, actor: "a") }
    #expect(try store.search(SearchQuery("secretword3"), groups: ["g1"]).total == 0)
    func deadCount() throws -> Int {
      try store.readSearchIndex { txn, storage in try txn.count(of: storage["dead"]) }
    }
    #expect(try deadCount() == 1)
    try store.writeSearchIndex { txn, storage in
      try projection.compacting(storage: storage, txn: txn)
    }
    #expect(try deadCount() == 0)
    let hasTerm = try store.readSearchIndex { txn, storage in
      var found = false
      try txn.scan(storage["postings"]) { key, _ in
        if String(decoding: key.dropFirst(4), as: UTF8.self).hasSuffix("secretword3") {
          found = true
        }
        return !found
      }
      return found
    }
    #expect(!hasTerm)
    #expect(try store.search(SearchQuery("common"), groups: ["g1"]).total == 35)
    #expect(try store.verify("search") == [])
  }

  @Test("an index of the layout before segments is built again when the store opens")
  func olderLayoutRebuilt() throws {
    let (t, _) = try store()
    for i in 0..<5 { _ = try t.store.put(doc("g1", "", "omega"), id: "d\(i)", actor: "a") }
    try t.store.updateSearchIndex()
    t.store.close()
    // Mark the index as written with layout 1, with a database of that layout beside it.
    do {
      var options = EventLog.Options(durability: .synced)
      options.merkleTree = false
      let env = try EventLog(directory: t.path + "/search", options: options)
      let state = try env.database(named: "search.state")
      let old = try env.database(named: "search.terms")
      try env.write { txn in
        try txn.put(UInt64(1).bigEndianBytes, forKey: Array("layout".utf8), in: state)
        try txn.put([1], forKey: [1], in: old)
      }
      env.close()
    }
    try t.reopen(indexes: [TextSearchProjection(schema: Self.schema)])
    #expect(try t.store.search(SearchQuery("omega"), groups: ["g1"]).total == 5)
    #expect(try t.store.verify("search") == [])
    t.store.close()
    var options = EventLog.Options(durability: .synced)
    options.merkleTree = false
    let env = try EventLog(directory: t.path + "/search", options: options)
    defer { env.close() }
    let old = try env.database(named: "search.terms")
    #expect(try env.read { try $0.count(of: old) } == 0)
  }
}
