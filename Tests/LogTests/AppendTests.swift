import Foundation
import Testing

@testable import Log

@Suite struct AppendTests {
  @Test("positions are dense from 1 across single, batched and concurrent appends")
  func density() async throws {
    let dir = TemporaryDirectory()
    let log = try EventLog(directory: dir.path, options: .init(durability: .groupCommit))
    let first = try await log.append([event(1)])
    #expect(first[0].position == 1)
    let batch = try await log.append((2...10).map { event($0) })
    #expect(batch.map(\.position.rawValue) == Array(2...10))
    try await withThrowingTaskGroup(of: Void.self) { group in
      for i in 0..<20 {
        group.addTask { _ = try await log.append([event(100 + i, stream: "c\(i % 3)")]) }
      }
      try await group.waitForAll()
    }
    try expectDense(log, count: 30)
  }

  @Test("a failed append leaves no gap in the positions")
  func noGapAfterFailure() throws {
    let dir = TemporaryDirectory()
    let log = try EventLog(directory: dir.path)
    try log.append([event(1, stream: "a")])
    #expect(throws: LogError.self) { try log.append([event(2, stream: "a", expected: .noStream)]) }
    #expect(throws: (any Error).self) {
      try log.write { txn throws in
        try txn.append(event(3))
        throw CancellationError()
      }
    }
    let next = try log.append([event(4)])
    #expect(next[0].position == 2)
    try expectDense(log, count: 2)
  }

  @Test("a batch is all or nothing when one expectation fails")
  func batchAtomic() throws {
    let dir = TemporaryDirectory()
    let log = try EventLog(directory: dir.path)
    try log.append([event(1, stream: "a"), event(2, stream: "b")])
    let batch = [
      event(3, stream: "a", expected: .exactly(1)), event(4, stream: "b", expected: .exactly(5)),
    ]
    #expect(throws: LogError.wrongExpectedVersion(stream: "b", expected: .exactly(5), actual: 1)) {
      try log.append(batch)
    }
    try expectDense(log, count: 2)
    #expect(try log.streamVersion(of: "a") == 1)
  }

  @Test(
    "expected versions: noStream, streamExists, exactly, and later events of one batch see earlier ones"
  )
  func expectedVersions() throws {
    let dir = TemporaryDirectory()
    let log = try EventLog(directory: dir.path)
    #expect(throws: LogError.wrongExpectedVersion(stream: "x", expected: .streamExists, actual: 0))
    {
      try log.append([event(0, stream: "x", expected: .streamExists)])
    }
    try log.append([
      event(1, stream: "x", expected: .noStream), event(2, stream: "x", expected: .exactly(1)),
    ])
    #expect(try log.streamVersion(of: "x") == 2)
    #expect(throws: LogError.wrongExpectedVersion(stream: "x", expected: .noStream, actual: 2)) {
      try log.append([event(3, stream: "x", expected: .noStream)])
    }
    let recorded = try log.append([event(4, stream: "x", expected: .exactly(2))])
    #expect(recorded[0].streamVersion == 3)
    #expect(throws: LogError.self) { try log.append([event(5, stream: "", expected: .noStream)]) }
  }

  @Test("a retried append with the same idempotency key is not duplicated")
  func idempotentRetry() async throws {
    let dir = TemporaryDirectory()
    let log = try EventLog(directory: dir.path)
    let events = [event(1, stream: "o"), event(2, stream: "o")]
    let first = try await log.append(events, idempotencyKey: "request-17")
    let retry = try await log.append(events, idempotencyKey: "request-17")
    #expect(retry == first)
    let asyncRetry = try await log.append(events, idempotencyKey: "request-17")
    #expect(asyncRetry == first)
    try expectDense(log, count: 2)
    await #expect(throws: LogError.idempotencyConflict(key: "request-17")) {
      try await log.append([event(9, stream: "o")], idempotencyKey: "request-17")
    }
    let outcome = try await log.write { txn in
      try txn.append(contentsOf: events, idempotencyKey: "request-17")
    }
    #expect(outcome.isDuplicate)
    let long = String(repeating: "k", count: 2000)
    try await log.append([event(3)], idempotencyKey: long)
    try await log.append([event(3)], idempotencyKey: long)
    try expectDense(log, count: 3)
  }

  @Test("caller databases are written in the same transaction as the append, or not at all")
  func hookTransaction() throws {
    let dir = TemporaryDirectory()
    let log = try EventLog(directory: dir.path)
    let projection = try log.database(named: "pages")
    try log.write { txn throws in
      let e = try txn.append(event(1, stream: "wiki:Home"))
      try txn.put(
        e.position.rawValue.bigEndianBytes, forKey: Array("wiki:Home".utf8), in: projection)
    }
    #expect(throws: (any Error).self) {
      try log.write { txn throws in
        try txn.append(event(2, stream: "wiki:Other"))
        try txn.put([1], forKey: Array("wiki:Other".utf8), in: projection)
        throw LogError.invalidArgument("projection refused")
      }
    }
    try log.read { txn throws in
      #expect(try txn.lastPosition == 1)
      #expect(try txn.get(Array("wiki:Home".utf8), in: projection) == UInt64(1).bigEndianBytes)
      #expect(try txn.get(Array("wiki:Other".utf8), in: projection) == nil)
      #expect(try txn.count(of: projection) == 1)
    }
    #expect(throws: LogError.self) { _ = try log.database(named: "log.events") }
    #expect(throws: LogError.self) {
      try log.write { txn in try txn.put([1], forKey: [], in: projection) }
    }
  }

  @Test("a savepoint undoes only its own writes and positions")
  func savepoints() throws {
    let dir = TemporaryDirectory()
    let log = try EventLog(directory: dir.path)
    try log.write { txn throws in
      try txn.append(event(1))
      #expect(throws: LogError.self) {
        try txn.savepoint { child in
          try child.append(event(2))
          throw LogError.invalidArgument("undo me")
        }
      }
      let kept = try txn.append(event(3))
      #expect(kept.position == 2)
    }
    try expectDense(log, count: 2)
    #expect(try log.event(at: 2)?.payload == Array("payload-3".utf8))
  }

  @Test("64 concurrent durable writers share group commits")
  func groupCommit() async throws {
    let dir = TemporaryDirectory()
    let log = try EventLog(directory: dir.path, options: .init(durability: .groupCommit))
    try await withThrowingTaskGroup(of: Void.self) { group in
      for w in 0..<64 {
        group.addTask {
          for i in 0..<10 { _ = try await log.append([event(w * 100 + i, stream: "w\(w)")]) }
        }
      }
      try await group.waitForAll()
    }
    try expectDense(log, count: 640)
    for w in 0..<64 { #expect(try log.streamVersion(of: "w\(w)") == 10) }
    #expect(log.durablePosition == 640)
    #expect(try log.verify().isValid)
  }

  @Test("one failing write in a group fails alone")
  func groupFailureIsolated() async throws {
    let dir = TemporaryDirectory()
    let log = try EventLog(directory: dir.path, options: .init(durability: .groupCommit))
    try await log.append([event(0, stream: "taken")])
    let results = await withTaskGroup(of: Bool.self) { group in
      for i in 0..<32 {
        group.addTask {
          let e =
            i == 7 ? event(i, stream: "taken", expected: .noStream) : event(i, stream: "free\(i)")
          return (try? await log.append([e])) != nil
        }
      }
      return await group.reduce(into: [Bool]()) { $0.append($1) }
    }
    #expect(results.filter { !$0 }.count == 1)
    try expectDense(log, count: 32)
  }
}

