import Foundation
import Testing

@Suite struct ImportExportTests {
  /// Documents with edits, a replicated conflict with unknown ancestors, a deleted conflict, a
  /// deletion, a stemmed tree and a tree longer than the revs limit set later.
  func fixture() throws -> CLI {
    let cli = try CLI()
    try cli.ok(["wiki", "create", "Home wiki", "--id", "w1", "--actor", "ann"])
    var rev = try cli.put(
      #"{"_id":"w1:Home","type":"page","wiki_id":"w1","markdown":"v1"}"#, ["--actor", "ann"])
    for n in 2...3 {
      rev = try cli.put(
        #"{"_id":"w1:Home","_rev":"\#(rev)","type":"page","wiki_id":"w1","markdown":"v\#(n)"}"#)
    }
    try cli.ok([
      "put", "--new-edits=false",
      #"{"_id":"w1:Home","_rev":"4-fff","_revisions":{"start":4,"ids":["fff","eee","\#(rev.dropFirst(2))"]},"type":"page","wiki_id":"w1","markdown":"far"}"#,
    ])
    try cli.ok([
      "put", "--new-edits=false",
      #"{"_id":"w1:Home","_rev":"5-zzz","_revisions":{"start":5,"ids":["zzz","yyy","xxx"]},"markdown":"disjoint"}"#,
    ])
    let loser = try cli.put(
      #"{"_id":"w1:Home","_rev":"\#(rev)","type":"page","wiki_id":"w1","markdown":"v4"}"#)
    try cli.ok(["delete", "w1:Home", "--rev", loser])
    let gone = try cli.put(#"{"_id":"gone","a":1}"#)
    try cli.ok(["delete", "gone", "--rev", gone])
    var long = try cli.put(#"{"_id":"long","n":0}"#)
    for n in 1...5 { long = try cli.put(#"{"_id":"long","_rev":"\#(long)","n":\#(n)}"#) }
    try cli.ok(["config", "revs-limit", "3"])
    var stemmed = try cli.put(#"{"_id":"stemmed","n":0}"#)
    for n in 1...5 { stemmed = try cli.put(#"{"_id":"stemmed","_rev":"\#(stemmed)","n":\#(n)}"#) }
    return cli
  }

  func state(_ cli: CLI, _ database: String, _ id: String) throws -> String {
    try cli.ok([
      "-d", database, "get", id, "--open-revs", "all", "--revs", "--conflicts",
      "--deleted-conflicts",
    ]).stdout
      + cli.ok(["-d", database, "get", id, "--conflicts", "--deleted-conflicts", "--revs-info"])
      .stdout
  }

  @Test("export then import rebuilds the same trees, winners, conflicts and bodies")
  func roundTrip() throws {
    let cli = try fixture()
    let export = try cli.ok(["export"]).lines
    #expect(export.count == 6)
    let header = try #require(
      try JSONSerialization.jsonObject(with: Data(export[0].utf8)) as? [String: Any])
    #expect(header["wikilog_export"] as? Int == 1 && header["revs_limit"] as? Int == 3)
    let home = try #require(
      try JSONSerialization.jsonObject(with: Data(export[5].utf8)) as? [String: Any])
    #expect(home["id"] as? String == "w1:Home")
    #expect((home["revisions"] as? [Any])?.count == 7)

    try cli.ok(["init", "-d", "copy"])
    let imported = try cli.ok(
      ["import", "-d", "copy", "--json", "--batch-size", "3"], stdin: export.joined(separator: "\n")
    ).object()
    #expect(imported["documents"] as? Int == 5)
    #expect(imported["revisions"] as? Int == 1 + 7 + 2 + 6 + 3)
    let again = try cli.ok(["-d", "copy", "export"]).lines
    #expect(Array(again.dropFirst()) == Array(export.dropFirst()))
    for id in ["w1", "w1:Home", "long", "stemmed"] {
      #expect(try state(cli, "copy", id) == state(cli, "wiki", id))
    }
    try cli.fails(["-d", "copy", "get", "gone"], "deleted")
    #expect(try cli.ok(["-d", "copy", "config", "revs-limit"]).stdout == "3\n")
    #expect(try cli.ok(["-d", "copy", "verify", "--json"]).object()["ok"] as? Bool == true)
    let history = try cli.ok(["-d", "copy", "tail", "--history", "--doc-id", "long"]).rows()
    #expect(history.count == 6)
    #expect(history.first?["actor"] as? String == "tester")

    // Importing it again adds nothing; into a database whose limit is lower, paths survive.
    let twice = try cli.ok(
      ["import", "-d", "copy", "--json"], stdin: export.joined(separator: "\n")
    ).object()
    #expect(twice["events"] as? Int == 0)
    try cli.ok(["init", "-d", "low"])
    try cli.ok(["-d", "low", "config", "revs-limit", "2"])
    try cli.ok(["import", "-d", "low"], stdin: export.joined(separator: "\n"))
    #expect(try state(cli, "low", "long") == state(cli, "wiki", "long"))
    #expect(try cli.ok(["-d", "low", "config", "revs-limit"]).stdout == "3\n")
  }

  @Test("bad input is refused with its line and nothing is imported")
  func badInput() throws {
    let cli = try CLI()
    let good = #"{"id":"a","revisions":[{"_id":"a","_rev":"1-x"}]}"#
    try cli.fails(["import"], stdin: good + "\n{oops", "line 2: malformed JSON")
    try cli.fails(
      ["import"], stdin: good + "\n" + #"{"id":"b","revisions":[{"_id":"b"}]}"#,
      "line 2, revision 1: new_edits=false requires _rev")
    try cli.fails(
      ["import"], stdin: #"{"id":"b","revisions":[{"_id":"c","_rev":"1-x"}]}"#,
      "a revision of 'c' in the line of 'b'")
    try cli.fails(["import"], stdin: #"{"_id":"_bad","_rev":"1-x"}"#, "Only reserved document ids")
    try cli.fails(["import"], stdin: #"{"wikilog_export":7}"#, "unsupported export header")
    try cli.fails(["import"], stdin: "[1,2]", "expected a wikilog export")
    try cli.fails(["import", "/nonexistent/file"], "cannot read /nonexistent/file")
    #expect(try cli.eventCount() == 0)
  }

  @Test("a CouchDB _all_docs?include_docs=true dump and NDJSON of documents import")
  func couchDBDump() throws {
    let cli = try CLI()
    let dump = """
      {"total_rows":3,"offset":0,"rows":[
      {"id":"a","key":"a","value":{"rev":"2-abc"},"doc":{"_id":"a","_rev":"2-abc","n":1}},
      {"id":"b","key":"b","value":{"rev":"1-def"},"doc":{"_id":"b","_rev":"1-def","_conflicts":["1-aaa"],"n":2}},
      {"key":"c","error":"not_found"}
      ]}
      """
    let r = try cli.ok(["import", "--origin", "http://couch/db", "--actor", "ops"], stdin: dump)
    #expect(r.stdout.contains("imported 2 documents, 2 revisions (2 new)"))
    #expect(try cli.ok(["get", "a"]).object()["_rev"] as? String == "2-abc")
    let history = try cli.ok(["history", "a", "--json"]).array() as? [[String: Any]]
    #expect(history?.first?["origin"] as? String == "http://couch/db")
    #expect(history?.first?["actor"] as? String == "ops")

    let ndjson =
      #"{"_id":"c","_rev":"3-c","_revisions":{"start":3,"ids":["c","b","a"]},"n":3}"# + "\n\n"
    try cli.ok(["import"], stdin: ndjson)
    let info =
      try cli.ok(["get", "c", "--revs-info"]).object()["_revs_info"] as? [[String: String]]
    #expect(info?.map { $0["status"]! } == ["available", "missing", "missing"])
    try cli.fails(
      ["import"], stdin: #"{"rows":[{"doc":{"_id":"x"}}]}"#, "row 1: new_edits=false requires _rev")
  }
}
