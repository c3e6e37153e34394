import Foundation
import TestSupport
import Testing

/// `wikilog replicate` between two `wikilog serve`s with users, of a wiki edited after its
/// pages (the feed gives the pages first).
@Suite struct OutOfOrderReplicateTests {
  /// A data directory with an administrator `root` and `users` (password `pw-NAME`), served.
  static func server(_ cli: CLI, users: [String]) throws -> (ChildProcess, String) {
    for user in users {
      try cli.ok(["user", "add", user, "--password-stdin"], stdin: "pw-\(user)\n")
    }
    var environment = CLI.environment
    environment["WIKILOG_ADMIN_PASSWORD"] = "rootpw"
    let server = try ChildProcess(
      wikilogPath,
      ["--db", cli.path, "serve", "--port", "0", "--log-level", "error", "--admin", "root"],
      environment: environment)
    #expect(server.waitFor(timeout: 60) { $0.contains { $0.contains("serving") } })
    let banner = try #require(server.lines.first { $0.contains("serving") })
    let base = try #require(banner.firstMatch(of: #/http://127\.0\.0\.1:\d+/#).map { String($0.0) })
    return (server, base)
  }

  /// `base` with alice's credentials, for `wikilog replicate`.
  static func alice(_ base: String, _ db: String = "wiki") -> String {
    base.replacingOccurrences(of: "http://", with: "http://alice:pw-alice@") + "/" + db
  }

  static func rev(_ cli: CLI, _ id: String) throws -> String {
    let doc = try cli.ok(["get", id]).object()
    return try #require(doc["_rev"] as? String)
  }

  @Test(
    "two serves: a wiki edited after its pages is pushed whole (exit 0, twice) and pulled back; a page its wiki never allows is listed, exit 2, on every run"
  )
  func pushAndPull() throws {
    let a = try CLI()
    let b = try CLI()
    try a.ok(["wiki", "create", "Team", "--id", "t1", "--actor", "alice"])
    for page in ["P1", "P2", "P3"] {
      try a.ok(["wiki", "edit", "t1", page, "--actor", "alice"], stdin: "# \(page)\n")
    }
    try a.ok([
      "put", #"{"_id":"t1","type":"wiki","title":"Team, renamed","owner_id":"alice","members":[]}"#,
      "--rev", try Self.rev(a, "t1"), "--actor", "alice",
    ])
    let (serverA, baseA) = try Self.server(a, users: ["alice"])
    defer { serverA.kill() }
    let (serverB, baseB) = try Self.server(b, users: ["alice", "carol"])
    defer { serverB.kill() }

    let first = try a.run(["replicate", Self.alice(baseA), Self.alice(baseB)])
    #expect(first.status == 0, "\(first.stderr)")
    for id in ["t1", "t1:P1", "t1:P2", "t1:P3"] {
      let got = try curl(["-u", "alice:pw-alice", baseB + "/wiki/" + id])
      #expect(got.status == 200, "\(id): \(got.body)")
    }
    let second = try a.run(["replicate", Self.alice(baseA), Self.alice(baseB), "--json"])
    #expect(second.status == 0, "\(second.stderr)")
    #expect(try second.rows().last?["docs_read"] as? Int == 0)

    // Pulled from B into a database of a third directory: every page.
    let c = try CLI()
    let pull = try c.run(["replicate", Self.alice(baseB), "copy", "--create-target"])
    #expect(pull.status == 0, "\(pull.stderr)")
    for id in ["t1", "t1:P1", "t1:P2", "t1:P3"] {
      #expect(try c.run(["get", "-d", "copy", id]).status == 0, "\(id)")
    }

    // On B, x9 is carol's and does not let alice in: alice's page of her own x9 stays out,
    // listed with the reason on every run.
    try b.ok(["wiki", "create", "Carol's", "--id", "x9", "--actor", "carol"])
    try a.ok(["wiki", "create", "Mine", "--id", "x9", "--actor", "alice"])
    try a.ok(["wiki", "edit", "x9", "Q", "--actor", "alice"], stdin: "q\n")
    for run in 1...2 {
      let r = try a.run(["replicate", Self.alice(baseA), Self.alice(baseB)])
      #expect(r.status == 2, "run \(run): \(r.stderr)")
      #expect(r.stderr.contains("refused: x9:Q: forbidden"), "run \(run): \(r.stderr)")
      #expect(r.stderr.contains("refused: x9: forbidden"), "run \(run): \(r.stderr)")
    }
    #expect(try curl(["-u", "carol:pw-carol", baseB + "/wiki/x9:Q"]).status == 404)
  }

  @Test("a new user's first push into a server where they have nothing yet")
  func firstPush() throws {
    let a = try CLI()
    try a.ok(["wiki", "create", "Dave's", "--id", "d1", "--actor", "dave"])
    try a.ok(["wiki", "edit", "d1", "Home", "--actor", "dave"], stdin: "# Home\n")
    try a.ok([
      "put", #"{"_id":"d1","type":"wiki","title":"Dave's own","owner_id":"dave","members":[]}"#,
      "--rev", try Self.rev(a, "d1"), "--actor", "dave",
    ])
    let b = try CLI()
    let (serverB, baseB) = try Self.server(b, users: ["dave"])
    defer { serverB.kill() }
    let target = baseB.replacingOccurrences(of: "http://", with: "http://dave:pw-dave@") + "/wiki"
    let r = try a.run(["replicate", "wiki", target])
    #expect(r.status == 0, "\(r.stderr)")
    #expect(try curl(["-u", "dave:pw-dave", baseB + "/wiki/d1:Home"]).status == 200)
  }
}
