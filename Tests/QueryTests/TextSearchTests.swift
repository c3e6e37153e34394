import Foundation
import JSON
import Log
import Projections
import Query
import StoreTestSupport
import Testing
import Wiki

/// Full-text search over wiki pages: a small corpus whose answers are known.
@Suite struct TextSearchTests {
  func corpus(_ name: String = #function) throws -> TestStore {
    let t = try TestStore(name, indexes: [TextSearchProjection(schema: .wikiPages)])
    let store = t.store!
    for w in ["w1", "w2"] {
      try store.put(
        #"{"type":"wiki","title":"\#(w)","owner_id":"ann","members":[]}"#, id: w, actor: "ann")
    }
    let pages = [
      ("w1:Apple Pie", "Apple pie with cinnamon. Slice the apples, then bake the apple filling."),
      ("w1:Banana Bread", "A banana bread recipe. No apple in it, only bananas and flour."),
      ("w1:Cinnamon Rolls", "Rolls with lots of cinnamon: cinnamon sugar on top."),
      ("w1:Crème brûlée", "Une CRÈME très douce, caramélisée."),
      ("w2:Secret", "The secret apple recipe of w2, apple apple apple."),
    ]
    for (id, text) in pages { try store.putPage(id, text) }
    return t
  }

  func ids(_ store: DocumentStore, _ q: String, groups: [String] = ["w1"]) throws -> [String] {
    try TextSearch(store).search(SearchQuery(q), groups: groups).hits.map(\.docID)
  }

  @Test("ranking, phrases, prefixes, case folding and groups on a known corpus")
  func ranking() throws {
    let t = try corpus()
    let store = t.store!
    // "apple": the pie (title and twice in the text) before the bread (once); w2 is not searched.
    #expect(try ids(store, "apple") == ["w1:Apple Pie", "w1:Banana Bread"])
    #expect(try ids(store, "APPLE") == ["w1:Apple Pie", "w1:Banana Bread"])
    #expect(try ids(store, "apple", groups: ["w2"]) == ["w2:Secret"])
    #expect(try ids(store, "cinnamon") == ["w1:Cinnamon Rolls", "w1:Apple Pie"])
    // Every word must match.
    #expect(try ids(store, "apple cinnamon") == ["w1:Apple Pie"])
    #expect(try ids(store, "apple zebra") == [])
    // Phrases: words in order, next to each other.
    #expect(try ids(store, "\"apple pie\"") == ["w1:Apple Pie"])
    #expect(try ids(store, "\"pie apple\"") == [])
    #expect(try ids(store, "\"banana bread\" recipe") == ["w1:Banana Bread"])
    // Prefixes.
    #expect(Set(try ids(store, "cinn*")) == ["w1:Cinnamon Rolls", "w1:Apple Pie"])
    #expect(try ids(store, "banan*") == ["w1:Banana Bread"])
    // Unicode words and case folding.
    #expect(try ids(store, "crème") == ["w1:Crème brûlée"])
    #expect(try ids(store, "CARAMÉLISÉE") == ["w1:Crème brûlée"])
    // Scores decrease; the pie's "apple" score is BM25's.
    let hits = try TextSearch(store).search(SearchQuery("apple"), groups: ["w1"]).hits
    #expect(hits[0].score > hits[1].score)
    #expect(throws: StoreError.self) { try SearchQuery("  ,, ") }
  }

  @Test("snippets mark the matched words; edits and deletions update the index; verify agrees")
  func snippetsAndUpdates() throws {
    let t = try corpus()
    let store = t.store!
    let hit = try #require(
      TextSearch(store).search(SearchQuery("apple"), groups: ["w1"]).hits.first)
    let text = try #require(TextSearch(store).searchable(hit.docID)?.text)
    let snippet = TextSearch.snippet(text, matched: hit.matched)
    #expect(snippet.contains("<mark>Apple</mark> pie"))
    #expect(snippet.contains("the <mark>apple</mark> filling"))
    #expect(
      TextSearch.snippet("a <b> & apple", matched: ["apple"])
        == "a &lt;b&gt; &amp; <mark>apple</mark>")

