import Foundation
import Testing

@testable import Log

@Suite struct ReadTests {
  @Test("reads by position, forwards and backwards, with limits")
  func ranges() throws {
    let dir = TemporaryDirectory()
    let log = try EventLog(directory: dir.path)
    try log.append((1...50).map { event($0, stream: "s\($0 % 4)") })
    #expect(try log.event(at: 7)?.payload == Array("payload-7".utf8))
    #expect(try log.event(at: 51) == nil)
    #expect(try log.event(at: 0) == nil)
    #expect(try log.read(from: 10, limit: 3).map(\.position) == [10, 11, 12])
    #expect(try log.read(after: 48).map(\.position) == [49, 50])
    #expect(
      try log.read(from: 5, direction: .backward, limit: 10).map(\.position) == [5, 4, 3, 2, 1])
    #expect(try log.read(from: 1000, direction: .backward, limit: 2).map(\.position) == [50, 49])
    #expect(try log.read(from: 1000).isEmpty)
    #expect(try log.read(from: 1, limit: 0).isEmpty)
  }

  @Test("reads a stream by version, forwards and backwards")
  func streams() throws {
    let dir = TemporaryDirectory()
    let log = try EventLog(directory: dir.path)
    try log.append((1...30).map { event($0, stream: $0 % 3 == 0 ? "three" : "other") })
    let three = try log.read(stream: "three")
    #expect(three.map(\.streamVersion) == Array(1...10))
    #expect(
      three.map(\.position.rawValue) == stride(from: 3, through: 30, by: 3).map { UInt64($0) })
    #expect(try log.read(stream: "three", fromVersion: 9).map(\.streamVersion) == [9, 10])
    #expect(
      try log.read(stream: "three", fromVersion: 3, direction: .backward).map(\.streamVersion) == [
        3, 2, 1,
      ])
    #expect(try log.read(stream: "missing").isEmpty)
    #expect(try log.streamVersion(of: "three") == 10)
    #expect(try log.read(stream: "thre").isEmpty)
  }

  @Test("stream names longer than LMDB's key limit still work and do not mix")
  func longStreamNames() throws {
    let dir = TemporaryDirectory()
    let log = try EventLog(directory: dir.path)
    let a = String(repeating: "a", count: 5000) + "1"
    let b = String(repeating: "a", count: 5000) + "2"
    try log.append([
      event(1, stream: a), event(2, stream: b), event(3, stream: a, expected: .exactly(1)),
    ])
    #expect(try log.read(stream: a).map(\.position) == [1, 3])
    #expect(try log.read(stream: b).map(\.position) == [2])
    #expect(try log.verify().isValid)
  }

  @Test("finds the first event at or after a time")
  func timeLookup() throws {
    let dir = TemporaryDirectory()
    let log = try EventLog(directory: dir.path)
    let before = Date()
    try log.append([event(1)])
    Thread.sleep(forTimeInterval: 0.02)
    let middle = Date()
    Thread.sleep(forTimeInterval: 0.02)
    try log.append([event(2)])
    try log.append([event(3)])
    #expect(try log.firstPosition(atOrAfter: before.addingTimeInterval(-1)) == 1)
    #expect(try log.firstPosition(atOrAfter: middle) == 2)
    #expect(try log.firstPosition(atOrAfter: Date().addingTimeInterval(60)) == nil)
    let events = try log.read(from: 1)
    #expect(events.map(\.timestampMicroseconds) == events.map(\.timestampMicroseconds).sorted())
    #expect(abs(events[0].timestamp.timeIntervalSince(before)) < 5)
  }

  @Test("records keep type, stream, actor and payload bytes exactly")
  func roundTrip() throws {
    let dir = TemporaryDirectory()
    let log = try EventLog(directory: dir.path)
    let payload = (0..<1000).map { UInt8(truncatingIfNeeded: $0 * 7) }
    let new = NewEvent(
      type: "doc.updated ✓", stream: "wiki:Page Name", actor: "ålice", payload: payload)
    let recorded = try log.append([new, NewEvent(type: "empty")])
    let read = try log.read(from: 1)
    #expect(read == recorded)
    #expect(
      read[0].type == "doc.updated ✓" && read[0].actor == "ålice" && read[0].payload == payload)
    #expect(read[1].stream == "" && read[1].payload.isEmpty && read[1].streamVersion == 0)
  }

  @Test("a read snapshot does not see later commits")
  func snapshotIsolation() throws {
    let dir = TemporaryDirectory()
    let log = try EventLog(directory: dir.path)
    try log.append([event(1)])
    try log.read { txn throws in
      let done = DispatchSemaphore(value: 0)
      DispatchQueue.global().async {
        _ = try? log.append([event(2)])
        done.signal()
      }
      done.wait()  // the writer was not blocked by this open reader
      #expect(try txn.lastPosition == 1)
    }
    #expect(try log.committedPosition == 2)
  }

  @Test("CRC-32C matches the published check value")
  func crcCheckValue() {
    #expect(CRC32C.checksum(Array("123456789".utf8)) == 0xE306_9283)
    #expect(CRC32C.checksum([UInt8](repeating: 0, count: 32)) == 0x8A91_36AA)
  }
}
