import Foundation
import Testing

@Suite struct ReplayTests {
  /// seq 1 wiki w, 2 w:P "p1" (ann), 3 w:P "p2" (bob), 4 w:Q, 5 w:Q deleted, 6 note, 7 a losing
  /// replicated conflicting leaf of w:P.
  func fixture() throws -> (cli: CLI, p1: String, p2: String) {
    let cli = try CLI()
    try cli.ok(["wiki", "create", "W", "--id", "w", "--actor", "ann", "--member", "bob"])
    let p1 = try rev(cli.ok(["wiki", "edit", "w", "P", "--actor", "ann"], stdin: "p1\n"))
    let p2 = try rev(cli.ok(["wiki", "edit", "w", "P", "--actor", "bob"], stdin: "p2\n"))
    let q = try rev(cli.ok(["wiki", "edit", "w", "Q", "--actor", "ann"], stdin: "q\n"))
    try cli.ok(["delete", "w:Q", "--rev", q])
    try cli.put(#"{"_id":"note","n":1}"#)
    try cli.ok([
      "put", "--new-edits=false",
      #"{"_id":"w:P","_rev":"2-00000000000000000000000000000000","_revisions":{"start":2,"ids":["00000000000000000000000000000000","\#(p1.dropFirst(2))"]},"type":"page","wiki_id":"w","markdown":"other\n"}"#,
    ])
    return (cli, p1, p2)
  }

  func rev(_ r: Run) throws -> String { try #require(try r.object()["rev"] as? String) }

  /// The time `tail --history` shows for the event at `seq`.
  func time(_ cli: CLI, _ seq: Int) throws -> String {
    let rows = try cli.ok(["tail", "--history"]).rows()
    return try #require(rows.first { $0["seq"] as? Int == seq }?["time"] as? String)
  }

  @Test("the summary shows the position, its time, the counts and the wikis as they were")
  func summary() throws {
    let (cli, _, _) = try fixture()
    func summary(_ asOf: String) throws -> [String: Any] {
      try cli.ok(["replay", "--as-of", asOf, "--json"]).object()
    }
    let empty = try summary("0")
    #expect(empty["seq"] as? Int == 0 && empty["time"] is NSNull)
    #expect(empty["documents"] as? Int == 0 && (empty["wikis"] as? [Any])?.isEmpty == true)

    let four = try summary("4")
    let t4 = try time(cli, 4)
    #expect(four["seq"] as? Int == 4 && four["time"] as? String == t4)
    #expect(four["documents"] as? Int == 3 && four["deleted"] as? Int == 0)
    let wikis = try #require(four["wikis"] as? [[String: Any]])
    #expect(wikis.map { $0["id"] as? String } == ["w"] && wikis[0]["pages"] as? Int == 2)

    let all = try summary("7")
    #expect(all["documents"] as? Int == 3 && all["deleted"] as? Int == 1)
    #expect(all["conflicts"] as? Int == 1)
    #expect((all["wikis"] as? [[String: Any]])?.first?["pages"] as? Int == 1)

    let text = try cli.ok(["replay", "--as-of", "5"]).stdout
    let t5 = try time(cli, 5)
    #expect(text.contains("as of       seq 5, \(t5)\n"))
    #expect(text.contains("documents   2 (1 deleted, 0 with conflicts)\n"))
    #expect(text.contains("\nID  TITLE  OWNER"))
    #expect(try cli.ok(["replay", "--as-of", "0"]).stdout.contains("seq 0 (the empty store)"))
  }

  @Test("an ISO-8601 --as-of includes every event committed at or before it, to the microsecond")
  func byTime() throws {
    let (cli, _, _) = try fixture()
    let t3 = try time(cli, 3)
    #expect(try cli.ok(["replay", "--as-of", t3, "--json"]).object()["seq"] as? Int == 3)
    let t1 = try time(cli, 1)
    #expect(try cli.ok(["replay", "--as-of", t1, "--json"]).object()["seq"] as? Int == 1)
    let later = try cli.ok(["replay", "--as-of", "2999-01-01", "--json"]).object()
    #expect(later["seq"] as? Int == 7)
    // One microsecond before event 3 (unless event 2 shares its microsecond).
    let micros = try #require(Int(t3.dropLast().split(separator: ".").last!))
    let t2 = try time(cli, 2)
    if micros > 0, t2 != t3 {
      let before = t3.split(separator: ".")[0] + "." + String(format: "%06d", micros - 1) + "Z"
      #expect(try cli.ok(["replay", "--as-of", before, "--json"]).object()["seq"] as? Int == 2)
    }
  }

  @Test("--doc shows a document as it was, with get's options; --wiki lists its pages then")
  func documentAndPages() throws {
    let (cli, p1, p2) = try fixture()
    let then = try cli.ok(["replay", "--as-of", "2", "--doc", "w:P", "--revs-info"]).object()
    #expect(then["_rev"] as? String == p1 && then["markdown"] as? String == "p1\n")
    #expect((then["_revs_info"] as? [Any])?.count == 1)
    let later = try cli.ok(["replay", "--as-of", "7", "--doc", "w:P", "--conflicts"]).object()
    #expect(
      later["_rev"] as? String == p2
        && later["_conflicts"] as? [String] == ["2-00000000000000000000000000000000"])
    let old = try cli.ok(["replay", "--as-of", "3", "--doc", "w:P", "--rev", p1]).object()
    #expect(old["markdown"] as? String == "p1\n")
    let leaves = try cli.ok(["replay", "--as-of", "3", "--doc", "w:P", "--open-revs", "all"])
      .array()
    #expect(leaves.count == 1)
    #expect(
      try cli.ok(["replay", "--as-of", "4", "--doc", "w:Q"]).object()["markdown"] as? String
        == "q\n")
    try cli.fails(
      ["replay", "--as-of", "5", "--doc", "w:Q"],
      "document 'w:Q' is deleted in database 'wiki' as of seq 5")
    try cli.fails(
      ["replay", "--as-of", "1", "--doc", "w:P"],
      "document 'w:P' is missing in database 'wiki' as of seq 1")

    let pages =
      try cli.ok(["replay", "--as-of", "4", "--wiki", "w", "--json"]).array()
      as? [[String: Any]]
    #expect(pages?.map { $0["title"] as? String } == ["P", "Q"])
    #expect(pages?.first?["rev"] as? String == p2)
    #expect(try cli.ok(["replay", "--as-of", "2", "--wiki", "w"]).lines.count == 2)
    #expect(try cli.ok(["replay", "--as-of", "1", "--wiki", "w", "--json"]).array().isEmpty)
    try cli.fails(
      ["replay", "--as-of", "0", "--wiki", "w"], "no wiki 'w' in database 'wiki' as of seq 0")
  }

