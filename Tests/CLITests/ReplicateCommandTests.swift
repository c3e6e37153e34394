import Foundation
import TestSupport
import Testing

/// `wikilog replicate` between local databases and `wikilog serve` processes.
@Suite struct ReplicateCommandTests {
  /// `count` notes written with `bulk-docs` (one call).
  static func fill(_ cli: CLI, count: Int, prefix: String = "note", database: String = "wiki")
    throws
  {
    let docs = (0..<count).map { #"{"_id":"\#(prefix)-\#($0)","text":"note \#($0)"}"# }
    try cli.ok(
      ["bulk-docs", "-d", database, "--actor", "alice"],
      stdin: #"{"docs":[\#(docs.joined(separator: ","))]}"#)
  }

  /// A database's `doc_count` as the server reports it.
  static func docCount(_ url: String) throws -> Int? {
    let r = try curl([url])
    let object = try JSONSerialization.jsonObject(with: Data(r.body.utf8)) as? [String: Any]
    return object?["doc_count"] as? Int
  }

  @Test("local to a server (--create-target, --json) and back into another local database")
  func localToServerAndBack() throws {
    let cli = try CLI()
    try Self.fill(cli, count: 300)
    try cli.ok(["put", #"{"_id":"a/b +%c ü","text":"odd id"}"#, "--actor", "alice"])
    let remote = try CLI(initialize: false)
    try FileManager.default.createDirectory(atPath: remote.path, withIntermediateDirectories: true)
    let (server, base) = try ChildProcess.serve(remote.path)
    defer { server.kill() }

    try cli.fails(["replicate", "wiki", base + "/copy"], "not_found")
    let run = try cli.ok(["replicate", "wiki", base + "/copy", "--create-target", "--json"])
    let events = try run.rows()
    let done = try #require(events.last)
    #expect(done["event"] as? String == "done")
    #expect(done["docs_written"] as? Int == 301)
    #expect(done["doc_write_failures"] as? Int == 0)
    #expect(events.contains { $0["state"] as? String == "running" })
    #expect(try Self.docCount(base + "/copy") == 301)

    // Back from the server into a new local database, then nothing more to do.
    let back = try cli.ok(["replicate", base + "/copy", "mirror", "--create-target", "--json"])
    #expect(try back.rows().last?["docs_written"] as? Int == 301)
    #expect(try cli.ok(["get", "-d", "mirror", "a/b +%c ü"]).stdout.contains("odd id"))
    let again = try cli.ok(["replicate", "wiki", base + "/copy", "--json"])
    #expect(try again.rows().last?["docs_read"] as? Int == 0)

    // --doc-ids and --since.
    let some = try cli.ok(
      ["replicate", "wiki", "picked", "--create-target", "--doc-ids", "note-1,note-2", "--json"])
    #expect(try some.rows().last?["docs_written"] as? Int == 2)
  }

  @Test(
    "credentials: --user with --password-stdin, never echoed; a wrong password fails in one line")
  func credentials() throws {
    let remote = try CLI()
    var environment = CLI.environment
    environment["WIKILOG_ADMIN_PASSWORD"] = "s3cret-pw"
    let server = try ChildProcess(
      wikilogPath,
      ["--db", remote.path, "serve", "--port", "0", "--log-level", "error", "--admin", "root"],
      environment: environment)
    defer { server.kill() }
    #expect(server.waitFor(timeout: 60) { $0.contains { $0.contains("serving") } })
    let banner = try #require(server.lines.first { $0.contains("serving") })
    let base = try #require(banner.firstMatch(of: #/http://127\.0\.0\.1:\d+/#).map { String($0.0) })

    let cli = try CLI()
    try Self.fill(cli, count: 20)
    let anonymous = try cli.run(["replicate", "wiki", base + "/wiki"])
    #expect(anonymous.status == 1)
    #expect(anonymous.stderr.contains("401"))
    let ok = try cli.run(
      ["replicate", "wiki", base + "/wiki", "--user", "root", "--password-stdin"],
      stdin: "s3cret-pw\n")
    #expect(ok.status == 0, "\(ok.stderr)")
    #expect(!(ok.stdout + ok.stderr).contains("s3cret-pw"))
    #expect(ok.stderr.contains("20 written"))
    // In the URL, and wrong.
    let wrong = try cli.run([
      "replicate", base.replacingOccurrences(of: "://", with: "://root:nope@") + "/wiki", "copy",
      "--create-target",
    ])
    #expect(wrong.status == 1)
    #expect(wrong.stderr.hasPrefix("wikilog: error: replication failed"))
    #expect(!wrong.stderr.contains("nope"))
  }

  @Test(
    "SIGKILL mid-replication, then the next run resumes from the checkpoint and writes nothing twice"
  )
  func killAndResume() throws {
    let cli = try CLI()
    for part in 0..<4 { try Self.fill(cli, count: 2_500, prefix: "n\(part)") }
    let remote = try CLI()
    let (server, base) = try ChildProcess.serve(remote.path)
    defer { server.kill() }
    let first = try startBackground(
      cli,
      [
        "replicate", "wiki", base + "/wiki", "--batch-size", "100", "--checkpoint-interval", "0",
        "--json",
      ])
    // Killed once at least two checkpoints were written.
    #expect(
      first.waitFor(timeout: 60) { lines in
        lines.filter { $0.contains("\"checkpointed_source_seq\"") && $0.contains("\"running\"") }
          .count > 3
      })
    first.kill()
    let present = try #require(try Self.docCount(base + "/wiki"))
    #expect(present > 0 && present < 10_000)

    let second = try cli.ok(["replicate", "wiki", base + "/wiki", "--batch-size", "500", "--json"])
    let done = try #require(try second.rows().last)
    let startSeq = done["start_seq"] as? Int ?? 0
    #expect(startSeq > 0)  // resumed from the checkpoint
    // What the target had is not written again: at most the one batch in flight at the kill.
    let written = try #require(done["docs_written"] as? Int)
    #expect(written == 10_000 - present)
    #expect((done["docs_read"] as? Int ?? 0) <= 10_000 - startSeq)
    #expect(try Self.docCount(base + "/wiki") == 10_000)
  }

  @Test("continuous: a target restarted under the job gets what was written meanwhile")
  func continuousTargetRestart() throws {
    let cli = try CLI()
    try Self.fill(cli, count: 50)
    let remote = try CLI()
    var (server, base) = try ChildProcess.serve(remote.path)
    defer { server.kill() }
    let job = try startBackground(
      cli, ["replicate", "wiki", base + "/wiki", "--continuous", "--json"])
    defer { job.kill() }
    #expect(job.waitFor(timeout: 30) { $0.contains { $0.contains("\"idle\"") } })
    #expect(try Self.docCount(base + "/wiki") == 50)

    server.kill()
    try Self.fill(cli, count: 30, prefix: "during")
    #expect(job.waitFor(timeout: 30) { $0.contains { $0.contains("\"offline\"") } })
    // --status shows it offline, with the error and the next retry.
    var shown: [String: Any]?
    for _ in 0..<100 {
      shown = try cli.ok(["replicate", "--status", "--json"]).rows().first
      if shown?["state"] as? String == "offline" { break }
      usleep(50_000)
    }
    #expect(shown?["state"] as? String == "offline")
    #expect(shown?["last_error"] is String)
    #expect(shown?["retry_at"] is String)
    let port = try #require(base.split(separator: ":").last.map(String.init))
    server = try ChildProcess(
      wikilogPath, ["--db", remote.path, "serve", "--port", port, "--log-level", "error"],
      environment: CLI.environment)
    #expect(server.waitFor(timeout: 60) { $0.contains { $0.contains("serving") } })
    var count: Int?
    for _ in 0..<300 {
      count = try? Self.docCount(base + "/wiki")
      if count == 80 { break }
      usleep(50_000)
    }
    #expect(count == 80)
    // A live edit arrives too.
    try cli.ok(["put", #"{"_id":"live","text":"x"}"#, "--actor", "alice"])
    var arrived = false
    for _ in 0..<600 where !arrived {
      arrived = (try? curl([base + "/wiki/live"]).status) == 200
      if !arrived { usleep(50_000) }
    }
    #expect(arrived, "\(job.lines.suffix(5))")
    job.kill()
    let table = try cli.ok(["replicate", "--status"]).stdout
    #expect(table.contains("stopped"))
    #expect(table.contains("wiki -> " + base + "/wiki"))
  }

  @Test("usage errors and a refused document (exit status 2)")
  func usageAndPartial() throws {
    let cli = try CLI()
    try cli.fails(
      ["replicate", "wiki", "x", "--doc-ids", "a", "--wiki", "w1"], status: 64, "one of")
    try cli.fails(["replicate", "ftp://h/db", "x"], "not an http(s) URL")
    try cli.fails(["replicate", "nope", "x"], "not_found")

    // bob may write a wiki of his own, not a design document (administrators only).
    let remote = try CLI()
    var environment = CLI.environment
    environment["WIKILOG_ADMIN_PASSWORD"] = "rootpw"
    try remote.ok(["user", "add", "bob", "--password-stdin"], stdin: "bobpw\n")
    let server = try ChildProcess(
      wikilogPath,
      ["--db", remote.path, "serve", "--port", "0", "--log-level", "error", "--admin", "root"],
      environment: environment)
    defer { server.kill() }
    #expect(server.waitFor(timeout: 60) { $0.contains { $0.contains("serving") } })
    let banner = try #require(server.lines.first { $0.contains("serving") })
    let base = try #require(banner.firstMatch(of: #/http://127\.0\.0\.1:\d+/#).map { String($0.0) })
    try cli.ok(["wiki", "create", "Bobs", "--id", "wb", "--actor", "bob"])
    try cli.ok(["put", #"{"_id":"_design/x","views":{}}"#, "--actor", "alice"])
    let r = try cli.run(
      ["replicate", "wiki", base + "/wiki", "--user", "bob", "--password-stdin"], stdin: "bobpw\n")
    #expect(r.status == 2, "\(r.stderr)")
    #expect(r.stderr.contains("1 written, 1 refused"))
    #expect(r.stderr.contains("_design/x"))
  }

  @Test("local to local: a conflict that arrives is kept and listed by wiki conflicts")
  func conflictsArrive() throws {
    let cli = try CLI()
    try cli.ok(["wiki", "create", "W", "--id", "w", "--actor", "alice", "--member", "bob"])
    try cli.ok(["wiki", "edit", "w", "Soup", "--actor", "alice"], stdin: "# Soup\nonions\n")
    try cli.ok(["replicate", "wiki", "other", "--create-target"])
    try cli.ok(["wiki", "edit", "w", "Soup", "--actor", "alice"], stdin: "# Soup\nred onions\n")
    try cli.ok(
      ["wiki", "edit", "-d", "other", "w", "Soup", "--actor", "bob"], stdin: "# Soup\nleeks\n")
    #expect(try cli.ok(["wiki", "conflicts", "w"]).stdout.contains("no page"))
    try cli.ok(["replicate", "other", "wiki"])
    let listed = try cli.ok(["wiki", "conflicts", "w", "--json"]).array()
    let row = try #require(listed.first as? [String: Any])
    #expect(row["id"] as? String == "w:Soup")
    #expect((row["conflicts"] as? [String])?.count == 1)
    // Both sides end with the same winner once replicated back.
    try cli.ok(["replicate", "wiki", "other"])
    let here = try cli.ok(["get", "w:Soup"]).object()["_rev"] as? String
    let there = try cli.ok(["get", "-d", "other", "w:Soup"]).object()["_rev"] as? String
    #expect(here != nil && here == there)

    // --wiki: the wiki and its pages only; --selector: what matches.
    try cli.ok(["put", #"{"_id":"note","kind":"loose"}"#, "--actor", "alice"])
    let onlyWiki = try cli.ok([
      "replicate", "wiki", "w-only", "--create-target", "--wiki", "w", "--json",
    ])
    #expect(try onlyWiki.rows().last?["docs_written"] as? Int == 3)  // w and both leaves of w:Soup
    #expect(try cli.run(["get", "-d", "w-only", "note"]).status == 1)
    let selected = try cli.ok(
      [
        "replicate", "wiki", "loose", "--create-target", "--selector", #"{"kind":"loose"}"#,
        "--json",
      ])
    #expect(try selected.rows().last?["docs_written"] as? Int == 1)
  }
}
