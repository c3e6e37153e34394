import Foundation
import Testing

@Suite struct WikiCommandTests {
  @Test("create a wiki, edit pages from stdin, list, show and find backlinks")
  func wikiAndPages() throws {
    let cli = try CLI()
    let created = try cli.ok([
      "wiki", "create", "Recipes", "--id", "recipes", "--actor", "ann", "--member", "bob",
    ]).object()
    #expect(created["id"] as? String == "recipes")
    let wiki = try cli.ok(["get", "recipes"]).object()
    #expect(wiki["type"] as? String == "wiki" && wiki["title"] as? String == "Recipes")
    #expect(wiki["owner_id"] as? String == "ann" && wiki["members"] as? [String] == ["bob"])
    try cli.fails(["wiki", "create", "Again", "--id", "recipes"], "already exists")
    try cli.fails(["wiki", "create", "Bad", "--id", "a:b"], status: 64, "may not")

    try cli.ok(
      ["wiki", "edit", "recipes", "Soup", "--actor", "bob"], stdin: "# Soup\nSee [[Stock]].\n")
    let page = try cli.ok(["get", "recipes:Soup"]).object()
    #expect(page["type"] as? String == "page" && page["wiki_id"] as? String == "recipes")
    #expect(page["updated_by"] as? String == "bob")
    let createdAt = try #require(page["created_at"] as? String)
    #expect(page["updated_at"] as? String == createdAt)

    // An update keeps created_at and other fields; unchanged text writes nothing.
    let events = try cli.eventCount()
    let same = try cli.ok(["wiki", "edit", "recipes", "Soup"], stdin: "# Soup\nSee [[Stock]].\n")
    #expect(same.stderr.contains("unchanged"))
    #expect(try cli.eventCount() == events)
    // Markdown that is not UTF-8 is refused, not stored with replacement characters.
    for command in [
      ["wiki", "edit", "recipes", "Soup"], ["wiki", "draft", "save", "recipes", "Soup"],
    ] {
      let input = cli.path + "/latin1.md"
      try Data([0x23, 0x20, 0x53, 0x6F, 0x70, 0xE9, 0x0A]).write(to: URL(fileURLWithPath: input))
      let r = try cli.runRedirected(command + ["--actor", "bob"], stdin: input)
      #expect(r.status == 1, "\(command)")
      #expect(r.stderr.contains("not valid UTF-8"), "\(command): \(r.stderr)")
    }
    #expect(try cli.eventCount() == events)
    try cli.ok(["wiki", "edit", "recipes", "Soup", "--actor", "ann"], stdin: "# Soup\nHot.\n")
    let updated = try cli.ok(["get", "recipes:Soup"]).object()
    #expect(updated["created_at"] as? String == createdAt)
    #expect(updated["updated_by"] as? String == "ann")
    #expect((updated["_rev"] as? String)?.hasPrefix("2-") == true)
    try cli.ok(["wiki", "edit", "recipes", "Stock"], stdin: "# Stock\nFor [[Soup]].\n")

    #expect(try cli.ok(["wiki", "show", "recipes", "Soup"]).stdout == "# Soup\nHot.\n")
    let firstRev = try #require(
      (try cli.ok(["history", "recipes:Soup", "--json"]).array().first as? [String: Any])?["rev"]
        as? String)
    #expect(
      try cli.ok(["wiki", "show", "recipes", "Soup", "--rev", firstRev]).stdout
        == "# Soup\nSee [[Stock]].\n")
    #expect(try cli.ok(["wiki", "backlinks", "recipes", "Soup"]).lines == ["Stock"])
    #expect(try cli.ok(["wiki", "backlinks", "recipes", "Stock", "--json"]).array().isEmpty)

    let pages = try cli.ok(["wiki", "pages", "recipes", "--json"]).array() as? [[String: Any]]
    #expect(pages?.map { $0["title"] as? String } == ["Soup", "Stock"])
    #expect(try cli.ok(["wiki", "pages", "recipes"]).lines.count == 3)
    let wikis = try cli.ok(["wiki", "list", "--json"]).array() as? [[String: Any]]
    #expect(wikis?.count == 1 && wikis?.first?["pages"] as? Int == 2)
    #expect(try cli.ok(["wiki", "list"]).stdout.contains("recipes  Recipes  ann"))

    try cli.fails(["wiki", "show", "recipes", "Nope"], "no page 'Nope' in wiki 'recipes'")
    try cli.fails(["wiki", "edit", "nowiki", "Page"], stdin: "x", "no wiki 'nowiki'")
    try cli.fails(["wiki", "pages", "nowiki"], "no wiki 'nowiki'")
    try cli.fails(["wiki", "backlinks", "nowiki", "P"], "no wiki 'nowiki'")
  }

  @Test(
    "wiki create and edit write valid TouchWiki documents; invalid ones are refused in one line")
  func schema() throws {
    let cli = try CLI()
    try cli.ok(["wiki", "create", "W", "--id", "w", "--actor", "ann", "--member", "bob"])
    let wiki = try cli.ok(["get", "w"]).object()
    #expect(wiki["owner_id"] as? String == "ann" && wiki["members"] as? [String] == ["bob"])
    // (--actor NAME writes as NAME: bob edits as a member of the wiki.)
    try cli.ok(["wiki", "edit", "w", "Home Page", "--actor", "bob"], stdin: "# Home\n")
    let page = try cli.ok(["get", "w:Home Page"]).object()
    #expect(page["wiki_id"] as? String == "w" && page["updated_by"] as? String == "bob")
    let millis = #/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/#
    for doc in [wiki, page] {
      for key in ["created_at", "updated_at"] {
        let time = try #require(doc[key] as? String)
        #expect(time.wholeMatch(of: millis) != nil, "\(key): \(time)")
      }
    }

    let events = try cli.eventCount()
    try cli.fails(
      ["put", #"{"_id":"w:P","type":"page","markdown":"x"}"#],
      "forbidden: a page needs 'wiki_id', the id of its wiki")
    try cli.fails(
      ["put", #"{"_id":"w:P","type":"page","wiki_id":"v","markdown":"x"}"#],
      "forbidden: a page's 'wiki_id' must be the string 'w'")
    try cli.fails(
      ["put", #"{"_id":"nowiki:P","type":"page","wiki_id":"nowiki","markdown":"x"}"#],
      "forbidden: the wiki 'nowiki' of page 'nowiki:P' does not exist")
    try cli.fails(
      ["put", #"{"_id":"v","type":"wiki","title":"V","owner_id":"ann"}"#],
      "forbidden: a wiki needs 'members'")
    try cli.fails(
      [
        "put",
        #"{"_id":"v","type":"wiki","title":"V","owner_id":"ann","members":[],"created_at":"today"}"#,
      ],
      "forbidden: a wiki's 'created_at' must be an ISO-8601 date-time")
    try cli.fails(
      ["wiki", "create", "V", "--id", "v", "--owner", ""], "forbidden: a wiki's 'owner_id'")
    try cli.fails(["wiki", "edit", "w", ""], stdin: "x", "forbidden: a page's id must be")
    #expect(try cli.eventCount() == events)
    // Other document types are plain CouchDB documents.
    try cli.put(#"{"_id":"w:note","type":"note"}"#)
  }

  @Test("wiki edit --editor runs $EDITOR on the current text, and writes nothing when it fails")
  func editor() throws {
    let cli = try CLI()
    try cli.ok(["wiki", "create", "W", "--id", "w"])
    try cli.ok(["wiki", "edit", "w", "Page"], stdin: "old text\n")
    let edited = try cli.run(
      ["wiki", "edit", "w", "Page", "--editor"],
      environment: ["EDITOR": "sed -i s/old/new/", "VISUAL": ""])
    #expect(edited.status == 0, "\(edited.stderr)")
    #expect(try cli.ok(["wiki", "show", "w", "Page"]).stdout == "new text\n")

    let events = try cli.eventCount()
    let failed = try cli.run(
      ["wiki", "edit", "w", "Page", "--editor"], environment: ["EDITOR": "false", "VISUAL": ""])
    #expect(failed.status == 1)
    #expect(failed.stderr.contains("the editor (false) failed with status 1; nothing written"))
    #expect(try cli.eventCount() == events)

    // Empty standard input is an empty page.
    try cli.ok(["wiki", "edit", "w", "Empty"], stdin: "")
    #expect(try cli.ok(["wiki", "show", "w", "Empty"]).stdout.isEmpty)
  }

  @Test("wiki conflicts shows each losing leaf merged with the winner against their ancestor")
  func conflicts() throws {
    let cli = try CLI()
    try cli.ok(["wiki", "create", "W", "--id", "w"])
    let base = "# Soup\nonions\nwater\nsalt\n"
    let r1 = try cli.put(
      #"{"_id":"w:Soup","type":"page","wiki_id":"w","markdown":"\#(base.replacingOccurrences(of: "\n", with: "\\n"))"}"#
    )
    let h = r1.dropFirst(2)
    func leaf(_ hash: String, _ markdown: String) throws {
      try cli.ok([
        "put", "--new-edits=false",
        #"{"_id":"w:Soup","_rev":"2-\#(hash)","_revisions":{"start":2,"ids":["\#(hash)","\#(h)"]},"type":"page","wiki_id":"w","markdown":"\#(markdown.replacingOccurrences(of: "\n", with: "\\n"))"}"#,
      ])
    }
    try leaf("aaa", "# Soup\nred onions\nwater\nsalt\n")
    try leaf("bbb", "# Soup\nonions\nwater\nsea salt\n")
    try leaf("ccc", "# Soup\nleeks\nwater\nsalt\n")

    let answer = try cli.ok(["wiki", "conflicts", "w", "Soup", "--json"]).object()
    #expect(answer["winner"] as? String == "2-ccc")
    let conflicts = try #require(answer["conflicts"] as? [[String: Any]])
    #expect(conflicts.map { $0["rev"] as? String } == ["2-bbb", "2-aaa"])
    #expect(conflicts.allSatisfy { $0["base"] as? String == r1 })
    #expect(conflicts[0]["clean"] as? Bool == true)
    #expect(conflicts[0]["merged"] as? String == "# Soup\nleeks\nwater\nsea salt\n")
    #expect(conflicts[1]["clean"] as? Bool == false && conflicts[1]["regions"] as? Int == 1)
    #expect((conflicts[1]["merged"] as? String)?.contains("<<<<<<< 2-ccc\nleeks\n") == true)

    let text = try cli.ok(["wiki", "conflicts", "w", "Soup"]).stdout
    #expect(text.contains("winner 2-ccc, 2 conflicting"))
    #expect(text.contains("=== 2-bbb with the winner, base \(r1): merges cleanly ==="))
    #expect(text.contains("1 conflicting region(s)"))

    try cli.ok(["wiki", "edit", "w", "Plain"], stdin: "x")
    #expect(try cli.ok(["wiki", "conflicts", "w", "Plain"]).stdout.contains("no conflicts"))
    try cli.fails(["wiki", "conflicts", "w", "Nope"], "no page 'Nope'")
  }
}
