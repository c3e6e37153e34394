import CouchAPI
import CouchTestSupport
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import JSON
import Projections
import Testing

/// Replicated pages that arrive before their wiki (any replicator's order: CouchDB's,
/// PouchDB's, wikilog's) are held and admitted when their writer's wiki arrives.
@Suite struct HeldPageTests {
  static let alice = AccessFixture.basic("alice")
  static let carol = AccessFixture.basic("carol")

  /// A replicated revision of `id`, as a replicator's `_bulk_docs` sends it.
  static func page(_ id: String, _ hash: Character, wiki: String) -> String {
    let rev = String(repeating: hash, count: 32)
    return
      #"{"_id":"\#(id)","_rev":"1-\#(rev)","_revisions":{"start":1,"ids":["\#(rev)"]},"type":"page","wiki_id":"\#(wiki)","markdown":"text of \#(id)"}"#
  }

  static func wiki(_ id: String, owner: String, members: [String] = [], gen: Int = 2) -> String {
    let ids = (0..<gen).map { "\"\(String(repeating: Character(String($0 + 1)), count: 32))\"" }
    let rev = "\(gen)-" + String(repeating: "1", count: 32)
    let members = members.map { "\"\($0)\"" }.joined(separator: ",")
    return
      #"{"_id":"\#(id)","_rev":"\#(rev)","_revisions":{"start":\#(gen),"ids":[\#(ids.joined(separator: ","))]},"type":"wiki","title":"T","owner_id":"\#(owner)","members":[\#(members)]}"#
  }

  static func bulk(_ docs: [String]) -> String {
    #"{"docs":[\#(docs.joined(separator: ","))],"new_edits":false}"#
  }

  @Test(
    "pages pushed before their wiki are refused for now, held, and written when the wiki arrives")
  func pagesBeforeWiki() async throws {
    try await withAccessServer { client, fixture in
      let first = try await client.call(
        .post, "/wiki/_bulk_docs",
        Self.bulk([Self.page("w9:A", "a", wiki: "w9"), Self.page("w9:B", "b", wiki: "w9")]),
        headers: Self.alice)
      #expect(first.code == 201, "\(first.text)")
      let rows = first.json?.arrayValue ?? []
      #expect(rows.count == 2)
      #expect(rows.allSatisfy { $0["error"] == .string("forbidden") })
      let reason = rows.first?["reason"]?.stringValue ?? ""
      #expect(reason.contains("held"), "\(reason)")
      // Not readable, not in any count, missing to _revs_diff.
      #expect(try await client.call(.get, "/wiki/w9:A", headers: Self.alice).code == 404)
      let diff = try await client.call(
        .post, "/wiki/_revs_diff", #"{"w9:A":["1-\#(String(repeating: "a", count: 32))"]}"#,
        headers: Self.alice)
      #expect(diff["w9:A"]?["missing"]?.arrayValue?.count == 1, "\(diff.text)")

      let second = try await client.call(
        .post, "/wiki/_bulk_docs", Self.bulk([Self.wiki("w9", owner: "alice")]),
        headers: Self.alice)
      #expect(second.code == 201 && second.json == .array([]), "\(second.text)")
      for id in ["w9", "w9:A", "w9:B"] {
        let got = try await client.call(.get, "/wiki/\(id)", headers: Self.alice)
        #expect(got.code == 200, "\(id): \(got.text)")
      }
      // Written as alice, and rebuilt by replay.
      let history = try fixture.store.revisionEvents(of: "w9:A")
      #expect(history.map(\.actor) == ["alice"])
      try fixture.store.rebuildAll()
      #expect(try fixture.store.verify("held").isEmpty)
      #expect(try fixture.store.verify("access").isEmpty)
      #expect(try await client.call(.get, "/wiki/w9:B", headers: Self.alice).code == 200)
    }
  }

  @Test(
    "pages and their wiki in one _bulk_docs, pages first: every one written, no failure answered")
  func oneBatch() async throws {
    try await withAccessServer { client, _ in
      let r = try await client.call(
        .post, "/wiki/_bulk_docs",
        Self.bulk([
          Self.page("w8:A", "a", wiki: "w8"), Self.page("w8:B", "b", wiki: "w8"),
          Self.wiki("w8", owner: "alice"),
        ]), headers: Self.alice)
      #expect(r.code == 201 && r.json == .array([]), "\(r.text)")
      #expect(try await client.call(.get, "/wiki/w8:B", headers: Self.alice).code == 200)
      // A single replicated PUT of a page ahead of its wiki is 403 with the same reason.
      let put = try await client.call(
        .put, "/wiki/w7:A?new_edits=false", Self.page("w7:A", "c", wiki: "w7"),
        headers: Self.alice)
      #expect(put.code == 403 && put.error == "forbidden", "\(put.text)")
    }
  }

