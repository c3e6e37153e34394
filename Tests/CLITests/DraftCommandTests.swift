import Foundation
import Testing

@Suite struct DraftCommandTests {
  /// A wiki `w` with a page `Soup` ("a\nb\nc\n", by ann).
  func fixture() throws -> (cli: CLI, rev: String) {
    let cli = try CLI()
    try cli.ok(["wiki", "create", "W", "--id", "w", "--actor", "ann", "--member", "bob"])
    let r = try cli.ok(["wiki", "edit", "w", "Soup", "--actor", "ann"], stdin: "a\nb\nc\n")
    return (cli, try #require(try r.object()["rev"] as? String))
  }

  @Test("save, list, show and discard a draft; each user sees only their own")
  func saveListShowDiscard() throws {
    let (cli, rev) = try fixture()
    let saved = try cli.ok(["wiki", "draft", "save", "w", "Soup", "--actor", "ann"], stdin: "A\n")
      .object()
    #expect(saved["id"] as? String == "w:Soup" && saved["base_rev"] as? String == rev)
    #expect(try cli.ok(["get", "w:Soup"]).object()["_rev"] as? String == rev)  // not published

    let list = try cli.ok(["wiki", "draft", "list", "--actor", "ann", "--json"]).array()
    let draft = try #require(list.first as? [String: Any])
    #expect(list.count == 1)
    #expect(draft["title"] as? String == "Soup" && draft["wiki_id"] as? String == "w")
    #expect(draft["markdown"] as? String == "A\n" && draft["autosaved"] as? Bool == false)
    #expect(draft["base_rev"] as? String == rev)
    let table = try cli.ok(["wiki", "draft", "list", "--actor", "ann"]).lines
    #expect(table.count == 2 && table[1].hasPrefix("w     Soup  \(rev)"))
    #expect(try cli.ok(["wiki", "draft", "list", "--actor", "bob", "--json"]).array().isEmpty)
    #expect(try cli.ok(["wiki", "draft", "list", "--actor", "bob"]).stdout.isEmpty)
    #expect(
      try cli.ok(["wiki", "draft", "list", "--actor", "ann", "--wiki", "v", "--json"]).array()
        .isEmpty)
    #expect(try cli.ok(["wiki", "draft", "show", "w", "Soup", "--actor", "ann"]).stdout == "A\n")
    try cli.fails(
      ["wiki", "draft", "show", "w", "Soup", "--actor", "bob"],
      "no draft of 'Soup' in wiki 'w' by 'bob'")

    // Saving again keeps the base even after the page changed; an autosave of the same text
    // writes nothing.
    try cli.ok(["wiki", "edit", "w", "Soup", "--actor", "bob"], stdin: "a\nb\nC\n")
    let again = try cli.ok(
      ["wiki", "draft", "save", "w", "Soup", "--actor", "ann", "--autosave"], stdin: "AA\n"
    ).object()
    #expect(again["base_rev"] as? String == rev)
    let shown = try cli.ok(["wiki", "draft", "show", "w", "Soup", "--actor", "ann", "--json"])
      .object()
    #expect(shown["markdown"] as? String == "AA\n" && shown["autosaved"] as? Bool == true)
    let events = try cli.eventCount()
    let same = try cli.ok(
      ["wiki", "draft", "save", "w", "Soup", "--actor", "ann", "--autosave"], stdin: "AA\n")
    #expect(same.stderr.contains("unchanged; nothing written"))
    #expect(try cli.eventCount() == events)

    // A draft of a new page has no base.
    let new = try cli.ok(["wiki", "draft", "save", "w", "Stock", "--actor", "ann"], stdin: "s\n")
      .object()
    #expect(new["base_rev"] is NSNull)
    #expect(try cli.ok(["wiki", "draft", "list", "--actor", "ann", "--json"]).array().count == 2)
    try cli.fails(["get", "w:Stock"], "missing")

    try cli.ok(["wiki", "draft", "discard", "w", "Soup", "--actor", "ann"])
    try cli.fails(
      ["wiki", "draft", "discard", "w", "Soup", "--actor", "ann"], "no draft of 'Soup'")
    try cli.fails(["wiki", "draft", "show", "w", "Soup", "--actor", "ann"], "no draft of 'Soup'")
    #expect(
      try cli.ok(["wiki", "draft", "list", "--actor", "ann", "--json"]).array().count == 1)
    #expect(try cli.ok(["tail", "--since", "0"]).rows().count == 2)  // drafts are not documents

