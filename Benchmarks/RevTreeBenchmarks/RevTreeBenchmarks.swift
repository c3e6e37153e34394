import Benchmark
import JSON
import RevTree

/// Benchmarks for the RevTree targets (see the RevTree module documentation):
/// - merge + winner on a 10,000-leaf document: ≤ 1 ms
/// - one edit merged into a 1,000-deep stemmed chain: ≤ 20 µs
/// - a 100,000-revision chain built edit by edit with revs_limit 1000: ≤ 2 s
/// - encode + decode of a typical 50-revision tree: ≤ 5 µs
/// - JSON parse and canonical digest of a typical 2 KB wiki page body
/// - the local-edit hot path on a 300-byte page: parse + digest, serialize, and decode + edit +
///   encode of its tree with 3 and with 1,000 revisions
let benchmarks: @Sendable () -> Void = {
  let metrics: [BenchmarkMetric] = [.throughput, .wallClock, .mallocCountTotal]
  // Fixtures are built once (static lets) and copied before `startMeasurement()`, so samples
  // measure only the operation. In-place benchmarks run 1,000 operations per sample.

  Benchmark(
    "merge + winner, 10,000-leaf document",
    configuration: .init(metrics: metrics, scalingFactor: .kilo)
  ) { benchmark in
    var tree = Fixtures.star10k
    var k: UInt64 = 1 << 40
    try tree.merge(
      RevisionPath(start: 2, ids: [RevHash(high: k, low: 3), Fixtures.root]), deleted: false,
      body: 0, revsLimit: 1000)
    benchmark.startMeasurement()
    for _ in benchmark.scaledIterations {
      k &+= 1
      let path = try RevisionPath(start: 2, ids: [RevHash(high: k, low: 3), Fixtures.root])
      blackHole(try tree.merge(path, deleted: false, body: k, revsLimit: 1000))
      blackHole(tree.winner)
    }
  }

  Benchmark(
    "one edit into a 1,000-deep stemmed chain",
    configuration: .init(metrics: metrics, scalingFactor: .kilo)
  ) { benchmark in
    var (tree, leaf) = Fixtures.chain1500
    let first = try RevID(generation: leaf.generation + 1, hash: RevHash(high: 1 << 40, low: 11))
    try tree.applyEdit(newRevision: first, parent: leaf, deleted: false, body: 1, revsLimit: 1000)
    leaf = first
    benchmark.startMeasurement()
    for _ in benchmark.scaledIterations {
      let next = try RevID(
        generation: leaf.generation + 1, hash: RevHash(high: UInt64(leaf.generation), low: 11))
      blackHole(
        try tree.applyEdit(
          newRevision: next, parent: leaf, deleted: false, body: 1, revsLimit: 1000))
      leaf = next
    }
  }

  Benchmark(
    "100,000-revision chain edit by edit, revs_limit 1000",
    configuration: .init(metrics: metrics, warmupIterations: 0, maxIterations: 5)
  ) { benchmark in
    for _ in benchmark.scaledIterations {
      blackHole(try Fixtures.chain(edits: 100_000, revsLimit: 1000))
    }
  }

  Benchmark(
    "encode + decode, 50-revision tree",
    configuration: .init(metrics: metrics, scalingFactor: .kilo)
  ) { benchmark in
    let tree = Fixtures.typical50
    benchmark.startMeasurement()
    for _ in benchmark.scaledIterations {
      blackHole(try RevisionTree(decoding: tree.encoded()))
    }
  }

  for (name, bytes) in [
    ("JSON parse + canonical digest, 2 KB page", Fixtures.page),
    ("JSON parse + revision digest, 300-byte page", Fixtures.smallPage),
  ] {
    Benchmark(name, configuration: .init(metrics: metrics, scalingFactor: .kilo)) { benchmark in
      let parent = try RevID("3-967a00dff5e02add41819138abb3284d")
      benchmark.startMeasurement()
      for _ in benchmark.scaledIterations {
        let body = try JSONValue(parsing: bytes)
        blackHole(RevisionDigest.revision(parent: parent, deleted: false, body: body))
      }
    }
  }

  Benchmark(
    "JSON serialize, 300-byte page",
    configuration: .init(metrics: metrics, scalingFactor: .kilo)
  ) { benchmark in
    let body = try JSONValue(parsing: Fixtures.smallPage)
    benchmark.startMeasurement()
    for _ in benchmark.scaledIterations {
      blackHole(body.serialized())
    }
  }

  for revisions in [3, 1000] {
    Benchmark(
      "decode + local edit + encode, \(revisions)-revision tree",
      configuration: .init(metrics: metrics, scalingFactor: .kilo)
    ) { benchmark in
      let (tree, leaf) = try Fixtures.chain(edits: revisions, revsLimit: 1000)
      let stored = tree.encoded()
      let next = try RevID(generation: leaf.generation + 1, hash: RevHash(high: 1 << 50, low: 7))
      benchmark.startMeasurement()
      for _ in benchmark.scaledIterations {
        var t = try RevisionTree(decoding: stored)
        let parent = try t.editParent(for: leaf, deleted: false)
        try t.applyEdit(
          newRevision: next, parent: parent, deleted: false, body: 1, revsLimit: 1000)
        blackHole(t.encoded())
      }
    }
  }
}

