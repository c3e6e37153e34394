import Foundation
import JSON
import Log
import Projections
import Query
import RevTree
import StoreTestSupport
import TestSupport
import Testing
import Wiki

/// A store with the wiki projection, and helpers that write TouchWiki documents.
///
/// The projection must follow whatever the log holds (logs written before validation, or by a
/// store that checks only CouchDB's rules), so these stores do not check the TouchWiki schema
/// and the tests write pages without wikis and documents of odd shapes.
private final class WikiStore {
  let t: TestStore
  /// Nil while the store has no wiki projection.
  var q: WikiQueries!
  var s: DocumentStore { t.store }

  init(_ name: String = #function, projection: Bool = true) throws {
    t = try TestStore(
      name, projections: projection ? [WikiProjection()] : [], validation: .couchDB)
    if projection { q = try WikiQueries(t.store) }
  }

  /// The winning rev of `id`, nil when it is missing or deleted.
  func rev(_ id: String) -> String? { (try? s.get(id))?[path: "_rev"]?.string }

  @discardableResult
  func putWiki(
    _ id: String, title: String, owner: String, members: [String], actor: String = "ann"
  ) throws -> String {
    try put(
      id,
      [
        "type": .string("wiki"), "title": .string(title), "owner_id": .string(owner),
        "members": .array(members.map { .string($0) }),
      ], actor: actor)
  }

  @discardableResult
  func putPage(_ wiki: String, _ title: String, _ markdown: String, by user: String = "ann")
    throws -> String
  {
    try put(
      "\(wiki):\(title)",
      [
        "type": .string("page"), "wiki_id": .string(wiki), "markdown": .string(markdown),
        "updated_at": .string("2024-05-01T10:00:00Z"), "updated_by": .string(user),
      ], actor: user)
  }

  /// Writes `fields` as the next revision of `id` (on its winner, or creating it).
  @discardableResult
  func put(_ id: String, _ fields: KeyValuePairs<String, JSONValue>, actor: String = "ann") throws
    -> String
  {
    var members: [JSONObject.Member] = [.init(key: "_id", value: .string(id))]
    if let rev = rev(id) { members.append(.init(key: "_rev", value: .string(rev))) }
    for (k, v) in fields { members.append(.init(key: k, value: v)) }
    return try s.put(JSONValue.object(JSONObject(members)).serialized(), actor: actor).rev!
  }

  func delete(_ id: String) throws {
    try s.delete(id, rev: rev(id)!, actor: "ann")
  }

  /// A replicated revision `<generation>-<ids[0]>` with ancestors `ids[1...]`.
  func replicate(
    _ id: String, start: Int, ids: [String], deleted: Bool = false,
    _ fields: KeyValuePairs<String, JSONValue> = [:]
  ) throws {
    var members: [JSONObject.Member] = [
      .init(key: "_id", value: .string(id)),
      .init(key: "_rev", value: .string("\(start)-\(ids[0])")),
      .init(
        key: "_revisions",
        value: .object(
          JSONObject([
            "start": .number(JSONNumber(Int64(start))), "ids": .array(ids.map { .string($0) }),
          ]))),
    ]
    if deleted { members.append(.init(key: "_deleted", value: .bool(true))) }
    for (k, v) in fields { members.append(.init(key: k, value: v)) }
    let failures = try s.bulkDocs([.object(JSONObject(members))], newEdits: false, actor: "peer")
    #expect(failures.isEmpty)
  }

  /// Every answer the queries give for `wikis` and `titles`, as text, for comparisons.
  func answers(wikis: [String], titles: [String], users: [String]) throws -> [String] {
    var out = try q.wikis().map { "\($0)" }
    for w in wikis {
      out.append("\(w): \(String(describing: try q.wiki(w)))")
      out.append("pages: \(try q.pages(in: w))")
      out.append("history: \(try q.membershipHistory(of: w))")
      for title in titles {
        out.append("\(title) -> \(try q.links(from: title, in: w))")
        out.append("\(title) <- \(try q.backlinks(to: title, in: w))")
      }
      for u in users { out.append("\(u) edits: \(try q.canEdit(u, wiki: w))") }
    }
    return out
  }

