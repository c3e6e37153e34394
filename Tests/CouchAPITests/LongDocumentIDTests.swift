import CouchAPI
import CouchTestSupport
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import JSON
import Projections
import Query
import Replication
import Testing

/// Document ids past LMDB's 511-byte keys (CouchDB stores ids of any length): stored up to
/// 16 KiB, read, listed, ranged, found and fed like any other, on a wiki data directory (every
/// projection `wikilog serve` runs).
@Suite("long document ids")
struct LongDocumentIDTests {
  /// 480 shared bytes, then what tells the ids apart (past the inline part of their keys).
  static let shared = String(repeating: "p", count: 480)
  static let longA = shared + "a" + String(repeating: "x", count: 600)
  static let longB = shared + "b" + String(repeating: "x", count: 20)
  static let huge = String(repeating: "h", count: 10_000)

  static func path(_ id: String) -> String {
    var allowed = CharacterSet.urlPathAllowed
    allowed.remove(charactersIn: "/?#%")
    return id.addingPercentEncoding(withAllowedCharacters: allowed)!
  }

  static func query(_ id: String) -> String {
    var allowed = CharacterSet.urlQueryAllowed
    allowed.remove(charactersIn: "&=+?#%\"")
    return "\"\(id)\"".addingPercentEncoding(withAllowedCharacters: allowed)!
  }

  static func ids(_ r: JSONResponse, _ member: String = "rows") -> [String] {
    r[member]?.arrayValue?.compactMap { $0["id"]?.stringValue ?? $0["_id"]?.stringValue } ?? []
  }

