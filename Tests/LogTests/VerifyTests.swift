import Foundation
import Testing

@testable import Log

@Suite struct VerifyTests {
  @Test("verify passes on a sound log and reports its size")
  func soundLog() throws {
    let dir = TemporaryDirectory()
    let log = try EventLog(directory: dir.path)
    try log.append((1...20).map { event($0, stream: "s\($0 % 3)") }, idempotencyKey: "k")
    try log.append([NewEvent(type: "global")])
    let report = try log.verify()
    #expect(report.isValid)
    #expect(report.eventCount == 21 && report.streamCount == 3 && report.lastPosition == 21)
  }

  @Test("a corrupt record is detected by verify and by reads")
  func corruptRecord() throws {
    let dir = TemporaryDirectory()
    let log = try EventLog(directory: dir.path)
    try log.append([event(1), event(2)])
    // Flip a payload byte of event 2 behind the log's back.
    try log.write { txn throws in
      var bytes = try #require(try txn.raw.get(log.dbs.events, UInt64(2).bigEndianBytes))
      bytes[bytes.count - 6] ^= 0xFF
      try txn.raw.put(log.dbs.events, UInt64(2).bigEndianBytes, bytes)
    }
    let report = try log.verify()
    #expect(!report.isValid)
    #expect(report.problems.contains { $0.contains("event 2 is corrupt") })
    #expect(throws: LogError.corruptRecord(position: 2, reason: "checksum mismatch")) {
      _ = try log.event(at: 2)
    }
    #expect(try log.event(at: 1) != nil)
  }

  @Test("verify finds a gap, a broken stream chain, a wrong head and a missing checkpoint")
  func gapsAndIndex() throws {
    let dir = TemporaryDirectory()
    let log = try EventLog(directory: dir.path)
    try log.append([event(1, stream: "a"), event(2, stream: "a"), event(3, stream: "b")])
    try log.append((1...64).map { event($0, stream: "c") })
    try log.write { txn throws in
      try txn.raw.delete(log.dbs.events, UInt64(2).bigEndianBytes)
      try txn.raw.putStreamHead(
        log.dbs.streams, prefix: StreamKey.prefix("b"), StreamHead(version: 5, last: 3))
      try txn.raw.delete(
        log.dbs.streamIndex, StreamKey.key(prefix: StreamKey.prefix("c"), version: 64))
    }
    let report = try log.verify()
    #expect(report.problems.contains { $0.contains("position 2 is missing") })
    #expect(
      report.problems.contains { $0.contains("the head of 'a' is v2@2, the events say v1@1") })
    #expect(report.problems.contains { $0.contains("the head of 'b' is v5@3") })
    #expect(report.problems.contains { $0.contains("checkpoint of 'c' v64") })
    #expect(throws: LogError.self) { _ = try log.read(stream: "a") }
  }

  @Test("the quick check of stream links passes sound logs and sends wrong heads to the full one")
  func streamLinkSums() throws {
    let dir = TemporaryDirectory()
    let log = try EventLog(directory: dir.path)
    // Names of every key form: short ones, and ones longer than StreamKey.maxInlineBytes, whose
    // keys are hashed.
    let long = String(repeating: "x", count: 500)
    let names = ["a", "é", long, long + "y"]
    for round in 0..<5 {
      try log.append((0..<8).map { event(round * 8 + $0, stream: names[$0 % names.count]) })
    }
    try log.append([NewEvent(type: "global")])
    let sound = try log.verify()
    #expect(sound.isValid, "\(sound)")
    #expect(sound.streamCount == 4 && sound.eventCount == 41)
    // A head one version behind (a consistent-looking pair), and a head for a stream with no
    // events: both found, with the full pass's words.
    try log.write { txn throws in
      try txn.raw.putStreamHead(
        log.dbs.streams, prefix: StreamKey.prefix(long + "y"), StreamHead(version: 9, last: 36))
      try txn.raw.putStreamHead(
        log.dbs.streams, prefix: StreamKey.prefix("ghost"), StreamHead(version: 1, last: 1))
    }
    let report = try log.verify()
    #expect(report.problems.contains { $0.contains("the head of '\(long)y' is v9@36") })
    #expect(report.problems.contains { $0.contains("there are 5 stream heads for 4 streams") })
  }

  @Test("long streams read correctly across checkpoints, in both directions")
  func checkpointedStreams() throws {
    let dir = TemporaryDirectory()
    let log = try EventLog(directory: dir.path)
    for chunk in 0..<10 {
      try log.append(
        (0..<50).map { i in event(chunk * 50 + i, stream: i % 2 == 0 ? "even" : "odd") })
    }
    #expect(try log.streamVersion(of: "even") == 250)
    #expect(try log.read(stream: "even").map(\.streamVersion) == Array(1...250))
    #expect(
      try log.read(stream: "even", fromVersion: 63, limit: 4).map(\.streamVersion) == [
        63, 64, 65, 66,
      ])
    #expect(
      try log.read(stream: "even", fromVersion: 200, direction: .backward, limit: 3).map(
        \.streamVersion) == [200, 199, 198])
    #expect(
      try log.read(stream: "odd", fromVersion: 1000, direction: .backward, limit: 2).map(
        \.streamVersion) == [250, 249])
    #expect(try log.read(stream: "odd", fromVersion: 128, limit: 1).map(\.position) == [256])
    #expect(try log.read(stream: "odd", fromVersion: 251).isEmpty)
    #expect(try log.verify().isValid)
  }
}
