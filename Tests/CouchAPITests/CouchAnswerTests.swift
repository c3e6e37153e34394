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
import TestSupport
import Testing

/// Answers checked against a real CouchDB 3.4.3, where wikilog's differed.
@Suite struct CouchAnswerTests {
  @Test(
    "a signed-in user in no wiki yet reads an empty database (a pull's first requests work), may create a wiki, and sees no other"
  )
  func nothingToSee() async throws {
    try await withAccessServer { client, fixture in
      let admin = AccessFixture.basic("admin")
      let made = try await client.call(
        .put, "/_users/org.couchdb.user:dave",
        #"{"name":"dave","password":"pw-dave","roles":[],"type":"user"}"#, headers: admin)
      #expect(made.code == 201, "\(made.text)")
      let dave = AccessFixture.basic("dave")
      let seq = try await client.call(.get, "/wiki", headers: admin)["update_seq"]
      let page = #"{"docs":[{"_id":"w1:Page","type":"page","wiki_id":"w1","markdown":"x"}]}"#
      // What the others wrote stays hidden: documents are missing, the feed and the list empty.
      for uri in ["/wiki/w1", "/wiki/nothing", "/wiki/w1:Home"] {
        let r = try await client.call(.get, uri, headers: dave)
        #expect(r.code == 404 && r.error == "not_found", "\(uri): \(r.text)")
      }
      let all = try await client.call(.get, "/wiki/_all_docs", headers: dave)
      #expect(all.code == 200 && all["rows"]?.arrayValue?.isEmpty == true, "\(all.text)")
      let changes = try await client.call(.get, "/wiki/_changes?style=all_docs", headers: dave)
      #expect(changes.code == 200 && changes["results"]?.arrayValue?.isEmpty == true)
      // A page of another's wiki is refused on its own, nothing written.
      let refused = try await client.call(.post, "/wiki/_bulk_docs", page, headers: dave)
      #expect(refused.code == 201 && refused.json?[0]?["error"]?.stringValue == "forbidden")
      #expect(try await client.call(.get, "/wiki", headers: admin)["update_seq"] == seq)
      // The database's own answer, a replicator's first request, with the counts of what dave
      // may see: nothing.
      let info = try await client.call(.get, "/wiki", headers: dave)
      #expect(info.code == 200 && info["doc_count"]?.int == 0, "\(info.text)")
      // A wiki of their own is still theirs to create; then the database is theirs to read,
      // and the other wikis stay hidden.
      let wiki = try await client.call(
        .put, "/wiki/w3", #"{"type":"wiki","title":"Dave's","owner_id":"dave","members":[]}"#,
        headers: dave)
      #expect(wiki.code == 201, "\(wiki.text)")
      #expect(try await client.call(.get, "/wiki", headers: dave).code == 200)
      #expect(try await client.call(.get, "/wiki/w1", headers: dave).code == 404)
      // carol, in w2, keeps wikilog's answers: 200, and a per-document refusal.
      let carol = AccessFixture.basic("carol")
      #expect(try await client.call(.get, "/wiki", headers: carol).code == 200)
      let bulk = try await client.call(.post, "/wiki/_bulk_docs", page, headers: carol)
      #expect(bulk.code == 201)
      #expect(bulk.json?[0]?["error"]?.stringValue == "forbidden")
      _ = fixture
    }
  }

  @Test("open_revs=all of a missing document is 404 not_found missing, as JSON and multipart")
  func openRevsAllOfMissing() async throws {
    try await withServer { client, _ in
      try await client.call(.put, "/db")
      try await client.call(.put, "/db/here", "{}")
      let json = try await client.call(.get, "/db/missing?open_revs=all")
      #expect(
        json.code == 404 && json.error == "not_found" && json["reason"]?.stringValue == "missing")
      var multipart = HTTPFields()
      multipart[.accept] = "multipart/mixed"
      let mixed = try await client.call(.get, "/db/missing?open_revs=all", headers: multipart)
      #expect(mixed.code == 404 && mixed.error == "not_found", "\(mixed.text)")
      // A list of revisions answers each one as missing; an existing document its leaves.
      let listed = try await client.call(.get, #"/db/missing?open_revs=["1-abc"]"#)
      #expect(listed.code == 200 && listed.json?[0]?["missing"]?.stringValue == "1-abc")
      let here = try await client.call(.get, "/db/here?open_revs=all")
      #expect(here.code == 200 && here.json?.arrayValue?.count == 1)
    }
  }

  @Test("/_global_changes: 404, and 412 for PUT, as a single CouchDB node answers")
  func globalChanges() async throws {
    try await withServer { client, _ in
      for method in [HTTPRequest.Method.get, .head, .delete] {
        let r = try await client.call(method, "/_global_changes")
        #expect(r.code == 404, "\(method)")
        if method != .head { #expect(r.error == "not_found") }
      }
      #expect(try await client.call(.get, "/_global_changes/_changes").code == 404)
      let put = try await client.call(.put, "/_global_changes")
      #expect(put.code == 412 && put.error == "file_exists")
    }
  }

  @Test("_bulk_docs with a document over max_document_size is 413 for the request, nothing written")
  func bulkDocsTooLarge() async throws {
    try await withServer { client, _ in
      try await client.call(.put, "/db")
      let seq = try await client.call(.get, "/db")["update_seq"]
      let big = String(repeating: "x", count: 10_000_000)
      let body = #"{"docs":[{"_id":"small"},{"_id":"big","s":"\#(big)"}]}"#
      let r = try await client.call(.post, "/db/_bulk_docs", body)
      #expect(r.code == 413 && r.error == "document_too_large" && r["reason"]?.stringValue == "big")
      #expect(try await client.call(.get, "/db")["update_seq"] == seq)
      #expect(try await client.call(.get, "/db/small").code == 404)
    }
  }

}
