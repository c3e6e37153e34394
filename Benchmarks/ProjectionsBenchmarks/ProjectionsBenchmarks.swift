import Benchmark
import Foundation
import JSON
import Log
import Projections
import Query
import RevTree
import Wiki

// The document store's workloads (issues 4 and 7), through the whole hot path: `_rev` check,
// revision id, one event, the documents and wiki projections, commit. Documents are ~300-byte
// TouchWiki pages with two [[links]]; the stores have the projections a wikilog database has
// (documents and wiki). Request bodies are parsed before `startMeasurement()`: these measure
// the store. (Benchmarks/DocCompare measures the same with the parse included, for
// `make compare`.)

/// A store in a temporary directory, shared by the iterations of one benchmark.
final class Fixture: @unchecked Sendable {
  // Touched only by the benchmark running it, one closure call at a time.
  var store: DocumentStore!
  var path = ""
  var next = 0
  var revs: [String] = []

  func open(_ name: String, _ durability: EventLog.Durability) throws {
    path = NSTemporaryDirectory() + "wikilog-bench-\(name)-\(UUID().uuidString)"
    var options = EventLog.Options(durability: durability)
    options.mapSize = 1 << 30
    store = try DocumentStore(
      directory: path, options: options, projections: [WikiProjection()], validation: .touchWiki)
    // The wikis w0...w99 the pages belong to: a local page edit needs its wiki.
    let wikis = (0..<100).map { k in
      try! JSONValue(
        parsing:
          #"{"_id":"w\#(k)","type":"wiki","title":"Wiki \#(k)","owner_id":"user0","members":["user1"]}"#
      )
    }
    let created = try store.bulkDocs(wikis, actor: "seed")
    precondition(created.allSatisfy(\.ok))
    next = 0
    revs = []
  }

  /// Creates pages `0..<count` (unsynced, then back to `durability`) and keeps their revs.
  func seed(_ count: Int, then durability: EventLog.Durability) throws {
    try store.log.setDurability(.unsynced)
    for start in stride(from: 0, to: count, by: 1000) {
      let results = try store.bulkDocs(pages(start..<min(count, start + 1000)), actor: "seed")
      revs.append(contentsOf: results.map { $0.rev! })
    }
    try store.log.setDurability(durability)
  }

  func close() {
    store?.close()
    store = nil
    try? FileManager.default.removeItem(atPath: path)
  }
}

