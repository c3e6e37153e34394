import Foundation
import TestSupport
import Testing

/// The `wikilog` executable, built beside the test bundle.
let wikilogPath = ChildProcess.besideTests("wikilog")

/// What one run of `wikilog` did.
struct Run {
  let status: Int32
  let stdout: String
  let stderr: String
  /// Standard output as bytes.
  var data = Data()
  /// True when the process died of a signal instead of exiting.
  var signaled = false

  var lines: [String] { stdout.split(separator: "\n").map(String.init) }

  /// Standard output as JSON.
  func json(sourceLocation: SourceLocation = #_sourceLocation) throws -> Any {
    do {
      return try JSONSerialization.jsonObject(
        with: Data(stdout.utf8), options: [.fragmentsAllowed])
    } catch {
      Issue.record("not JSON: \(stdout)", sourceLocation: sourceLocation)
      throw error
    }
  }

  func object(sourceLocation: SourceLocation = #_sourceLocation) throws -> [String: Any] {
    try #require(try json(sourceLocation: sourceLocation) as? [String: Any])
  }

  func array(sourceLocation: SourceLocation = #_sourceLocation) throws -> [Any] {
    try #require(try json(sourceLocation: sourceLocation) as? [Any])
  }

  /// Each line of standard output as a JSON object (NDJSON).
  func rows() throws -> [[String: Any]] {
    try lines.map {
      try #require(
        try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any], "\($0)")
    }
  }
}

/// A data directory of its own for one test, removed when it goes away, and a way to run
/// `wikilog` on it.
final class CLI {
  let path: String

  init(_ name: String = #function, initialize: Bool = true) throws {
    let safe = name.filter { $0.isLetter || $0.isNumber }.prefix(40)
    path = NSTemporaryDirectory() + "wikilog-cli-\(safe)-\(UUID().uuidString)"
    try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    if initialize { try ok(["init"]) }
  }

  deinit {
    try? FileManager.default.removeItem(atPath: path)
  }

  static var environment: [String: String] {
    var env = ProcessInfo.processInfo.environment
    env["WIKILOG_ACTOR"] = nil
    env["WIKILOG_DB"] = nil
    env["USER"] = "tester"
    return env
  }

  /// Runs `wikilog --db <dir> arguments...` with `stdin` as standard input.
  func run(_ arguments: [String], stdin: String = "", environment: [String: String] = [:]) throws
    -> Run
  {
    let process = SpawnedProcess()
    process.executableURL = URL(fileURLWithPath: wikilogPath)
    process.arguments = ["--db", path] + arguments
    process.environment = Self.environment.merging(environment) { $1 }
    let input = Pipe()
    let output = Pipe()
    let errors = Pipe()
    process.standardInput = input
    process.standardOutput = output
    process.standardError = errors
    try process.run()
    let writer = Thread {
      input.fileHandleForWriting.write(Data(stdin.utf8))
      try? input.fileHandleForWriting.close()
    }
    writer.start()
    let group = DispatchGroup()
    nonisolated(unsafe) var errorData = Data()
    group.enter()
    DispatchQueue.global().async {
      errorData = errors.fileHandleForReading.readDataToEndOfFile()
      group.leave()
    }
    let outputData = output.fileHandleForReading.readDataToEndOfFile()
    group.wait()
    process.waitUntilExit()
    return Run(
      status: process.terminationStatus, stdout: String(decoding: outputData, as: UTF8.self),
      stderr: String(decoding: errorData, as: UTF8.self), data: outputData,
      signaled: process.terminationReason == .uncaughtSignal)
  }

