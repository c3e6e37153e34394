import Foundation
import TestSupport
import Testing

/// `wikilog serve` with users: no open door, --admin, HTTPS.
@Suite struct ServeAccessTests {

  func start(_ cli: CLI, _ arguments: [String], password: String? = nil) throws -> (
    server: ChildProcess, url: String
  ) {
    var environment = CLI.environment
    environment["WIKILOG_ADMIN_PASSWORD"] = password
    let server = try ChildProcess(
      wikilogPath, ["--db", cli.path, "serve", "--port", "0", "--log-level", "error"] + arguments,
      environment: environment)
    #expect(server.waitFor(timeout: 60) { $0.contains { $0.contains("serving") } })
    let banner = try #require(server.lines.first { $0.contains("serving") })
    let url = try #require(
      banner.firstMatch(of: #/https?://127\.0\.0\.1:\d+/#).map { String($0.0) + "/" })
    return (server, url)
  }

  @Test("without an administrator: loopback only, said at start, anonymous acts as one")
  func adminParty() throws {
    let cli = try CLI(initialize: false)
    try cli.fails(["serve", "--bind", "0.0.0.0", "--port", "0"], "there is no administrator")
    let (server, url) = try start(cli, [])
    defer { server.kill() }
    #expect(server.waitFor(timeout: 10) { $0.contains { $0.contains("admin party") } })
    let listed = try curl([url + "_all_dbs"])
    if listed.status != 200 { Issue.record("url=\(url) got=\(listed)") }
  }

  @Test("--admin makes the administrator from WIKILOG_ADMIN_PASSWORD; then anonymous is anonymous")
  func admin() throws {
    let cli = try CLI(initialize: false)
    try cli.ok(["demo"])
    let (server, url) = try start(cli, ["--admin", "root"], password: "rootpw")
    defer { server.kill() }
    #expect(try curl([url + "_all_dbs"]).status == 401)
    #expect(try curl([url + "wiki/_all_docs"]).status == 401)
    let listed = try curl(["-u", "root:rootpw", url + "_all_dbs"])
    #expect(listed.status == 200)
    #expect(listed.body.contains("wiki"))
    #expect(try curl(["-u", "root:wrong", url + "_all_dbs"]).status == 401)
    let users = try cli.ok(["user", "list"]).stdout
    #expect(users.contains("root"))
    #expect(users.contains("_admin"))
  }

  @Test("--tls-cert and --tls-key serve HTTPS")
  func https() throws {
    let cli = try CLI(initialize: false)
    let openssl = SpawnedProcess()
    openssl.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
    openssl.arguments = [
      "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", cli.path + "/key.pem", "-out",
      cli.path + "/cert.pem", "-days", "1", "-subj", "/CN=localhost",
    ]
    openssl.standardError = FileHandle.nullDevice
    openssl.standardOutput = FileHandle.nullDevice
    try openssl.run()
    openssl.waitUntilExit()
    #expect(openssl.terminationStatus == 0)
    try cli.fails(["serve", "--tls-cert", cli.path + "/cert.pem"], status: 64, "go together")
    let (server, url) = try start(
      cli, ["--tls-cert", cli.path + "/cert.pem", "--tls-key", cli.path + "/key.pem"])
    defer { server.kill() }
    #expect(url.hasPrefix("https://"))
    let welcome = try curl(["-k", url])
    #expect(welcome.status == 200)
    #expect(welcome.body.contains("Welcome"))
    #expect(try curl([url.replacingOccurrences(of: "https", with: "http")]).status != 200)
  }
}