  /// Checks the projection against the documents' winners as the store serves them.
  func expectMatchesDocuments(wikis: [String], titles: [String]) throws {
    for w in wikis {
      let doc = try? s.get(w)
      let summary = try q.wiki(w)
      if let doc, doc[path: "type"]?.string == "wiki" {
        #expect(summary?.rev == doc[path: "_rev"]?.string)
        #expect(summary?.title == doc[path: "title"]?.string)
        #expect(summary?.owner == doc[path: "owner_id"]?.string)
        let members = Set(doc[path: "members"]?.arrayValue?.compactMap(\.stringValue) ?? [])
        #expect(Set(summary?.members ?? []) == members)
      } else {
        #expect(summary == nil)
      }
      let pages = try q.pages(in: w)
      if let summary { #expect(summary.pageCount == pages.count) }
      var live: [String] = []
      for title in titles {
        let doc = try? s.get("\(w):\(title)")
        let page = try q.page(title, in: w)
        if let doc, doc[path: "type"]?.string == "page" {
          live.append(title)
          #expect(page?.rev == doc[path: "_rev"]?.string)
          #expect(page?.length == doc[path: "markdown"]?.string?.utf8.count ?? 0)
        } else {
          #expect(page == nil)
          #expect(try q.links(from: title, in: w).isEmpty)
        }
      }
      #expect(
        pages.map(\.title)
          == live.sorted { Array($0.utf8).lexicographicallyPrecedes(Array($1.utf8)) })
    }
  }
}

private let hash0 = String(repeating: "0", count: 32)
private let hashF = String(repeating: "f", count: 32)

/// The hash part of a `N-hash` revision.
private func hash(_ rev: String) -> String { String(rev.split(separator: "-")[1]) }

@Suite struct WikiProjectionTests {
  @Test("creating a wiki and pages gives its summary, pages by title, links and backlinks")
  func createWikiAndPages() throws {
    let w = try WikiStore()
    let wikiRev = try w.putWiki("w1", title: "Recipes", owner: "ann", members: ["cy", "bob", "cy"])
    try w.putPage("w1", "Home", "Start with [[Soup]] or [[Set up|the set-up page]].\n[[ Über ]]")
    try w.putPage(
      "w1", "Set up", "Back [[Home]]. Later: [[Not yet]] and [[Home|again]].", by: "bob")
    try w.putPage("w1", "Über", "Nothing here [[]] [[ | empty]] [[broken\n]]", by: "cy")
    try w.putPage("w1", "Zebra", "# Z")
    try w.putPage("w1", "apple pie", "[[Home]]")
    try w.putPage("w2", "Home", "another wiki's [[Soup]]")
    let last = w.s.position

    let summary = try #require(try w.q.wiki("w1"))
    #expect(summary.id == "w1" && summary.rev == wikiRev && summary.title == "Recipes")
    #expect(summary.owner == "ann" && summary.members == ["bob", "cy"])
    #expect(summary.pageCount == 5)
    #expect(summary.lastUpdate.rawValue == last.rawValue - 1)  // the last w1 page; w2's page came after
    #expect(summary.lastUpdateMicroseconds > 0)
    #expect(try w.q.wikis().map(\.id) == ["w1"])  // w2 has pages but no wiki document
    #expect(try w.q.wiki("w2") == nil)

    let pages = try w.q.pages(in: "w1")
    #expect(pages.map(\.title) == ["Home", "Set up", "Zebra", "apple pie", "Über"])
    let setUp = pages[1]
    #expect(setUp.id == "w1:Set up" && setUp.rev == w.rev("w1:Set up"))
    #expect(setUp.updatedBy == "bob" && setUp.updatedAt == "2024-05-01T10:00:00Z")
    #expect(setUp.length == "Back [[Home]]. Later: [[Not yet]] and [[Home|again]].".utf8.count)
    #expect(try w.q.pages(in: "w2").map(\.title) == ["Home"])

    #expect(try w.q.links(from: "Home", in: "w1") == ["Set up", "Soup", "Über"])
    #expect(try w.q.links(from: "Set up", in: "w1") == ["Home", "Not yet"])
    #expect(try w.q.links(from: "Über", in: "w1") == [])
    #expect(try w.q.backlinks(to: "Home", in: "w1") == ["Set up", "apple pie"])
    #expect(try w.q.backlinks(to: "Soup", in: "w1") == ["Home"])
    #expect(try w.q.backlinks(to: "Soup", in: "w2") == ["Home"])
    #expect(try w.q.backlinks(to: "Not yet", in: "w1") == ["Set up"])

    // The missing page comes into being: its backlinks are already there.
    try w.putPage("w1", "Not yet", "[[Home]]")
    #expect(try w.q.backlinks(to: "Not yet", in: "w1") == ["Set up"])
    #expect(try w.q.backlinks(to: "Home", in: "w1") == ["Not yet", "Set up", "apple pie"])
    #expect(try w.q.wiki("w1")?.pageCount == 6)
    #expect(try w.q.wiki("w1")?.lastUpdate == w.s.position)
    #expect(try w.s.verify("wiki") == [])
  }

