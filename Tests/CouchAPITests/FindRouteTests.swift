import CouchAPI
import CouchTestSupport
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import JSON
import Projections
import Query
import Replication
import Testing

/// `_find`, `_index` and `_explain` over HTTP: CouchDB's shapes and statuses, and access.
@Suite struct FindRouteTests {
  @Test("_find, _index (create, exists, list, delete) and _explain, with CouchDB's shapes")
  func findAndIndexes() async throws {
    try await withServer { client, _ in
      #expect(try await client.call(.put, "/db").code == 201)
      for i in 0..<12 {
        let r = try await client.call(
          .put, "/db/d\(i)", #"{"year": \#(2000 + i % 6), "title": "t\#(i)"}"#)
        #expect(r.code == 201)
      }
      let scan = try await client.call(
        .post, "/db/_find", #"{"selector": {"year": {"$gte": 2004}}, "fields": ["_id", "year"]}"#)
      #expect(scan.code == 200)
      #expect(scan["docs"]?.arrayValue?.count == 4)
      #expect(
        scan["warning"]?.stringValue
          == "No matching index found, create an index to optimize query time.")
      #expect(scan["bookmark"]?.stringValue != nil)

      let created = try await client.call(
        .post, "/db/_index",
        #"{"index": {"fields": ["year"]}, "name": "year-idx", "ddoc": "years"}"#)
      #expect(created.code == 200)
      #expect(created.json == json(#"{"result":"created","id":"_design/years","name":"year-idx"}"#))
      let again = try await client.call(
        .post, "/db/_index",
        #"{"index": {"fields": ["year"]}, "name": "year-idx", "ddoc": "years"}"#)
      #expect(again["result"] == .string("exists"))
      let ddoc = try await client.call(.get, "/db/_design/years")
      #expect(ddoc["language"] == .string("query"))
      #expect(ddoc["views"]?["year-idx"]?["map"]?["fields"] == json(#"{"year":"asc"}"#))

      let list = try await client.call(.get, "/db/_index")
      #expect(list["total_rows"]?.int == 2)
      #expect(list["indexes"]?[0]?["name"] == .string("_all_docs"))
      #expect(list["indexes"]?[1]?["ddoc"] == .string("_design/years"))
      #expect(list["indexes"]?[1]?["type"] == .string("json"))

      let indexed = try await client.call(
        .post, "/db/_find",
        #"{"selector": {"year": {"$gte": 2004}}, "sort": [{"year": "desc"}], "execution_stats": true}"#
      )
      #expect(indexed["warning"] == nil)
      let years = indexed["docs"]?.arrayValue?.compactMap { $0["year"]?.int } ?? []
      #expect(years == [2005, 2005, 2004, 2004])
      #expect(indexed["execution_stats"]?["results_returned"]?.int == 4)
      #expect(indexed["execution_stats"]?["total_docs_examined"]?.int == 4)

      let explain = try await client.call(
        .post, "/db/_explain", #"{"selector": {"year": 2003}}"#)
      #expect(explain.code == 200)
      #expect(explain["index"]?["name"] == .string("year-idx"))
      #expect(explain["dbname"] == .string("db"))
      #expect(explain["selector"] == json(#"{"year": {"$eq": 2003}}"#))
      #expect(explain["mrargs"]?["start_key"] == json("[2003]"))

      // Errors, as CouchDB gives them.
      let badOp = try await client.call(.post, "/db/_find", #"{"selector": {"a": {"$foo": 1}}}"#)
      #expect(badOp.code == 400 && badOp.error == "invalid_operator")
      let noSelector = try await client.call(.post, "/db/_find", #"{"limit": 1}"#)
      #expect(noSelector.code == 400 && noSelector.error == "missing_required_key")
      let badSort = try await client.call(
        .post, "/db/_find", #"{"selector": {"title": "t1"}, "sort": ["title"]}"#)
      #expect(badSort.code == 400 && badSort.error == "no_usable_index")
      #expect(try await client.call(.get, "/db/_find").code == 405)
      let plain = try await client.execute(
        uri: "/db/_find", method: .post, headers: [.contentType: "text/plain"],
        body: ByteBuffer(string: #"{"selector": {}}"#)
      ) { $0.status.code }
      #expect(plain == 415)
      #expect(
        try await client.call(.post, "/db/_index", #"{"index": {"fields": []}}"#).code == 400)

      // Deleting: the design document goes with its last index.
      #expect(try await client.call(.delete, "/db/_index/years/json/nope").code == 404)
      let deleted = try await client.call(.delete, "/db/_index/_design/years/json/year-idx")
      #expect(deleted.json == json(#"{"ok":true}"#))
      #expect(try await client.call(.get, "/db/_design/years").code == 404)
      #expect(try await client.call(.get, "/db/_index")["total_rows"]?.int == 1)
      // No build is running now (a build runs inside its design document's write).
      #expect(try await client.call(.get, "/_active_tasks").json == json("[]"))
      let after = try await client.call(.post, "/db/_find", #"{"selector": {"year": 2003}}"#)
      #expect(after["warning"] != nil && after["docs"]?.arrayValue?.count == 2)
    }
  }

  @Test(
    "_index paths, _bulk_delete, limit and skip, _design/{ddoc}/_info, as mango_httpd answers them"
  )
  func indexRoutes() async throws {
    try await withServer { client, _ in
      #expect(try await client.call(.put, "/db").code == 201)
      for name in ["a", "b", "c"] {
        let r = try await client.call(
          .post, "/db/_index",
          #"{"index": {"fields": ["\#(name)"]}, "ddoc": "\#(name)", "name": "\#(name)"}"#)
        #expect(r["result"] == .string("created"))
      }
      // Listing: `limit` and `skip`, separated by `&` or `;`; total_rows counts them all.
      let page = try await client.call(.get, "/db/_index?limit=2;skip=1")
      #expect(page["total_rows"]?.int == 4)
      #expect(page["indexes"]?.arrayValue?.compactMap { $0["name"]?.stringValue } == ["a", "b"])
      #expect(try await client.call(.get, "/db/_index?skip=9")["indexes"] == json("[]"))
      #expect(try await client.call(.get, "/db/_index?limit=0").code == 500)
      #expect(try await client.call(.get, "/db/_index?skip=-1").code == 500)
      // Paths that name no index are 404; the right path with the wrong method 405.
      for path in ["a", "a/b", "a/b/c/d", "a/b/c/d/e"] {
        #expect(try await client.call(.delete, "/db/_index/\(path)").code == 404, "\(path)")
        #expect(try await client.call(.get, "/db/_index/\(path)").code == 404, "\(path)")
      }
      #expect(try await client.call(.get, "/db/_index/a/json/a").code == 405)
      #expect(try await client.call(.get, "/db/_index/_bulk_delete").code == 405)
      #expect(try await client.call(.delete, "/db/_index/a/text/a").code == 404)
      // `_design/` escaped into the design document's segment.
      #expect(try await client.call(.delete, "/db/_index/_design%2Fa/json/a").code == 200)
      let info = try await client.call(.get, "/db/_design/b/_info")
      #expect(info["name"] == .string("b"))
      #expect(info["view_index"]?["language"] == .string("query"))
      #expect(info["view_index"]?["updater_running"] == .bool(false))
      #expect(info["view_index"]?["sizes"]?["active"]?.int == 0)
      // The sizes are the index's rows: a document adds its id and values ("y", ["hello"]).
      #expect(try await client.call(.put, "/db/y", #"{"b": "hello"}"#).code == 201)
      let sizes = try await client.call(.get, "/db/_design/b/_info")["view_index"]?["sizes"]
      #expect(sizes?["external"]?.int == 10)
      #expect((sizes?["active"]?.int ?? 0) > 10 && sizes?["file"] == sizes?["active"])
      #expect(try await client.call(.get, "/db/_design/a/_info").code == 404)
      let bulk = try await client.call(
        .post, "/db/_index/_bulk_delete", #"{"docids": ["b", "_design/c", "nope"]}"#)
      #expect(
        bulk.json
          == json(
            #"{"success": [{"id": "_design/c", "ok": true}, {"id": "_design/b", "ok": true}], "fail": [{"id": "_design/nope", "error": "not_found"}]}"#
          ))
      #expect(try await client.call(.get, "/db/_index")["total_rows"]?.int == 1)
      #expect(
        try await client.call(.post, "/db/_index/_bulk_delete", #"{"docids": [1]}"#).error
          == "invalid_bulk_docs")
      // Design documents are never `_find` results.
      #expect(try await client.call(.put, "/db/x", #"{"a": 1}"#).code == 201)
      let all = try await client.call(.post, "/db/_find", #"{"selector": {}}"#)
      #expect(all["docs"]?.arrayValue?.compactMap { $0["_id"]?.stringValue } == ["x", "y"])
    }
  }

  @Test("_find shows, counts and pages only what the caller may read; _index needs a db admin")
  func findRespectsAccess() async throws {
    try await withAccessServer { client, fixture in
      let q = #"{"selector": {"type": {"$in": ["page", "wiki", "note"]}}, "execution_stats": true}"#
      let expected: [String: [String]] = [
        "admin": ["note", "w1", "w1:Home", "w2", "w2:Home"], "alice": ["w1", "w1:Home"],
        "bob": ["w1", "w1:Home"], "carol": ["w2", "w2:Home"],
      ]
      for round in 0..<2 {
        for (who, ids) in expected {
          let r = try await client.call(
            .post, "/wiki/_find", q, headers: AccessFixture.headers(who))
          #expect(r.code == 200, "\(who)")
          let found = r["docs"]?.arrayValue?.compactMap { $0["_id"]?.stringValue } ?? []
          #expect(found.sorted() == ids, "\(who), round \(round)")
          #expect(r["execution_stats"]?["total_docs_examined"]?.int == ids.count, "\(who)")
          #expect(r["execution_stats"]?["total_keys_examined"]?.int == ids.count, "\(who)")
          #expect(
            !r.text.contains(who == "carol" ? "Hidden text" : "carol's page") || who == "admin")
        }
        if round == 0 {
          // Only a database admin may create an index (a design document).
          let refused = try await client.call(
            .post, "/wiki/_index", #"{"index": {"fields": ["type"]}, "ddoc": "t"}"#,
            headers: AccessFixture.headers("bob"))
          #expect(refused.code == 403)
          let made = try await client.call(
            .post, "/wiki/_index", #"{"index": {"fields": ["type"]}, "ddoc": "t"}"#,
            headers: AccessFixture.headers("admin"))
          #expect(made["result"] == .string("created"))
          #expect(
            try await client.call(
              .delete, "/wiki/_index/t/json/x", headers: AccessFixture.headers("bob")
            ).code == 403)
        }
      }
      #expect(
        try await client.call(.post, "/wiki/_find", q, headers: AccessFixture.headers(nil)).code
          == 401)
      #expect(
        try await client.call(.get, "/_active_tasks", headers: AccessFixture.headers("bob")).code
          == 401)
      _ = fixture
    }
  }

  @Test("_search finds pages only in wikis the caller may read, with snippets")
  func searchRespectsAccess() async throws {
    try await withAccessServer { client, _ in
      func ids(_ who: String, _ path: String) async throws -> [String] {
        let r = try await client.call(.get, path, headers: AccessFixture.headers(who))
        #expect(r.code == 200, "\(who) \(path): \(r.text)")
        return r["rows"]?.arrayValue?.compactMap { $0["id"]?.stringValue } ?? []
      }
      #expect(try await ids("bob", "/wiki/_search?q=text") == ["w1:Home"])
      #expect(try await ids("carol", "/wiki/_search?q=text") == [])
      #expect(try await ids("carol", "/wiki/_search?q=page") == ["w2:Home"])
      #expect(try await ids("bob", "/wiki/_search?q=page&wiki=w2") == [])
      #expect(try await ids("admin", "/wiki/_search?q=hidden") == ["w1:Home"])
      let r = try await client.call(
        .get, "/wiki/_search?q=hidden", headers: AccessFixture.headers("alice"))
      #expect(r["total_rows"]?.int == 1)
      #expect(r["rows"]?[0]?["snippet"]?.stringValue == "<mark>Hidden</mark> text of w1")
      #expect(r["rows"]?[0]?["title"] == .string("Home"))
      let carol = try await client.call(
        .get, "/wiki/_search?q=hidden", headers: AccessFixture.headers("carol"))
      #expect(carol["total_rows"]?.int == 0)
      #expect(
        try await client.call(.get, "/wiki/_search", headers: AccessFixture.headers("bob")).code
          == 400)
      #expect(try await client.call(.get, "/wiki/_search?q=text").code == 401)
    }
  }
}