    try cli.fails(["wiki", "draft", "save", "nowiki", "P"], stdin: "x", "no wiki 'nowiki'")
    try cli.fails(["wiki", "draft", "save", "w", ""], stdin: "x", "<wikiId>:<Page Name>")
    try cli.fails(["wiki", "draft", "publish", "w", "Nope"], "no draft of 'Nope'")
    try cli.fails(["wiki", "draft", "save", "w"], status: 64, "Missing expected argument")
  }

  @Test("a draft is edited in $EDITOR from the page's text, then from its own")
  func editor() throws {
    let (cli, _) = try fixture()
    let env = ["EDITOR": "sed -i s/b/B/", "VISUAL": ""]
    let first = try cli.run(
      ["wiki", "draft", "save", "w", "Soup", "--editor", "--actor", "ann"], environment: env)
    #expect(first.status == 0, "\(first.stderr)")
    #expect(
      try cli.ok(["wiki", "draft", "show", "w", "Soup", "--actor", "ann"]).stdout == "a\nB\nc\n")
    let second = try cli.run(
      ["wiki", "draft", "save", "w", "Soup", "--editor", "--actor", "ann"],
      environment: ["EDITOR": "sed -i s/c/C/", "VISUAL": ""])
    #expect(second.status == 0, "\(second.stderr)")
    #expect(
      try cli.ok(["wiki", "draft", "show", "w", "Soup", "--actor", "ann"]).stdout == "a\nB\nC\n")
  }

  @Test("publishing writes on the base, or three-way merges with changes made since")
  func publish() throws {
    let (cli, rev) = try fixture()
    // Unchanged page: written on the base.
    try cli.ok(["wiki", "draft", "save", "w", "Soup", "--actor", "ann"], stdin: "A\nb\nc\n")
    let plain = try cli.ok(["wiki", "draft", "publish", "w", "Soup", "--actor", "ann"]).object()
    #expect(plain["merged"] as? Bool == false && plain["parent_rev"] as? String == rev)
    let rev2 = try #require(plain["rev"] as? String)
    #expect(rev2.hasPrefix("2-"))
    #expect(try cli.ok(["wiki", "show", "w", "Soup"]).stdout == "A\nb\nc\n")
    let page = try cli.ok(["get", "w:Soup"]).object()
    #expect(page["updated_by"] as? String == "ann" && page["wiki_id"] as? String == "w")
    #expect(try cli.ok(["wiki", "draft", "list", "--actor", "ann", "--json"]).array().isEmpty)

    // bob drafts from rev 2, ann edits meanwhile: bob's publish merges both.
    try cli.ok(["wiki", "draft", "save", "w", "Soup", "--actor", "bob"], stdin: "A\nb\nc\nd\n")
    let rev3 = try #require(
      try cli.ok(["wiki", "edit", "w", "Soup", "--actor", "ann"], stdin: "A\nB\nc\n").object()[
        "rev"] as? String)
    let merged = try cli.ok(["wiki", "draft", "publish", "w", "Soup", "--actor", "bob"]).object()
    #expect(merged["merged"] as? Bool == true && merged["parent_rev"] as? String == rev3)
    #expect((merged["rev"] as? String)?.hasPrefix("4-") == true)
    #expect(try cli.ok(["wiki", "show", "w", "Soup"]).stdout == "A\nB\nc\nd\n")
    let history = try cli.ok(["history", "w:Soup", "--json"]).array() as? [[String: Any]]
    #expect(history?.map { $0["actor"] as? String } == ["ann", "ann", "ann", "bob"])

    // A draft of a new page creates it.
    try cli.ok(["wiki", "draft", "save", "w", "Stock", "--actor", "bob"], stdin: "stock\n")
    let created = try cli.ok(["wiki", "draft", "publish", "w", "Stock", "--actor", "bob"]).object()
    #expect(created["parent_rev"] is NSNull && (created["rev"] as? String)?.hasPrefix("1-") == true)
    let stock = try cli.ok(["get", "w:Stock"]).object()
    #expect(stock["type"] as? String == "page" && stock["markdown"] as? String == "stock\n")
  }

  @Test("a conflicting publish writes nothing, keeps the draft and shows the texts")
  func conflict() throws {
    let (cli, rev) = try fixture()
    try cli.ok(["wiki", "draft", "save", "w", "Soup", "--actor", "ann"], stdin: "a\nmine\nc\n")
    let theirs = try #require(
      try cli.ok(["wiki", "edit", "w", "Soup", "--actor", "bob"], stdin: "a\ntheirs\nc\n")
        .object()["rev"] as? String)
    let events = try cli.eventCount()

    let r = try cli.run(["wiki", "draft", "publish", "w", "Soup", "--actor", "ann"])
    #expect(r.status == 1)
    #expect(r.stdout.isEmpty)
    let lines = r.stderr.split(separator: "\n", omittingEmptySubsequences: false).dropLast()
    #expect(
      lines.last?.hasPrefix(
        "wikilog: error: the draft of w:Soup overlaps changes made since its base \(rev) (current \(theirs))"
      ) == true, "\(r.stderr)")
    #expect(
      r.stderr.hasPrefix(
        "a\n<<<<<<< draft\nmine\n||||||| \(rev)\nb\n=======\ntheirs\n>>>>>>> \(theirs)\nc\n"),
      "\(r.stderr)")
    #expect(try cli.eventCount() == events)

    let j = try cli.run(["wiki", "draft", "publish", "w", "Soup", "--actor", "ann", "--json"])
    #expect(j.status == 1)
    #expect(j.stderr.split(separator: "\n").count == 1 && j.stderr.hasPrefix("wikilog: error: "))
    let details = try j.object()
    #expect(details["ok"] as? Bool == false && details["error"] as? String == "conflict")
    #expect(details["base"] as? String == "a\nb\nc\n")
    #expect(details["draft"] as? String == "a\nmine\nc\n")
    #expect(details["current"] as? String == "a\ntheirs\nc\n")
    #expect(details["base_rev"] as? String == rev && details["current_rev"] as? String == theirs)
    #expect((details["marked"] as? String)?.contains("<<<<<<< draft\nmine\n") == true)
    #expect(try cli.eventCount() == events)
    #expect(try cli.ok(["wiki", "show", "w", "Soup"]).stdout == "a\ntheirs\nc\n")
    #expect(
      try cli.ok(["wiki", "draft", "show", "w", "Soup", "--actor", "ann"]).stdout == "a\nmine\nc\n")

    // A page deleted since the base is a conflict too.
    try cli.ok(["delete", "w:Soup", "--rev", theirs])
    try cli.fails(
      ["wiki", "draft", "publish", "w", "Soup", "--actor", "ann"],
      "w:Soup was deleted")
  }
}
