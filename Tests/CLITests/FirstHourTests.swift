import Foundation
import TestSupport
import Testing

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// What a new user meets in their first hour: the version, hints that can be pasted as they
/// are, errors that say how to fix them, help that reads well at 80 columns.
@Suite struct FirstHourTests {
  @Test("--version prints the version")
  func version() throws {
    let cli = try CLI(initialize: false)
    let r = try cli.run(["--version"])
    #expect(r.status == 0, "\(r.stderr)")
    #expect(r.stdout.wholeMatch(of: #/wikilog \d+\.\d+\.\d+\n/#) != nil, "\(r.stdout)")
  }

  @Test("a missing database's hint keeps the --db and -d given, and works when pasted")
  func missingDatabaseHint() throws {
    let cli = try CLI(initialize: false)
    let r = try cli.fails(["tail"], "no database 'wiki'")
    #expect(r.stderr.contains("create it with: wikilog init --db \(cli.path) "), "\(r.stderr)")
    #expect(r.stderr.contains("wikilog demo --db \(cli.path))"), "\(r.stderr)")
    let named = try cli.fails(["-d", "team", "log", "tail"], "no database 'team'")
    #expect(named.stderr.contains("wikilog init --db \(cli.path) -d team "), "\(named.stderr)")
    #expect(named.stderr.contains("wikilog demo --db \(cli.path) -d team)"), "\(named.stderr)")
    // The hint, run as given (the CLI helper passes the same --db).
    try cli.ok(["init", "-d", "team"])
    try cli.ok(["log", "tail", "-d", "team"])

    try cli.ok(["init"])
    let wiki = try cli.fails(["wiki", "pages", "nowiki"], "no wiki 'nowiki'")
    #expect(wiki.stderr.contains("wikilog wiki create TITLE --id nowiki --db \(cli.path)"))
    let draft = try cli.fails(
      ["wiki", "draft", "show", "nowiki", "My Page", "--actor", "ann"], "no draft")
    #expect(
      draft.stderr.contains(
        "wikilog wiki draft save nowiki 'My Page' --actor ann --db \(cli.path)"),
      "\(draft.stderr)")
  }

  @Test("malformed JSON reads as what was unexpected where, not as an enum case")
  func jsonErrors() throws {
    let cli = try CLI()
    try cli.fails(["put", "{b"], "malformed JSON document: unexpected 'b' at byte 1")
    try cli.fails(
      ["put", #"{"a":1"#], "malformed JSON document: unexpected end of input at byte 6")
    try cli.fails(
      ["bulk-docs"], stdin: #"{"docs":[}"#,
      "malformed JSON on standard input (a _bulk_docs body): unexpected '}' at byte 9")
    let r = try cli.fails(["all-docs", "--keys", "[x"], "unexpected 'x' at byte 1")
    #expect(!r.stderr.contains("unexpectedByte"))
    #expect(try cli.eventCount() == 0)
  }

  @Test("a revision conflict says what the current revision is and how to pass it")
  func conflicts() throws {
    let cli = try CLI()
    let r1 = try cli.put(#"{"_id":"note","text":"a"}"#)
    // No revision given: the error gives the current one and says to pass it.
    var r = try cli.fails(
      ["put", #"{"_id":"note","text":"b"}"#], "conflict: 'note' already exists")
    #expect(r.stderr.contains("at revision \(r1); to update it, pass --rev \(r1)"), "\(r.stderr)")
    #expect(r.stderr.contains("nothing written"))
    #expect(try cli.eventCount() == 1)
    // Following the advice works.
    let r2 = try cli.put(#"{"_id":"note","text":"b"}"#, ["--rev", r1])
    // A stale revision (as --rev or as _rev): the error names both.
    r = try cli.fails(["put", #"{"_id":"note","text":"c"}"#, "--rev", r1], "conflict")
    #expect(
      r.stderr.contains("'note' is at revision \(r2), not \(r1); to update it, pass --rev \(r2)"))
    r = try cli.fails(["put", #"{"_id":"note","_rev":"\#(r1)","text":"c"}"#], "conflict")
    #expect(r.stderr.contains("is at revision \(r2), not \(r1)"))
    r = try cli.fails(["delete", "note", "--rev", r1], "conflict")
    #expect(r.stderr.contains("to delete it: wikilog delete note --rev \(r2) --db \(cli.path)"))
    #expect(try cli.eventCount() == 2)
    let tombstone = try #require(
      try cli.ok(["delete", "note", "--rev", r2]).object()["rev"] as? String)
    r = try cli.fails(["put", #"{"_id":"note","text":"d"}"#, "--rev", r2], "conflict")
    #expect(
      r.stderr.contains(
        "'note' was deleted, at revision \(tombstone); to write it again, leave out --rev"))
    try cli.put(#"{"_id":"note","text":"d"}"#)
    r = try cli.fails(["put", #"{"_id":"other","text":"d"}"#, "--rev", r1], "conflict")
    #expect(r.stderr.contains("there is no document 'other'"))

    // `_local` documents never conflict (CouchDB 3): the named revision plus one.
    try cli.ok(["local", "put", "cp", #"{"seq":1}"#])
    #expect(
      try cli.ok(["local", "put", "cp", #"{"_rev":"0-7","seq":2}"#]).object()["rev"] as? String
        == "0-8")
  }

  @Test("wiki edit --rev edits that revision, and is refused with the current one when stale")
  func wikiEditRev() throws {
    let cli = try CLI()
    try cli.ok(["wiki", "create", "W", "--id", "w", "--actor", "ann", "--member", "bob"])
    let r1 = try #require(
      try cli.ok(["wiki", "edit", "w", "Soup", "--actor", "ann"], stdin: "one\n").object()["rev"]
        as? String)
    let r2 = try #require(
      try cli.ok(["wiki", "edit", "w", "Soup", "--rev", r1, "--actor", "bob"], stdin: "two\n")
        .object()["rev"] as? String)
    #expect(r2.hasPrefix("2-"))
    let events = try cli.eventCount()
    let r = try cli.fails(
      ["wiki", "edit", "w", "Soup", "--rev", r1, "--actor", "ann"], stdin: "three\n",
      "conflict: 'w:Soup' is at revision \(r2), not \(r1)")
    #expect(r.stderr.contains("wikilog wiki show w Soup --db \(cli.path) and pass --rev \(r2)"))
    #expect(try cli.eventCount() == events)
    #expect(try cli.ok(["wiki", "show", "w", "Soup"]).stdout == "two\n")
    try cli.fails(
      ["wiki", "edit", "w", "New", "--rev", "1-abc"], stdin: "x\n",
      "there is no document 'w:New' (so no revision 1-abc); leave out the revision to create it")
    #expect(try cli.eventCount() == events)
  }

  @Test("log tail --format text shows each event's payload as readable text")
  func logTailText() throws {
    let cli = try CLI()
    try cli.ok(["wiki", "create", "W", "--id", "w", "--member", "bob", "--actor", "ann"])
    try cli.ok(["wiki", "edit", "w", "Soup", "--actor", "ann"], stdin: "# Soup\nhot\n")
    try cli.ok(["wiki", "draft", "save", "w", "Soup", "--actor", "bob"], stdin: "# Soup\ncold\n")
    try cli.ok(["local", "put", "cp", #"{"seq":1}"#])
    try cli.ok(["config", "revs-limit", "7"])
    let rev = try #require(try cli.ok(["get", "w:Soup"]).object()["_rev"] as? String)
    let lines = try cli.ok(["log", "tail", "--format", "text"]).lines
    #expect(lines.count == 5)
    #expect(lines[1].contains(#"  #2  ann  doc.edit  w:Soup  \#(rev)  {"#), "\(lines[1])")
    #expect(lines[1].contains(##""markdown":"# Soup\nhot\n""##), "\(lines[1])")
    #expect(
      lines[2].contains(##"draft.save  _draft/3/bob/w:Soup  base \##(rev)  "# Soup\ncold\n""##))
    #expect(lines[3].hasSuffix(#"local.put  _local/cp  0-1  {"seq":1}"#), "\(lines[3])")
    #expect(lines[4].hasSuffix("db.revs_limit  _db  revs_limit 7"), "\(lines[4])")
    for line in lines {
      #expect(!line.unicodeScalars.contains { $0.value < 0x20 || $0 == "\u{FFFD}" }, "\(line)")
    }
  }

  @Test("audit --help names every kind of row an audit prints")
  func auditHelp() throws {
    let cli = try CLI()
    try cli.ok(["wiki", "create", "W", "--id", "w", "--actor", "ann"])
    let rev = try #require(
      try cli.ok(["wiki", "edit", "w", "A", "--actor", "ann"], stdin: "a\n").object()["rev"]
        as? String)
    try cli.ok(["delete", "w:A", "--rev", rev])
    try cli.ok([
      "put", "--new-edits=false", "--origin", "http://peer/db",
      #"{"_id":"x","_rev":"1-abc","_revisions":{"start":1,"ids":["abc"]}}"#,
    ])
    try cli.ok(["local", "put", "cp", #"{"seq":1}"#])
    try cli.ok(["local", "delete", "cp"])
    try cli.ok(["config", "revs-limit", "9"])
    for (page, command) in [("B", "discard"), ("C", "publish")] {
      try cli.ok(["wiki", "draft", "save", "w", page, "--actor", "ann"], stdin: "b\n")
      try cli.ok(
        ["wiki", "draft", "save", "w", page, "--actor", "ann", "--autosave"], stdin: "c\n")
      try cli.ok(["wiki", "draft", command, "w", page, "--actor", "ann"])
    }
    let rows = try cli.ok(["audit", "--json"]).array() as? [[String: Any]] ?? []
    let types = Set(rows.compactMap { $0["type"] as? String })
    #expect(types.count == 9, "\(types.sorted())")
    let table = try cli.ok(["audit"]).stdout
    #expect(table.contains("doc.edit (deleted)"))
    let help = try cli.run(["audit", "--help"], environment: ["COLUMNS": "1000"]).stdout
    for type in types {
      #expect(help.contains("\n  \(type) "), "audit --help does not explain \(type)")
    }
    #expect(help.contains("(deleted)"))
  }

  @Test("the demo's documents carry the times of the events that wrote them")
  func demoTimes() throws {
    let cli = try CLI(initialize: false)
    try cli.ok(["demo"])
    let ids = ["demo", "demo:Home", "demo:Getting Started", "demo:Ideas", "demo:Replication"]
    for id in ids {
      let history = try cli.ok(["history", id, "--json", "--no-diff"]).array() as? [[String: Any]]
      let entries = try #require(history)
      var created: String?
      for entry in entries {
        let rev = try #require(entry["rev"] as? String)
        let eventTime = try #require(micros(entry["time"] as? String))
        let doc = try cli.ok(["get", id, "--rev", rev]).object()
        let updatedAt = try #require(doc["updated_at"] as? String)
        let updated = try #require(micros(updatedAt))
        // Taken just before the write, in TouchWiki's milliseconds: the event's time to the
        // millisecond it was written in (not minutes or hours before it).
        #expect(updated <= eventTime, "\(id) \(rev): \(updatedAt) after \(entry["time"]!)")
        #expect(eventTime - updated < 1_000_000, "\(id) \(rev): \(updatedAt) vs \(entry["time"]!)")
        if created == nil { created = updatedAt }
        #expect(doc["created_at"] as? String == created, "\(id) \(rev)")
      }
    }
  }

  /// Microseconds since 1970 of an ISO-8601 UTC time with a fraction of 3 or 6 digits.
  func micros(_ text: String?) -> Int64? {
    guard let text, let dot = text.firstIndex(of: "."), text.hasSuffix("Z") else { return nil }
    let formatter = ISO8601DateFormatter()
    guard let seconds = formatter.date(from: String(text[..<dot]) + "Z") else { return nil }
    let digits = text[text.index(after: dot)..<text.index(before: text.endIndex)]
    guard let fraction = Int64(digits.padding(toLength: 6, withPad: "0", startingAt: 0)) else {
      return nil
    }
    return Int64(seconds.timeIntervalSince1970) * 1_000_000 + fraction
  }

  @Test(
    "serve offers no -d, says how to fill an empty directory, reports a port in use in one line, and logs its shutdown"
  )
  func serve() throws {
    let cli = try CLI(initialize: false)
    let help = try cli.ok(["serve", "--help"]).stdout
    #expect(!help.contains("-d,") && !help.contains("--database"), "\(help)")
    try cli.fails(["serve", "-d", "x"], status: 64, "leave out -d")
    try cli.fails(["-d", "x", "serve"], status: 64, "leave out -d")

    let server = try startBackground(cli, ["serve", "--port", "0", "--log-level", "error"])
    #expect(server.waitFor(timeout: 30) { !$0.isEmpty })
    let banner = try #require(server.lines.first)
    let port = try #require(
      banner.firstMatch(of: #/http://127\.0\.0\.1:(\d+)//#).map { String($0.1) })
    #expect(banner.contains("no databases yet"), "\(banner)")
    #expect(banner.contains("wikilog init --db \(cli.path)"), "\(banner)")
    #expect(banner.contains("wikilog demo --db \(cli.path)"), "\(banner)")

    // The version the server reports is the one --version prints.
    let version = try cli.ok(["--version"]).stdout.trimmingCharacters(in: .newlines)
    let root = try #require(get("http://127.0.0.1:\(port)/"))
    let vendor = (root["vendor"] as? [String: Any])?["version"] as? String
    #expect(version == "wikilog \(vendor ?? "?")")

    let taken = try cli.fails(
      ["serve", "--port", port], "127.0.0.1:\(port) is in use; choose another --port")
    #expect(taken.stderr == "wikilog: error: 127.0.0.1:\(port) is in use; choose another --port\n")

    kill(server.process.processIdentifier, SIGTERM)
    #expect(server.waitForExit(timeout: 15))
    #expect(server.process.terminationStatus == 0)
    #expect(
      server.lines.last?.hasPrefix("wikilog: stopped serving \(cli.path)") == true,
      "\(server.lines)")
  }

  @Test("SIGTERM ends the Sync page's event stream with the server, within seconds")
  func syncEventsEndAtShutdown() throws {
    let cli = try CLI()
    let server = try startBackground(cli, ["serve", "--port", "0", "--log-level", "error"])
    #expect(server.waitFor(timeout: 30) { $0.contains { $0.contains("serving") } })
    let port = try #require(
      server.lines.lazy.compactMap { $0.firstMatch(of: #/http://127\.0\.0\.1:(\d+)//#) }.first
    ).1
    // A browser's EventSource on the Sync page (the admin party: no sign-in needed).
    let stream = try ChildProcess(
      "/usr/bin/curl", ["-s", "-N", "http://127.0.0.1:\(port)/_wiki/_sync/_events"])
    #expect(stream.waitFor(timeout: 10) { $0.contains { $0.hasPrefix("data: ") } })
    kill(server.process.processIdentifier, SIGTERM)
    #expect(server.waitForExit(timeout: 10), "the server waited for the stream")
    #expect(stream.waitForExit(timeout: 10))
  }

  /// GET `url` as a JSON object.
  func get(_ url: String) -> [String: Any]? {
    nonisolated(unsafe) var result: [String: Any]?
    let done = DispatchSemaphore(value: 0)
    URLSession.shared.dataTask(with: URL(string: url)!) { data, _, _ in
      result = data.flatMap { try? JSONSerialization.jsonObject(with: $0) as? [String: Any] }
      done.signal()
    }.resume()
    _ = done.wait(timeout: .now() + 10)
    return result
  }
}
