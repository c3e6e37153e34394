// The document workloads of scripts/compare (issues 4 and 7), on a DocumentStore with the
// projections a wikilog database has (documents, wiki, drafts, access; --no-access leaves the
// last out), printed as
// "<workload> <count> <seconds> <per_second>" lines, the format of LogCompare and the C baselines.
//
//   DocCompare DIR [--docs N] [--updates N] [--replicated N] [--writers N] [--per-writer N]
//                  [--single N] [--docs-only] [--durability unsynced|synced] [--only w1,...]
//
// --docs-only opens the stores with the documents projection alone (what the SQLite baseline
// stores) and suffixes the workload names with "-docsonly".
//
// Workloads (names for --only):
//   create      N page documents created by _bulk_docs, 1,000 per call (one transaction each,
//               see --durability); the request bodies are parsed before the timing, as the C
//               baselines get their documents ready-made. Leaves DIR/docs behind.
//   rebuild     rebuilds every projection in one pass (DocumentStore.rebuildAll), then the
//               documents projection alone, from DIR/docs's log.
//   asof        builds an as-of view (documents and wiki) of DIR/docs at position 100,000.
//   changes     the changes feed of DIR/docs: every row, 100,000 per call, each serialized as an
//               NDJSON line (DocumentStore.writeChangesJSON, what `_changes` sends); also the
//               rows alone.
//   update      --updates documents created untimed, then each updated once by _bulk_docs with
//               its _rev, 1,000 per call.
//   replicated  --replicated documents written with new_edits=false, each with a 3-revision
//               _revisions history, 1,000 per call; counts leaf revisions.
//   concurrent  --writers tasks each editing its own document --per-writer times with
//               putAsync on a group-commit log: every edit durable when it returns.
//   concurrent-create  --writers tasks each creating --per-writer new documents the same way.
//   single      --single edits with put, one synced transaction each.
// Bodies are ~300-byte TouchWiki pages ({"type":"page","wiki_id":...,"markdown":...}) with two
// [[links]], so the wiki projection does its full work (pages, links, backlinks, wikis).
import Foundation
import JSON
import Log
import Projections
import Query
import RevTree
import Wiki

// MARK: Arguments

let arguments = Array(CommandLine.arguments.dropFirst())
func option(_ name: String, _ defaultValue: Int) -> Int {
  guard let i = arguments.firstIndex(of: name), i + 1 < arguments.count,
    let n = Int(arguments[i + 1].replacingOccurrences(of: "_", with: ""))
  else { return defaultValue }
  return n
}
let base =
  arguments.first.flatMap { $0.hasPrefix("--") ? nil : $0 }
  ?? NSTemporaryDirectory() + "wikilog-doccompare"
let docCount = option("--docs", 1_000_000)
let updateCount = option("--updates", 200_000)
let replicatedCount = option("--replicated", 200_000)
let writers = option("--writers", 64)
let perWriter = option("--per-writer", 200)
let singleCount = option("--single", 500)
let docsOnly = arguments.contains("--docs-only")
/// Leave out the access projection (WikiAccessProjection), which every database of a wiki data
/// directory has since issue 17: to measure what it costs.
let noAccess = arguments.contains("--no-access")
/// The query projections a wiki data directory has (Mango indexes, full-text search over
/// pages), with one JSON index on `wiki_id`: `--query` adds them (`--mango`, `--search` one
/// each), to measure what they cost.
let withQuery = arguments.contains("--query")
let withMango = withQuery || arguments.contains("--mango")
let withSearch = withQuery || arguments.contains("--search")
/// The batched workloads' durability: unsynced (the default, as SQLite's synchronous=NORMAL:
/// a crash of the process loses nothing, a power loss may lose the last commits) or synced
/// (every commit flushed, as synchronous=FULL; the workload names then end in "-synced").
let batchDurability: EventLog.Durability =
  arguments.firstIndex(of: "--durability").map {
    $0 + 1 < arguments.count && arguments[$0 + 1] == "synced" ? .synced : .unsynced
  } ?? .unsynced
