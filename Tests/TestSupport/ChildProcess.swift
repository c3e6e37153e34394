public import Foundation

/// A child process for the tests (crash workers, cross-process followers, the `wikilog`
/// binary), whose standard output lines are collected as they arrive. Standard error goes to
/// the test's, standard input is empty. A process still running when this goes away is killed.
public final class ChildProcess: @unchecked Sendable {
  public let process = SpawnedProcess()
  /// The pipe the child writes its standard output to (a test may close the reading end).
  public let output = Pipe()
  private let lock = NSLock()
  private var buffer = Data()
  private var collected: [String] = []
  /// Whether the child's standard output has ended (all its lines are collected).
  private var ended = false

  /// The path of an executable built beside the running test bundle, such as a test worker.
  public static func besideTests(_ name: String) -> String {
    let exe =
      (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe"))
      ?? CommandLine.arguments[0]
    return URL(fileURLWithPath: exe).deletingLastPathComponent().appendingPathComponent(name).path
  }

  /// Starts `executable` with `arguments` (and `environment`, when given).
  public init(_ executable: String, _ arguments: [String], environment: [String: String]? = nil)
    throws
  {
    process.executableURL = URL(fileURLWithPath: executable)
    process.arguments = arguments
    if let environment { process.environment = environment }
    process.standardOutput = output
    process.standardError = FileHandle.standardError
    process.standardInput = FileHandle.nullDevice
    output.fileHandleForReading.readabilityHandler = { [weak self] handle in
      let data = handle.availableData
      guard let self else { return }
      self.lock.lock()
      self.buffer.append(data)
      while let newline = self.buffer.firstIndex(of: UInt8(ascii: "\n")) {
        self.collected.append(
          String(decoding: self.buffer[self.buffer.startIndex..<newline], as: UTF8.self))
        self.buffer.removeSubrange(self.buffer.startIndex...newline)
      }
      if data.isEmpty { self.ended = true }
      self.lock.unlock()
      if data.isEmpty { handle.readabilityHandler = nil }
    }
    try Self.launch(process)
  }

  /// Starts `process`, one launch at a time across the test process (``SpawnedProcess``: not
  /// Foundation's `Process.run()`, which crashes now and then on Linux).
  public static func launch(_ process: SpawnedProcess) throws {
    launching.lock()
    defer { launching.unlock() }
    try process.run()
  }

  private static let launching = NSLock()

  /// The complete lines written so far.
  public var lines: [String] {
    lock.lock()
    defer { lock.unlock() }
    return collected
  }

  /// Waits until `predicate` holds for the lines so far, up to `timeout` seconds (less if the
  /// process ends first).
  public func waitFor(timeout: Double, _ predicate: ([String]) -> Bool) -> Bool {
    let deadline = Date().addingTimeInterval(timeout)
    while Date() < deadline && process.isRunning {
      if predicate(lines) { return true }
      usleep(2_000)
    }
    // The process ended (or the time is up): what it printed last may still be in the pipe.
    // Waited for until the reader meets the pipe's end, not for a fixed time: a loaded machine
    // can take longer than any pause to hand over a line written just before the exit.
    let drained = Date().addingTimeInterval(5)
    while !process.isRunning && Date() < drained && !lock.withLock({ ended }) {
      if predicate(lines) { return true }
      usleep(2_000)
    }
    return predicate(lines)
  }

  /// Waits up to `timeout` seconds for the process to end; kills it if it does not.
  public func waitForExit(timeout: Double) -> Bool {
    let deadline = Date().addingTimeInterval(timeout)
    while process.isRunning && Date() < deadline { usleep(5_000) }
    if process.isRunning {
      kill()
      return false
    }
    // The process has ended; its last lines may still be in the pipe.
    let drained = Date().addingTimeInterval(2)
    while Date() < drained && !lock.withLock({ ended }) { usleep(2_000) }
    return true
  }

  /// Kills the process with SIGKILL and waits for it.
  public func kill() {
    if process.isRunning { Foundation.kill(process.processIdentifier, SIGKILL) }
    process.waitUntilExit()
    usleep(20_000)  // let the reader drain what the pipe still holds
  }

  deinit {
    if process.isRunning {
      Foundation.kill(process.processIdentifier, SIGKILL)
      process.waitUntilExit()
    }
  }
}

extension ChildProcess {
  /// `wikilog serve` on data directory `path` and a free port, started and serving; its
  /// base URL (`http://127.0.0.1:PORT`, no trailing slash). The caller kills it.
  public static func serve(_ path: String, timeout: Double = 30) throws -> (
    server: ChildProcess, base: String
  ) {
    let server = try ChildProcess(
      besideTests("wikilog"), ["serve", "--db", path, "--port", "0", "--log-level", "error"])
    guard server.waitFor(timeout: timeout, { $0.contains { $0.contains("serving") } }),
      let line = server.lines.first(where: { $0.contains("serving") }),
      let url = line.split(separator: " ").first(where: { $0.hasPrefix("http://") })
    else {
      server.kill()
      throw CocoaError(
        .fileReadUnknown, userInfo: [NSLocalizedDescriptionKey: "wikilog serve did not start"])
    }
    return (server, String(url.dropLast()))
  }
}

/// A file of ../shared (beside the repository), from a test file's `#filePath`
/// (`Tests/<Suite>/<file>.swift`): `sharedFile("revids/vectors.json")`.
public func sharedFile(_ relative: String, from filePath: String = #filePath) -> URL {
  URL(fileURLWithPath: filePath)
    .resolvingSymlinksInPath()
    .deletingLastPathComponent()  // the test target
    .deletingLastPathComponent()  // Tests
    .deletingLastPathComponent()  // the repository
    .deletingLastPathComponent()  // beside it
    .appendingPathComponent("shared/" + relative)
}