  @Test("--export and --format ndjson write the documents as they were, as export does")
  func export() throws {
    let (cli, _, _) = try fixture()
    // As of the end, the replay's export is `wikilog export`, but for the log heads an export
    // signs when it runs.
    let now = try cli.ok(["export"]).stdout.replacingOccurrences(
      of: #",\"log_heads\":\[[^\]]*\]"#, with: "", options: .regularExpression)
    #expect(try cli.ok(["replay", "--as-of", "7", "--format", "ndjson"]).stdout == now)

    let then = try cli.ok(["replay", "--as-of", "3", "--format", "ndjson"])
    #expect(then.stderr.isEmpty)  // no progress when standard error is not a terminal
    let lines = then.lines
    #expect(lines.count == 3)  // header, w, w:P
    let header = try #require(
      try JSONSerialization.jsonObject(with: Data(lines[0].utf8)) as? [String: Any])
    #expect(header["update_seq"] as? Int == 3 && header["doc_count"] as? Int == 2)

    // It imports, and the copy exports the same documents.
    try cli.ok(["init", "-d", "then"])
    try cli.ok(["import", "-d", "then"], stdin: then.stdout)
    #expect(
      try Array(cli.ok(["-d", "then", "export"]).lines.dropFirst()) == Array(lines.dropFirst()))
    #expect(
      try cli.ok(["-d", "then", "wiki", "show", "w", "P"]).stdout == "p2\n")

    let file = cli.path + "/then.ndjson"
    let written = try cli.ok(["replay", "--as-of", "3", "--export", file])
    #expect(written.stdout.isEmpty && written.stderr.contains("wrote 2 documents as of seq 3"))
    #expect(try String(contentsOfFile: file, encoding: .utf8) == then.stdout)
    #expect(try cli.ok(["replay", "--as-of", "3", "--export", "-"]).stdout == then.stdout)
    try cli.fails(
      ["replay", "--as-of", "3", "--export", cli.path + "/no/such/dir/x.ndjson"], "cannot write")
    try cli.fails(
      ["replay", "--as-of", "3", "--export", "/dev/full"],
      "cannot write /dev/full: No space left on device; nothing written")
    #expect(
      try FileManager.default.contentsOfDirectory(atPath: cli.path).sorted()
        == ["then.ndjson", "then", "wiki"].sorted())
  }

  @Test(
    "bad --as-of and option mixes are one-line errors; the database and TMPDIR are left as they were"
  )
  func badInput() throws {
    let (cli, _, _) = try fixture()
    let events = try cli.eventCount()
    try cli.fails(["replay", "--as-of", "yesterday"], status: 64, "--as-of takes a log position")
    try cli.fails(["replay", "--as-of=-1"], status: 64, "got '-1'")
    try cli.fails(["replay"], status: 64, "Missing expected argument '--as-of")
    try cli.fails(
      ["replay", "--as-of", "8"],
      "--as-of 8 is past the end of the log of database 'wiki' (last position 7)")
    try cli.fails(
      ["replay", "--as-of", "2000-01-01T00:00:00Z"],
      "--as-of 2000-01-01T00:00:00Z is before the first event of database 'wiki' (seq 1 at")
    try cli.fails(
      ["replay", "--as-of", "1", "--doc", "w", "--wiki", "w"], status: 64, "give one of")
    try cli.fails(["replay", "--as-of", "1", "--revs"], status: 64, "need --doc")
    try cli.fails(["replay", "--as-of", "1", "--format", "xml"], status: 64, "xml")
    try cli.fails(
      ["replay", "--as-of", "1", "--doc", "w", "--json"], status: 64, "--json goes with")
    try cli.fails(["-d", "nope", "replay", "--as-of", "1"], "no database 'nope'")
    #expect(try cli.eventCount() == events)

    let scratch = cli.path + "/tmp"
    try FileManager.default.createDirectory(atPath: scratch, withIntermediateDirectories: true)
    let r = try cli.run(["replay", "--as-of", "5", "--json"], environment: ["TMPDIR": scratch])
    #expect(r.status == 0 && r.stderr.isEmpty)
    #expect(try FileManager.default.contentsOfDirectory(atPath: scratch).isEmpty)

    let empty = try CLI()
    try empty.fails(["replay", "--as-of", "2026-01-01"], "the log of database 'wiki' is empty")
    #expect(try empty.ok(["replay", "--as-of", "0", "--json"]).object()["documents"] as? Int == 0)
  }
}
