import Foundation
import JSON
import Log
import Projections
import Query
import RevTree
import StoreTestSupport
import Testing
import Wiki

/// The feed's tests write wiki and page documents without every field of the TouchWiki schema,
/// so their stores check only CouchDB's rules.
@Suite struct ChangesTests {
  func seed(_ s: DocumentStore) throws {
    let w = try s.put(#"{"_id":"w1","type":"wiki","title":"One"}"#, actor: "alice")
    try s.put(
      #"{"_id":"w1:Home","type":"page","wiki_id":"w1","markdown":"Home text"}"#, actor: "alice")
    try s.put(
      #"{"_id":"w2:Home","type":"page","wiki_id":"w2","markdown":"Other text"}"#, actor: "bob")
    try s.put(#"{"_id":"w1","_rev":"\#(w.rev!)","type":"wiki","title":"One!"}"#, actor: "alice")
  }

  @Test("one row per document at its latest change, since and limit, last_seq and pending")
  func normalFeed() throws {
    let t = try TestStore(validation: .couchDB)
    let s = t.store!
    try seed(s)
    let all = try s.changes()
    #expect(all.results.map(\.id) == ["w1:Home", "w2:Home", "w1"])
    #expect(all.results.map(\.seq.rawValue) == [2, 3, 4])
    #expect(all.lastSeq == 4 && all.pending == 0)
    var o = ChangesOptions()
    o.since = 2
    o.limit = 1
    let page = try s.changes(o)
    #expect(page.results.map(\.id) == ["w2:Home"])
    #expect(page.lastSeq == 3 && page.pending == 1)
    o = ChangesOptions()
    o.descending = true
    #expect(try s.changes(o).results.map(\.id) == ["w1", "w2:Home", "w1:Home"])
  }

  @Test("filters: doc ids, selector, wiki; the feed still advances past what does not match")
  func filters() throws {
    let t = try TestStore(validation: .couchDB)
    let s = t.store!
    try seed(s)
    var o = ChangesOptions()
    o.docIDs = ["w2:Home"]
    #expect(try s.changes(o).results.map(\.id) == ["w2:Home"])
    o = ChangesOptions()
    o.selector = try Selector(json(#"{"type":"page","wiki_id":{"$in":["w2","w3"]}}"#))
    #expect(try s.changes(o).results.map(\.id) == ["w2:Home"])
    o = ChangesOptions()
    o.filter = .wiki("w1")
    #expect(try s.changes(o).results.map(\.id) == ["w1:Home", "w1"])
    o = ChangesOptions()
    o.docIDs = ["nothing"]
    let none = try s.changes(o)
    #expect(none.results.isEmpty && none.lastSeq == 4)
    // As in CouchDB (`mango_selector:match`), an empty `$or` matches every change.
    o = ChangesOptions()
    o.selector = try Selector(json(#"{"$or":[]}"#))
    #expect(try s.changes(o).results.map(\.id) == s.changes(ChangesOptions()).results.map(\.id))
    #expect(throws: StoreError.self) { _ = try Selector(json(#"{"$or":{}}"#)) }
  }

  @Test("include_docs, style=all_docs and history mode")
  func docsStyleHistory() throws {
    let t = try TestStore(validation: .couchDB)
    let s = t.store!
    try seed(s)
    var o = ChangesOptions()
    o.includeDocs = true
    o.since = 3
    let rows = try s.changes(o).results
    #expect(rows.first?.doc?[path: "title"]?.string == "One!")
    _ = try s.bulkDocs(
      [json(#"{"_id":"w2:Home","_rev":"1-0000000000000000000000000000000a","x":1}"#)],
      newEdits: false, actor: "peer")
    o = ChangesOptions()
    o.style = .allDocs
    o.docIDs = ["w2:Home"]
    #expect(try s.changes(o).results.first?.changes.count == 2)
    let history = try s.changes(ChangesOptions.history())
    #expect(history.results.map(\.id) == ["w1", "w1:Home", "w2:Home", "w1", "w2:Home"])
    #expect(history.results.map(\.actor) == ["alice", "alice", "bob", "alice", "peer"])
  }

  @Test("the live feed catches up, reports progress, then follows new writes")
  func liveFeed() async throws {
    let t = try TestStore(validation: .couchDB)
    let s = t.store!
    try seed(s)
    var iterator = s.liveChanges().makeAsyncIterator()
    var ids: [String] = []
    while ids.count < 3, let item = try await iterator.next() {
      if case .change(let row) = item { ids.append(row.id) }
    }
    #expect(ids == ["w1:Home", "w2:Home", "w1"])
    #expect(try await iterator.next() == .progress(4))
    let writer = Task {
      try await Task.sleep(for: .milliseconds(20))
      try s.put(#"{"_id":"late","v":1}"#, actor: "carol")
    }
    guard case .change(let row) = try await iterator.next() else {
      Issue.record("expected a change")
      return
    }
    #expect(row.id == "late" && row.seq == 5)
    try await writer.value
  }
}
