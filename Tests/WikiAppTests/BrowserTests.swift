import Foundation
import TestSupport
import Testing

/// The web UI in a real browser: Debian's headless Chromium driven through the DevTools
/// protocol by `Tests/browser/e2e_wiki.py` (Python's standard library only), against a
/// `wikilog serve` of a demo data directory with its users. The scenario signs in, creates a
/// wiki and pages, autosaves and publishes drafts, follows a missing-page link, reads history
/// and blame, travels in time (the moment's date, links keeping it, no form, errors in the
/// frame), deletes a page and restores it, finds a draft-only page and My drafts, resolves a
/// conflict made through the API, checks that a
/// non-member gets 404s and that XSS attempts are inert, sets up sync with a second `wikilog
/// serve` on the Sync page and sees a page arrive there; its screenshots go to a temporary
/// directory, or to `$WIKILOG_SCREENSHOTS` when set (docs/screenshots holds a set).
@Suite struct BrowserTests {
  @Test("the wiki in headless Chromium: the whole scenario of Tests/browser/e2e_wiki.py")
  func scenario() throws {
    let chromium = "/usr/bin/chromium"
    guard FileManager.default.isExecutableFile(atPath: chromium) else {
      Issue.record("Chromium is missing: scripts/bootstrap installs it (apt-get install chromium)")
      return
    }
    let dir = NSTemporaryDirectory() + "wikilog-browser-\(UUID().uuidString)"
    defer { try? FileManager.default.removeItem(atPath: dir) }
    let wikilog = ChildProcess.besideTests("wikilog")
    let demo = try ChildProcess(wikilog, ["demo", "--users", "--db", dir])
    #expect(demo.waitForExit(timeout: 120))
    #expect(demo.process.terminationStatus == 0, "\(demo.lines)")
    var passwords: [String: String] = [:]
    let signIns = try String(contentsOfFile: dir + "/demo-sign-ins.txt", encoding: .utf8)
    for line in signIns.split(separator: "\n") {
      let parts = line.split(separator: " ")
      if parts.count == 2 { passwords[String(parts[0])] = String(parts[1]) }
    }
    let (server, base) = try ChildProcess.serve(dir, timeout: 60)
    defer { server.kill() }
    // A second server, for the Sync page: the scenario syncs alice's wikis with it.
    let remoteDir = dir + "-remote"
    defer { try? FileManager.default.removeItem(atPath: remoteDir) }
    let remoteDemo = try ChildProcess(wikilog, ["demo", "--users", "--db", remoteDir])
    #expect(remoteDemo.waitForExit(timeout: 120))
    let remoteSignIns = try String(
      contentsOfFile: remoteDir + "/demo-sign-ins.txt", encoding: .utf8)
    let remotePassword = remoteSignIns.split(separator: "\n").compactMap { line in
      let parts = line.split(separator: " ")
      return parts.count == 2 && parts[0] == "alice" ? String(parts[1]) : nil
    }.first
    let (remoteServer, remoteBase) = try ChildProcess.serve(remoteDir, timeout: 60)
    defer { remoteServer.kill() }
    let shots =
      ProcessInfo.processInfo.environment["WIKILOG_SCREENSHOTS"] ?? (dir + "/screenshots")
    try FileManager.default.createDirectory(atPath: shots, withIntermediateDirectories: true)
    var environment = ProcessInfo.processInfo.environment
    environment["WIKI_ADMIN"] = "admin"
    environment["WIKI_ADMIN_PASSWORD"] = passwords["admin"]
    environment["WIKI_USER1"] = "alice"
    environment["WIKI_USER1_PASSWORD"] = passwords["alice"]
    environment["WIKI_USER2"] = "carol"
    environment["WIKI_USER2_PASSWORD"] = passwords["carol"]
    environment["WIKI_REMOTE_URL"] = remoteBase + "/wiki"
    environment["WIKI_REMOTE_USER"] = "alice"
    environment["WIKI_REMOTE_PASSWORD"] = remotePassword
    // The scenario stops the remote and starts it again on its port.
    environment["WIKI_REMOTE_PID"] = String(remoteServer.process.processIdentifier)
    environment["WIKI_REMOTE_SERVE"] =
      "\(wikilog) serve --db \(remoteDir) --port \(remoteBase.split(separator: ":").last ?? "0") --log-level error"
    let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
      .deletingLastPathComponent().appendingPathComponent("browser/e2e_wiki.py").path
    let run = try ChildProcess(
      "/usr/bin/env", ["python3", script, base, shots], environment: environment)
    let finished = run.waitForExit(timeout: 600)
    if !finished { run.kill() }
    #expect(finished, "the browser scenario did not finish in 10 minutes")
    let failures = run.lines.filter { $0.hasPrefix("FAIL") }
    for failure in failures { Issue.record("\(failure)") }
    #expect(run.process.terminationStatus == 0, "\(run.lines.suffix(5))")
    #expect(run.lines.last?.hasSuffix(" 0 failed") == true, "\(run.lines.suffix(3))")
  }
}
