import Benchmark
import Foundation
import Log

// Workloads of issue 2: single durable append, batches of 1000, 64 concurrent durable writers with
// group commit, and a sequential read. Events carry 100-byte payloads, as in the C baseline
// (Benchmarks/baselines/lmdb_log.c), which writes records of the same size.

/// A fresh log in a temporary directory for one benchmark.
final class BenchLog: @unchecked Sendable {
  let directory: String
  let log: EventLog

  init(_ name: String, durability: EventLog.Durability) {
    directory = NSTemporaryDirectory() + "wikilog-bench-\(name)-\(UUID().uuidString)"
    var options = EventLog.Options(durability: durability)
    options.mapSize = 1 << 30
    log = try! EventLog(directory: directory, options: options)
  }

  func close() {
    log.close()
    try? FileManager.default.removeItem(atPath: directory)
  }
}

let payload = [UInt8](repeating: 0x61, count: 100)

func events(_ count: Int, from start: Int, streams: Int) -> [NewEvent] {
  (0..<count).map { i in
    NewEvent(
      type: "bench.event", stream: streams == 0 ? "" : "stream-\((start + i) % streams)", actor: "bench",
      payload: payload)
  }
}

let benchmarks: @Sendable () -> Void = {
  Benchmark.defaultConfiguration = .init(
    metrics: [.throughput, .wallClock, .mallocCountTotal], warmupIterations: 1,
    maxDuration: .seconds(3), maxIterations: 1_000_000)

  Benchmark("append: single durable event") { benchmark in
    let b = BenchLog("single", durability: .synced)
    defer { b.close() }
    let one = events(1, from: 0, streams: 1000)
    benchmark.startMeasurement()
    for _ in benchmark.scaledIterations { blackHole(try b.log.append(one)) }
    benchmark.stopMeasurement()
  }

  for streams in [1000, 0] {
    let label = streams == 0 ? "no stream" : "\(streams) streams"
    Benchmark(
      "append: batch of 1000, unsynced, \(label)",
      configuration: .init(scalingFactor: .kilo)
    ) { benchmark in
      let b = BenchLog("batch", durability: .unsynced)
      defer { b.close() }
      let batches = (0..<64).map { events(1000, from: $0 * 1000, streams: streams) }
      var n = 0
      benchmark.startMeasurement()
      for _ in 0..<benchmark.scaledIterations.count / 1000 {
        blackHole(try b.log.append(batches[n % batches.count]))
        n += 1
      }
      benchmark.stopMeasurement()
    }
  }

  Benchmark("append: batch of 1000, durable", configuration: .init(scalingFactor: .kilo)) { benchmark in
    let b = BenchLog("batch-durable", durability: .synced)
    defer { b.close() }
    let batch = events(1000, from: 0, streams: 1000)
    benchmark.startMeasurement()
    for _ in 0..<benchmark.scaledIterations.count / 1000 { blackHole(try b.log.append(batch)) }
    benchmark.stopMeasurement()
  }

  Benchmark("append: 64 concurrent durable writers, group commit", configuration: .init(scalingFactor: .kilo))
  { benchmark in
    let b = BenchLog("group", durability: .groupCommit)
    defer { b.close() }
    let perWriter = max(1, benchmark.scaledIterations.count / 64)
    benchmark.startMeasurement()
    await withTaskGroup(of: Void.self) { group in
      for w in 0..<64 {
        group.addTask {
          let one = events(1, from: w, streams: 1000)
          for _ in 0..<perWriter { blackHole(try? await b.log.append(one)) }
        }
      }
    }
    benchmark.stopMeasurement()
  }

  Benchmark("read: sequential", configuration: .init(scalingFactor: .mega)) { benchmark in
    let b = BenchLog("read", durability: .unsynced)
    defer { b.close() }
    let total = benchmark.scaledIterations.count
    var written = 0
    while written < total {
      let n = min(10_000, total - written)
      try b.log.append(events(n, from: written, streams: 1000))
      written += n
    }
    benchmark.startMeasurement()
    var position = LogPosition.start
    var count = 0
    while count < total {
      let batch = try b.log.read(after: position, limit: 4096)
      guard let last = batch.last else { break }
      count += batch.count
      position = last.position
      blackHole(batch)
    }
    benchmark.stopMeasurement()
  }
}