  @Test("editing a page moves its links; deleting removes it and its links; re-creating restores")
  func editDeleteRecreate() throws {
    let w = try WikiStore()
    try w.putWiki("w", title: "T", owner: "ann", members: [])
    try w.putPage("w", "A", "[[B]] [[C]]")
    try w.putPage("w", "B", "[[A]]")
    try w.putPage("w", "A", "[[C]] [[D|dee]]")
    #expect(try w.q.links(from: "A", in: "w") == ["C", "D"])
    #expect(try w.q.backlinks(to: "B", in: "w") == [])
    #expect(try w.q.backlinks(to: "D", in: "w") == ["A"])
    #expect(try w.q.wiki("w")?.pageCount == 2)

    try w.delete("w:A")
    let deletedAt = w.s.position
    #expect(try w.q.pages(in: "w").map(\.title) == ["B"])
    #expect(try w.q.page("A", in: "w") == nil)
    #expect(try w.q.links(from: "A", in: "w") == [])
    #expect(try w.q.backlinks(to: "C", in: "w") == [])
    #expect(try w.q.backlinks(to: "A", in: "w") == ["B"])  // B still links to the deleted page
    #expect(try w.q.wiki("w")?.pageCount == 1)
    #expect(try w.q.wiki("w")?.lastUpdate == deletedAt)

    try w.putPage("w", "A", "back: [[B]]")
    #expect(try w.q.page("A", in: "w")?.rev.hasPrefix("4-") == true)
    #expect(try w.q.links(from: "A", in: "w") == ["B"])
    #expect(try w.q.backlinks(to: "B", in: "w") == ["A"])
    #expect(try w.q.wiki("w")?.pageCount == 2)

    // Deleting the last pages and the wiki leaves nothing behind.
    try w.delete("w:A")
    try w.delete("w:B")
    try w.delete("w")
    #expect(try w.q.wikis().isEmpty && w.q.pages(in: "w").isEmpty)
    #expect(try w.q.backlinks(to: "A", in: "w").isEmpty)
    #expect(try w.s.verify("wiki") == [])
  }

  @Test("a replicated conflicting revision counts only when it wins; resolving keeps the winner")
  func conflicts() throws {
    let w = try WikiStore()
    try w.putWiki("w", title: "T", owner: "ann", members: [])
    let r1 = try w.putPage("w", "P", "v1 [[A]]")
    let r2 = try w.putPage("w", "P", "v2 [[B]]")
    let before = try w.answers(wikis: ["w"], titles: ["P", "A", "B", "C", "D"], users: [])
    let lastUpdate = try w.q.wiki("w")?.lastUpdate

    // 2-000… loses to the local 2-… (same generation, lower hash).
    try w.replicate(
      "w:P", start: 2, ids: [hash0, hash(r1)],
      ["type": .string("page"), "markdown": .string("loser [[C]]")])
    #expect(w.rev("w:P") == r2)
    #expect(try w.answers(wikis: ["w"], titles: ["P", "A", "B", "C", "D"], users: []) == before)
    #expect(try w.q.wiki("w")?.lastUpdate == lastUpdate)

    // 2-fff… wins.
    try w.replicate(
      "w:P", start: 2, ids: [hashF, hash(r1)],
      ["type": .string("page"), "markdown": .string("winner [[D]]")])
    #expect(try w.q.page("P", in: "w")?.rev == "2-\(hashF)")
    #expect(try w.q.links(from: "P", in: "w") == ["D"])
    #expect(try w.q.backlinks(to: "B", in: "w") == [])
    #expect(try w.q.wiki("w")?.lastUpdate == w.s.position)
    #expect(try w.q.wiki("w")?.pageCount == 1)

    // Resolving: delete the losing branches; the winner stays.
    try w.s.delete("w:P", rev: "2-\(hash0)", actor: "ann")
    try w.s.delete("w:P", rev: r2, actor: "ann")
    #expect(try w.q.page("P", in: "w")?.rev == "2-\(hashF)")
    #expect(try w.q.links(from: "P", in: "w") == ["D"])
    #expect(try w.q.backlinks(to: "D", in: "w") == ["P"])

    // Deleting the winner while a conflict is left makes the conflict the page.
    try w.replicate(
      "w:P", start: 2, ids: ["1" + String(hash0.dropFirst()), hash(r1)],
      ["type": .string("page"), "markdown": .string("survivor [[A]]")])
    try w.s.delete("w:P", rev: "2-\(hashF)", actor: "ann")
    #expect(try w.q.page("P", in: "w")?.rev == "2-1" + String(hash0.dropFirst()))
    #expect(try w.q.links(from: "P", in: "w") == ["A"])
    #expect(try w.q.wiki("w")?.pageCount == 1)

    // A replicated tombstone that wins removes the page.
    try w.replicate(
      "w:P", start: 3, ids: [hash0, "1" + String(hash0.dropFirst()), hash(r1)], deleted: true)
    #expect(try w.q.page("P", in: "w") == nil)
    #expect(try w.q.wiki("w")?.pageCount == 0)
    #expect(try w.q.backlinks(to: "A", in: "w") == [])
    #expect(try w.s.verify("wiki") == [])
  }

