// The query targets of issue 21, on stores built here (release build, WIKILOG_BENCHMARKS=1):
//
//   QueryCompare DIR [--docs N] [--pages N] [--runs N] [--queries N] [--only index,find,search]
//                    [--reuse]
//   QueryCompare DIR --only search-growth [--batch N] [--batches N] [--queries N] [--plain]
//                    [--tsv PATH] [--queries-out PATH] [--generate-only]
//
//   index   N documents (--docs, 1,000,000; ~200 bytes, `owner` one of N/100 values) created by
//           _bulk_docs in calls of 1,000 into a store with the Mango projection, then a JSON
//           index on `owner` created (its design document written: the build runs in that
//           transaction) and dropped again, --runs times: "mango-index-build".
//   find    on that store with the index: `{"selector":{"owner":...},"limit":100}` for --queries
//           owners, each returning 100 rows, the rows serialized as `_find` sends them
//           ("mango-find-eq-100"); and for each owner the same query with
//           `"fields":["_id","owner"]`, which the index covers ("mango-find-eq-100-covered").
//   search  --pages (100,000) wiki pages of ~2 KB, in 10 wikis, with words drawn from a Zipf
//           distribution over 20,000 words, written by _bulk_docs in calls of 1,000 into a store
//           with the full-text projection ("search-create-2k"); then --queries two-word queries
//           over the 10 wikis (words of Zipf rank 20 to 2,000), each with its page of 25 hits
//           and their snippets made ("search-two-words"); and two of the most common words
//           ("search-two-common-words"); "-ranking-only" lines time the search without the
//           page's titles and snippets. --reuse searches DIR/search as an earlier run left it.
//   search-growth (issue 56; only when named in --only): --batches (6) batches of --batch
//           (20,000) TouchWiki pages of 60 words (Zipf, s = 1, over 50,000 words) in 97 wikis,
//           each batch written by _bulk_docs in calls of 1,000 and the index brought up to the
//           log's end; per batch its time ("search-growth-batch <k> <pages> <seconds> <rate>"),
//           the process's resident memory and the sizes of data.mdb and search/data.mdb. Then
//           --queries (50, after 5 that warm up) queries of each class (a very common word, a
//           rare one, two mid-rank words, a prefix, a phrase of a page), over the 97 wikis and
//           over 3 of them, timed with and without their page of snippets. --plain writes the
//           same documents without "type":"page" (nothing indexed; "search-growth-plain-*"
//           lines) to tell the writes from the indexing. --tsv writes the pages ("id\twiki\ttext"
//           lines) and --queries-out the queries, for Benchmarks/baselines/fts5_pages.c;
//           --generate-only writes just those two files (scripts/compare-search).
//
// Lines are "<workload> <count> <seconds> <per_second>" like DocCompare's, then for the
// timed-per-operation workloads "<workload>-ms median <m> p90 <p> max <x>".
import Foundation
import JSON
import Log
import Projections
import Query
import Wiki

let arguments = Array(CommandLine.arguments.dropFirst())
func option(_ name: String, _ defaultValue: Int) -> Int {
  guard let i = arguments.firstIndex(of: name), i + 1 < arguments.count,
    let n = Int(arguments[i + 1].replacingOccurrences(of: "_", with: ""))
  else { return defaultValue }
  return n
}
let base =
  arguments.first.flatMap { $0.hasPrefix("--") ? nil : $0 }
  ?? NSTemporaryDirectory() + "wikilog-querycompare"
let docCount = option("--docs", 1_000_000)
let pageCount = option("--pages", 100_000)
let runs = option("--runs", 3)
let queryCount = option("--queries", 200)
let only: Set<String>? = arguments.firstIndex(of: "--only").flatMap {
  $0 + 1 < arguments.count ? Set(arguments[$0 + 1].split(separator: ",").map(String.init)) : nil
}
/// The sections that run when `--only` is not given; the others run only when named.
let defaultSections: Set<String> = ["index", "find", "search"]
func enabled(_ name: String) -> Bool { only?.contains(name) ?? defaultSections.contains(name) }
func stringOption(_ name: String) -> String? {
  guard let i = arguments.firstIndex(of: name), i + 1 < arguments.count else { return nil }
  return arguments[i + 1]
}

