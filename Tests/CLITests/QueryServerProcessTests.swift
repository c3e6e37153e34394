import Foundation
import TestSupport
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// `wikilog query-server` itself, as a process: it answers CouchDB's protocol with its walls up
/// (no new privileges, seccomp), for root (as CI runs) and for a user who is not root (an
/// operator's `wikilog serve`), whose threads count against limits root's do not.
@Suite struct QueryServerProcessTests {
  static let commands = [
    #"["reset",{}]"#, #"["add_fun","function (doc) { emit(doc._id, 1) }"]"#,
    #"["map_doc",{"_id":"a"}]"#,
    #"["ddoc","new","k",{"_id":"_design/x","shows":{"s":"function () { var a = []; for (var i = 0; i < 200000; i++) a.push({i: i}); return String(a.length); }"}}]"#,
    #"["ddoc","k",["shows","s"],[null,{}]]"#,
  ]

  /// Runs `arguments` with the commands on standard input; its output lines and status.
  static func run(_ executable: String, _ arguments: [String]) throws -> ([String], Int32) {
    let process = SpawnedProcess()
    process.executableURL = URL(fileURLWithPath: executable)
    process.arguments = arguments
    let input = Pipe()
    let output = Pipe()
    process.standardInput = input
    process.standardOutput = output
    process.standardError = FileHandle.nullDevice
    try process.run()
    input.fileHandleForWriting.write(Data((commands.joined(separator: "\n") + "\n").utf8))
    try input.fileHandleForWriting.close()
    let data = output.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    let lines = String(decoding: data, as: UTF8.self).split(separator: "\n").map(String.init)
    return (lines, process.terminationStatus)
  }

  static let expected = ["true", "true", #"[[["a",1]]]"#, "true", #"["resp",{"body":"200000"}]"#]

  @Test("the query server answers with its walls up")
  func answers() throws {
    let (lines, status) = try Self.run(ChildProcess.besideTests("wikilog"), ["query-server"])
    #expect(lines == Self.expected)
    #expect(status == 0)
  }

  @Test("the query server answers for a user who is not root (its threads start)")
  func notRoot() throws {
    let setpriv = "/usr/bin/setpriv"
    guard getuid() == 0, FileManager.default.isExecutableFile(atPath: setpriv) else {
      // Not root here: the test above already ran as a user who is not root.
      return
    }
    // A copy that user `nobody` may run (the build folder may be closed to it).
    let dir = NSTemporaryDirectory() + "wikilog-qs-\(UUID().uuidString)"
    try FileManager.default.createDirectory(
      atPath: dir, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o755])
    defer { try? FileManager.default.removeItem(atPath: dir) }
    let copy = dir + "/wikilog"
    try FileManager.default.copyItem(atPath: ChildProcess.besideTests("wikilog"), toPath: copy)
    try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: copy)
    let (lines, status) = try Self.run(
      setpriv,
      ["--reuid=nobody", "--regid=nogroup", "--clear-groups", copy, "query-server"])
    #expect(lines == Self.expected)
    #expect(status == 0)
  }
}
