import Foundation
import JSON
import TestSupport
import Testing

@Suite struct TailTests {
  /// A wiki with two pages, an edit and a deletion: seq 1 wiki, 2 Home, 3 Ideas, 4 Home v2
  /// (by bob), 5 Ideas deleted, 6 a plain document.
  func fixture() throws -> CLI {
    let cli = try CLI()
    try cli.put(
      #"{"_id":"w1","type":"wiki","title":"Recipes","owner_id":"ann","members":["bob"]}"#,
      ["--actor", "ann"])
    let home = try cli.put(
      ##"{"_id":"w1:Home","type":"page","wiki_id":"w1","markdown":"# Home\nSee [[Ideas]]"}"##,
      ["--actor", "ann"])
    let ideas = try cli.put(
      ##"{"_id":"w1:Ideas","type":"page","wiki_id":"w1","markdown":"# Ideas"}"##,
      ["--actor", "ann"])
    try cli.put(
      ##"{"_id":"w1:Home","_rev":"\##(home)","type":"page","wiki_id":"w1","markdown":"# Home v2"}"##,
      ["--actor", "bob"])
    try cli.ok(["delete", "w1:Ideas", "--rev", ideas, "--actor", "bob"])
    try cli.put(#"{"_id":"note","type":"note","text":"hi"}"#, ["--actor", "carol"])
    return cli
  }

  @Test("the feed is one CouchDB row per document, after --since")
  func mainFeed() throws {
    let cli = try fixture()
    let rows = try cli.ok(["tail"]).rows()
    #expect(rows.map { $0["seq"] as? Int } == [1, 4, 5, 6])
    #expect(rows.map { $0["id"] as? String } == ["w1", "w1:Home", "w1:Ideas", "note"])
    #expect(rows[2]["deleted"] as? Bool == true)
    #expect(rows[0]["deleted"] == nil && rows[0]["actor"] == nil)
    let changes = try #require(rows[1]["changes"] as? [[String: String]])
    #expect(changes.count == 1 && changes[0]["rev"]!.hasPrefix("2-"))

    #expect(try cli.ok(["tail", "--since", "4"]).rows().map { $0["seq"] as? Int } == [5, 6])
    #expect(try cli.ok(["tail", "--since", "now"]).stdout.isEmpty)
    // The largest seq there can be: nothing after it (the position after it overflowed).
    let max = String(UInt64.max)
    #expect(try cli.ok(["tail", "--since", max]).stdout.isEmpty)
    #expect(try cli.ok(["tail", "--since", max, "--history"]).stdout.isEmpty)
    #expect(try cli.ok(["log", "tail", "--since", max]).stdout.isEmpty)
    #expect(try cli.ok(["tail", "--limit", "2"]).rows().count == 2)
    #expect(try cli.ok(["tail", "--limit", "0"]).stdout.isEmpty)
    let past = try cli.ok(["tail", "--since", "2000-01-01T00:00:00Z"]).rows()
    #expect(past.count == 4)
    #expect(try cli.ok(["tail", "--since", "2999-01-01"]).stdout.isEmpty)

    let docs = try cli.ok(["tail", "--include-docs", "--doc-id", "w1:Home"]).rows()
    #expect((docs.first?["doc"] as? [String: Any])?["markdown"] as? String == "# Home v2")
  }

  @Test("filters: wiki, doc ids, type and actor; history rows have actor and time")
  func filtersAndHistory() throws {
    let cli = try fixture()
    func ids(_ arguments: [String]) throws -> [String] {
      try cli.ok(["tail"] + arguments).rows().compactMap { $0["id"] as? String }
    }
    #expect(try ids(["--wiki", "w1"]) == ["w1", "w1:Home", "w1:Ideas"])
    #expect(try ids(["--doc-id", "note", "--doc-id", "w1"]) == ["w1", "note"])
    #expect(try ids(["--type", "note"]) == ["note"])
    #expect(try ids(["--actor", "bob"]) == ["w1:Home", "w1:Ideas"])

    let history = try cli.ok(["tail", "--history"]).rows()
    #expect(history.map { $0["seq"] as? Int } == [1, 2, 3, 4, 5, 6])
    #expect(history.map { $0["actor"] as? String } == ["ann", "ann", "ann", "bob", "bob", "carol"])
    #expect(history.allSatisfy { ($0["time"] as? String)?.hasSuffix("Z") == true })
    #expect(try ids(["--history", "--doc-id", "w1:Home"]) == ["w1:Home", "w1:Home"])
    #expect(try ids(["--history", "--type", "page", "--actor", "ann"]) == ["w1:Home", "w1:Ideas"])
    #expect(try ids(["--history", "--since", "3", "--limit", "1"]) == ["w1:Home"])
  }

  @Test("style all_docs lists conflicting leaves; text format is for people")
  func styleAndText() throws {
    let cli = try CLI()
    for leaf in ["bbb", "ccc"] {
      // Pages of a wiki that does not exist, written by the operator as repl.
      try cli.ok(
        [
          "put", "--new-edits=false",
          ##"{"_id":"w:c","_rev":"2-\##(leaf)","_revisions":{"start":2,"ids":["\##(leaf)","aaa"]},"type":"page","wiki_id":"w","markdown":"# \##(leaf)\nmore"}"##,
        ], environment: ["WIKILOG_ACTOR": "repl"])
    }
    let main = try cli.ok(["tail"]).rows()
    #expect((main.first?["changes"] as? [[String: String]])?.count == 1)
    let all = try cli.ok(["tail", "--style", "all_docs"]).rows()
    #expect(
      (all.first?["changes"] as? [[String: String]])?.map { $0["rev"]! } == ["2-ccc", "2-bbb"])
    let docs = try cli.ok(["tail", "--include-docs", "--conflicts"]).rows()
    #expect((docs.first?["doc"] as? [String: Any])?["_conflicts"] as? [String] == ["2-bbb"])

    let text = try cli.ok(["tail", "--format", "text", "--style", "all_docs"]).lines
    #expect(text.count == 1)
    // Each line shows its seq (#N), which --since and replay --as-of take.
    #expect(text.first?.contains("Z  #2  repl  w:c  2-ccc (+1 leaves)  page: # ccc") == true)
    let historyText = try cli.ok(["tail", "--history", "--format", "text"]).lines
    #expect(historyText.count == 2)
    #expect(historyText.first?.contains("Z  #1  repl  w:c  2-bbb  page: # bbb") == true)
    #expect(historyText.last?.contains("Z  #2  repl  w:c  2-ccc  page: # ccc") == true)
  }