func now() -> Double {
  var ts = timespec()
  clock_gettime(CLOCK_MONOTONIC, &ts)
  return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
}

func report(_ name: String, _ n: Int, _ seconds: Double) {
  print(name, n, String(format: "%.6f", seconds), String(format: "%.0f", Double(n) / seconds))
  fflush(nil)
}

func reportTimes(_ name: String, _ seconds: [Double]) {
  let ms = seconds.map { $0 * 1000 }.sorted()
  func at(_ q: Double) -> Double { ms[min(ms.count - 1, Int(Double(ms.count) * q))] }
  print(
    name + "-ms", "median", String(format: "%.3f", at(0.5)), "p90", String(format: "%.3f", at(0.9)),
    "max", String(format: "%.3f", ms.last ?? 0))
  fflush(nil)
}

/// A deterministic generator (SplitMix64).
struct Random {
  var state: UInt64
  mutating func next() -> UInt64 {
    state &+= 0x9E37_79B9_7F4A_7C15
    var z = state
    z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
    z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
    return z ^ (z >> 31)
  }
  mutating func unit() -> Double { Double(next() >> 11) / Double(1 << 53) }
  mutating func below(_ n: Int) -> Int { Int(next() % UInt64(n)) }
}

func openStore(
  _ name: String, _ projections: [any Projection], indexes: [any IndexBehindLog] = [],
  fresh: Bool
) throws -> DocumentStore {
  let dir = base + "/" + name
  if fresh { try? FileManager.default.removeItem(atPath: dir) }
  var options = EventLog.Options(durability: .unsynced)
  options.mapSize = 16 << 30
  return try DocumentStore(
    directory: dir, options: options, projections: projections, indexes: indexes)
}

func write(_ store: DocumentStore, _ body: String) throws {
  guard let docs = try JSONValue(parsing: Array(body.utf8))["docs"]?.arrayValue else {
    fatalError("bad bulk body")
  }
  guard try store.bulkDocs(docs, actor: "bench").allSatisfy(\.ok) else {
    fatalError("a write failed")
  }
}

// MARK: Mango: index build and indexed equality _find

