import CouchAPI
import CouchTestSupport
import Foundation
import HTTPTypes
import JSON
import Projections
import Testing

/// Views and the design functions around them over HTTP, as CouchDB serves them.
@Suite struct ViewRouteTests {
  static let design = #"""
    {"views": {
       "by_n": {"map": "function(doc) { if (doc.n !== undefined) emit(doc.n, doc._id) }",
                "reduce": "_count"}},
     "shows": {"s": "function(doc, req) { return '<b>' + (doc ? doc._id : 'none') + '</b>' }"},
     "updates": {"bump": "function(doc, req) { doc.n = (doc.n || 0) + 1; return [doc, {json: {n: doc.n}}] }"},
     "lists": {"ids": "function(head, req) { var r; while ((r = getRow())) send(r.id + ' '); }"},
     "filters": {"odd": "function(doc, req) { return doc.n % 2 === 1 }"},
     "validate_doc_update": "function(doc, old, user) { if (doc.n < 0) throw({forbidden: 'n must not be negative'}); if (doc.locked && !user.name) throw({unauthorized: 'sign in'}) }"}
    """#

  @Test("GET and POST _view, /queries, _info, _view_cleanup, errors in CouchDB's shape")
  func views() async throws {
    try await withServer { client, _ in
      #expect(try await client.call(.put, "/db").code == 201)
      for i in 0..<5 { _ = try await client.call(.put, "/db/d\(i)", #"{"n":\#(i)}"#) }
      #expect(try await client.call(.put, "/db/_design/app", Self.design).code == 201)
      let all = try await client.call(.get, "/db/_design/app/_view/by_n?reduce=false")
      #expect(all.code == 200 && all["total_rows"] == .int(5))
      #expect(all["rows"]?.arrayValue?.map { $0["id"] } == (0..<5).map { .string("d\($0)") })
      let count = try await client.call(.get, "/db/_design/app/_view/by_n")
      #expect(count["rows"] == JSONValue.array([json(#"{"key":null,"value":5}"#)]))
      let posted = try await client.call(
        .post, "/db/_design/app/_view/by_n?reduce=false", #"{"keys":[3,1]}"#)
      #expect(posted["rows"]?.arrayValue?.map { $0["key"] } == [.int(3), .int(1)])
      let many = try await client.call(
        .post, "/db/_design/app/_view/by_n/queries",
        #"{"queries":[{"reduce":false,"limit":1},{"group":true,"startkey":4}]}"#)
      #expect(many["results"]?.arrayValue?.count == 2)
      let bad = try await client.call(.get, "/db/_design/app/_view/by_n?group_level=x")
      #expect(bad.code == 400 && bad.error == "query_parse_error")
      #expect(try await client.call(.get, "/db/_design/app/_view/nope").code == 404)
      #expect(try await client.call(.get, "/db/_design/none/_view/by_n").code == 404)
      let info = try await client.call(.get, "/db/_design/app/_info")
      #expect(info["name"] == .string("app"))
      #expect(info["view_index"]?["language"] == .string("javascript"))
      // A new version of the views: a new index; cleanup removes the old one's files.
      let rev = try #require(try await client.call(.get, "/db/_design/app")["_rev"]?.stringValue)
      let changed = Self.design.replacingOccurrences(of: "_count", with: "_sum")
        .replacingOccurrences(of: "emit(doc.n, doc._id)", with: "emit(doc.n, doc.n)")
      #expect(try await client.call(.put, "/db/_design/app?rev=\(rev)", changed).code == 201)
      let sum = try await client.call(.get, "/db/_design/app/_view/by_n")
      #expect(sum["rows"]?.arrayValue?.first?["value"] == .int(10))
      #expect(try await client.call(.post, "/db/_view_cleanup", "{}").code == 202)
      // Compacting the view index: the next query opens it again, with the same rows.
      #expect(try await client.call(.post, "/db/_compact/app", "{}").code == 202)
      #expect(try await client.call(.get, "/db/_design/app/_view/by_n")["rows"] == sum["rows"])
      #expect(try await client.call(.post, "/db/_compact/none", "{}").code == 404)
      // A map function that does not compile is refused when saved.
      let broken = try await client.call(
        .put, "/db/_design/broken", #"{"views":{"v":{"map":"function(doc) {"}}}"#)
      #expect(broken.code == 400 && broken.error == "compilation_error")
    }
  }

  @Test("a purge reaches a view index that was closed then (compacted, or not yet opened)")
  func purgeReachesClosedViews() async throws {
    try await withServer { client, _ in
      #expect(try await client.call(.put, "/db").code == 201)
      for i in 0..<3 { _ = try await client.call(.put, "/db/d\(i)", #"{"n":\#(i)}"#) }
      #expect(try await client.call(.put, "/db/_design/app", Self.design).code == 201)
      let all = "/db/_design/app/_view/by_n?reduce=false"
      #expect(try await client.call(.get, all)["total_rows"] == .int(3))
      // Compacting closes the index; the next query opens it again.
      #expect(try await client.call(.post, "/db/_compact/app", "{}").code == 202)
      let rev = try #require(try await client.call(.get, "/db/d1")["_rev"]?.stringValue)
      let purged = try await client.call(.post, "/db/_purge", #"{"d1":["\#(rev)"]}"#)
      #expect(purged.code == 201)
      let after = try await client.call(.get, all)
      #expect(after["total_rows"] == .int(2))
      #expect(after["rows"]?.arrayValue?.map { $0["id"] } == [.string("d0"), .string("d2")])
      #expect(
        try await client.call(.get, "/db/_design/app/_view/by_n")["rows"]?
          .arrayValue?.first?["value"] == .int(2))
    }
  }

  @Test("validate_doc_update answers 403 and 401; JavaScript filters; _show, _list, _update")
  func designFunctions() async throws {
    try await withServer { client, _ in
      #expect(try await client.call(.put, "/db").code == 201)
      #expect(try await client.call(.put, "/db/_design/app", Self.design).code == 201)
      let negative = try await client.call(.put, "/db/neg", #"{"n":-1}"#)
      #expect(negative.code == 403 && negative["reason"] == .string("n must not be negative"))
      let locked = try await client.call(.put, "/db/locked", #"{"n":1,"locked":true}"#)
      #expect(locked.code == 401 && locked.error == "unauthorized")
      let bulk = try await client.call(
        .post, "/db/_bulk_docs", #"{"docs":[{"_id":"x","n":-5},{"_id":"y","n":5}]}"#)
      #expect(bulk.json?.arrayValue?.map { $0["error"] } == [.string("forbidden"), nil])
      for i in 0..<4 { _ = try await client.call(.put, "/db/d\(i)", #"{"n":\#(i)}"#) }
      let odd = try await client.call(.get, "/db/_changes?filter=app/odd")
      let ids = odd["results"]?.arrayValue?.compactMap { $0["id"]?.stringValue }
      #expect(Set(ids ?? []) == ["d1", "d3", "y"])
      let show = try await client.call(.get, "/db/_design/app/_show/s/d2")
      #expect(show.code == 200 && show.text == "<b>d2</b>")
      let list = try await client.call(.get, "/db/_design/app/_list/ids/by_n?reduce=false&limit=2")
      #expect(list.text == "d0 d1 ")
      let picked = try await client.call(
        .post, "/db/_design/app/_list/ids/by_n?reduce=false", #"{"keys":[3,1]}"#)
      #expect(picked.text == "d3 d1 ")
      let bumped = try await client.call(.post, "/db/_design/app/_update/bump/d2")
      #expect(bumped.code == 201 && bumped["n"] == .int(3))
      #expect(bumped.headers[HTTPField.Name("X-Couch-Update-NewRev")!]?.hasPrefix("2-") == true)
    }
  }

  @Test("a wiki user's view rows come only from the documents they may read")
  func accessFiltersRows() async throws {
    try await withAccessServer { client, fixture in
      let admin = AccessFixture.headers("admin")
      let design =
        #"{"views":{"types":{"map":"function(doc) { emit(doc.type || null, null) }","reduce":"_count"}}}"#
      #expect(try await client.call(.put, "/wiki/_design/t", design, headers: admin).code == 201)
      // Design documents are for database admins.
      let refused = try await client.call(
        .put, "/wiki/_design/mine", design, headers: AccessFixture.headers("bob"))
      #expect(refused.code == 403)
      let bob = try await client.call(
        .get, "/wiki/_design/t/_view/types?reduce=false", headers: AccessFixture.headers("bob"))
      let seen = Set(bob["rows"]?.arrayValue?.compactMap { $0["id"]?.stringValue } ?? [])
      #expect(seen == ["w1", "w1:Home"])
      let all = try await client.call(
        .get, "/wiki/_design/t/_view/types?reduce=false", headers: admin)
      #expect((all["rows"]?.arrayValue?.count ?? 0) >= 5)
      let counted = try await client.call(
        .get, "/wiki/_design/t/_view/types", headers: AccessFixture.headers("bob"))
      #expect(counted["rows"]?.arrayValue?.first?["value"] == .int(2))
      // A show function sees only what the caller may read.
      let shows = #"{"shows":{"md":"function(doc) { return doc ? doc.markdown : 'none' }"}}"#
      #expect(try await client.call(.put, "/wiki/_design/s", shows, headers: admin).code == 201)
      let own = try await client.call(
        .get, "/wiki/_design/s/_show/md/w1:Home", headers: AccessFixture.headers("bob"))
      #expect(own.code == 200 && own.text.contains("Hidden text of w1"))
      let others = try await client.call(
        .get, "/wiki/_design/s/_show/md/w2:Home", headers: AccessFixture.headers("bob"))
      #expect(others.code == 404 && !others.text.contains("carol"))
    }
  }

  @Test("query_server_config limits: a larger limit is 400, none is the most; partitions apart")
  func queryLimits() async throws {
    try await withServer { client, _ in
      #expect(try await client.call(.put, "/db").code == 201)
      for i in 0..<5 { _ = try await client.call(.put, "/db/d\(i)", #"{"n":\#(i)}"#) }
      #expect(try await client.call(.put, "/db/_design/app", Self.design).code == 201)
      let config = "/_node/_local/_config/query_server_config/"
      #expect(try await client.call(.put, config + "query_limit", #""3""#).code == 200)
      let view = "/db/_design/app/_view/by_n?reduce=false"
      #expect(try await client.call(.get, view)["rows"]?.arrayValue?.count == 3)
      #expect(try await client.call(.get, view + "&limit=2")["rows"]?.arrayValue?.count == 2)
      let tooMany = try await client.call(.get, view + "&limit=4")
      #expect(tooMany.code == 400 && tooMany.error == "query_parse_error")
      #expect(tooMany["reason"] == .string("Limit is too large, must not exceed 3"))
      #expect(try await client.call(.get, "/db/_all_docs")["rows"]?.arrayValue?.count == 3)
      #expect(try await client.call(.get, "/db/_all_docs?limit=9").code == 400)
      #expect(try await client.call(.delete, config + "query_limit").code == 200)
      #expect(try await client.call(.get, "/db/_all_docs")["rows"]?.arrayValue?.count == 6)

      #expect(try await client.call(.put, "/p?partitioned=true").code == 201)
      for i in 0..<4 { _ = try await client.call(.put, "/p/a:d\(i)", "{}") }
      #expect(try await client.call(.put, config + "partition_query_limit", #""2""#).code == 200)
      let within = try await client.call(.get, "/p/_partition/a/_all_docs")
      #expect(within["rows"]?.arrayValue?.count == 2)
      #expect(try await client.call(.get, "/p/_partition/a/_all_docs?limit=3").code == 400)
      // The global query is not a partition's.
      #expect(try await client.call(.get, "/p/_all_docs")["rows"]?.arrayValue?.count == 4)
      #expect(try await client.call(.put, config + "query_limit", #""x""#).code == 400)
    }
  }

  @Test("a list answers JSON unless it says otherwise, OPTIONS too; errors name their kind")
  func listDefaults() async throws {
    try await withServer { client, _ in
      #expect(try await client.call(.put, "/db").code == 201)
      _ = try await client.call(.put, "/db/d1", #"{"n":1}"#)
      let design = #"""
        {"views": {"v": {"map": "function(doc) { emit(doc.n, null) }"}},
         "lists": {"sec": "function(head, req) { return toJSON(req.secObj) }",
                   "html": "function(head, req) { start({headers: {'Content-Type': 'text/html'}}); return '<p>' }",
                   "bad": "function(head, req) { send('head'); getRow(); fooBarBam.x; }"}}
        """#
      #expect(try await client.call(.put, "/db/_design/l", design).code == 201)
      let sec = try await client.call(.get, "/db/_design/l/_list/sec/v")
      #expect(sec.headers[.contentType] == "application/json" && sec.json?.objectValue != nil)
      let html = try await client.call(.get, "/db/_design/l/_list/html/v")
      #expect(html.headers[.contentType] == "text/html" && html.text == "<p>")
      #expect(try await client.call(.options, "/db/_design/l/_list/sec/v").code == 200)
      let bad = try await client.call(.get, "/db/_design/l/_list/bad/v")
      #expect(bad.text.contains("ReferenceError: fooBarBam is not defined"), "\(bad.text)")
    }
  }
}