/// Page `i`, version `version`, as a client sends it.
func pageJSON(_ i: Int, version: Int = 1, rev: String? = nil) -> String {
  let wiki = "w\(i % 100)"
  let revField = rev.map { #""_rev":"\#($0)","# } ?? ""
  return #"{"_id":"\#(wiki):Page \#(i)",\#(revField)"type":"page","wiki_id":"\#(wiki)","#
    + #""updated_by":"user\#(i % 7)","updated_at":"2026-01-0\#(version % 9 + 1)T10:00:00Z","#
    + ##""markdown":"# Page \##(i)\n\nVersion \##(version) of this page. It links to [[Page \##(i + 1)]] "##
    + #"and to [[Home]], and has a few more words so that its body is about the size of a short "#
    + #"wiki page."}"#
}

func pages(_ range: Range<Int>, version: Int = 1, revs: [String]? = nil) -> [JSONValue] {
  range.map { try! JSONValue(parsing: pageJSON($0, version: version, rev: revs?[$0])) }
}

/// A page replicated with three revisions of history (3-c, 2-b, 1-a).
func replicatedPage(_ i: Int) -> JSONValue {
  let h = String(format: "%08x", i)
  let ids = ["c", "b", "a"].map { String(repeating: $0, count: 24) + h }
  var json = pageJSON(i, version: 3, rev: "3-\(ids[0])")
  json.removeLast()
  json += #","_revisions":{"start":3,"ids":["\#(ids[0])","\#(ids[1])","\#(ids[2])"]}}"#
  return try! JSONValue(parsing: json)
}

let benchmarks: @Sendable () -> Void = {
  Benchmark.defaultConfiguration = .init(
    metrics: [.throughput, .wallClock, .mallocCountTotal], warmupIterations: 1,
    maxDuration: .seconds(3), maxIterations: 1_000_000)

  // MARK: Local edits

  let create = Fixture()
  Benchmark(
    "local edits: _bulk_docs of 1,000 new pages, synced",
    configuration: .init(scalingFactor: .kilo),
    closure: { benchmark in
      let n = benchmark.scaledIterations.count
      let docs = pages(create.next..<create.next + n)
      create.next += n
      benchmark.startMeasurement()
      blackHole(try create.store.bulkDocs(docs, actor: "bench"))
      benchmark.stopMeasurement()
    }, setup: { try create.open("create", .synced) }, teardown: { create.close() })

  let update = Fixture()
  let updateDocs = 50_000
  Benchmark(
    "local edits: _bulk_docs of 1,000 page updates with _rev, synced",
    configuration: .init(scalingFactor: .kilo),
    closure: { benchmark in
      let n = benchmark.scaledIterations.count
      let start = update.next % updateDocs
      let range = start..<min(updateDocs, start + n)
      let docs = pages(range, version: update.next / updateDocs + 2, revs: update.revs)
      update.next += range.count
      benchmark.startMeasurement()
      let results = try update.store.bulkDocs(docs, actor: "bench")
      benchmark.stopMeasurement()
      for (i, r) in zip(range, results) { update.revs[i] = r.rev! }
    },
    setup: {
      try update.open("update", .synced)
      try update.seed(updateDocs, then: .synced)
    }, teardown: { update.close() })

  let single = Fixture()
  Benchmark(
    "local edits: one put per synced transaction",
    closure: { benchmark in
      for _ in benchmark.scaledIterations {
        single.next += 1
        let rev = single.revs.last
        let r = try single.store.put(pageJSON(1, version: single.next, rev: rev), actor: "bench")
        single.revs = [r.rev!]
      }
    }, setup: { try single.open("single", .synced) }, teardown: { single.close() })

  let concurrent = Fixture()
  Benchmark(
    "local edits: 64 concurrent durable writers, putAsync with group commit",
    configuration: .init(scalingFactor: .kilo),
    closure: { benchmark in
      let perWriter = max(1, benchmark.scaledIterations.count / 64)
      let store = concurrent.store!
      let round = concurrent.next
      concurrent.next += 1
      let revs = concurrent.revs
      benchmark.startMeasurement()
      let latest = try await withThrowingTaskGroup(of: (Int, String).self) { group in
        for w in 0..<64 {
          group.addTask {
            var rev = revs[w]
            for v in 0..<perWriter {
              rev = try await store.putAsync(
                pageJSON(w, version: round * perWriter + v, rev: rev), actor: "writer\(w)"
              ).rev!
            }
            return (w, rev)
          }
        }
        return try await group.reduce(into: [Int: String]()) { $0[$1.0] = $1.1 }
      }
      benchmark.stopMeasurement()
      for (w, rev) in latest { concurrent.revs[w] = rev }
    },
    setup: {
      try concurrent.open("concurrent", .groupCommit)
      try concurrent.seed(64, then: .groupCommit)
    }, teardown: { concurrent.close() })

  // MARK: Replicated writes

  let replicated = Fixture()
  Benchmark(
    "replicated writes: _bulk_docs new_edits=false, 1,000 pages with 3-revision histories",
    configuration: .init(scalingFactor: .kilo),
    closure: { benchmark in
      let n = benchmark.scaledIterations.count
      let docs = (replicated.next..<replicated.next + n).map(replicatedPage)
      replicated.next += n
      benchmark.startMeasurement()
      let failures = try replicated.store.bulkDocs(
        docs, newEdits: false, actor: "replicator", origin: "https://peer/db")
      benchmark.stopMeasurement()
      precondition(failures.isEmpty)
    }, setup: { try replicated.open("replicated", .synced) }, teardown: { replicated.close() })

  // MARK: Reading and rebuilding

  let feed = Fixture()
  let feedDocs = 100_000
  Benchmark(
    "changes feed: 100,000 documents in one read (throughput = whole feeds)",
    configuration: .init(maxIterations: 20),
    closure: { benchmark in
      for _ in benchmark.scaledIterations {
        let result = try feed.store.changes()
        precondition(result.results.count == feedDocs)
        blackHole(result)
      }
    },
    setup: {
      try feed.open("feed", .unsynced)
      try feed.seed(feedDocs, then: .unsynced)
    }, teardown: { feed.close() })

  let paged = Fixture()
  Benchmark(
    "changes feed: 100,000 documents in pages of 1,000 (since + limit)",
    configuration: .init(maxIterations: 20),
    closure: { benchmark in
      for _ in benchmark.scaledIterations {
        var options = ChangesOptions()
        options.limit = 1000
        var rows = 0
        while true {
          let page = try paged.store.changes(options)
          if page.results.isEmpty { break }
          rows += page.results.count
          options.since = page.lastSeq
        }
        precondition(rows == feedDocs)
      }
    },
    setup: {
      try paged.open("paged", .unsynced)
      try paged.seed(feedDocs, then: .unsynced)
    }, teardown: { paged.close() })

  let rebuild = Fixture()
  Benchmark(
    "rebuild: documents and wiki projections from 100,000 events (throughput = rebuilds)",
    configuration: .init(maxIterations: 10),
    closure: { benchmark in
      for _ in benchmark.scaledIterations { try rebuild.store.rebuildAll() }
    },
    setup: {
      try rebuild.open("rebuild", .unsynced)
      try rebuild.seed(feedDocs, then: .unsynced)
    }, teardown: { rebuild.close() })

  let asOf = Fixture()
  Benchmark(
    "as-of view: the whole store as of position 100,000 (throughput = views)",
    configuration: .init(maxIterations: 10),
    closure: { benchmark in
      for _ in benchmark.scaledIterations {
        let view = try asOf.store.asOf(LogPosition(UInt64(feedDocs)))
        let count = try view.info.docCount
        precondition(count > 0)
        view.close()
      }
    },
    setup: {
      try asOf.open("asof", .unsynced)
      try asOf.seed(feedDocs, then: .unsynced)
    }, teardown: { asOf.close() })

  // MARK: Pathological revision trees, through the store
  // (1,000 leaves: building 10,000 through the store takes minutes, each write re-reading and
  // re-writing the whole tree twice, once per projection; RevTreeBenchmarks has the 10,000-leaf
  // merge on the tree alone.)

  let wide = Fixture()
  Benchmark(
    "replicated conflict into a document with 1,000 leaves",
    configuration: .init(maxIterations: 2000),
    closure: { benchmark in
      for _ in benchmark.scaledIterations {
        wide.next += 1
        let leaf = String(format: "%032x", wide.next)
        let doc = try JSONValue(
          parsing:
            #"{"_id":"w1:Wide","_rev":"2-\#(leaf)","_revisions":{"start":2,"ids":["\#(leaf)","\#(String(repeating: "0", count: 32))"]},"type":"page","markdown":"leaf \#(wide.next)"}"#
        )
        blackHole(try wide.store.bulkDocs([doc], newEdits: false, actor: "replicator"))
      }
    },
    setup: {
      try wide.open("wide", .unsynced)
      for start in stride(from: 0, to: 1000, by: 1000) {
        let docs = (start..<start + 1000).map { i in
          let leaf = String(format: "%032x", i + (1 << 40))
          return try! JSONValue(
            parsing:
              #"{"_id":"w1:Wide","_rev":"2-\#(leaf)","_revisions":{"start":2,"ids":["\#(leaf)","\#(String(repeating: "0", count: 32))"]},"type":"page","markdown":"leaf \#(i)"}"#
          )
        }
        _ = try wide.store.bulkDocs(docs, newEdits: false, actor: "seed")
      }
    }, teardown: { wide.close() })

  let deep = Fixture()
  Benchmark(
    "local edit of a document with a 1,000-revision history (revs_limit 1000)",
    configuration: .init(maxIterations: 5000),
    closure: { benchmark in
      for _ in benchmark.scaledIterations {
        deep.next += 1
        let r = try deep.store.put(
          pageJSON(7, version: deep.next, rev: deep.revs.last), actor: "bench")
        deep.revs = [r.rev!]
      }
    },
    setup: {
      try deep.open("deep", .unsynced)
      var rev: String? = nil
      for v in 0..<1000 {
        rev = try deep.store.put(pageJSON(7, version: v, rev: rev), actor: "seed").rev
      }
      deep.revs = [rev!]
      deep.next = 1000
    }, teardown: { deep.close() })
}
