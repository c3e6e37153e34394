import Foundation
import Testing

@testable import Log

/// Events are appended one at a time (`WriteTransaction.append(_:)`), and batches whose events
/// expect nothing (`.any`) are appended event by event, on their own path: one B-tree search on
/// `log.streams` per event, no stream cache. Batches with expectations are checked first with
/// the stream cache. These check both paths write the same, and keep every rule.
@Suite struct SingleAppendTests {
  @Test("single appends write the same stream heads, links and checkpoints as checked batches")
  func sameAsBatched() throws {
    let dir = TemporaryDirectory()
    let single = try EventLog(directory: dir.sub("single"))
    let batched = try EventLog(directory: dir.sub("batched"))
    var versions: [String: UInt64] = [:]
    let events = (1...200).map { n in
      let stream = "s\(n % 3 == 0 ? 0 : n % 7)"
      defer { versions[stream, default: 0] += 1 }
      return event(n, stream: stream, expected: .exactly(versions[stream, default: 0]))
    }
    for chunk in stride(from: 0, to: events.count, by: 40) {
      let part = Array(events[chunk..<min(chunk + 40, events.count)])
      try single.write { txn throws in
        for e in part { try txn.append(e) }
      }
      try batched.append(part)  // expectations: the checked path
    }
    let streams = Set(events.map(\.stream))
    for log in [single, batched] {
      #expect(try log.verify().isValid)
    }
    try single.read { s throws in
      try batched.read { b throws in
        for stream in streams {
          let key = StreamKey.prefix(stream)
          #expect(try s.raw.get(single.dbs.streams, key) == b.raw.get(batched.dbs.streams, key))
        }
        for position in 1...UInt64(events.count) {
          let a = try #require(try s.raw.eventWithPrevious(single.dbs.events, at: position))
          let b = try #require(try b.raw.eventWithPrevious(batched.dbs.events, at: position))
          #expect(a.previous == b.previous)
          #expect(a.event.streamVersion == b.event.streamVersion)
          #expect(a.event.stream == b.event.stream && a.event.payload == b.event.payload)
        }
        // 66 events of "s0": one checkpoint, the same entry either way.
        var singleIndex: [[UInt8]] = []
        var batchedIndex: [[UInt8]] = []
        try s.raw.scan(single.dbs.streamIndex, from: nil, reverse: false) { k, v in
          singleIndex.append(k + v)
          return true
        }
        try b.raw.scan(batched.dbs.streamIndex, from: nil, reverse: false) { k, v in
          batchedIndex.append(k + v)
          return true
        }
        #expect(singleIndex.count == 1 && singleIndex == batchedIndex)
      }
    }
  }