  @Test("ids and revisions that need escaping come out as valid JSON")
  func escaping() throws {
    let cli = try CLI()
    let id = "we\"ird\\ \n\t\u{01} é ✓"
    let json = try JSONSerialization.data(withJSONObject: ["_id": id, "markdown": "a\nb"])
    try cli.ok(["put", String(decoding: json, as: UTF8.self)])
    let rows = try cli.ok(["tail", "--include-docs"]).rows()
    #expect(rows.first?["id"] as? String == id)
    #expect((rows.first?["doc"] as? [String: Any])?["_id"] as? String == id)
    let history = try cli.ok(["tail", "--history"]).rows()
    #expect(history.first?["id"] as? String == id)
  }

  @Test("bad --since, --limit and --style are usage errors")
  func badOptions() throws {
    let cli = try CLI()
    try cli.fails(["tail", "--since", "yesterday"], status: 64, "--since takes 0, now")
    try cli.fails(["tail", "--since=-3"], status: 64, "got '-3'")
    try cli.fails(["tail", "--limit=-1"], status: 64, "--limit must be 0 or more")
    try cli.fails(["tail", "--style", "fancy"], status: 64, "fancy")
    try cli.fails(["tail", "--format", "xml"], status: 64, "xml")
  }

  @Test("tail --follow sees another process's write within a second and stops on SIGINT")
  func followAndInterrupt() throws {
    let cli = try CLI()
    try cli.put(#"{"_id":"first"}"#)
    let tail = try startBackground(cli, ["tail", "--follow"])
    #expect(tail.waitFor(timeout: 10) { $0.count == 1 })
    try cli.put(#"{"_id":"second"}"#, ["--actor", "bob"])
    let written = Date()
    #expect(tail.waitFor(timeout: 1) { $0.count == 2 })
    #expect(Date().timeIntervalSince(written) < 1)
    #expect(tail.lines.last?.contains(#""id":"second""#) == true)
    kill(tail.process.processIdentifier, SIGINT)
    #expect(tail.waitForExit(timeout: 5))
    #expect(tail.process.terminationReason == .exit)
    #expect(tail.process.terminationStatus == 0)
  }

  @Test("tail --follow ends cleanly on SIGTERM, and when the reader closes the pipe")
  func followEndsWithItsReader() throws {
    let cli = try CLI()
    try cli.put(#"{"_id":"first"}"#)
    let terminated = try startBackground(
      cli, ["tail", "--follow", "--history", "--format", "text"])
    #expect(terminated.waitFor(timeout: 10) { $0.count == 1 })
    kill(terminated.process.processIdentifier, SIGTERM)
    #expect(terminated.waitForExit(timeout: 5))
    #expect(terminated.process.terminationStatus == 0)

    let piped = try startBackground(cli, ["tail", "--follow"])
    #expect(piped.waitFor(timeout: 10) { $0.count == 1 })
    piped.output.fileHandleForReading.readabilityHandler = nil
    try piped.output.fileHandleForReading.close()
    #expect(piped.waitForExit(timeout: 5))
    #expect(piped.process.terminationReason == .exit)
    #expect(piped.process.terminationStatus == 0)
  }

  @Test("tail --follow with filters and a limit stops after the limit")
  func followWithLimit() throws {
    let cli = try CLI()
    let tail = try startBackground(
      cli, ["tail", "--follow", "--since", "0", "--actor", "bob", "--limit", "2"])
    try cli.put(#"{"_id":"a"}"#, ["--actor", "ann"])
    try cli.put(#"{"_id":"b"}"#, ["--actor", "bob"])
    try cli.put(#"{"_id":"c"}"#, ["--actor", "bob"])
    #expect(tail.waitForExit(timeout: 10))
    #expect(tail.process.terminationStatus == 0)
    #expect(tail.lines.count == 2)
    #expect(tail.lines.allSatisfy { !$0.contains(#""id":"a""#) })
  }
}