  @Test("owner and member changes make membership history entries and decide canEdit")
  func membership() throws {
    let w = try WikiStore()
    #expect(try !w.q.canEdit("ann", wiki: "w"))
    try w.putWiki("w", title: "T", owner: "ann", members: ["bob"])
    let p1 = w.s.position
    try w.putWiki("w", title: "Renamed", owner: "ann", members: ["bob"])  // no membership change
    try w.putWiki("w", title: "Renamed", owner: "ann", members: ["bob", "cy"])
    let p3 = w.s.position
    try w.putWiki("w", title: "Renamed", owner: "ann", members: ["cy", "bob", "bob"])  // same set
    try w.putWiki("w", title: "Renamed", owner: "dee", members: ["cy"])
    let p5 = w.s.position

    let history = try w.q.membershipHistory(of: "w")
    #expect(history.map(\.position) == [p1, p3, p5])
    #expect(history.map(\.owner) == ["ann", "ann", "dee"])
    #expect(history.map(\.members) == [["bob"], ["bob", "cy"], ["cy"]])
    #expect(history.allSatisfy { $0.timestampMicroseconds > 0 })
    #expect(history[0].allows("bob") && !history[2].allows("bob") && history[2].allows("dee"))

    #expect(try w.q.canEdit("dee", wiki: "w") && w.q.canEdit("cy", wiki: "w"))
    #expect(try !w.q.canEdit("ann", wiki: "w") && !w.q.canEdit("bob", wiki: "w"))
    #expect(try w.q.wiki("w")?.title == "Renamed")

    // Deleting the wiki ends everyone's access; re-creating it starts a new entry.
    try w.delete("w")
    let p6 = w.s.position
    #expect(try !w.q.canEdit("dee", wiki: "w"))
    try w.putWiki("w", title: "Back", owner: "bob", members: [])
    let after = try w.q.membershipHistory(of: "w").suffix(2)
    #expect(after.map(\.position) == [p6, w.s.position])
    #expect(after.map(\.owner) == [nil, "bob"])
    #expect(try w.q.canEdit("bob", wiki: "w"))
    #expect(try w.s.verify("wiki") == [])
  }

