import Foundation
import Testing

@Suite struct MaintenanceTests {
  @Test("verify checks the log and each projection; stats counts; rebuild replays")
  func verifyStatsRebuild() throws {
    let cli = try CLI()
    try cli.put(#"{"_id":"w1","type":"wiki","title":"T","owner_id":"ann","members":[]}"#)
    let r = try cli.put(#"{"_id":"w1:Home","type":"page","wiki_id":"w1","markdown":"[[A]]"}"#)
    try cli.ok(["delete", "w1:Home", "--rev", r])
    for leaf in ["b", "c"] {
      try cli.ok([
        "put", "--new-edits=false",
        #"{"_id":"x","_rev":"2-\#(leaf)","_revisions":{"start":2,"ids":["\#(leaf)","a"]}}"#,
      ])
    }

    let verify = try cli.ok(["verify", "--json"]).object()
    #expect(verify["ok"] as? Bool == true)
    let projections = try #require(verify["projections"] as? [String: [String]])
    #expect(
      projections == [
        "docs": [], "wiki": [], "drafts": [], "access": [], "held": [], "search": [], "mango": [],
      ])
    #expect(try cli.ok(["verify"]).stdout.contains("projection wiki: ok"))

    let stats = try cli.ok(["stats", "--json"]).object()
    #expect(stats["events"] as? Int == 5)
    #expect(stats["documents"] as? Int == 2)
    #expect(stats["deleted"] as? Int == 1)
    #expect(stats["conflicts"] as? Int == 1)
    #expect(stats["committed_position"] as? Int == 5)
    #expect(stats["durable_position"] as? Int == 5)
    #expect((stats["size_bytes"] as? Int ?? 0) > 0)
    #expect(
      stats["checkpoints"] as? [String: Int] == [
        "docs": 5, "wiki": 5, "drafts": 5, "access": 5, "held": 5, "search": 5, "mango": 5,
      ])
    #expect(try cli.ok(["stats"]).stdout.contains("with conflicts      1"))

    #expect(
      try cli.ok(["rebuild"]).lines == [
        "rebuilt docs from 5 events", "rebuilt wiki from 5 events", "rebuilt drafts from 5 events",
        // The inline projections (Mango among them), then the indexes behind the log.
        "rebuilt access from 5 events", "rebuilt held from 5 events", "rebuilt mango from 5 events",
        "rebuilt search from 5 events",
      ])
    #expect(try cli.ok(["rebuild", "wiki"]).lines == ["rebuilt wiki from 5 events"])
    try cli.fails(
      ["rebuild", "nope"],
      "no projection named 'nope'; the projections are docs, wiki, drafts, access, held, mango, search"
    )
    #expect(try cli.ok(["verify", "--json"]).object()["ok"] as? Bool == true)
    #expect(try cli.ok(["get", "x", "--conflicts"]).object()["_conflicts"] as? [String] == ["2-b"])
  }

  @Test("log tail shows the raw events, _local writes included")
  func rawLog() throws {
    let cli = try CLI()
    try cli.put(#"{"_id":"a"}"#, ["--actor", "ann"])
    try cli.ok(["local", "put", "cp", "{}"])
    let rows = try cli.ok(["log", "tail", "--since", "0"]).rows()
    #expect(rows.map { $0["type"] as? String } == ["doc.edit", "local.put"])
    #expect(rows.map { $0["stream"] as? String } == ["a", "_local/cp"])
    #expect(rows.first?["actor"] as? String == "ann")
    try cli.fails(["-d", "nope", "log", "tail"], "no database 'nope'")
  }
}

@Suite struct CompactCommandTests {
  @Test("compact keeps every document and event and says how the file changed")
  func compact() throws {
    let cli = try CLI()
    for i in 0..<50 {
      try cli.put(#"{"_id":"d\#(i)","pad":"\#(String(repeating: "p", count: 2_000))"}"#)
    }
    let before = try cli.eventCount()
    let out = try cli.ok(["compact"]).stdout
    #expect(out.hasPrefix("compacted wiki: data.mdb "))
    #expect(try cli.eventCount() == before)
    #expect(
      try cli.ok(["get", "d7"]).object()["pad"] as? String == String(repeating: "p", count: 2_000))
    try cli.ok(["verify"])
    try cli.fails(["compact", "-d", "nothere"], "no database 'nothere'")
  }
}
