import Foundation
import TestSupport
import Testing

@testable import Log

@Suite(.serialized) struct CrashTests {
  /// The payload the worker writes for its n-th event (see Tests/LogTestWorker/main.swift).
  func expectedPayload(_ n: Int) -> [UInt8] {
    var bytes = Array("n=\(n);".utf8)
    for i in 0..<(64 + n % 200) { bytes.append(UInt8(truncatingIfNeeded: n &* 31 &+ i)) }
    return bytes
  }

  func crashTrials(mode: String, trials: Int) throws {
    let dir = TemporaryDirectory()
    var generator = SystemRandomNumberGenerator()
    var totalAcked = 0
    for trial in 0..<trials {
      let worker = try startWorker(["append", dir.path, mode])
      // Wait until it is appending, then kill it at a random moment.
      #expect(
        worker.waitFor(timeout: 20) { $0.contains { $0.hasPrefix("ack") } },
        "trial \(trial): no ack")
      usleep(UInt32.random(in: 0...150_000, using: &generator))
      worker.kill()
      let acks = worker.lines.compactMap { line -> (UInt64, Int)? in
        let parts = line.split(separator: " ")
        guard parts.count == 3, parts[0] == "ack", let p = UInt64(parts[1]), let n = Int(parts[2])
        else { return nil }
        return (p, n)
      }
      totalAcked += acks.count
      let log = try EventLog(directory: dir.path)
      let report = try log.verify()
      #expect(report.isValid, "trial \(trial): \(report)")
      for (position, n) in acks {
        let stored = try log.event(at: LogPosition(position))
        #expect(
          stored?.payload == expectedPayload(n),
          "trial \(trial): acknowledged event \(position) lost or changed")
      }
      let last = try log.committedPosition
      #expect(last.rawValue >= acks.map(\.0).max() ?? 0)
      // Every event present is whole: its payload is the worker's pattern for the number it names.
      for e in try log.read(from: 1) {
        let text = String(
          decoding: e.payload.prefix(while: { $0 != UInt8(ascii: ";") }), as: UTF8.self)
        guard text.hasPrefix("n="), let n = Int(text.dropFirst(2)) else {
          Issue.record("trial \(trial): event \(e.position) has a foreign payload")
          continue
        }
        #expect(e.payload == expectedPayload(n), "trial \(trial): event \(e.position) is torn")
      }
      log.close()
    }
    #expect(totalAcked > trials)
  }

  @Test("SIGKILL during synced appends loses no acknowledged event and tears none")
  func killDuringSyncedAppends() throws {
    try crashTrials(mode: "synced", trials: 12)
  }

  @Test("SIGKILL during group commits loses no acknowledged event and tears none")
  func killDuringGroupCommits() throws {
    try crashTrials(mode: "group", trials: 12)
  }
}