  /// Runs `wikilog --db <dir> arguments...` with its standard streams on files (a file as
  /// standard input, `/dev/full` as an output): a command that stops reading early, or a
  /// stream that cannot be written, without a pipe in between. Standard error is captured
  /// unless `stderr` names a file; nil streams are the null device.
  func runRedirected(
    _ arguments: [String], stdin: String? = nil, stdout: String? = nil, stderr: String? = nil
  ) throws -> (status: Int32, signaled: Bool, stderr: String) {
    let process = SpawnedProcess()
    process.executableURL = URL(fileURLWithPath: wikilogPath)
    process.arguments = ["--db", path] + arguments
    process.environment = Self.environment
    func handle(_ file: String?, writing: Bool) throws -> FileHandle {
      guard let file else { return FileHandle.nullDevice }
      let opened = writing ? FileHandle(forWritingAtPath: file) : FileHandle(forReadingAtPath: file)
      return try #require(opened, "cannot open \(file)")
    }
    process.standardInput = try handle(stdin, writing: false)
    process.standardOutput = try handle(stdout, writing: true)
    let errors = Pipe()
    process.standardError = stderr == nil ? errors : try handle(stderr, writing: true)
    try process.run()
    let message =
      stderr == nil
      ? String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self) : ""
    process.waitUntilExit()
    return (
      process.terminationStatus, process.terminationReason == .uncaughtSignal, message
    )
  }

  /// Runs a command that must succeed.
  @discardableResult
  func ok(
    _ arguments: [String], stdin: String = "", environment: [String: String] = [:],
    sourceLocation: SourceLocation = #_sourceLocation
  ) throws -> Run {
    let r = try run(arguments, stdin: stdin, environment: environment)
    #expect(
      r.status == 0, "wikilog \(arguments.joined(separator: " ")): \(r.stderr)",
      sourceLocation: sourceLocation)
    return r
  }

  /// Runs a command that must fail with `status` and one line on stderr containing `message`,
  /// and nothing on standard output.
  @discardableResult
  func fails(
    _ arguments: [String], stdin: String = "", status: Int32 = 1, _ message: String,
    sourceLocation: SourceLocation = #_sourceLocation
  ) throws -> Run {
    let r = try run(arguments, stdin: stdin)
    #expect(
      r.status == status, "status of \(arguments): \(r.stderr)", sourceLocation: sourceLocation)
    #expect(r.stderr.hasPrefix("wikilog: error: "), "\(r.stderr)", sourceLocation: sourceLocation)
    #expect(r.stderr.contains(message), "\(r.stderr)", sourceLocation: sourceLocation)
    #expect(
      r.stderr.split(separator: "\n").count == 1, "one line: \(r.stderr)",
      sourceLocation: sourceLocation)
    return r
  }

  /// Writes a document and returns its new revision.
  @discardableResult
  func put(
    _ json: String, _ extra: [String] = [], environment: [String: String] = [:],
    sourceLocation: SourceLocation = #_sourceLocation
  )
    throws -> String
  {
    let r = try ok(["put", json] + extra, environment: environment, sourceLocation: sourceLocation)
    return try #require(try r.object()["rev"] as? String, sourceLocation: sourceLocation)
  }

  /// The number of events in the log (to check that a failed command wrote nothing).
  func eventCount(sourceLocation: SourceLocation = #_sourceLocation) throws -> Int {
    let r = try ok(["stats", "--json"], sourceLocation: sourceLocation)
    return try #require(try r.object()["events"] as? Int)
  }
}

/// Starts `wikilog --db <cli's directory> arguments...` in the background.
func startBackground(_ cli: CLI, _ arguments: [String]) throws -> ChildProcess {
  try ChildProcess(wikilogPath, ["--db", cli.path] + arguments, environment: CLI.environment)
}

/// Runs curl with `arguments` (loopback URLs only); returns the HTTP status (0 when no answer
/// came) and the body.
func curl(_ arguments: [String]) throws -> (status: Int, body: String) {
  let process = SpawnedProcess()
  process.executableURL = URL(fileURLWithPath: "/usr/bin/curl")
  process.arguments = ["-s", "-m", "10", "-w", "\n%{http_code}"] + arguments
  let pipe = Pipe()
  process.standardOutput = pipe
  try process.run()
  let data = pipe.fileHandleForReading.readDataToEndOfFile()
  process.waitUntilExit()
  let text = String(decoding: data, as: UTF8.self)
  let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
  return (Int(lines.last ?? "") ?? 0, lines.dropLast().joined(separator: "\n"))
}