  @Test(
    "a page for a wiki that does not let its writer in stays out, answered as for a missing wiki")
  func neverAllowed() async throws {
    try await withAccessServer { client, fixture in
      // carol pushes a page of alice's w1 and one of a wiki that does not exist: the same
      // refusal, so that it tells nothing of w1.
      let r = try await client.call(
        .post, "/wiki/_bulk_docs",
        Self.bulk([Self.page("w1:X", "a", wiki: "w1"), Self.page("nowiki:X", "a", wiki: "nowiki")]),
        headers: Self.carol)
      let reasons = (r.json?.arrayValue ?? []).map {
        ($0["reason"]?.stringValue ?? "").replacingOccurrences(of: "nowiki", with: "w1")
      }
      #expect(reasons.count == 2 && reasons[0] == reasons[1], "\(r.text)")
      // Her replicated w1 is refused (she is not its owner), and admits nothing.
      let wiki = try await client.call(
        .post, "/wiki/_bulk_docs", Self.bulk([Self.wiki("w1", owner: "carol", gen: 5)]),
        headers: Self.carol)
      #expect(wiki.json?[0]?["error"] == .string("forbidden"), "\(wiki.text)")
      #expect(try await client.call(.get, "/wiki/w1:X", headers: Self.alice).code == 404)
      // alice lets carol in: alice's write does not collect what carol pushed.
      let current = try await client.call(.get, "/wiki/w1", headers: Self.alice)
      var object = current.json?.objectValue ?? JSONObject()
      object["members"] = .array([.string("bob"), .string("carol")])
      let edit = try await client.call(
        .put, "/wiki/w1", String(decoding: JSONValue.object(object).serialized(), as: UTF8.self),
        headers: Self.alice)
      #expect(edit.code == 201, "\(edit.text)")
      #expect(try await client.call(.get, "/wiki/w1:X", headers: Self.alice).code == 404)
      // carol's own push again, now that she may write w1, writes it.
      let again = try await client.call(
        .post, "/wiki/_bulk_docs", Self.bulk([Self.page("w1:X", "a", wiki: "w1")]),
        headers: Self.carol)
      #expect(again.json == .array([]), "\(again.text)")
      #expect(try await client.call(.get, "/wiki/w1:X", headers: Self.alice).code == 200)
      _ = fixture
    }
  }

  @Test(
    "a new user's first push into a database where they see nothing: GET /db, _local, _revs_diff, _bulk_docs"
  )
  func firstPush() async throws {
    try await withAccessServer { client, fixture in
      let admin = AccessFixture.basic("admin")
      let made = try await client.call(
        .put, "/_users/org.couchdb.user:dave",
        #"{"name":"dave","password":"pw-dave","roles":[],"type":"user"}"#, headers: admin)
      #expect(made.code == 201)
      let dave = AccessFixture.basic("dave")
      let info = try await client.call(.get, "/wiki", headers: dave)
      #expect(info.code == 200, "\(info.text)")
      #expect(info["doc_count"]?.int == 0 && info["update_seq"] != nil)
      #expect(try await client.call(.head, "/wiki", headers: dave).code == 200)
      #expect(try await client.call(.get, "/wiki/_local/abc", headers: dave).code == 404)
      let diff = try await client.call(
        .post, "/wiki/_revs_diff", #"{"d1:A":["1-\#(String(repeating: "a", count: 32))"]}"#,
        headers: dave)
      #expect(diff.code == 200 && diff["d1:A"] != nil, "\(diff.text)")
      let push = try await client.call(
        .post, "/wiki/_bulk_docs",
        Self.bulk([Self.page("d1:A", "a", wiki: "d1"), Self.wiki("d1", owner: "dave")]),
        headers: dave)
      #expect(push.code == 201 && push.json == .array([]), "\(push.text)")
      let checkpoint = try await client.call(
        .put, "/wiki/_local/abc", #"{"history":[]}"#, headers: dave)
      #expect(checkpoint.code == 201, "\(checkpoint.text)")
      #expect(try await client.call(.get, "/wiki", headers: dave)["doc_count"]?.int == 2)
      // What dave may not read stays hidden.
      #expect(try await client.call(.get, "/wiki/w1", headers: dave).code == 404)
      _ = fixture
    }
  }
}
