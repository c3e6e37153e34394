import Foundation
import JSON
import Projections
import Testing
import Wiki

/// Full-text search over wiki pages: a small corpus whose answers are known.
@Suite struct TextSearchTests {
  func corpus(_ name: String = #function) throws -> TestStore {
    let t = try TestStore(name, projections: [TextSearchProjection(schema: .wikiPages)])
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
    for (id, text) in pages {
      try store.put(
        JSONValue.object(
          JSONObject([
            "type": .string("page"), "wiki_id": .string(String(id.prefix(2))),
            "markdown": .string(text),
          ])
        ).serialized(), id: id, actor: "ann")
    }
    return t
  }

  func ids(_ store: DocumentStore, _ q: String, groups: [String] = ["w1"]) throws -> [String] {
    try store.search(SearchQuery(q), groups: groups).hits.map(\.docID)
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
    let hits = try store.search(SearchQuery("apple"), groups: ["w1"]).hits
    #expect(hits[0].score > hits[1].score)
    #expect(throws: StoreError.self) { try SearchQuery("  ,, ") }
  }

  @Test("snippets mark the matched words; edits and deletions update the index; verify agrees")
  func snippetsAndUpdates() throws {
    let t = try corpus()
    let store = t.store!
    let hit = try #require(store.search(SearchQuery("apple"), groups: ["w1"]).hits.first)
    let text = try #require(store.searchable(hit.docID)?.text)
    let snippet = DocumentStore.snippet(text, matched: hit.matched)
    #expect(snippet.contains("<mark>Apple</mark> pie"))
    #expect(snippet.contains("the <mark>apple</mark> filling"))
    #expect(
      DocumentStore.snippet("a <b> & apple", matched: ["apple"])
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
}