@Suite struct ReleaseTests {
  /// The writer queue may hold the last reference to a log when its caller lets go right after an
  /// async write returns; the log's deinit then closes it on that queue, which must not wait for
  /// the queue itself (libdispatch traps such a deadlock and kills the process).
  @Test(
    "a log released while its writer queue still holds it closes cleanly",
    arguments: [EventLog.Durability.groupCommit, .synced, .unsynced])
  func releasedDuringDrain(_ durability: EventLog.Durability) async throws {
    let dir = TemporaryDirectory()
    for i in 0..<60 {
      let path = dir.sub("log-\(i)")
      do {
        let log = try EventLog(directory: path, options: .init(durability: durability))
        _ = try await log.append([event(i)])
      }
      // Every log was closed however it went: the directory opens again with its event.
      for _ in 0..<200 {
        if let reopened = try? EventLog(directory: path) {
          #expect(try reopened.committedPosition == LogPosition(1))
          reopened.close()
          break
        }
        try await Task.sleep(for: .milliseconds(5))
      }
    }
  }
}

@Suite struct GroupWithoutSavepointsTests {
  @Test("a write promising to fail before writing that fails after writing fails alone")
  func brokenPromise() async throws {
    let dir = TemporaryDirectory()
    let log = try EventLog(directory: dir.path, options: .init(durability: .groupCommit))
    let db = try log.database(named: "side")
    struct Refused: Error {}
    let outcomes = await withTaskGroup(of: (Int, Bool).self) { group in
      for i in 0..<48 {
        group.addTask {
          do {
            _ = try await log.write(failsOnlyBeforeWriting: true) { txn in
              try txn.append(event(i, stream: "s\(i)"))
              try txn.put([UInt8(i)], forKey: Array("k\(i)".utf8), in: db)
              if i % 10 == 3 { throw Refused() }  // after writing
              if i % 10 == 7 && txn.nextPosition.rawValue > 1_000_000 { throw Refused() }
            }
            return (i, true)
          } catch is Refused {
            return (i, false)
          } catch {
            Issue.record("unexpected \(error)")
            return (i, false)
          }
        }
      }
      return await group.reduce(into: [Int: Bool]()) { $0[$1.0] = $1.1 }
    }
    let refused = Set(outcomes.filter { !$0.value }.map(\.key))
    #expect(refused == Set((0..<48).filter { $0 % 10 == 3 }))
    try expectDense(log, count: 48 - refused.count)
    let streams = Set(try log.read(from: 1).map(\.stream))
    #expect(streams == Set((0..<48).filter { !refused.contains($0) }.map { "s\($0)" }))
    try log.read { txn in
      for i in 0..<48 {
        let present = try txn.get(Array("k\(i)".utf8), in: db) != nil
        #expect(present == !refused.contains(i))
      }
    }
    #expect(try log.verify().isValid)
  }
}
