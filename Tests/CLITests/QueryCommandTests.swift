import Foundation
import Testing

@Suite struct QueryCommandTests {
  @Test("find, index create/list/drop, grep (winners and --history) and search")
  func queryCommands() throws {
    let cli = try CLI()
    try cli.put(#"{"_id":"w1","type":"wiki","title":"T","owner_id":"ann","members":[]}"#)
    let home = try cli.put(
      #"{"_id":"w1:Home","type":"page","wiki_id":"w1","markdown":"Apple pie and TODO list"}"#)
    try cli.put(#"{"_id":"w1:Other","type":"page","wiki_id":"w1","markdown":"pears"}"#)
    try cli.put(#"{"_id":"n1","year":2001}"#)
    try cli.put(#"{"_id":"n2","year":2005}"#)

    let q = #"{"selector":{"year":{"$gt":2000}},"fields":["_id","year"]}"#
    let scan = try cli.ok(["find", q]).object()
    #expect((scan["docs"] as? [[String: Any]])?.count == 2)
    #expect(scan["warning"] as? String != nil)
    let created = try cli.ok(["index", "create", "year", "--ddoc", "y", "--name", "year"]).object()
    #expect(created["result"] as? String == "created")
    #expect(
      try cli.ok(["index", "list"]).lines == ["_all_docs\t(special)\t_id", "_design/y\tyear\tyear"])
    let indexed = try cli.ok(["find", q]).object()
    #expect(indexed["warning"] == nil)
    #expect(try cli.ok(["find", "--format", "ndjson", q]).lines.count == 2)
    #expect(
      try cli.ok(["find", "--format", "table", q]).lines == ["_id\tyear", "n1\t2001", "n2\t2005"])
    #expect(try cli.ok(["verify"]).stdout.contains("projection mango: ok"))
    try cli.fails(["find", #"{"selector":{"a":{"$nope":1}}}"#], "Invalid operator: $nope")
    try cli.fails(["find", "{"], "malformed JSON")
    try cli.ok(["index", "drop", "y", "year"])
    #expect(try cli.ok(["index", "list"]).lines == ["_all_docs\t(special)\t_id"])

    // grep: winners by default, every revision with --history.
    try cli.ok([
      "put", "--id", "w1:Home", "--rev", home,
      #"{"type":"page","wiki_id":"w1","markdown":"Apple crumble"}"#,
    ])
    try cli.fails(["grep", "("], "bad regular expression")
    #expect(try cli.run(["grep", "TODO"]).status == 1, "no winner mentions TODO any more")
    let history = try cli.ok(["grep", "TODO", "--history", "--field", "markdown"]).lines
    #expect(history.count == 1)
    #expect(history.first?.hasPrefix("w1:Home\t\(home)\tmarkdown\ttester\t") == true)
    let winners = try cli.ok(["grep", "(?i)apple", "--type", "page"]).lines
    #expect(winners.count == 1 && winners[0].hasPrefix("w1:Home\t2-"))

    // search
    let found = try cli.ok(["search", "crumble"]).lines
    #expect(found.count == 2 && found[0].contains("w1:Home") && found[0].contains("[crumble]"))
    #expect(try cli.ok(["search", "pear*", "--json"]).object()["total_rows"] as? Int == 1)
  }
}
