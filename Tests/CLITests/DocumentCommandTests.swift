import Foundation
import Testing

@Suite struct DocumentCommandTests {
  @Test("init creates the database once; commands on an unknown database fail")
  func initAndUnknownDatabase() throws {
    let cli = try CLI(initialize: false)
    try cli.fails(["get", "x"], "no database 'wiki'")
    let first = try cli.ok(["init"])
    #expect(first.stdout.contains("created database 'wiki'"))
    #expect(try cli.ok(["init"]).stdout.contains("already exists"))
    try cli.fails(["-d", "other", "get", "x"], "no database 'other'")
    try cli.fails(["get", "x", "-d", "Bad Name"], "Only lowercase")
    try cli.ok(["init", "-d", "other"])
    try cli.fails(["-d", "other", "get", "x"], "not_found")
  }

  @Test("put, get, update and delete a document; wrong revisions and bad JSON write nothing")
  func putGetDelete() throws {
    let cli = try CLI()
    let r1 = try cli.put(#"{"_id":"a","n":1}"#, ["--actor", "ann"])
    #expect(r1.hasPrefix("1-"))
    let doc = try cli.ok(["get", "a"]).object()
    #expect(doc["_id"] as? String == "a" && doc["_rev"] as? String == r1 && doc["n"] as? Int == 1)

    // From stdin, with --rev.
    let r2 = try #require(
      try cli.ok(["put", "--id", "a", "--rev", r1], stdin: #"{"n":2}"#).object()["rev"] as? String)
    #expect(r2.hasPrefix("2-"))

    let events = try cli.eventCount()
    try cli.fails(["put", #"{"_id":"a","_rev":"\#(r1)","n":3}"#], "conflict")
    try cli.fails(["put", #"{"_id":"a","n":3}"#], "conflict")
    try cli.fails(["put", #"{"_id":"a","#], "malformed JSON document: unexpected end of input")
    try cli.fails(["put"], stdin: "[1,2]", "expected a JSON object document")
    try cli.fails(["put", #"{"_id":"a","_rev":"bogus"}"#], "Invalid rev format")
    try cli.fails(["delete", "a", "--rev", r1], "conflict")
    try cli.fails(["delete", "nope", "--rev", r1], "conflict")
    #expect(try cli.eventCount() == events)

    try cli.fails(["get", "nope"], "not_found: document 'nope' is missing")
    try cli.fails(["get", "a", "--rev", "7-abc"], "not_found")
    try cli.fails(["get", "a", "--rev", "x"], "Invalid rev format")

    let old = try cli.ok(["get", "a", "--rev", r1, "--revs"]).object()
    #expect(old["n"] as? Int == 1)
    let revs = try #require(old["_revisions"] as? [String: Any])
    #expect(revs["start"] as? Int == 1)

    let info = try cli.ok(["get", "a", "--revs-info", "--local-seq"]).object()
    let revsInfo = try #require(info["_revs_info"] as? [[String: Any]])
    #expect(revsInfo.map { $0["rev"] as? String } == [r2, r1])
    #expect(info["_local_seq"] as? Int == 2)

    let deleted = try cli.ok(["delete", "a", "--rev", r2]).object()
    #expect(deleted["ok"] as? Bool == true)
    try cli.fails(["get", "a"], "is deleted")
    let tomb = try cli.ok(["get", "a", "--rev", deleted["rev"] as! String]).object()
    #expect(tomb["_deleted"] as? Bool == true)
  }

  @Test("replicated writes make conflicts that get shows with every option")
  func conflictsAndOpenRevs() throws {
    let cli = try CLI()
    try cli.ok([
      "put", "--new-edits=false", "--origin", "http://peer/db",
      #"{"_id":"c","_rev":"2-bbb","_revisions":{"start":2,"ids":["bbb","aaa"]},"v":"b"}"#,
    ])
    try cli.ok([
      "put", "--new-edits", "false",
      #"{"_id":"c","_rev":"2-ccc","_revisions":{"start":2,"ids":["ccc","aaa"]},"v":"c"}"#,
    ])
    let doc = try cli.ok(["get", "c", "--conflicts"]).object()
    #expect(doc["_rev"] as? String == "2-ccc")
    #expect(doc["_conflicts"] as? [String] == ["2-bbb"])
    let all = try cli.ok(["get", "c", "--open-revs", "all"]).array()
    #expect(all.count == 2)
    let some =
      try cli.ok(["get", "c", "--open-revs", #"["2-bbb","3-zzz"]"#]).array()
      as? [[String: Any]]
    #expect(some?.first?["ok"] != nil)
    #expect(some?.last?["missing"] as? String == "3-zzz")
    let latest = try cli.ok(["get", "c", "--rev", "1-aaa", "--latest"]).object()
    #expect(latest["_rev"] as? String == "2-ccc")
    try cli.fails(["get", "c", "--open-revs", "[1]"], "--open-revs takes")
    try cli.fails(["get", "c", "--open-revs", "[oops"], "malformed JSON")
    try cli.fails(
      ["put", "--new-edits=false", #"{"_id":"c"}"#], "needs the document's _id and _rev")

    // A deleted conflict.
    let r = try cli.ok(["delete", "c", "--rev", "2-bbb"]).object()["rev"] as? String
    let deleted = try cli.ok(["get", "c", "--deleted-conflicts"]).object()
    #expect(deleted["_deleted_conflicts"] as? [String] == [r!])
  }

  @Test("bulk-docs takes CouchDB bodies, new_edits false included, and reports each document")
  func bulkDocs() throws {
    let cli = try CLI()
    let results =
      try cli.ok(
        ["bulk-docs"], stdin: #"{"docs":[{"_id":"a","n":1},{"_id":"b"},{"n":3}]}"#
      ).array() as? [[String: Any]]
    #expect(results?.count == 3)
    #expect(results?.allSatisfy { $0["ok"] as? Bool == true } == true)

    let replicated = try cli.ok(
      ["bulk-docs", "--origin", "http://peer"],
      stdin:
        #"{"new_edits":false,"docs":[{"_id":"r","_rev":"3-c","_revisions":{"start":3,"ids":["c","b","a"]}}]}"#
    ).array()
    #expect(replicated.isEmpty)
    #expect(try cli.ok(["get", "r"]).object()["_rev"] as? String == "3-c")

    let partial = try cli.run(["bulk-docs"], stdin: #"{"docs":[{"_id":"a","n":9},{"_id":"z"}]}"#)
    #expect(partial.status == 2)
    let rows = try partial.array() as? [[String: Any]]
    #expect(rows?.first?["error"] as? String == "conflict")
    #expect(rows?.last?["ok"] as? Bool == true)
    #expect(
      partial.stderr.contains(
        "1 of 2 documents were refused (1 in conflict: give each its current _rev, shown by wikilog get a --db \(cli.path)); the others were written"
      ), "\(partial.stderr)")
    #expect(partial.stderr.split(separator: "\n").count == 1)

    let events = try cli.eventCount()
    try cli.fails(["bulk-docs"], stdin: "{", "malformed JSON")
    try cli.fails(["bulk-docs"], stdin: #"{"documents":[]}"#, #"needs a "docs" array"#)
    try cli.fails(["bulk-docs"], stdin: #"{"docs":[],"new_edits":"no"}"#, "new_edits must be")
    try cli.fails(["bulk-docs"], stdin: "", "got nothing")
    #expect(try cli.eventCount() == events)
  }

  @Test("revs-diff lists missing revisions and possible ancestors")
  func revsDiff() throws {
    let cli = try CLI()
    let rev = try cli.put(#"{"_id":"a"}"#)
    let answer = try cli.ok(["revs-diff"], stdin: #"{"a":["\#(rev)","2-x"],"b":["1-y"]}"#).object()
    let a = try #require(answer["a"] as? [String: Any])
    #expect(a["missing"] as? [String] == ["2-x"])
    #expect(a["possible_ancestors"] as? [String] == [rev])
    #expect((answer["b"] as? [String: Any])?["missing"] as? [String] == ["1-y"])
    try cli.fails(["revs-diff"], stdin: #"{"a":"1-x"}"#, "must be an array of strings")
    try cli.fails(["revs-diff"], stdin: #"{"a":["bad"]}"#, "Invalid rev format")
    try cli.fails(["revs-diff"], stdin: "nope", "malformed JSON")
  }

  @Test("all-docs with ranges, limits, keys and documents")
  func allDocs() throws {
    let cli = try CLI()
    for id in ["a", "b", "c", "d"] { try cli.put(#"{"_id":"\#(id)","x":"\#(id)"}"#) }
    func ids(_ arguments: [String]) throws -> [String] {
      let rows = try #require(
        try cli.ok(["all-docs"] + arguments).object()["rows"] as? [[String: Any]])
      return rows.compactMap { $0["id"] as? String ?? $0["key"] as? String }
    }
    #expect(try ids([]) == ["a", "b", "c", "d"])
    #expect(try ids(["--start-key", "b", "--end-key", "c"]) == ["b", "c"])
    #expect(try ids(["--start-key", "b", "--end-key", "c", "--inclusive-end", "false"]) == ["b"])
    #expect(try ids(["--descending", "--limit", "2"]) == ["d", "c"])
    #expect(try ids(["--skip", "3"]) == ["d"])
    #expect(try ids(["--keys", #"["c","zz"]"#]) == ["c", "zz"])
    let rows = try cli.ok(["all-docs", "--include-docs", "--limit", "1"]).object()
    #expect(rows["total_rows"] as? Int == 4)
    let first = try #require((rows["rows"] as? [[String: Any]])?.first)
    #expect((first["doc"] as? [String: Any])?["x"] as? String == "a")
    try cli.fails(["all-docs", "--keys", "c"], "malformed JSON")
    try cli.fails(["all-docs", "--limit=-1"], status: 64, "--limit must be 0 or more")
  }

  @Test("local documents and the revs limit")
  func localAndConfig() throws {
    let cli = try CLI()
    let put = try cli.ok(["local", "put", "cp", #"{"seq":1}"#]).object()
    #expect(put["rev"] as? String == "0-1")
    try cli.ok(["local", "put", "_local/cp"], stdin: #"{"_rev":"0-1","seq":2}"#)
    let doc = try cli.ok(["local", "get", "cp"]).object()
    #expect(doc["seq"] as? Int == 2 && doc["_rev"] as? String == "0-2")
    #expect(try cli.ok(["get", "_local/cp"]).object()["seq"] as? Int == 2)
    #expect(
      try cli.ok(["put", #"{"_id":"_local/cp","_rev":"0-2","seq":3}"#]).object()["rev"] as? String
        == "0-3")
    #expect(
      try cli.ok(["delete", "_local/cp", "--rev", "0-3"]).object()["rev"] as? String == "0-0")
    try cli.ok(["local", "put", "cp", #"{"seq":1}"#])
    try cli.ok(["local", "put", "cp", #"{"_rev":"0-1","seq":2}"#])
    // As in CouchDB 3, the last write wins: the new revision is the named one plus one.
    #expect(
      try cli.ok(["local", "put", "cp", #"{"_rev":"0-1"}"#]).object()["rev"] as? String == "0-2")
    try cli.fails(["local", "put", "cp", #"{"_rev":"1-abc"}"#], "Invalid rev format")
    try cli.ok(["local", "delete", "cp", "--rev", "0-1"])
    try cli.fails(["local", "get", "cp"], "not_found")
    try cli.fails(["local", "delete", "cp"], "not_found")

    #expect(try cli.ok(["config", "revs-limit"]).stdout == "1000\n")
    #expect(try cli.ok(["config", "revs-limit", "5"]).stdout == "5\n")
    #expect(try cli.ok(["config", "revs-limit"]).stdout == "5\n")
    try cli.fails(["config", "revs-limit", "0"], status: 64, "at least 1")
    try cli.fails(["config", "revs-limit", "many"], status: 64, "many")
  }

  @Test("usage errors are one line with status 64; --help works on every command")
  func usageAndHelp() throws {
    let cli = try CLI()
    try cli.fails(["get"], status: 64, "Missing expected argument")
    try cli.fails(["frobnicate"], status: 64, "Unexpected argument")
    try cli.fails(["tail", "--nope"], status: 64, "Unknown option")
    let commands: [[String]] = [
      [], ["init"], ["put"], ["get"], ["delete"], ["bulk-docs"], ["revs-diff"], ["all-docs"],
      ["local"], ["local", "get"], ["local", "put"], ["local", "delete"], ["config"],
      ["config", "revs-limit"], ["tail"], ["history"], ["audit"], ["verify"], ["stats"],
      ["rebuild"], ["wiki"], ["wiki", "create"], ["wiki", "list"], ["wiki", "pages"],
      ["wiki", "show"], ["wiki", "edit"], ["wiki", "backlinks"], ["wiki", "conflicts"],
      ["import"], ["export"], ["log"], ["log", "tail"],
    ]
    for command in commands {
      let r = try cli.run(command + ["--help"])
      #expect(r.status == 0, "\(command)")
      #expect(r.stdout.contains("Example"), "no example in the help of \(command)")
    }
  }
}
