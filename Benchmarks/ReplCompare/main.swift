import CouchAPI
import CouchQuery
// The replication rows of scripts/compare (the replication issue's targets), wikilog to wikilog
// over loopback HTTP, printed as "<workload> <count> <seconds> <per_second>" lines:
//
//   ReplCompare DIR [--docs N] [--batch N] [--writes N]
//
//   repl-bulk-docs-raw  the N documents (~300-byte pages, 3-revision histories) POSTed to a
//                       fresh server's _bulk_docs with new_edits=false, --batch per request
//                       (bodies serialized before the timing): the raw write rate.
//   repl-end-to-end     the same N documents replicated by the Replicator (HTTPTransport,
//                       batch size --batch) from a server holding them to a fresh one:
//                       _changes, _revs_diff, _bulk_get, _bulk_docs, checkpoints.
//   repl-latency-p50/p99  a continuous replication between two idle servers; --writes single
//                       writes on the source 20 ms apart, each timed until the target has it
//                       (seconds column: the percentile, in seconds).
// Servers use group commit (durable writes), as `wikilog serve` does.
import Foundation
import Hummingbird
import JSON
import Log
import Logging
import Projections
import Replication
import Synchronization
import Wiki

let arguments = Array(CommandLine.arguments.dropFirst())
func option(_ name: String, _ defaultValue: Int) -> Int {
  guard let i = arguments.firstIndex(of: name), i + 1 < arguments.count,
    let value = Int(arguments[i + 1])
  else { return defaultValue }
  return value
}
guard let root = arguments.first, !root.hasPrefix("--") else {
  print("usage: ReplCompare DIR [--docs N] [--batch N] [--writes N]")
  exit(64)
}
let docCount = option("--docs", 100_000)
let batch = option("--batch", 1_000)
let writes = option("--writes", 200)
/// --plain: documents that are not wiki pages (no wiki, access or search rows), as the issue's
/// reference figures (CouchDB to CouchDB) were measured with.
let plain = arguments.contains("--plain")
let quiet = Logger(label: "repl") { _ in SwiftLogNoOpLogHandler() }

func directory(_ name: String) -> DataDirectory {
  let path = root + "/" + name
  try? FileManager.default.removeItem(atPath: path)
  try! FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
  return DataDirectory.wiki(path: path, options: EventLog.Options(durability: .groupCommit))
}

/// Starts a server on a free loopback port; returns its base URL.
func serve(_ data: DataDirectory) async -> String {
  let port = Mutex<Int?>(nil)
  let app = buildApplication(
    dataDirectory: data, options: .withQuery,
    configuration: ApplicationConfiguration(address: .hostname("127.0.0.1", port: 0)),
    logger: quiet, onServerRunning: { p in port.withLock { $0 = p } })
  Task { try await app.run() }
  while port.withLock({ $0 }) == nil { try? await Task.sleep(for: .milliseconds(5)) }
  return "http://127.0.0.1:\(port.withLock { $0 }!)"
}

/// A row; with --plain the transfer rows are named `...-plain`, so that scripts/compare can
/// keep both kinds.
func line(_ name: String, _ count: Int, _ seconds: Double) {
  let named = plain ? name + "-plain" : name
  print(String(format: "%@ %d %.4f %.0f", named, count, seconds, Double(count) / seconds))
}

func seconds(_ d: Duration) -> Double {
  Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18
}

/// Document `i`: a page with a 3-revision history.
func document(_ i: Int) -> JSONValue {
  let h = String(format: "%08x", i)
  let text = String(repeating: "word ", count: 40)
  if plain {
    return try! JSONValue(
      parsing: Array(
        ##"{"_id":"doc-\##(h)","_rev":"3-c\##(h)","_revisions":{"start":3,"ids":["c\##(h)","b\##(h)","a\##(h)"]},"type":"note","title":"Note \##(i)","text":"\##(text)"}"##
          .utf8))
  }
  return try! JSONValue(
    parsing: Array(
      ##"{"_id":"w\##(i % 10):Page \##(i)","_rev":"3-c\##(h)","_revisions":{"start":3,"ids":["c\##(h)","b\##(h)","a\##(h)"]},"type":"page","wiki_id":"w\##(i % 10)","markdown":"# Page \##(i)\n\##(text) [[Page \##(i + 1)]]"}"##
        .utf8))
}

let bodies: [[UInt8]] = stride(from: 0, to: docCount, by: batch).map { start in
  JSONValue.object(
    JSONObject([
      "new_edits": .bool(false),
      "docs": .array((start..<min(start + batch, docCount)).map(document)),
    ])
  ).serialized()
}

// Raw _bulk_docs.
let raw = directory("raw")
_ = try raw.create("wiki")
let rawURL = await serve(raw)
let rawTransport = HTTPTransport(baseURL: rawURL)
let rawStart = ContinuousClock.now
for body in bodies {
  let r = try await rawTransport.send("POST", "/wiki/_bulk_docs", body: body)
  precondition(r.status == 201, "bulk_docs answered \(r.status)")
}
line("repl-bulk-docs-raw", docCount, seconds(ContinuousClock.now - rawStart))

// End to end: the raw server is now the source.
let target = directory("target")
_ = try target.create("wiki")
let targetURL = await serve(target)
var options = ReplicationOptions()
options.batchSize = batch
let replicator = Replicator(
  source: CouchEndpoint(transport: rawTransport, database: "wiki", identity: rawURL + "/wiki"),
  target: CouchEndpoint(
    transport: HTTPTransport(baseURL: targetURL), database: "wiki", identity: targetURL + "/wiki"),
  options: options)
let start = ContinuousClock.now
let report = try await replicator.replicate()
line("repl-end-to-end", report.docsWritten, seconds(ContinuousClock.now - start))
precondition(report.docsWritten == docCount && report.docWriteFailures == 0)

// Latency of a continuous replication between idle servers.
let a = directory("latency-a")
let b = directory("latency-b")
let storeA = try a.create("wiki")
let storeB = try b.create("wiki")
let urlA = await serve(a)
let urlB = await serve(b)
var continuous = ReplicationOptions()
continuous.continuous = true
let live = Replicator(
  source: CouchEndpoint(transport: HTTPTransport(baseURL: urlA), database: "wiki", identity: urlA),
  target: CouchEndpoint(transport: HTTPTransport(baseURL: urlB), database: "wiki", identity: urlB),
  options: continuous)
let job = Task { try await live.replicate() }
try await Task.sleep(for: .milliseconds(500))
var latencies: [Double] = []
for i in 0..<writes {
  let id = "live-\(i)"
  let t0 = ContinuousClock.now
  _ = try await storeA.putAsync(Array(#"{"_id":"\#(id)","text":"x"}"#.utf8), actor: "bench")
  while try storeB.record(id) == nil { try await Task.sleep(for: .microseconds(200)) }
  latencies.append(seconds(ContinuousClock.now - t0))
  try await Task.sleep(for: .milliseconds(20))
}
job.cancel()
latencies.sort()
let p50 = latencies[latencies.count / 2]
let p99 = latencies[min(latencies.count - 1, Int(Double(latencies.count) * 0.99))]
print(String(format: "repl-latency-p50 %d %.4f 0", writes, p50))
print(String(format: "repl-latency-p99 %d %.4f 0", writes, p99))
exit(0)
