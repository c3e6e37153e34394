import Foundation
import Testing

/// `--actor NAME` writes as NAME: the wiki's access rules check each write in the transaction
/// that commits it, as they check the server's callers; without `--actor` the command line is
/// the operator's own tool.
@Suite struct ActorAccessTests {
  @Test("a write --actor NAME is refused where NAME may not write, and writes nothing")
  func actorIsChecked() throws {
    let cli = try CLI()
    try cli.put(
      #"{"_id":"w1","type":"wiki","title":"One","owner_id":"alice","members":["bob"]}"#,
      ["--actor", "alice"])
    // A member writes a page; an outsider may not, nor make himself a member.
    try cli.put(
      #"{"_id":"w1:Home","type":"page","wiki_id":"w1","markdown":"by bob"}"#, ["--actor", "bob"])
    let before = try cli.ok(["stats", "--json"]).stdout
    try cli.fails(
      [
        "put", #"{"_id":"w1:Other","type":"page","wiki_id":"w1","markdown":"x"}"#, "--actor",
        "carol",
      ],
      "forbidden")
    let wiki = try cli.ok(["get", "w1"]).object()
    let rev = try #require(wiki["_rev"] as? String)
    try cli.fails(
      [
        "put",
        #"{"_id":"w1","_rev":"\#(rev)","type":"wiki","title":"One","owner_id":"alice","members":["bob","carol"]}"#,
        "--actor", "carol",
      ], "forbidden")
    // A member may not change who may access the wiki either.
    try cli.fails(
      [
        "put",
        #"{"_id":"w1","_rev":"\#(rev)","type":"wiki","title":"One","owner_id":"bob","members":[]}"#,
        "--actor", "bob",
      ], "forbidden")
    #expect(try cli.ok(["stats", "--json"]).stdout == before)
    try cli.fails(["get", "w1:Other"], "not_found")
    // Without --actor: the operator's tool, not checked.
    try cli.put(#"{"_id":"w1:Other","type":"page","wiki_id":"w1","markdown":"x"}"#)
  }

  @Test("a draft --actor NAME is saved only where NAME may write the page")
  func draftsAreChecked() throws {
    let cli = try CLI()
    try cli.put(
      #"{"_id":"w1","type":"wiki","title":"One","owner_id":"alice","members":["bob"]}"#,
      ["--actor", "alice"])
    let before = try cli.ok(["stats", "--json"]).stdout
    try cli.fails(
      ["wiki", "draft", "save", "w1", "Plan", "--actor", "carol"], stdin: "# carol's",
      "forbidden")
    #expect(try cli.ok(["stats", "--json"]).stdout == before)
    try cli.ok(["wiki", "draft", "save", "w1", "Plan", "--actor", "bob"], stdin: "# bob's")
    let shown = try cli.ok(["wiki", "draft", "show", "w1", "Plan", "--actor", "bob"]).stdout
    #expect(shown.hasPrefix("# bob's"))
  }
}