let batchSuffix = batchDurability == .synced ? "-synced" : ""
let only: Set<String>? = arguments.firstIndex(of: "--only").flatMap {
  $0 + 1 < arguments.count ? Set(arguments[$0 + 1].split(separator: ",").map(String.init)) : nil
}
func enabled(_ name: String) -> Bool { only?.contains(name) ?? true }

// MARK: Helpers

func report(_ name: String, _ n: Int, _ seconds: Double) {
  print(
    name + (docsOnly ? "-docsonly" : ""), n, String(format: "%.6f", seconds),
    String(format: "%.0f", Double(n) / seconds))
  fflush(nil)
}

func note(_ text: String) {
  FileHandle.standardError.write(Data((text + "\n").utf8))
}

func now() -> Double {
  var ts = timespec()
  clock_gettime(CLOCK_MONOTONIC, &ts)
  return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
}

func openStore(_ name: String, _ durability: EventLog.Durability, fresh: Bool = true) throws
  -> DocumentStore
{
  let dir = base + "/" + name + (docsOnly ? "-docsonly" : "")
  if fresh { try? FileManager.default.removeItem(atPath: dir) }
  var options = EventLog.Options(durability: durability)
  options.mapSize = 4 << 30
  let store = try DocumentStore(
    directory: dir, options: options,
    projections: docsOnly
      ? []
      : [WikiProjection(), DraftProjection()] + (noAccess ? [] : [WikiAccessProjection()])
        + (withMango ? [MangoProjection(database: name)] : []),
    indexes: !docsOnly && withSearch ? [TextSearchProjection(schema: .wikiPages)] : [],
    validation: .touchWiki)
  if fresh && withMango {
    let index = try JSONValue(
      parsing:
        #"{"_id":"_design/bench","language":"query","views":{"by-wiki":{"map":{"fields":{"wiki_id":"asc"},"partial_filter_selector":{}},"reduce":"_count","options":{"def":{"fields":["wiki_id"]}}}}}"#
    )
    guard try store.bulkDocs([index], actor: "bench").allSatisfy(\.ok) else {
      fatalError("the index's design document was refused")
    }
  }
  if fresh { try createWikis(store) }
  return store
}

/// The wikis `w0`...`w99` the pages belong to (a local page edit needs its wiki), untimed.
func createWikis(_ store: DocumentStore) throws {
  let docs = (0..<100).map { k in
    try! JSONValue(
      parsing:
        #"{"_id":"w\#(k)","type":"wiki","title":"Wiki \#(k)","owner_id":"user0","members":["user1","user2"]}"#
    )
  }
  guard try store.bulkDocs(docs, actor: "bench").allSatisfy(\.ok) else {
    fatalError("could not create the wikis")
  }
}

func remove(_ name: String) {
  try? FileManager.default.removeItem(atPath: base + "/" + name + (docsOnly ? "-docsonly" : ""))
}

