import Foundation
import TestSupport
import Testing

/// The `notes` example (Examples/Notes) built and run: two devices' notes meet through a
/// `wikilog serve`.
@Suite struct ExampleTests {
  /// Runs `notes` with `arguments`; its output lines, after checking it succeeded.
  func notes(_ arguments: [String]) throws -> [String] {
    let child = try ChildProcess(ChildProcess.besideTests("notes"), arguments)
    #expect(child.waitForExit(timeout: 60))
    #expect(child.process.terminationStatus == 0, "notes \(arguments) failed")
    return child.lines
  }

  @Test func notesSyncBetweenTwoDevicesThroughAServer() async throws {
    let serverDir = TempDirectory()
    let (server, base) = try serveWikilog(serverDir.path)
    defer { server.kill() }
    #expect(try await request(base, "PUT", "/notes").0 == 201)
    let laptop = TempDirectory()
    let phone = TempDirectory()

    let added = try notes(["--data", laptop.path, "add", "Buy milk", "--tag", "home"])
    let id = try #require(added.first?.split(separator: " ").first.map(String.init))
    _ = try notes(["--data", laptop.path, "add", "Write the report", "--tag", "work"])
    #expect(
      try notes(["--data", laptop.path, "list", "--tag", "home"]) == ["- \(id) Buy milk [home]"])
    let pushed = try notes(["--data", laptop.path, "sync", base + "/notes", "--until-idle"])
    #expect(pushed.last == "stopped pushed=2 pulled=0")

    _ = try notes(["--data", phone.path, "sync", base + "/notes", "--until-idle"])
    #expect(try notes(["--data", phone.path, "list"]).count == 2)
    _ = try notes(["--data", phone.path, "done", id])
    _ = try notes(["--data", phone.path, "sync", base + "/notes", "--until-idle"])
    _ = try notes(["--data", laptop.path, "sync", base + "/notes", "--until-idle"])
    #expect(
      try notes(["--data", laptop.path, "list", "--tag", "home"]) == ["x \(id) Buy milk [home]"])

    // A mistake is one line on standard error and a failing exit.
    let wrong = try ChildProcess(
      ChildProcess.besideTests("notes"), ["--data", laptop.path, "done", "no-such-note"])
    #expect(wrong.waitForExit(timeout: 30))
    #expect(wrong.process.terminationStatus == 1)
  }
}