  @Test("documents that are neither wikis nor pages are ignored, until one becomes a page")
  func ignoresOtherDocuments() throws {
    let w = try WikiStore()
    try w.put("note", ["type": .string("note"), "markdown": .string("[[Home]]")])
    try w.put("w:Home", ["type": .string("draft"), "markdown": .string("[[X]]")])
    try w.put("w:", ["type": .string("page"), "markdown": .string("[[X]]")])  // no title
    try w.put(":Home", ["type": .string("page"), "markdown": .string("[[X]]")])  // no wiki
    try w.put("w", ["type": .string("page"), "markdown": .string("[[X]]")])  // a page id needs a colon
    try w.put("x:y", ["type": .string("wiki"), "title": .string("t"), "owner_id": .string("ann")])  // a wiki id has none
    try w.s.putLocal("cp", Array(#"{"type":"wiki"}"#.utf8), actor: "r")
    try w.s.setRevsLimit(3, actor: "admin")
    #expect(try w.q.wikis().isEmpty && w.q.pages(in: "w").isEmpty && w.q.pages(in: "x").isEmpty)
    #expect(try w.q.backlinks(to: "X", in: "w").isEmpty && w.q.membershipHistory(of: "x").isEmpty)

    // Its third revision makes w:Home a page; its history (under revs_limit 3) comes along.
    try w.put("w:Home", ["type": .string("draft"), "markdown": .string("[[Y]]")])
    try w.put("w:Home", ["type": .string("page"), "markdown": .string("[[Z]]")])
    #expect(try w.q.page("Home", in: "w")?.rev == w.rev("w:Home"))
    #expect(try w.q.links(from: "Home", in: "w") == ["Z"])
    try w.put("w:Home", ["type": .string("draft")])
    #expect(try w.q.page("Home", in: "w") == nil && w.q.links(from: "Home", in: "w").isEmpty)
    #expect(try w.s.verify("wiki") == [])
  }

  @Test(
    "a document first written as no wiki is skipped, with pages of its id already counted; it becomes one later"
  )
  func firstEventsThatAreNoWiki() throws {
    let w = try WikiStore()
    // Pages of wiki "n" before any document "n": the wiki's row counts them.
    try w.putPage("n", "Home", "hello")
    let before = try w.q.wikis()
    // "n" first written as a note: skipped, and the row is as it was.
    try w.put("n", ["type": .string("note")])
    #expect(try w.q.wikis() == before)
    // Its second revision makes it a wiki; its third a note again.
    try w.putWiki("n", title: "Now a wiki", owner: "ann", members: [])
    #expect(try w.q.wikis().first { $0.id == "n" }?.title == "Now a wiki")
    try w.put("n", ["type": .string("note")])
    #expect(try w.q.wikis().first { $0.id == "n" }?.title == nil)
    #expect(try w.s.verify("wiki") == [])
    try w.s.rebuild("wiki")
    #expect(try w.s.verify("wiki") == [])
  }

  /// Seed 30 includes a peer that gives one revision id two different bodies on two branches.
  @Test(
    "a random workload of 500 operations: the projection matches the documents, rebuild and verify agree"
  )
  func randomWorkload() throws {
    let w = try WikiStore()
    let (wikis, titles, users) = try runWorkload(w, seed: 30, operations: 500)
    try w.expectMatchesDocuments(wikis: wikis, titles: titles)
    #expect(try w.s.verify("wiki") == [])
    let before = try w.answers(wikis: wikis, titles: titles, users: users)
    #expect(before.count > 50)
    try w.s.rebuild("wiki")
    #expect(try w.answers(wikis: wikis, titles: titles, users: users) == before)
    #expect(try w.s.verify("wiki") == [])
    // Every projection in one pass, the wiki taking the documents' merged trees.
    try w.s.rebuildAll()
    #expect(try w.answers(wikis: wikis, titles: titles, users: users) == before)
    #expect(try w.s.verify("wiki") == [] && w.s.verify("docs") == [])
  }

  @Test("a wiki projection added to an existing store catches up with the documents")
  func lateProjection() throws {
    let w = try WikiStore(projection: false)
    let (wikis, titles, users) = try runWorkload(w, seed: 11, operations: 200, queries: false)
    try w.t.reopen(projections: [WikiProjection()])
    w.q = try WikiQueries(w.t.store)
    #expect(try w.q.wikis().count > 0)
    try w.expectMatchesDocuments(wikis: wikis, titles: titles)
    #expect(try w.s.verify("wiki") == [])
    let before = try w.answers(wikis: wikis, titles: titles, users: users)
    try w.putPage("w0", "Home", "[[Zebra]]")
    #expect(try w.q.backlinks(to: "Zebra", in: "w0").contains("Home"))
    try w.expectMatchesDocuments(wikis: wikis, titles: titles)
    #expect(try w.answers(wikis: wikis, titles: titles, users: users) != before)
  }

  @Test("link syntax: labels, whitespace, brackets, unclosed and overlong links")
  func linkSyntax() throws {
    let w = try WikiStore()
    let long = String(repeating: "x", count: 600)
    try w.putPage(
      "w", "A",
      """
      [[[Triple]]] [[open [[Inner]] [[Tab\t|x|y]] [[  ]] [[|label only]]
      [[Two
      lines]] [[Same]] [[Same|again]] [[\(long)]] [[Ünïcode page]] [[A]]
      """)
    #expect(
      try w.q.links(from: "A", in: "w") == ["A", "Inner", "Same", "Tab", "Triple", "Ünïcode page"])
    #expect(try w.q.backlinks(to: "A", in: "w") == ["A"])
    #expect(try w.q.backlinks(to: long, in: "w").isEmpty)
    #expect(try w.s.verify("wiki") == [])
  }

  @Test("queries need a store with the wiki projection")
  func queriesNeedProjection() throws {
    let t = try TestStore(validation: .touchWiki)
    #expect(throws: StoreError.self) { try WikiQueries(t.store) }
  }
}

/// Runs a seeded mix of wiki, page, conflict, delete, revs_limit and unrelated writes.
private func runWorkload(_ w: WikiStore, seed: UInt64, operations: Int, queries: Bool = true)
  throws -> (wikis: [String], titles: [String], users: [String])
{
  let wikis = ["w0", "w1", "w2"]
  let titles = ["Home", "Set up", "Über", "Zebra", "apple", "Missing"]
  let users = ["ann", "bob", "cy", "dee"]
  var rng = SplitMix64(seed: seed)
  func pick<T>(_ list: [T]) -> T { list[Int(rng.next() % UInt64(list.count))] }
  func markdown() -> String {
    (0..<Int(rng.next() % 4)).map { _ in
      let t = pick(titles)
      return rng.next() % 3 == 0 ? "[[ \(t) |label]]" : "text [[\(t)]]"
    }.joined(separator: "\n")
  }
  for i in 0..<operations {
    let wiki = pick(wikis)
    let page = "\(wiki):\(pick(titles.dropLast()))"
    switch rng.next() % 20 {
    case 0..<8:
      let md = markdown()
      try tolerateConflict {
        try w.putPage(wiki, String(page.drop { $0 != ":" }.dropFirst()), md, by: pick(users))
      }
    case 8, 9:
      if w.rev(page) != nil { try tolerateConflict { try w.delete(page) } }
    case 10..<13:
      let gen = 1 + Int(rng.next() % 4)
      let ids = (0..<gen).map { _ in String(format: "%032x", rng.next() % 3) }
      let type: JSONValue = .string(rng.next() % 5 == 0 ? "note" : "page")
      try w.replicate(
        page, start: gen, ids: ids, deleted: rng.next() % 6 == 0,
        ["type": type, "markdown": .string(markdown()), "updated_by": .string("peer\(i)")])
    case 13..<16:
      let owner = pick(users)
      let members = (0..<Int(rng.next() % 3)).map { _ in pick(users) }
      try tolerateConflict {
        try w.putWiki(wiki, title: "Wiki \(i % 5)", owner: owner, members: members)
      }
    case 16:
      if w.rev(wiki) != nil { try tolerateConflict { try w.delete(wiki) } }
    case 17:
      let gen = 1 + Int(rng.next() % 3)
      let ids = (0..<gen).map { _ in String(format: "%032x", rng.next() % 3) }
      try w.replicate(
        wiki, start: gen, ids: ids,
        ["type": .string("wiki"), "title": .string("R"), "owner_id": .string(pick(users))])
    case 18:
      let id = "other\(rng.next() % 3)"
      try tolerateConflict {
        try w.put(id, ["type": .string("note"), "markdown": .string("[[Home]]")])
      }
    default:
      try w.s.setRevsLimit(1 + Int(rng.next() % 4), actor: "admin")
    }
    if queries && i % 50 == 0 { try w.expectMatchesDocuments(wikis: wikis, titles: titles) }
  }
  return (wikis, titles, users)
}

/// Runs `body`, ignoring a conflict: with duplicate revision ids from a random peer, a local
/// edit can compute a revision the tree already has, which the store refuses (as CouchDB does).
private func tolerateConflict(_ body: () throws -> Void) throws {
  do {
    try body()
  } catch let error as StoreError where error == .conflict {}
}
