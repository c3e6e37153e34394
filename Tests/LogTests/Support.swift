import Foundation
import Log
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

/// The LogTestWorker executable, built beside the test bundle.
var workerPath: String {
  let exe =
    (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe"))
    ?? CommandLine.arguments[0]
  return URL(fileURLWithPath: exe).deletingLastPathComponent().appendingPathComponent(
    "LogTestWorker"
  ).path
}

/// A running LogTestWorker whose stdout lines are collected as they arrive.
final class Worker: @unchecked Sendable {
  let process = Process()
  private let lock = NSLock()
  private var buffer = Data()
  private var collected: [String] = []

  init(_ arguments: [String]) throws {
    process.executableURL = URL(fileURLWithPath: workerPath)
    process.arguments = arguments
    let pipe = Pipe()
    process.standardOutput = pipe
    process.standardError = FileHandle.standardError
    pipe.fileHandleForReading.readabilityHandler = { [weak self] handle in
      let data = handle.availableData
      guard let self else { return }
      self.lock.lock()
      self.buffer.append(data)
      while let newline = self.buffer.firstIndex(of: UInt8(ascii: "\n")) {
        let line = String(decoding: self.buffer[self.buffer.startIndex..<newline], as: UTF8.self)
        self.collected.append(line)
        self.buffer.removeSubrange(self.buffer.startIndex...newline)
      }
      self.lock.unlock()
      if data.isEmpty { handle.readabilityHandler = nil }
    }
    try process.run()
  }

  var lines: [String] {
    lock.lock()
    defer { lock.unlock() }
    return collected
  }

  /// Waits until `predicate` holds for the lines so far, up to `timeout` seconds.
  func waitFor(timeout: Double, _ predicate: ([String]) -> Bool) -> Bool {
    let deadline = Date().addingTimeInterval(timeout)
    while Date() < deadline {
      if predicate(lines) { return true }
      usleep(2_000)
    }
    return predicate(lines)
  }

  func kill() {
    if process.isRunning { Foundation.kill(process.processIdentifier, SIGKILL) }
    process.waitUntilExit()
    // Let the reader drain what the pipe still holds.
    usleep(20_000)
  }
}
