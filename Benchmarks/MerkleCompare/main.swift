// What the Merkle tree costs and how fast its proofs and checks are (issue 23's targets):
//
//   MerkleCompare DIR append [EVENTS] [ROUNDS]   batched appends with the tree and without,
//                                                alternating, fresh logs: median rates, ratio
//   MerkleCompare DIR proofs EVENTS [PROOFS]     builds a log of EVENTS small events (unsynced),
//                                                then times inclusion proofs: median, p99 of
//                                                wall and of thread CPU time, major faults
//   MerkleCompare DIR verify EVENTS              builds a log of EVENTS, times EventLog.verify()
//
// Release builds only: WIKILOG_BENCHMARKS=1 swift build -c release --product MerkleCompare.
import Foundation
import Log

func now() -> Double { Double(DispatchTime.now().uptimeNanoseconds) / 1e9 }

/// The CPU time this thread has used, in seconds: on a shared machine a proof's wall time also
/// counts the time it waited for a core.
func threadCPUTime() -> Double {
  var t = timespec()
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t)
  return Double(t.tv_sec) + Double(t.tv_nsec) / 1e9
}

/// Page faults that had to read the disk, so far.
func majorFaults() -> Int {
  var usage = rusage()
  getrusage(RUSAGE_SELF.rawValue, &usage)
  return usage.ru_majflt
}

func micros(_ seconds: Double) -> String { String(format: "%.1f µs", seconds * 1e6) }

func median(_ values: [Double]) -> Double {
  let sorted = values.sorted()
  return sorted[sorted.count / 2]
}

let arguments = CommandLine.arguments
guard arguments.count >= 3 else {
  print("usage: MerkleCompare DIR append|proofs|verify [N] [M]")
  exit(64)
}
let root = arguments[1]
let mode = arguments[2]
let n = arguments.count > 3 ? Int(arguments[3])! : 200_000
let m = max(1, arguments.count > 4 ? Int(arguments[4])! : 5)

let payload = [UInt8](repeating: 0x62, count: 300)

func docEvents(_ count: Int, from start: Int, payload: [UInt8]) -> [NewEvent] {
  (start..<start + count).map {
    NewEvent(type: "doc.edit", stream: "w\($0 % 100):Page \($0)", actor: "alice", payload: payload)
  }
}

func freshLog(_ name: String, tree: Bool) throws -> EventLog {
  let path = root + "/" + name
  try? FileManager.default.removeItem(atPath: path)
  var options = EventLog.Options()
  options.durability = .unsynced
  options.merkleTree = tree
  options.mapSize = 1 << 30
  return try EventLog(directory: path, options: options)
}

/// Appends `count` events in batches of 1000; returns events per second.
func appendRate(tree: Bool, count: Int) throws -> Double {
  let log = try freshLog(tree ? "with" : "without", tree: tree)
  defer { log.close() }
  let batches = stride(from: 0, to: count, by: 1000).map {
    docEvents(min(1000, count - $0), from: $0, payload: payload)
  }
  let start = now()
  for batch in batches { try log.append(batch) }
  let elapsed = now() - start
  return Double(count) / elapsed
}

/// A log of `count` small events, appended in batches of 10,000 without syncing.
func bigLog(_ count: Int) throws -> EventLog {
  let path = root + "/big-\(count)"
  var options = EventLog.Options()
  options.durability = .unsynced
  options.mapSize = 1 << 32
  if FileManager.default.fileExists(atPath: path + "/data.mdb") {
    let log = try EventLog(directory: path, options: options)
    if try log.committedPosition.rawValue == UInt64(count) { return log }
    log.close()
    try FileManager.default.removeItem(atPath: path)
  }
  let log = try EventLog(directory: path, options: options)
  let small = [UInt8](repeating: 0x61, count: 16)
  var written = 0
  let start = now()
  while written < count {
    let k = min(10_000, count - written)
    try log.append(docEvents(k, from: written, payload: small))
    written += k
  }
  try log.sync()
  print("built a log of \(count) events in \(String(format: "%.1f", now() - start)) s")
  return log
}

switch mode {
case "append":
  var with: [Double] = []
  var without: [Double] = []
  _ = try appendRate(tree: true, count: n / 4)  // warm-up
  // Each order half the time: a run leaves dirty pages that slow the next one's writes.
  for round in 0..<m {
    if round % 2 == 0 {
      without.append(try appendRate(tree: false, count: n))
      with.append(try appendRate(tree: true, count: n))
    } else {
      with.append(try appendRate(tree: true, count: n))
      without.append(try appendRate(tree: false, count: n))
    }
  }
  let a = median(with)
  let b = median(without)
  // Each round's two runs are next to each other in time: their ratio drifts less with the
  // machine's load than the runs themselves do.
  let pairs = median(zip(with, without).map { $0 / $1 })
  print(
    "batched appends (1000 per batch, 300-byte payloads, \(n) events, median of \(m)): "
      + "with the tree \(Int(a))/s, without \(Int(b))/s, ratio \(String(format: "%.3f", a / b)), "
      + "median of the rounds' ratios \(String(format: "%.3f", pairs))")
  print("  with:    \(with.map { Int($0) })")
  print("  without: \(without.map { Int($0) })")
case "proofs":
  let log = try bigLog(n)
  defer { log.close() }
  var rng = SystemRandomNumberGenerator()
  var times: [Double] = []
  var cpu: [Double] = []
  let head = try log.treeHead()
  let faults = majorFaults()
  for _ in 0..<max(m, 100) {
    let p = UInt64.random(in: 1...head.size, using: &rng)
    let start = now()
    let startCPU = threadCPUTime()
    let proof = try log.inclusionProof(position: LogPosition(p))
    cpu.append(threadCPUTime() - startCPU)
    times.append(now() - start)
    precondition(proof.root == head.root)
  }
  let sorted = times.sorted()
  let sortedCPU = cpu.sorted()
  print(
    "inclusion proofs on \(n) events (\(times.count) random positions): median \(micros(median(times))), p99 \(micros(sorted[sorted.count * 99 / 100])), max \(micros(sorted.last!)); CPU time median \(micros(median(cpu))), p99 \(micros(sortedCPU[sortedCPU.count * 99 / 100])); \(majorFaults() - faults) major page faults"
  )
  var ctimes: [Double] = []
  for _ in 0..<100 {
    let old = UInt64.random(in: 1...head.size, using: &rng)
    let start = now()
    _ = try log.consistencyProof(oldSize: old)
    ctimes.append(now() - start)
  }
  print("consistency proofs: median \(micros(median(ctimes)))")
case "verify":
  let log = try bigLog(n)
  defer { log.close() }
  var times: [Double] = []
  for _ in 0..<max(1, m) {
    let start = now()
    let report = try log.verify()
    times.append(now() - start)
    precondition(report.isValid, "\(report)")
  }
  print(
    "verify of \(n) events (median of \(times.count)): \(String(format: "%.2f", median(times))) s")
default:
  print("unknown mode \(mode)")
  exit(64)
}