/// The JSON of page `i` (about 300 bytes), as a client sends it.
func page(_ i: Int, version: Int = 1, rev: String? = nil, into out: inout String) {
  let wiki = "w\(i % 100)"
  out += #"{"_id":"\#(wiki):Page \#(i)","#
  if let rev { out += #""_rev":"\#(rev)","# }
  out += #""type":"page","wiki_id":"\#(wiki)","updated_by":"user\#(i % 7)","#
  out +=
    ##""updated_at":"2026-01-0\##(version % 9 + 1)T10:00:00Z","markdown":"# Page \##(i)\n\nVersion "##
  out += #"\#(version) of this page. It links to [[Page \#(i + 1)]] and to [[Home]], and has "#
  out += #"a few more words so that its body is about the size of a short wiki page."}"#
}

/// The documents of one _bulk_docs call: pages `range`, with their revs when given, parsed
/// from a request body (before the timing: the C programs get their documents ready-made too).
func bulkDocs(_ range: Range<Int>, version: Int = 1, revs: [String]? = nil) -> [JSONValue] {
  var s = #"{"docs":["#
  s.reserveCapacity(range.count * 360)
  for i in range {
    if i != range.lowerBound { s += "," }
    page(i, version: version, rev: revs?[i], into: &s)
  }
  s += "]}"
  return parseBulk(Array(s.utf8))
}

func parseBulk(_ body: [UInt8]) -> [JSONValue] {
  guard let docs = try? JSONValue(parsing: body)["docs"]?.arrayValue else {
    fatalError("bad bulk body")
  }
  return docs
}

/// Writes a _bulk_docs call's documents.
func postBulk(_ store: DocumentStore, _ docs: [JSONValue], newEdits: Bool = true) throws
  -> [DocumentWriteResult]
{
  try store.bulkDocs(docs, newEdits: newEdits, actor: "bench", origin: newEdits ? "" : "peer")
}

/// Creates documents `0..<count` in calls of 1,000; returns the seconds spent in the store
/// (not building and parsing the request bodies) and their revs.
func createPages(_ store: DocumentStore, count: Int) throws -> (Double, [String]) {
  var revs: [String] = []
  revs.reserveCapacity(count)
  // Every call's documents first, so that the timed calls follow one another with no gap in
  // which a projection kept behind the log (search) could catch up unseen.
  let batches = stride(from: 0, to: count, by: 1000).map { bulkDocs($0..<min(count, $0 + 1000)) }
  var seconds = 0.0
  for docs in batches {
    let t0 = now()
    let results = try postBulk(store, docs)
    seconds += now() - t0
    for r in results {
      guard r.ok, let rev = r.rev else { fatalError("write failed: \(r)") }
      revs.append(rev)
    }
  }
  return (seconds, revs)
}

// MARK: Workloads

if enabled("create") || enabled("rebuild") || enabled("changes") || enabled("asof") {
  let fresh = enabled("create")
  let store = try openStore("docs", batchDurability, fresh: fresh)
  if fresh {
    let (seconds, _) = try createPages(store, count: docCount)
    report("doc-create-batched" + batchSuffix, docCount, seconds)
    if withSearch {
      // The full-text index follows the log: the writes above did not wait for it. What it
      // had left to do when they were acknowledged, and the rate counting that too.
      let behind =
        Int(try store.log.committedPosition.rawValue)
        - Int(try TextSearch(store).checkpoint()?.rawValue ?? 0)
      let t0 = now()
      try TextSearch(store).update()
      let dt = now() - t0
      note("search index \(behind) events behind at the last write; caught up in \(dt) s")
      report("doc-create-batched-indexed" + batchSuffix, docCount, seconds + dt)
    }
  }
  let events = Int(try store.log.committedPosition.rawValue)

  if enabled("rebuild") {
    // Every projection in one pass (what `wikilog rebuild` does), then the documents alone.
    var t0 = now()
    try store.rebuildAll()
    report("rebuild-all", events, now() - t0)
    t0 = now()
    try store.rebuild("docs")
    report("rebuild-docs", events, now() - t0)
  }

  if enabled("asof") {
    // The whole store (documents and wiki) as of position 100,000 (or the log's end when
    // shorter): a view built by replaying that many events into scratch databases.
    let position = min(events, 100_000)
    let t0 = now()
    let view = try store.asOf(LogPosition(UInt64(position)))
    let info = try view.info
    let dt = now() - t0
    view.close()
    report("asof-view", position, dt)
    note("as-of view at \(position): \(info.docCount) documents")
  }

  if enabled("changes") {
    // The rows alone, then the rows serialized as the feed sends them.
    for serialize in [false, true] {
      var options = ChangesOptions()
      options.limit = 100_000
      var rows = 0
      var bytes = 0
      var out: [UInt8] = []
      out.reserveCapacity(1 << 20)
      let t0 = now()
      while true {
        if serialize {
          // As `_changes` and `wikilog tail` write them: straight from the stored records.
          out.removeAll(keepingCapacity: true)
          let written = try store.writeChangesJSON(options, into: &out, separator: [0x0A])!
          if written.rows == 0 { break }
          rows += written.rows
          bytes += out.count + 1
          options.since = written.lastSeq
          continue
        }
        let page = try store.changes(options)
        if page.results.isEmpty { break }
        rows += page.results.count
        options.since = page.lastSeq
      }
      let dt = now() - t0
      report(serialize ? "changes-scan-ndjson" : "changes-scan-rows", rows, dt)
      if serialize { note("changes feed: \(rows) rows, \(bytes) bytes of NDJSON") }
    }
  }
  store.close()
}

if enabled("update") {
  let store = try openStore("update", .unsynced)
  let (_, revs) = try createPages(store, count: updateCount)
  try store.log.setDurability(batchDurability)
  try TextSearch(store).update()
  let batches = stride(from: 0, to: updateCount, by: 1000).map {
    bulkDocs($0..<min(updateCount, $0 + 1000), version: 2, revs: revs)
  }
  var seconds = 0.0
  for docs in batches {
    let t0 = now()
    let results = try postBulk(store, docs)
    seconds += now() - t0
    guard results.allSatisfy(\.ok) else { fatalError("update failed") }
  }
  report("doc-update-batched" + batchSuffix, updateCount, seconds)
  if withSearch {
    let t0 = now()
    try TextSearch(store).update()
    report("doc-update-batched-indexed" + batchSuffix, updateCount, seconds + now() - t0)
  }
  store.close()
  remove("update")
}

if enabled("replicated") {
  let store = try openStore("replicated", batchDurability)
  var seconds = 0.0
  for start in stride(from: 0, to: replicatedCount, by: 1000) {
    var s = #"{"docs":["#
    for i in start..<min(replicatedCount, start + 1000) {
      if i != start { s += "," }
      // A document replicated with three revisions of history: 3-c, 2-b, 1-a.
      let h = String(format: "%08x", i)
      let ids = ["c", "b", "a"].map { String(repeating: $0, count: 24) + h }
      var doc = ""
      page(i, version: 3, rev: "3-\(ids[0])", into: &doc)
      doc.removeLast()
      s += doc + #","_revisions":{"start":3,"ids":["\#(ids[0])","\#(ids[1])","\#(ids[2])"]}}"#
    }
    s += "]}"
    let docs = parseBulk(Array(s.utf8))
    let t0 = now()
    let failures = try postBulk(store, docs, newEdits: false)
    seconds += now() - t0
    guard failures.isEmpty else { fatalError("replicated write failed: \(failures[0])") }
  }
  report("doc-replicated-batched" + batchSuffix, replicatedCount, seconds)
  store.close()
  remove("replicated")
}

/// A workload of --writers tasks writing on a group-commit log (in DIR/`name`) at once, each
/// running `writer` with its number: reported as doc-`kind`-N-writers-group-commit, with how
/// the log grouped the writes.
func concurrentWorkload(
  _ name: String, kind: String,
  _ writer: @escaping @Sendable (DocumentStore, Int) async throws -> Void
) async throws {
  let store = try openStore(name, .groupCommit)
  let t0 = now()
  try await withThrowingTaskGroup(of: Void.self) { group in
    for w in 0..<writers { group.addTask { try await writer(store, w) } }
    try await group.waitForAll()
  }
  report("doc-\(kind)-\(writers)-writers-group-commit", writers * perWriter, now() - t0)
  let stats = store.log.statistics
  note(
    "group commit: \(stats.commits) commits for \(stats.groupedWrites) writes (\(String(format: "%.1f", Double(stats.groupedWrites) / Double(max(1, stats.groups)))) per group)"
  )
  store.close()
  remove(name)
}

if enabled("concurrent") {
  // Each writer edits its own page.
  try await concurrentWorkload("concurrent", kind: "edit") { store, w in
    var rev: String? = nil
    for v in 1...perWriter {
      var doc = ""
      page(w, version: v % 10, rev: rev, into: &doc)
      rev = try await store.putAsync(doc, actor: "writer\(w)").rev
    }
  }
}

if enabled("concurrent-create") {
  // Each writer creates new pages.
  try await concurrentWorkload("concurrent-create", kind: "create") { store, w in
    for v in 0..<perWriter {
      var doc = ""
      page(w * perWriter + v, into: &doc)
      _ = try await store.putAsync(doc, actor: "writer\(w)")
    }
  }
}

if enabled("single") {
  let store = try openStore("single", .synced)
  var rev: String? = nil
  let t0 = now()
  for v in 0..<singleCount {
    var doc = ""
    page(1, version: v % 10, rev: rev, into: &doc)
    rev = try store.put(doc, actor: "bench").rev
  }
  report("doc-edit-single-synced", singleCount, now() - t0)
  store.close()
  remove("single")
}