    let bread = try store.get("w1:Banana Bread")
    try store.put(
      #"{"_id":"w1:Banana Bread","_rev":"\#(bread["_rev"]!.stringValue!)","type":"page","wiki_id":"w1","markdown":"Only bananas now."}"#,
      actor: "ann")
    #expect(try ids(store, "apple") == ["w1:Apple Pie"])
    #expect(try ids(store, "bananas") == ["w1:Banana Bread"])
    let pie = try store.get("w1:Apple Pie")
    _ = try store.delete("w1:Apple Pie", rev: pie["_rev"]!.stringValue!, actor: "ann")
    #expect(try ids(store, "apple") == [])
    let problems = try store.verify("search")
    #expect(problems == [])
  }

  func page(_ id: String, _ text: String, rev: String? = nil) -> JSONValue {
    var members: [JSONObject.Member] = [
      .init(key: "_id", value: .string(id)), .init(key: "type", value: .string("page")),
      .init(key: "wiki_id", value: .string(String(id.prefix(while: { $0 != ":" })))),
      .init(key: "markdown", value: .string(text)),
    ]
    if let rev { members.insert(.init(key: "_rev", value: .string(rev)), at: 1) }
    return .object(JSONObject(members))
  }

  func total(_ store: DocumentStore, _ q: String, groups: [String] = ["w1"]) throws -> Int {
    try TextSearch(store).search(SearchQuery(q), groups: groups).total
  }

  @Test(
    "batches across buckets, updates, deletions, a wiki emptied and refilled, group commit: the index equals its replay"
  )
  func batchedWrites() async throws {
    let t = try TestStore(
      indexes: [TextSearchProjection(schema: .wikiPages)], durability: .groupCommit)
    let store = t.store!
    for w in ["w1", "w2"] {
      try store.put(
        #"{"type":"wiki","title":"\#(w)","owner_id":"ann","members":[]}"#, id: w, actor: "ann")
    }
    // 300 pages of w1 (three buckets of 128) and 3 of w2 in one transaction.
    let first =
      (0..<300).map { i in
        page("w1:P\(i)", "common word \(i % 2 == 0 ? "even" : "odd") unique\(i) common")
      } + (0..<3).map { page("w2:Q\($0)", "common other") }
    let revs = try store.bulkDocs(first, actor: "ann").map { try #require($0.rev) }
    #expect(try total(store, "common") == 300)
    #expect(try total(store, "even common") == 150)
    #expect(try total(store, "common", groups: ["w1", "w2"]) == 303)
    #expect(try ids(store, "unique257") == ["w1:P257"])
    #expect(try ids(store, "\"word odd\" unique257") == ["w1:P257"])
    #expect(try ids(store, "\"word even\" unique257") == [])
    // Page 1 has "common" twice in 4 words, like every page: ties go by id.
    #expect(try ids(store, "common").prefix(3) == ["w1:P0", "w1:P1", "w1:P10"])

    // Updates (odd → changed, one word more), deletions and an unchanged text in one batch.
    var second: [JSONValue] = []
    for i in stride(from: 1, to: 200, by: 2) {
      second.append(page("w1:P\(i)", "common word changed unique\(i) common more", rev: revs[i]))
    }
    for i in stride(from: 200, to: 300, by: 2) {
      second.append(
        .object(
          JSONObject([
            .init(key: "_id", value: .string("w1:P\(i)")),
            .init(key: "_rev", value: .string(revs[i])),
            .init(key: "_deleted", value: .bool(true)),
          ])))
    }
    second.append(page("w1:P0", "common word even unique0 common", rev: revs[0]))
    #expect(try store.bulkDocs(second, actor: "ann").allSatisfy(\.ok))
    #expect(try total(store, "odd") == 50)
    #expect(try total(store, "changed") == 100)
    #expect(try total(store, "even") == 100)
    #expect(try total(store, "common") == 250)
    #expect(try ids(store, "unique0") == ["w1:P0"])
    #expect(try ids(store, "unique1") == ["w1:P1"])
    #expect(try ids(store, "unique202") == [])

    // w2 emptied, then refilled: its numbers start again.
    for i in 0..<3 {
      let rev = try store.get("w2:Q\(i)")["_rev"]!.stringValue!
      _ = try store.delete("w2:Q\(i)", rev: rev, actor: "ann")
    }
    #expect(try total(store, "other", groups: ["w2"]) == 0)
    #expect(try TextSearch(store).groups() == ["w1"])
    try store.put(page("w2:R", "fresh other").serialized(), actor: "ann")
    #expect(try ids(store, "other", groups: ["w2"]) == ["w2:R"])

    // Concurrent writers under group commit (savepoints in one transaction).
    try await withThrowingTaskGroup(of: Void.self) { group in
      for w in 0..<6 {
        group.addTask {
          var rev: String? = nil
          for v in 0..<4 {
            rev = try await store.putAsync(
              page("w2:Writer\(w)", "writer version\(v) other", rev: rev).serialized(),
              actor: "ann"
            ).rev
          }
        }
      }
      try await group.waitForAll()
    }
    #expect(try total(store, "version3", groups: ["w2"]) == 6)
    #expect(try total(store, "version2", groups: ["w2"]) == 0)
    #expect(try total(store, "other", groups: ["w2"]) == 7)

    #expect(try store.verify("search") == [])
    let before = try TextSearch(store).search(SearchQuery("common word"), groups: ["w1", "w2"])
    try store.rebuild("search")
    let after = try TextSearch(store).search(SearchQuery("common word"), groups: ["w1", "w2"])
    #expect(before.total == after.total)
    #expect(before.hits == after.hits)
  }

}
