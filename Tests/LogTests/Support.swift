import Foundation
import Log
import TestSupport
import Testing

/// A directory of its own for one test, removed when it goes away.
final class TemporaryDirectory {
  let path: String

  init(_ name: String = #function) {
    let safe = name.filter { $0.isLetter || $0.isNumber }.prefix(40)
    path = NSTemporaryDirectory() + "wikilog-logtests-\(safe)-\(UUID().uuidString)"
    try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
  }

  func sub(_ name: String) -> String { path + "/" + name }

  deinit {
    try? FileManager.default.removeItem(atPath: path)
  }
}

func event(_ n: Int, stream: String = "s", type: String = "test", expected: ExpectedVersion = .any)
  -> NewEvent
{
  NewEvent(
    type: type, stream: stream, actor: "tester", payload: Array("payload-\(n)".utf8),
    expectedVersion: expected)
}

/// Checks that positions run 1, 2, 3, ... with nothing missing.
func expectDense(_ log: EventLog, count: Int, sourceLocation: SourceLocation = #_sourceLocation)
  throws
{
  let events = try log.read(from: 1)
  #expect(events.count == count, sourceLocation: sourceLocation)
  for (i, e) in events.enumerated() {
    #expect(e.position == LogPosition(UInt64(i + 1)), sourceLocation: sourceLocation)
  }
  #expect(try log.committedPosition == LogPosition(UInt64(count)), sourceLocation: sourceLocation)
}

/// Starts the LogTestWorker executable (built beside the test bundle) with `arguments`.
func startWorker(_ arguments: [String]) throws -> ChildProcess {
  try ChildProcess(ChildProcess.besideTests("LogTestWorker"), arguments)
}
