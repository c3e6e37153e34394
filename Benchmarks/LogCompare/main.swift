// The wikilog side of scripts/compare-log: the same workloads as Benchmarks/baselines/lmdb_log.c,
// printed as "<workload> <count> <seconds> <per_second>" lines.
//
//   LogCompare DIR [events] [workload,workload,...]
//
// Workloads: append-batch-unsynced, append-streams-unsynced, append-streams-synced,
// append-single-synced, group-commit-64-writers, read-sequential (all by default); and, only
// when named, append-streams-unsynced-no-tree (append-streams-unsynced without the Merkle tree,
// `EventLog.Options.merkleTree = false`: issue 23's comparison) and the per-operation workloads
// for callgrind in Operations.swift (ops-...).
import Foundation
import Log

let base =
  CommandLine.arguments.count > 1
  ? CommandLine.arguments[1] : NSTemporaryDirectory() + "wikilog-compare"
let count = CommandLine.arguments.count > 2 ? Int(CommandLine.arguments[2]) ?? 1_000_000 : 1_000_000
let payload = [UInt8](repeating: 0x61, count: 100)
let only: Set<String>? =
  CommandLine.arguments.count > 3
  ? Set(CommandLine.arguments[3].split(separator: ",").map(String.init)) : nil
func enabled(_ name: String) -> Bool { only?.contains(name) ?? true }

for name in only?.sorted() ?? [] where name.hasPrefix("ops-") {
  try runOperation(name, directory: base, count: count)
}

func fresh(_ name: String, _ durability: EventLog.Durability, merkleTree: Bool = true) throws -> (
  EventLog, String
) {
  let dir = base + "/" + name
  try? FileManager.default.removeItem(atPath: dir)
  var options = EventLog.Options(durability: durability)
  options.mapSize = 8 << 30
  options.merkleTree = merkleTree
  return (try EventLog(directory: dir, options: options), dir)
}

func report(_ name: String, _ n: Int, _ seconds: Double) {
  print(name, n, String(format: "%.6f", seconds), String(format: "%.0f", Double(n) / seconds))
  fflush(nil)
}

/// One transaction's worth of events: 1000, in `streams` streams (0 = no stream).
func batch(streams: Int) -> [NewEvent] {
  (0..<1000).map { i in
    NewEvent(
      type: "bench.event", stream: streams == 0 ? "" : "stream-\(i % streams)", actor: "bench",
      payload: payload)
  }
}

func appendBatches(
  _ name: String, durability: EventLog.Durability, streams: Int, total: Int, merkleTree: Bool = true
) throws {
  let (log, dir) = try fresh(name, durability, merkleTree: merkleTree)
  let batch = batch(streams: streams)
  let start = Date()
  for _ in 0..<(total / 1000) { try log.append(batch) }
  report(name, total / 1000 * 1000, Date().timeIntervalSince(start))
  log.close()
  try? FileManager.default.removeItem(atPath: dir)
}

if enabled("append-batch-unsynced") {
  try appendBatches("append-batch-unsynced", durability: .unsynced, streams: 0, total: count)
}
if enabled("append-streams-unsynced") {
  try appendBatches("append-streams-unsynced", durability: .unsynced, streams: 1000, total: count)
}
if only?.contains("append-streams-unsynced-no-tree") == true {
  try appendBatches(
    "append-streams-unsynced-no-tree", durability: .unsynced, streams: 1000, total: count,
    merkleTree: false)
}
if enabled("append-streams-synced") {
  try appendBatches("append-streams-synced", durability: .synced, streams: 1000, total: count)
}

if enabled("append-single-synced") {
  let (log, dir) = try fresh("append-single", .synced)
  let one = [NewEvent(type: "bench.event", stream: "stream-1", actor: "bench", payload: payload)]
  let n = 2000
  let start = Date()
  for _ in 0..<n { try log.append(one) }
  report("append-single-synced", n, Date().timeIntervalSince(start))
  log.close()
  try? FileManager.default.removeItem(atPath: dir)
}

if enabled("group-commit-64-writers") {
  let (log, dir) = try fresh("group", .groupCommit)
  let perWriter = 300
  let start = Date()
  try await withThrowingTaskGroup(of: Void.self) { group in
    for w in 0..<64 {
      group.addTask {
        let one = [
          NewEvent(type: "bench.event", stream: "writer-\(w)", actor: "bench", payload: payload)
        ]
        for _ in 0..<perWriter { _ = try await log.append(one) }
      }
    }
    try await group.waitForAll()
  }
  report("group-commit-64-writers", 64 * perWriter, Date().timeIntervalSince(start))
  let stats = log.statistics
  FileHandle.standardError.write(
    Data(
      "group commit: \(stats.commits) commits, \(stats.groups) groups of \(Double(stats.groupedWrites) / Double(max(1, stats.groups))) writes on average\n"
        .utf8))
  log.close()
  try? FileManager.default.removeItem(atPath: dir)
}

if enabled("read-sequential") {
  let (log, dir) = try fresh("read", .unsynced)
  let batch = batch(streams: 1000)
  for _ in 0..<(count / 1000) { try log.append(batch) }
  var position = LogPosition.start
  var n = 0
  let start = Date()
  while true {
    let events = try log.read(after: position, limit: 4096)
    guard let last = events.last else { break }
    n += events.count
    position = last.position
  }
  report("read-sequential", n, Date().timeIntervalSince(start))
  log.close()
  try? FileManager.default.removeItem(atPath: dir)
}
