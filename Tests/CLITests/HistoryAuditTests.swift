import Foundation
import Testing

@Suite struct HistoryAuditTests {
  @Test("history shows every revision with author, time, origin and the Markdown diff")
  func history() throws {
    let cli = try CLI()
    try cli.ok(["wiki", "create", "W", "--id", "w1", "--actor", "ann", "--member", "bob"])
    let r1 = try cli.put(
      ##"{"_id":"w1:Home","type":"page","wiki_id":"w1","markdown":"# Home\nhello\n"}"##,
      ["--actor", "ann"])
    let r2 = try cli.put(
      ##"{"_id":"w1:Home","_rev":"\##(r1)","type":"page","wiki_id":"w1","markdown":"# Home\nhello world\n"}"##,
      ["--actor", "bob"])
    try cli.ok(
      [
        "put", "--new-edits=false", "--origin", "http://peer/db",
        ##"{"_id":"w1:Home","_rev":"3-abc","_revisions":{"start":3,"ids":["abc","\##(r2.dropFirst(2))","\##(r1.dropFirst(2))"]},"type":"page","wiki_id":"w1","markdown":"# Home\nhello world\nfrom afar\n"}"##,
      ], environment: ["WIKILOG_ACTOR": "repl"])
    let text = try cli.ok(["history", "w1:Home"]).stdout
    #expect(text.contains("revision \(r1)  (seq 2)"))
    #expect(text.contains("Author:  bob"))
    #expect(text.contains("Origin:  http://peer/db"))
    #expect(text.contains("-hello\n+hello world\n"))
    #expect(text.contains("+from afar\n"))

    let entries = try cli.ok(["history", "w1:Home", "--json"]).array() as? [[String: Any]]
    #expect(entries?.map { $0["actor"] as? String } == ["ann", "bob", "repl"])
    #expect(entries?.map { $0["rev"] as? String } == [r1, r2, "3-abc"])
    #expect(entries?[1]["parent"] as? String == r1)
    #expect(entries?[2]["origin"] as? String == "http://peer/db")
    #expect(entries?[1]["insertions"] as? Int == 1 && entries?[1]["deletions"] as? Int == 1)
    #expect((entries?[0]["time"] as? String)?.hasSuffix("Z") == true)
    let noDiff =
      try cli.ok(["history", "w1:Home", "--json", "--no-diff"]).array() as? [[String: Any]]
    #expect(noDiff?.first?["diff"] == nil)

    try cli.fails(["history", "nope"], "no document 'nope'")
    try cli.fails(["history"], status: 64, "Missing expected argument")
  }

  @Test("audit filters by wiki, user and time range, as a table or JSON")
  func audit() throws {
    let cli = try CLI()
    try cli.put(
      #"{"_id":"w1","type":"wiki","title":"W","owner_id":"ann","members":["bob"]}"#,
      ["--actor", "ann"])
    try cli.put(
      #"{"_id":"w1:Home","type":"page","wiki_id":"w1","markdown":""}"#, ["--actor", "bob"])
    // A replicated page may arrive before its wiki (written by the operator as ann: a page
    // of a wiki that does not exist is refused to ann herself, `--actor ann`).
    try cli.ok(
      [
        "put", "--new-edits=false",
        #"{"_id":"w2:Home","_rev":"1-abc","type":"page","wiki_id":"w2","markdown":""}"#,
      ], environment: ["WIKILOG_ACTOR": "ann"])
    try cli.ok(["local", "put", "cp", "{}", "--actor", "repl"])

    func ids(_ arguments: [String]) throws -> [String] {
      try (cli.ok(["audit", "--json"] + arguments).array() as? [[String: Any]] ?? []).compactMap {
        $0["id"] as? String
      }
    }
    #expect(try ids([]) == ["w1", "w1:Home", "w2:Home", "_local/cp"])
    #expect(try ids(["--user", "ann"]) == ["w1", "w2:Home"])
    #expect(try ids(["--wiki", "w1"]) == ["w1", "w1:Home"])
    #expect(try ids(["--wiki", "w1", "--user", "bob"]) == ["w1:Home"])
    #expect(
      try ids(["--since", "2000-01-01", "--until", "2999-01-01T00:00:00Z", "--limit", "2"]) == [
        "w1", "w1:Home",
      ])
    #expect(try ids(["--since", "2999-01-01"]) == [])
    #expect(try ids(["--until", "2000-01-01"]) == [])

    let entry = try #require(
      (try cli.ok(["audit", "--json", "--limit", "1"]).array()).first as? [String: Any])
    #expect(entry["type"] as? String == "doc.edit" && entry["seq"] as? Int == 1)
    #expect(entry["actor"] as? String == "ann")

    let table = try cli.ok(["audit", "--user", "repl"]).lines
    #expect(table.count == 2)
    #expect(table[0].hasPrefix("TIME"))
    #expect(
      table[1].contains("repl") && table[1].contains("local.put") && table[1].contains("_local/cp"))

    try cli.fails(["audit", "--since", "last week"], status: 64, "--since takes an ISO-8601 time")
    try cli.fails(["audit", "--until", "tomorrow"], status: 64, "--until takes an ISO-8601 time")
  }

  @Test("times printed for events bound audit, tail and log tail exactly, to the microsecond")
  func exactTimes() throws {
    let cli = try CLI()
    for id in ["a", "b", "c"] { try cli.put(#"{"_id":"\#(id)"}"#) }
    let times = try cli.ok(["tail", "--history"]).rows().compactMap { $0["time"] as? String }
    #expect(times.count == 3)
    func audit(_ arguments: [String]) throws -> [String] {
      try (cli.ok(["audit", "--json"] + arguments).array() as? [[String: Any]] ?? []).compactMap {
        $0["id"] as? String
      }
    }
    // Events in the same microsecond are bounded together.
    let atOrAfter = times.indices.filter { times[$0] >= times[1] }.map { ["a", "b", "c"][$0] }
    let atOrBefore = times.indices.filter { times[$0] <= times[1] }.map { ["a", "b", "c"][$0] }
    #expect(try audit(["--since", times[1]]) == atOrAfter)
    #expect(try audit(["--until", times[1]]) == atOrBefore)
    #expect(
      try cli.ok(["tail", "--since", times[1]]).rows().compactMap { $0["id"] as? String }
        == atOrAfter)
    #expect(try cli.ok(["log", "tail", "--since", times[1]]).rows().count == atOrAfter.count)
    try cli.fails(["audit", "--since", "2026-11-21.5"], status: 64, "--since takes an ISO-8601")
  }
}
