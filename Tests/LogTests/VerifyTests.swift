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
    #expect(throws: LogError.corruptRecord(position: 2, reason: "checksum mismatch")) { _ = try log.event(at: 2) }
    #expect(try log.event(at: 1) != nil)
  }

  @Test("verify finds a gap and a missing index entry")
  func gapsAndIndex() throws {
    let dir = TemporaryDirectory()
    let log = try EventLog(directory: dir.path)
    try log.append([event(1, stream: "a"), event(2, stream: "a"), event(3, stream: "b")])
    try log.write { txn throws in
      try txn.raw.delete(log.dbs.events, UInt64(2).bigEndianBytes)
      try txn.raw.delete(log.dbs.streams, StreamKey.key(prefix: StreamKey.prefix("b"), version: 1))
    }
    let report = try log.verify()
    #expect(report.problems.contains { $0.contains("position 2 is missing") })
    #expect(report.problems.contains { $0.contains("does not point to event 3") })
  }
}
