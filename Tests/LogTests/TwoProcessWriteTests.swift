import Foundation
import Log
import TestSupport
import Testing

/// Two processes writing one log: each write transaction appends after the other's events.
@Suite struct TwoProcessWriteTests {
  @Test("after a commit that wrote nothing, another process's appends are seen, not overwritten")
  func emptyCommitThenAnotherProcess() throws {
    let dir = TemporaryDirectory()
    let log = try EventLog(directory: dir.path)
    func event(_ n: Int) -> NewEvent {
      NewEvent(type: "test.appended", stream: "here", actor: "test", payload: Array("\(n)".utf8))
    }
    #expect(try log.append([event(0)])[0].position == 1)
    for round in 0..<3 {
      // A commit with nothing in it: LMDB does not advance its transaction id for it, so the
      // other process's next commit takes the id this process would expect from itself.
      try log.write { _ in }
      // One transaction there: exactly the id this process would take for its own.
      let worker = try startWorker(["appendN", dir.path, "1"])
      #expect(worker.waitForExit(timeout: 60))
      #expect(worker.lines.contains { $0.hasPrefix("done ") }, "\(worker.lines)")
      let appended = try log.append([event(round + 1)])
      #expect(appended[0].position == LogPosition(UInt64(1 + (round + 1) * 2)))
    }
    try expectDense(log, count: 7)
  }
}