  @Test("a single append checks its expected version and writes nothing when it fails")
  func expectations() throws {
    let dir = TemporaryDirectory()
    let log = try EventLog(directory: dir.path)
    try log.write { txn throws in
      #expect(
        throws: LogError.wrongExpectedVersion(stream: "x", expected: .streamExists, actual: 0)
      ) { try txn.append(event(0, stream: "x", expected: .streamExists)) }
      #expect(
        throws: LogError.wrongExpectedVersion(stream: "x", expected: .exactly(1), actual: 0)
      ) { try txn.append(event(0, stream: "x", expected: .exactly(1))) }
      #expect(try txn.append(event(1, stream: "x", expected: .exactly(0))).streamVersion == 1)
      #expect(
        throws: LogError.wrongExpectedVersion(stream: "x", expected: .noStream, actual: 1)
      ) { try txn.append(event(2, stream: "x", expected: .noStream)) }
      #expect(try txn.append(event(2, stream: "x", expected: .streamExists)).streamVersion == 2)
      #expect(
        throws: LogError.wrongExpectedVersion(stream: "x", expected: .exactly(5), actual: 2)
      ) { try txn.append(event(3, stream: "x", expected: .exactly(5))) }
      #expect(try txn.append(event(3, stream: "x", expected: .exactly(2))).streamVersion == 3)
      #expect(try txn.append(event(4, stream: "y", expected: .noStream)).position == 4)
      #expect(throws: LogError.self) { try txn.append(event(5, stream: "", expected: .noStream)) }
      #expect(try txn.append(event(5, stream: "")).streamVersion == 0)
    }
    try expectDense(log, count: 5)
    #expect(try log.streamVersion(of: "x") == 3)
    #expect(try log.read(stream: "x").map(\.position) == [1, 2, 3])
    #expect(try log.verify().isValid)
  }

  @Test("streams written one event at a time read back across checkpoints, both ways")
  func checkpoints() throws {
    let dir = TemporaryDirectory()
    let log = try EventLog(directory: dir.path, options: .init(durability: .unsynced))
    for round in 0..<4 {
      try log.write { txn throws in
        for i in 0..<50 {
          try txn.append(event(round * 50 + i, stream: i % 5 == 0 ? "other" : "long"))
        }
      }
    }
    #expect(try log.streamVersion(of: "long") == 160)
    let long = try log.read(stream: "long")
    #expect(long.map(\.streamVersion) == Array(1...160))
    #expect(
      try log.read(stream: "long", fromVersion: 100, limit: 30).map(\.streamVersion)
        == Array(100..<130))
    #expect(
      try log.read(stream: "long", fromVersion: 129, direction: .backward, limit: 3).map(
        \.streamVersion) == [129, 128, 127])
    #expect(try log.verify().isValid)
  }

  @Test("single and batched appends interleave on the same streams, in and across transactions")
  func interleaved() throws {
    let dir = TemporaryDirectory()
    let log = try EventLog(directory: dir.path)
    try log.append([event(1, stream: "a"), event(2, stream: "b")])  // fills the stream cache
    try log.write { txn throws in
      #expect(try txn.append(event(3, stream: "a", expected: .exactly(1))).streamVersion == 2)
      let batch = try txn.append(contentsOf: [
        event(4, stream: "a", expected: .exactly(2)), event(5, stream: "b", expected: .exactly(1)),
      ])
      #expect(batch.events.map(\.streamVersion) == [3, 2])
      #expect(try txn.append(event(6, stream: "b", expected: .exactly(2))).streamVersion == 3)
    }
    try log.append([event(7, stream: "b", expected: .exactly(3)), event(8, stream: "c")])
    try log.write { txn throws in
      #expect(try txn.append(event(9, stream: "b", expected: .exactly(4))).streamVersion == 5)
    }
    #expect(
      throws: LogError.wrongExpectedVersion(stream: "b", expected: .exactly(4), actual: 5)
    ) { try log.append([event(10, stream: "b", expected: .exactly(4)), event(11)]) }
    #expect(try log.read(stream: "a").map(\.position) == [1, 3, 4])
    #expect(try log.read(stream: "b").map(\.position) == [2, 5, 6, 7, 9])
    #expect(try log.verify().isValid)
  }

  @Test("a savepoint undoes its single appends; the parent goes on appending to the same stream")
  func savepoints() throws {
    let dir = TemporaryDirectory()
    let log = try EventLog(directory: dir.path)
    try log.write { txn throws in
      try txn.append(event(1, stream: "s"))
      #expect(throws: CancellationError.self) {
        try txn.savepoint { child throws in
          try child.append(event(2, stream: "s", expected: .exactly(1)))
          try child.append(event(3, stream: "t"))
          throw CancellationError()
        }
      }
      #expect(try txn.append(event(4, stream: "s", expected: .exactly(1))).position == 2)
      try txn.savepoint { child throws in
        #expect(try child.append(event(5, stream: "s", expected: .exactly(2))).position == 3)
      }
      #expect(try txn.append(event(6, stream: "s", expected: .exactly(3))).streamVersion == 4)
    }
    #expect(
      try log.read(stream: "s").map(\.payload) == [1, 4, 5, 6].map { Array("payload-\($0)".utf8) })
    #expect(try log.streamVersion(of: "t") == 0)
    #expect(try log.verify().isValid)
  }

  @Test("single appends to streams with names past LMDB's key limit keep them apart")
  func longNames() throws {
    let dir = TemporaryDirectory()
    let log = try EventLog(directory: dir.path)
    let a = String(repeating: "x", count: 600) + "a"
    let b = String(repeating: "x", count: 600) + "b"
    let edge = String(repeating: "é", count: 200)  // exactly 400 UTF-8 bytes: kept whole
    try log.write { txn throws in
      try txn.append(event(1, stream: a, expected: .noStream))
      try txn.append(event(2, stream: b, expected: .noStream))
      try txn.append(event(3, stream: a, expected: .exactly(1)))
      try txn.append(event(4, stream: edge))
      try txn.append(event(5, stream: edge, expected: .exactly(1)))
    }
    #expect(try log.read(stream: a).map(\.position) == [1, 3])
    #expect(try log.read(stream: b).map(\.position) == [2])
    #expect(try log.read(stream: edge).map(\.position) == [4, 5])
    #expect(try log.verify().isValid)
  }
}

@Suite struct AppendPoisonTests {
  /// Replaces the head of `stream` with three bytes, as a damaged database might hold.
  func breakHead(of stream: String, in log: EventLog) throws {
    try log.write { txn throws in
      try txn.raw.put(log.dbs.streams, StreamKey.prefix(stream), [1, 2, 3])
    }
  }

  @Test("a malformed stream head fails a single append, which writes nothing")
  func singleAppend() throws {
    let dir = TemporaryDirectory()
    let log = try EventLog(directory: dir.path)
    try log.append([event(1, stream: "bad")])
    try breakHead(of: "bad", in: log)
    try log.write { txn throws in
      #expect(throws: LogError.self) { try txn.append(event(2, stream: "bad")) }
      try txn.append(event(3, stream: "good"))
    }
    #expect(try log.read(from: 1).map(\.stream) == ["bad", "good"])
  }

  @Test(
    "a batch that fails after writing part of itself cannot commit, even if the error is caught")
  func batchPartway() throws {
    let dir = TemporaryDirectory()
    let log = try EventLog(directory: dir.path)
    try log.append([event(1, stream: "bad")])
    try breakHead(of: "bad", in: log)
    let batch = [event(2, stream: "good"), event(3, stream: "bad")]
    var caught = 0
    #expect(throws: LogError.self) {
      try log.write { txn throws in
        do { try txn.append(contentsOf: batch) } catch { caught += 1 }
      }
    }
    #expect(throws: LogError.self) {
      try log.write { txn throws in
        try txn.savepoint { child in
          do { try child.append(contentsOf: batch) } catch { caught += 1 }
        }
      }
    }
    try log.write { txn throws in
      do {
        try txn.savepoint { child in _ = try? child.append(contentsOf: batch) }
      } catch {
        caught += 1
      }
      try txn.append(event(4, stream: "other"))
    }
    #expect(caught == 3)
    #expect(try log.read(from: 1).map(\.stream) == ["bad", "other"])
    #expect(try log.streamVersion(of: "good") == 0)
  }
}