if enabled("index") || enabled("find") {
  let fresh = enabled("index")
  let store = try openStore("mango", [MangoProjection(database: "mango")], fresh: fresh)
  let owners = max(1, docCount / 100)
  if fresh {
    var seconds = 0.0
    for start in stride(from: 0, to: docCount, by: 1000) {
      var s = #"{"docs":["#
      for i in start..<min(docCount, start + 1000) {
        if i != start { s += "," }
        s +=
          #"{"_id":"doc\#(String(format: "%08d", i))","type":"note","owner":"user\#(i % owners)","#
        s += #""n":\#(i),"tags":["t\#(i % 13)","t\#(i % 7)"],"title":"Note \#(i)","#
        s +=
          #""text":"A short note of about two hundred bytes, number \#(i), for the index benchmark."}"#
      }
      s += "]}"
      let t0 = now()
      try write(store, s)
      seconds += now() - t0
    }
    report("mango-create", docCount, seconds)
    let design =
      #"{"_id":"_design/owner","language":"query","views":{"by-owner":{"map":{"fields":{"owner":"asc"},"partial_filter_selector":{}},"reduce":"_count","options":{"def":{"fields":["owner"]}}}}}"#
    var builds: [Double] = []
    for run in 0..<runs {
      let t0 = now()
      let result = try store.bulkDocs([try JSONValue(parsing: design)], actor: "bench")
      builds.append(now() - t0)
      guard result.allSatisfy(\.ok), let rev = result.first?.rev else {
        fatalError("index refused")
      }
      report("mango-index-build", docCount, builds.last!)
      if run < runs - 1 {
        // Dropped (its rows removed, untimed) for the next run.
        let deleted = #"{"_id":"_design/owner","_rev":"\#(rev)","_deleted":true}"#
        guard try store.bulkDocs([try JSONValue(parsing: deleted)], actor: "bench").allSatisfy(\.ok)
        else { fatalError("drop refused") }
      }
    }
    reportTimes("mango-index-build", builds)
  }
  if enabled("find") {
    var random = Random(state: 21)
    // The same owners asked for whole documents and for fields the index covers, in turn
    // first (so that neither always finds the other's pages in the cache).
    var times: [Double] = []
    var coveredTimes: [Double] = []
    for q in 0..<queryCount + 10 {
      let owner = "user\(random.below(owners))"
      for covered in q % 2 == 0 ? [false, true] : [true, false] {
        let fields = covered ? #","fields":["_id","owner"]"# : ""
        let body = try JSONValue(
          parsing:
            #"{"selector":{"owner":"\#(owner)"},"limit":100,"execution_stats":true\#(fields)}"#)
        let t0 = now()
        let query = try FindQuery(body)
        let result = try MangoQueries(store).find(query)
        let out = result.json.serialized()
        let dt = now() - t0
        guard result.docs.count == min(100, docCount / owners), result.warning == nil,
          !out.isEmpty, (result.stats?.docsExamined == 0) == covered
        else {
          fatalError("find returned \(result.docs.count) rows, warning \(result.warning ?? "none")")
        }
        if q >= 10 { covered ? coveredTimes.append(dt) : times.append(dt) }  // ten warm the cache
      }
    }
    report("mango-find-eq-100", times.count, times.reduce(0, +))
    reportTimes("mango-find-eq-100", times)
    report("mango-find-eq-100-covered", coveredTimes.count, coveredTimes.reduce(0, +))
    reportTimes("mango-find-eq-100-covered", coveredTimes)
  }
  store.close()
}

// MARK: Full-text search: two-word queries over 2 KB pages

if enabled("search") {
  // 20,000 pronounceable words (one to three syllables), ranked; Zipf (s = 1) over the ranks.
  var r = Random(state: 7)
  let vocabulary = ZipfVocabulary(count: 20_000, maxSyllables: 3, &r)
  func word(_ r: inout Random) -> String { vocabulary.word(&r) }
  let reuse =
    arguments.contains("--reuse") && FileManager.default.fileExists(atPath: base + "/search")
  // The search index follows the log (an index behind it, as `wikilog serve` keeps it).
  let store = try openStore(
    "search", [], indexes: [TextSearchProjection(schema: .wikiPages)], fresh: !reuse)
  var seconds = 0.0
  var textBytes = 0
  for start in stride(from: 0, to: reuse ? 0 : pageCount, by: 1000) {
    var s = #"{"docs":["#
    for i in start..<min(pageCount, start + 1000) {
      var text = ""
      var sentence = 0
      while text.utf8.count < 2000 {
        let w = word(&r)
        text += sentence == 0 ? w.prefix(1).uppercased() + w.dropFirst() : w
        sentence += 1
        if sentence > 8 + r.below(8) {
          text += ". "
          sentence = 0
        } else {
          text += " "
        }
      }
      textBytes += text.utf8.count
      if i != start { s += "," }
      s +=
        #"{"_id":"w\#(i % 10):Page \#(i)","type":"page","wiki_id":"w\#(i % 10)","markdown":"\#(text)"}"#
    }
    s += "]}"
    let t0 = now()
    try write(store, s)
    seconds += now() - t0
  }
  let wikis = (0..<10).map { "w\($0)" }
  // Indexing is done when a search has brought the index up to the log: the writes and the
  // catch-up together are the time to index the pages.
  let caughtUp = now()
  _ = try TextSearch(store).search(SearchQuery(vocabulary[0]), groups: wikis)
  seconds += now() - caughtUp
  if !reuse { report("search-create-2k", pageCount, seconds) }
  func run(_ name: String, _ queries: [String]) throws {
    var times: [Double] = []
    var ranking: [Double] = []
    var totals: [Int] = []
    for (q, text) in queries.enumerated() {
      let t0 = now()
      let result = try TextSearch(store).search(SearchQuery(text), groups: wikis)
      let t1 = now()
      let json = try TextSearch(store).json(result).serialized()
      let dt = now() - t0
      _ = json
      if q >= 5 {
        times.append(dt)
        ranking.append(t1 - t0)
        totals.append(result.total)
      }
    }
    report(name, times.count, times.reduce(0, +))
    reportTimes(name, times)
    reportTimes(name + "-ranking-only", ranking)
    let sorted = totals.sorted()
    print(name + "-matches", "median", sorted[sorted.count / 2], "max", sorted.last ?? 0)
  }
  var qr = Random(state: 99)
  let queries = (0..<queryCount + 5).map { _ in
    "\(vocabulary[20 + qr.below(1980)]) \(vocabulary[20 + qr.below(1980)])"
  }
  try run("search-two-words", queries)
  let common = (0..<25).map { k in "\(vocabulary[k % 5]) \(vocabulary[5 + k % 5])" }
  try run("search-two-common-words", common)
  store.close()
}

// MARK: Search growth (issue 56): indexing cost per page as the wiki grows, index size, queries

/// The process's resident memory now and at its peak, in kB (/proc/self/status).
func residentKB() -> (current: Int, peak: Int) {
  guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else {
    return (0, 0)
  }
  var current = 0
  var peak = 0
  for line in status.split(separator: "\n") {
    let fields = line.split(whereSeparator: \.isWhitespace)
    guard fields.count >= 2 else { continue }
    if fields[0] == "VmRSS:" { current = Int(fields[1]) ?? 0 }
    if fields[0] == "VmHWM:" { peak = Int(fields[1]) ?? 0 }
  }
  return (current, peak)
}

/// A file's size and the bytes it takes on disk (st_blocks × 512: LMDB's files may be sparse).
func fileSizes(_ path: String) -> (bytes: Int, disk: Int) {
  var st = stat()
  guard stat(path, &st) == 0 else { return (0, 0) }
  return (Int(st.st_size), Int(st.st_blocks) * 512)
}

if only?.contains("search-growth") ?? false {
  let batchSize = option("--batch", 20_000)
  let batchCount = option("--batches", 6)
  let perClass = option("--queries", 50)
  let plain = arguments.contains("--plain")
  let generateOnly = arguments.contains("--generate-only")
  let prefix = plain ? "search-growth-plain" : "search-growth"
  let total = batchSize * batchCount
  let wikiCount = 97
  let wordsPerPage = 60

  // 50,000 pronounceable words (one to four syllables), ranked; Zipf (s = 1) over the ranks.
  var vr = Random(state: 7)
  let vocabulary = ZipfVocabulary(count: 50_000, maxSyllables: 4, &vr)
  func rank(_ r: inout Random) -> Int { vocabulary.rank(&r) }

  // The pages whose text the phrase queries take two adjacent words of, chosen before the
  // pages are made (the same in every variant and in --generate-only).
  var qr = Random(state: 5_699)
  let phrasePages = (0..<perClass + 5).map { _ in qr.below(max(1, total)) }
  let phraseSet = Set(phrasePages)
  var pageWords: [Int: [Int]] = [:]
  var occurrences = [Int](repeating: 0, count: vocabulary.count)

  let tsv = stringOption("--tsv").map { fopen($0, "w")! }
  let store =
    generateOnly
    ? nil
    : try openStore(
      plain ? "search-growth-plain" : "search-growth", [],
      indexes: [TextSearchProjection(schema: .wikiPages)], fresh: true)
  let dir = base + "/" + (plain ? "search-growth-plain" : "search-growth")
  let allWikis = (0..<wikiCount).map { "w\($0)" }
  var pr = Random(state: 56)
  var textBytes = 0
  for batch in stride(from: 1, through: batchCount, by: 1) {
    var writeSeconds = 0.0
    let first = (batch - 1) * batchSize
    for start in stride(from: first, to: first + batchSize, by: 1000) {
      var s = #"{"docs":["#
      for i in start..<min(first + batchSize, start + 1000) {
        var text = ""
        var sentence = 0
        var ranks: [Int] = []
        for n in 0..<wordsPerPage {
          let k = rank(&pr)
          ranks.append(k)
          occurrences[k] += 1
          let w = vocabulary[k]
          text += sentence == 0 ? w.prefix(1).uppercased() + w.dropFirst() : w
          sentence += 1
          if n == wordsPerPage - 1 {
            text += "."
          } else if sentence > 8 + pr.below(8) {
            text += ". "
            sentence = 0
          } else {
            text += " "
          }
        }
        if phraseSet.contains(i) { pageWords[i] = ranks }
        textBytes += text.utf8.count
        let wiki = "w\(i % wikiCount)"
        if let tsv { fputs("\(wiki):Page \(i)\t\(wiki)\t\(text)\n", tsv) }
        if i != start { s += "," }
        let type = plain ? "" : #""type":"page","#
        s += #"{"_id":"\#(wiki):Page \#(i)",\#(type)"wiki_id":"\#(wiki)","markdown":"\#(text)"}"#
      }
      s += "]}"
      guard let store else { continue }
      let t0 = now()
      try write(store, s)
      writeSeconds += now() - t0
    }
    guard let store else { continue }
    // The index is up when a search has brought it to the log's end: the writes and the
    // catch-up together are the batch's cost.
    let caughtUp = now()
    _ = try TextSearch(store).search(SearchQuery(vocabulary[0]), groups: allWikis)
    let catchUp = now() - caughtUp
    let seconds = writeSeconds + catchUp
    print(
      "\(prefix)-batch", batch, batchSize, String(format: "%.6f", seconds),
      String(format: "%.0f", Double(batchSize) / seconds))
    print(
      "\(prefix)-batch-parts", batch, "write", String(format: "%.6f", writeSeconds), "catchup",
      String(format: "%.6f", catchUp))
    let memory = residentKB()
    print("\(prefix)-rss", batch, "current_kb", memory.current, "peak_kb", memory.peak)
    let index = fileSizes(dir + "/search/data.mdb")
    let log = fileSizes(dir + "/data.mdb")
    print(
      "\(prefix)-size", batch, "search_bytes", index.bytes, "search_disk", index.disk,
      "store_bytes", log.bytes, "store_disk", log.disk)
    fflush(nil)
  }
  if let tsv { fclose(tsv) }
  print("\(prefix)-text-bytes", total, textBytes)

  // The queries, the same for wikilog and for the FTS5 baseline: five that warm up, then
  // --queries of each class.
  let n = perClass + 5
  func midWord() -> String { vocabulary[20 + qr.below(1980)] }
  var rare: [String] = []
  while rare.count < n {
    let k = 20_000 + qr.below(29_000)
    if occurrences[k] > 0 { rare.append(vocabulary[k]) }
  }
  var prefixes: [String] = []
  while prefixes.count < n {
    let w = midWord()
    if w.utf8.count > 3 { prefixes.append(String(w.prefix(3)) + "*") }
  }
  let classes: [(String, [String])] = [
    ("common", (0..<n).map { vocabulary[$0 % 5] }),
    ("rare", rare),
    ("two", (0..<n).map { _ in "\(midWord()) \(midWord())" }),
    ("prefix", prefixes),
    (
      "phrase",
      phrasePages.map { page in
        let words = pageWords[page] ?? [0, 0]
        let at = qr.below(words.count - 1)
        return "\"\(vocabulary[words[at]]) \(vocabulary[words[at + 1]])\""
      }
    ),
  ]
  let fewWikis = ["w5", "w42", "w77"]
  if let path = stringOption("--queries-out") {
    var out = "wikis\t" + fewWikis.joined(separator: ",") + "\n"
    for (name, queries) in classes {
      for q in queries { out += "\(name)\t\(q)\n" }
    }
    try out.write(toFile: path, atomically: true, encoding: .utf8)
  }
  if let store, !plain {
    for (name, queries) in classes {
      for (scope, groups) in [("all", allWikis), ("few", fewWikis)] {
        var times: [Double] = []
        var ranking: [Double] = []
        var totals: [Int] = []
        for (q, text) in queries.enumerated() {
          let t0 = now()
          let result = try TextSearch(store).search(SearchQuery(text), groups: groups)
          let t1 = now()
          let json = try TextSearch(store).json(result).serialized()
          let dt = now() - t0
          _ = json
          guard q >= 5 else { continue }
          times.append(dt)
          ranking.append(t1 - t0)
          totals.append(result.total)
          print("\(prefix)-match", name, scope, q, result.total)
        }
        let label = "\(prefix)-\(name)-\(scope)"
        reportTimes(label, times)
        reportTimes(label + "-ranking-only", ranking)
        let sorted = totals.sorted()
        print(label + "-matches", "median", sorted[sorted.count / 2], "max", sorted.last ?? 0)
      }
    }
  }
  if let store {
    let memory = residentKB()
    print("\(prefix)-rss-end current_kb", memory.current, "peak_kb", memory.peak)
    store.close()
  }
}