enum Fixtures {
  static let root = RevHash(high: 0, low: 1)
  static let star10k = star(leaves: 10_000)
  static let chain1500 = try! chain(edits: 1500, revsLimit: 1000)
  static let typical50 = try! typical(revisions: 50)
  static let page = pageBody()
  static let smallPage = Array(
    ##"{"_id":"w7:Page 7","type":"page","wiki_id":"w7","updated_by":"user0","updated_at":"2026-01-01T10:00:00Z","markdown":"# Page 7\n\nVersion 1 of this page. It links to [[Page 8]] and to [[Home]], and has a few more words so that its body is about the size of a short wiki page."}"##
      .utf8)

  /// One root with `leaves` conflicting children.
  static func star(leaves: Int) -> RevisionTree {
    var tree = RevisionTree()
    for i in 0..<leaves {
      let leaf = RevHash(high: UInt64(i) &* 0x9E37_79B9_7F4A_7C15, low: 2)
      let path = try! RevisionPath(start: 2, ids: [leaf, root])
      try! tree.merge(path, deleted: false, body: UInt64(i), revsLimit: 1000)
    }
    return tree
  }

  /// A linear history of `edits` local edits; returns the tree and its leaf.
  static func chain(edits: Int, revsLimit: Int) throws -> (RevisionTree, RevID) {
    var tree = RevisionTree()
    var parent: RevID? = nil
    for i in 0..<edits {
      let rev = try RevID(generation: i + 1, hash: RevHash(high: UInt64(i), low: 12))
      try tree.applyEdit(
        newRevision: rev, parent: parent, deleted: false, body: UInt64(i), revsLimit: revsLimit)
      parent = rev
    }
    return (tree, parent!)
  }

  /// A 50-revision document: a chain with a short replicated conflict branch.
  static func typical(revisions: Int) throws -> RevisionTree {
    var (tree, _) = try chain(edits: revisions - 2, revsLimit: 1000)
    let base = RevHash(high: UInt64(revisions - 5), low: 12)
    let path = try RevisionPath(
      start: revisions - 2, ids: [RevHash(high: 1, low: 99), RevHash(high: 2, low: 99), base])
    try tree.merge(path, deleted: false, body: 7, revsLimit: 1000)
    return tree
  }

  /// A typical 2 KB wiki page document.
  static func pageBody() -> [UInt8] {
    var page = JSONObject()
    page["_id"] = .string("wiki-1:Home Page")
    page["_rev"] = .string("3-967a00dff5e02add41819138abb3284d")
    page["type"] = .string("page")
    page["wiki_id"] = .string("wiki-1")
    page["markdown"] = .string(
      String(repeating: "Some *markdown* text with [[Links]] and \"quotes\".\n", count: 34))
    page["created_at"] = .string("2024-05-01T10:00:00Z")
    page["updated_at"] = .string("2024-05-02T11:30:00Z")
    page["updated_by"] = .string("alice")
    page["tags"] = .array([.string("a"), .string("b")])
    return JSONValue.object(page).serialized()
  }
}