  @Test("PUT, GET, update, DELETE of ids of 481, 10,000 and 16,384 bytes; 16,385 refused")
  func lifecycle() async throws {
    try await withServer { client, _ in
      try await client.call(.put, "/db")
      let unicode = String(repeating: "é", count: 400)  // 800 bytes
      let limit = String(repeating: "l", count: 16_384)
      for id in [Self.shared + "1", Self.huge, unicode, limit] {
        let put = try await client.call(.put, "/db/\(Self.path(id))", #"{"v":1}"#)
        #expect(put.code == 201, "\(id.utf8.count) bytes: \(put.text.prefix(200))")
        #expect(put["id"]?.stringValue == id)
        let got = try await client.call(.get, "/db/\(Self.path(id))")
        #expect(got["_id"]?.stringValue == id)
        let rev = try #require(got["_rev"]?.stringValue)
        let update = try await client.call(
          .put, "/db/\(Self.path(id))", #"{"_rev":"\#(rev)","v":2}"#)
        #expect(update.code == 201)
        let rev2 = try #require(update["rev"]?.stringValue)
        #expect(rev2.hasPrefix("2-"))
        let deleted = try await client.call(.delete, "/db/\(Self.path(id))?rev=\(rev2)")
        #expect(deleted.code == 200)
        #expect(try await client.call(.get, "/db/\(Self.path(id))").code == 404)
        let again = try await client.call(.put, "/db/\(Self.path(id))", #"{"v":3}"#)
        #expect(again.code == 201)
      }
      let over = try await client.call(.put, "/db/\(Self.path(limit + "l"))", #"{"v":1}"#)
      #expect(over.code == 400)
      #expect(over["reason"]?.stringValue?.contains("16384 bytes") == true)
      #expect(try await client.call(.get, "/db")["doc_count"]?.int == 4)
    }
  }

  @Test("_all_docs: order, keys, startkey and endkey compare whole ids past the shared bytes")
  func allDocs() async throws {
    try await withServer { client, _ in
      try await client.call(.put, "/db")
      let all = ["a", Self.longA, Self.longB, Self.shared + "c", "zz", Self.huge]
      for id in all {
        #expect(try await client.call(.put, "/db/\(Self.path(id))", "{}").code == 201)
      }
      let sorted = all.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
      let listed = Self.ids(try await client.call(.get, "/db/_all_docs"))
      #expect(listed.count == 6)
      #expect(Set(listed) == Set(all))
      // Ids that differ in their first 480 bytes keep CouchDB's order.
      #expect(listed.first == "a" && listed.last == "zz")
      #expect(listed.firstIndex(of: Self.huge)! < listed.firstIndex(of: Self.longA)!)

      let keys = try await client.call(
        .post, "/db/_all_docs", #"{"keys":["\#(Self.longB)","nope","\#(Self.huge)"]}"#)
      #expect(Self.ids(keys) == [Self.longB, Self.huge])

      let fromB = Self.ids(
        try await client.call(.get, "/db/_all_docs?startkey=\(Self.query(Self.longB))"))
      #expect(Set(fromB) == Set(sorted.drop { $0 != Self.longB }))
      let toA = Self.ids(
        try await client.call(.get, "/db/_all_docs?endkey=\(Self.query(Self.longA))"))
      #expect(Set(toA) == Set(["a", Self.longA, Self.huge]))
      let toAExclusive = Self.ids(
        try await client.call(
          .get, "/db/_all_docs?endkey=\(Self.query(Self.longA))&inclusive_end=false"))
      #expect(Set(toAExclusive) == Set(["a", Self.huge]))
      let down = Self.ids(
        try await client.call(
          .get,
          "/db/_all_docs?descending=true&startkey=\(Self.query(Self.longB))&endkey=\(Self.query(Self.longA))"
        ))
      #expect(Set(down) == Set([Self.longA, Self.longB]))
      let page = try await client.call(
        .get, "/db/_all_docs?startkey=\(Self.query(Self.longA))&limit=1")
      #expect(page["offset"]?.int != nil)
    }
  }

  @Test("_changes, _bulk_docs, _bulk_get, _revs_diff and _find carry long ids")
  func feedsAndQueries() async throws {
    try await withServer { client, _ in
      try await client.call(.put, "/db")
      let bulk = try await client.call(
        .post, "/db/_bulk_docs",
        #"{"docs":[{"_id":"\#(Self.longA)","k":1},{"_id":"\#(Self.longB)","k":2},{"_id":"short","k":3}]}"#
      )
      #expect(bulk.code == 201)
      #expect(bulk.json?.arrayValue?.allSatisfy { $0["ok"] == .bool(true) } == true)
      let replicated = try await client.call(
        .post, "/db/_bulk_docs",
        #"{"new_edits":false,"docs":[{"_id":"\#(Self.huge)","_rev":"1-0123456789abcdef0123456789abcdef","k":4}]}"#
      )
      #expect(replicated.code == 201)

      for query in ["", "?style=all_docs", "?include_docs=true", "?feed=longpoll&since=0"] {
        let changes = try await client.call(.get, "/db/_changes\(query)")
        #expect(
          Set(Self.ids(changes, "results")) == Set([Self.longA, Self.longB, "short", Self.huge]),
          "_changes\(query)")
      }
      let ids = try await client.call(
        .post, "/db/_changes?filter=_doc_ids", #"{"doc_ids":["\#(Self.longB)"]}"#)
      #expect(Self.ids(ids, "results") == [Self.longB])

      let bulkGet = try await client.call(
        .post, "/db/_bulk_get", #"{"docs":[{"id":"\#(Self.huge)"}]}"#)
      let got = bulkGet["results"]?.arrayValue?.first?["docs"]?.arrayValue?.first?["ok"]
      #expect(got?["_id"]?.stringValue == Self.huge)
      let diff = try await client.call(
        .post, "/db/_revs_diff", #"{"\#(Self.longA)":["1-00000000000000000000000000000000"]}"#)
      #expect(diff[Self.longA]?["missing"]?.strings == ["1-00000000000000000000000000000000"])

      let found = try await client.call(
        .post, "/db/_find", #"{"selector":{"_id":{"$gt":"\#(Self.shared)"}}}"#)
      #expect(Set(Self.ids(found, "docs")) == Set([Self.longA, Self.longB, "short"]))
      let exact = try await client.call(
        .post, "/db/_find", #"{"selector":{"_id":"\#(Self.longB)"}}"#)
      #expect(Self.ids(exact, "docs") == [Self.longB])
      let index = try await client.call(.post, "/db/_index", #"{"index":{"fields":["k"]}}"#)
      #expect(index.code == 200)
      let indexed = try await client.call(
        .post, "/db/_find", #"{"selector":{"k":{"$gt":0}},"sort":["k"]}"#)
      #expect(Self.ids(indexed, "docs") == [Self.longA, Self.longB, "short", Self.huge])
      // Bookmark paging over _all_docs visits each long id once.
      var seen: [String] = []
      var bookmark: String?
      for _ in 0..<6 {
        let mark = bookmark.map { #","bookmark":"\#($0)""# } ?? ""
        let r = try await client.call(
          .post, "/db/_find",
          #"{"selector":{"_id":{"$gte":"\#(Self.shared)"}},"limit":1\#(mark)}"#)
        let page = Self.ids(r, "docs")
        if page.isEmpty { break }
        seen += page
        bookmark = r["bookmark"]?.stringValue
      }
      #expect(seen.count == 3 && Set(seen) == Set([Self.longA, Self.longB, "short"]))
    }
  }

  @Test("wikis and pages keep their 491- and 500-byte limits; other long ids stay ordinary")
  func wikiLimits() async throws {
    try await withServer { client, _ in
      try await client.call(.put, "/db")
      let page = try await client.call(
        .put, "/db/w:\(String(repeating: "t", count: 600))",
        #"{"type":"page","wiki_id":"w","markdown":"x"}"#)
      #expect(page.code == 403)
      #expect(page["reason"]?.stringValue?.contains("at most") == true)
      let wiki = try await client.call(
        .put, "/db/\(String(repeating: "w", count: 600))",
        #"{"type":"wiki","title":"t","owner_id":"ann","members":[]}"#)
      #expect(wiki.code == 403)
      // Page-shaped and wiki-shaped ids that are neither: ordinary documents.
      for id in [
        String(repeating: "v", count: 600) + ":x", "v:" + String(repeating: "y", count: 900),
      ] {
        #expect(try await client.call(.put, "/db/\(Self.path(id))", #"{"n":1}"#).code == 201)
        #expect(try await client.call(.get, "/db/\(Self.path(id))")["n"]?.int == 1)
      }
      let local = try await client.call(
        .put, "/db/_local/\(String(repeating: "q", count: 481))", #"{"n":1}"#)
      #expect(local.code == 400)
      #expect(
        try await client.call(.put, "/db/_local/\(String(repeating: "q", count: 480))", "{}").code
          == 201)
    }
  }

  @Test("a wiki with a 480-byte id: its pages, 100-byte words and all, indexed and found")
  func longWikiSearch() async throws {
    try await withServer { client, dir in
      try await client.call(.put, "/db")
      let wiki = String(repeating: "k", count: 480)
      let wrote = try await client.call(
        .put, "/db/\(wiki)", #"{"type":"wiki","title":"Long","owner_id":"ann","members":[]}"#)
      #expect(wrote.code == 201, "\(wrote.text)")
      let word = String(repeating: "z", count: 100)
      for (n, title) in ["A", "B"].enumerated() {
        let page = try await client.call(
          .put, "/db/\(wiki):\(title)",
          #"{"type":"page","wiki_id":"\#(wiki)","markdown":"\#(word) common \#(n)"}"#)
        #expect(page.code == 201, "\(page.text)")
      }
      let found = try await client.call(.get, "/db/_search?q=\(word)")
      #expect(found["rows"]?.arrayValue?.count == 2, "\(found.text)")
      #expect(found["rows"]?[0]?["wiki"]?.stringValue == wiki)
      let store = try dir.data.open("db")
      #expect(try TextSearch(store).groups() == [wiki])
      #expect(try store.verify("search") == [])
    }
  }

  @Test("every projection rebuilt by replay equals the live one with long ids in it")
  func replayEqualsLive() async throws {
    try await withServer { client, dir in
      try await client.call(.put, "/db")
      try await client.call(.post, "/db/_index", #"{"index":{"fields":["k"]}}"#)
      for (n, id) in [Self.longA, Self.longB, Self.huge, "v:" + Self.huge].enumerated() {
        let put = try await client.call(.put, "/db/\(Self.path(id))", #"{"k":\#(n)}"#)
        let rev = try #require(put["rev"]?.stringValue)
        if n % 2 == 0 {
          try await client.call(.delete, "/db/\(Self.path(id))?rev=\(rev)")
        }
      }
      let store = try dir.data.open("db")
      for name in store.projectionNames {
        #expect(try store.verify(name) == [], "\(name)")
      }
    }
  }
}
