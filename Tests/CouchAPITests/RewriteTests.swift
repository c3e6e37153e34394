import CouchAPI
import CouchTestSupport
import Foundation
import HTTPTypes
import JSON
import Testing

/// `/{db}/_design/{ddoc}/_rewrite/...`: a design document's rules and rewrite functions, the
/// request routed again as its caller, as `chttpd_rewrite` answers.
@Suite struct RewriteTests {
  static let rules = #"""
    {"_attachments": {"foo.txt": {"content_type": "text/plain", "data": "aGVsbG8gZmlsZQ=="}},
     "rewrites": [
       {"from": "foo", "to": "foo.txt"},
       {"from": "doc/:id", "to": "../../:id", "method": "GET"},
       {"from": "doc/:id", "to": "_update/stamp/:id", "method": "PUT"},
       {"from": "hi/:name", "to": "_show/hi", "query": {"name": ":name"}},
       {"from": "range/:start/:end", "to": "_view/by_n",
        "query": {"startkey": ":start", "endkey": ":end", "reduce": "false"},
        "formats": {"start": "int", "end": "int"}},
       {"from": "pair/:a/:b", "to": "_view/by_pair", "query": {"key": [":a", ":b"]}},
       {"from": "db/*", "to": "../../*"},
       {"from": "/", "to": "_view/by_n"}
     ],
     "shows": {"hi": "function(doc, req) { return 'Hello ' + req.query.name }"},
     "updates": {"stamp": "function(doc, req) { doc.stamped = true; return [doc, 'stamped ' + doc._id] }"},
     "views": {
       "by_n": {"map": "function(doc) { if (doc.n !== undefined) emit(doc.n, null) }"},
       "by_pair": {"map": "function(doc) { if (doc.a) emit([doc.a, doc.b], doc._id) }"}}}
    """#

  @Test("rules: bindings, formats, JSON keys, *, methods, attachments and their errors")
  func rules() async throws {
    try await withServer { client, _ in
      #expect(try await client.call(.put, "/db").code == 201)
      for i in 0..<6 { _ = try await client.call(.put, "/db/d\(i)", #"{"n":\#(i)}"#) }
      _ = try await client.call(.put, "/db/p", #"{"a":"x","b":"y"}"#)
      #expect(try await client.call(.put, "/db/_design/r", Self.rules).code == 201)
      let base = "/db/_design/r/_rewrite"

      let file = try await client.call(.get, base + "/foo")
      #expect(file.code == 200 && file.text == "hello file")
      #expect(file.headers[.contentType] == "text/plain")
      let doc = try await client.call(.get, base + "/doc/d2")
      #expect(doc["n"] == .int(2))
      let stamped = try await client.call(.put, base + "/doc/d3")
      #expect(stamped.code == 201 && stamped.text == "stamped d3")
      #expect(try await client.call(.get, "/db/d3")["stamped"] == .bool(true))
      #expect(try await client.call(.get, base + "/hi/ann").text == "Hello ann")
      // `:start` and `:end` made integers: keys 2 to 4.
      let range = try await client.call(.get, base + "/range/2/4")
      #expect(range["rows"]?.arrayValue?.map { $0["key"] } == [.int(2), .int(3), .int(4)])
      let pair = try await client.call(.get, base + "/pair/x/y")
      #expect(pair["rows"]?.arrayValue?.map { $0["id"] } == [.string("p")])
      // A request's own key parameters travel as JSON.
      let keyed = try await client.call(.get, base + "?key=5")
      #expect(keyed["rows"]?.arrayValue?.map { $0["key"] } == [.int(5)])
      // `*` takes the rest of the path, with the query string.
      let meta = try await client.call(.get, base + "/db/_design/r?revs_info=true")
      #expect(meta["_id"] == .string("_design/r") && meta["_revs_info"] != nil)

      let none = try await client.call(.delete, base + "/nothing/here/at/all")
      #expect(none.code == 404 && none.error == "not_found")
      #expect(try await client.call(.put, "/db/_design/empty", "{}").code == 201)
      let empty = try await client.call(.get, "/db/_design/empty/_rewrite/x")
      #expect(empty.code == 404 && empty.error == "rewrite_error")
      let missing = try await client.call(.get, "/db/_design/nope/_rewrite/x")
      #expect(missing.code == 404)
    }
  }

  @Test("a rule out of its database is refused unless secure_rewrites is off; loops stop")
  func secureAndLimited() async throws {
    try await withServer { client, _ in
      #expect(try await client.call(.put, "/db").code == 201)
      let out = #"{"rewrites": [{"from": "uuids", "to": "../../../_uuids"}]}"#
      #expect(try await client.call(.put, "/db/_design/out", out).code == 201)
      let refused = try await client.call(.get, "/db/_design/out/_rewrite/uuids")
      #expect(refused.code == 500 && refused.error == "insecure_rewrite_rule")
      let config = "/_node/_local/_config/chttpd/"
      #expect(try await client.call(.put, config + "secure_rewrites", #""false""#).code == 200)
      let uuids = try await client.call(.get, "/db/_design/out/_rewrite/uuids")
      #expect(uuids.code == 200 && uuids["uuids"]?.arrayValue?.count == 1)
      #expect(try await client.call(.delete, config + "secure_rewrites").code == 200)
      #expect(try await client.call(.get, "/db/_design/out/_rewrite/uuids").code == 500)

      let loop = #"{"rewrites": [{"from": "loop", "to": "_rewrite/loop"}]}"#
      #expect(try await client.call(.put, "/db/_design/loop", loop).code == 201)
      let looped = try await client.call(.get, "/db/_design/loop/_rewrite/loop")
      #expect(looped.code == 400 && looped["reason"] == .string("Exceeded rewrite recursion limit"))
      #expect(try await client.call(.put, config + "rewrite_limit", #""x""#).code == 400)
    }
  }

  @Test("a rewrite function: a path, a request of its own, an answer of its own, nothing")
  func functions() async throws {
    try await withServer { client, _ in
      #expect(try await client.call(.put, "/db").code == 201)
      for id in ["a", "b"] { _ = try await client.call(.put, "/db/\(id)", "{}") }
      let design = #"""
        {"rewrites": "function(req) { var p = req.path.slice(4).join('/'); if (p === 'changes') return {path: '../../_changes', query: {filter: '_doc_ids'}}; if (p === 'teapot') return {code: 418, body: 'short and stout', headers: {'X-Pot': 'tea'}}; if (p === 'who') return {path: '_show/who', method: 'GET'}; if (p === 'db') return '../..'; }",
         "shows": {"who": "function(doc, req) { return req.method + ' ' + req.path[0] }"}}
        """#
      #expect(try await client.call(.put, "/db/_design/f", design).code == 201)
      let base = "/db/_design/f/_rewrite"
      // The body is passed on; the function's query replaces the request's.
      let changes = try await client.call(.post, base + "/changes?x=1", #"{"doc_ids":["b"]}"#)
      #expect(changes["results"]?.arrayValue?.map { $0["id"] } == [.string("b")])
      let pot = try await client.call(.get, base + "/teapot")
      #expect(pot.code == 418 && pot.text == "short and stout")
      #expect(pot.headers[HTTPField.Name("X-Pot")!] == "tea")
      #expect(try await client.call(.post, base + "/who", "{}").text == "GET db")
      #expect(try await client.call(.get, base + "/db")["db_name"] == .string("db"))
      let nothing = try await client.call(.get, base + "/else")
      #expect(nothing.code == 404 && nothing.error == "rewrite_error")
      let bad = #"{"rewrites": "function(req) { return {path: 5} }"}"#
      #expect(try await client.call(.put, "/db/_design/bad", bad).code == 201)
      let badAnswer = try await client.call(.get, "/db/_design/bad/_rewrite")
      #expect(badAnswer.code == 500 && badAnswer.error == "rewrite_error")
    }
  }

  @Test("a rewritten request is its caller's: it reaches nothing they could not reach directly")
  func callersAccess() async throws {
    try await withAccessServer { client, _ in
      let admin = AccessFixture.headers("admin")
      // A database everyone reads, whose rule leads into the wiki's database.
      #expect(try await client.call(.put, "/open", headers: admin).code == 201)
      let open = #"{"members": {"names": [], "roles": []}}"#
      #expect(try await client.call(.put, "/open/_security", open, headers: admin).code == 200)
      let design = #"{"rewrites": [{"from": "home", "to": "../../../wiki/w1:Home"}]}"#
      #expect(try await client.call(.put, "/open/_design/go", design, headers: admin).code == 201)
      let config = "/_node/_local/_config/chttpd/secure_rewrites"
      #expect(try await client.call(.put, config, #""false""#, headers: admin).code == 200)
      let path = "/open/_design/go/_rewrite/home"
      let bob = try await client.call(.get, path, headers: AccessFixture.headers("bob"))
      #expect(bob.code == 200 && bob["markdown"] == .string("Hidden text of w1"))
      let carol = try await client.call(.get, path, headers: AccessFixture.headers("carol"))
      #expect(carol.code == 403 || carol.code == 404)
      #expect(!carol.text.contains("Hidden text"))
      let anonymous = try await client.call(.get, path, headers: [:])
      #expect(anonymous.code == 401 || anonymous.code == 403 || anonymous.code == 404)
      #expect(!anonymous.text.contains("Hidden text"))
    }
  }

  @Test("chttpd/WWW-Authenticate and X-CouchDB-WWW-Authenticate name a 401's challenge")
  func challenge() async throws {
    try await withAccessServer { client, _ in
      let admin = AccessFixture.headers("admin")
      let before = try await client.call(
        .get, "/_all_dbs", headers: AccessFixture.headers("nobody"))
      #expect(before.code == 401 && before.headers[.wwwAuthenticate] == nil)
      let set = try await client.call(
        .put, "/_node/_local/_config/chttpd/WWW-Authenticate", #""Basic realm=\"wl\"""#,
        headers: admin)
      #expect(set.code == 200)
      let after = try await client.call(.get, "/_all_dbs", headers: AccessFixture.headers("nobody"))
      #expect(after.code == 401 && after.headers[.wwwAuthenticate] == #"Basic realm="wl""#)
      var asked = AccessFixture.headers("nobody")
      asked[HTTPField.Name("X-CouchDB-WWW-Authenticate")!] = "Cookie"
      #expect(
        try await client.call(.get, "/_all_dbs", headers: asked).headers[.wwwAuthenticate]
          == "Cookie")
      #expect(
        try await client.call(
          .delete, "/_node/_local/_config/chttpd/WWW-Authenticate", headers: admin
        ).code == 200)
      let reset = try await client.call(.get, "/_all_dbs", headers: AccessFixture.headers("nobody"))
      #expect(reset.headers[.wwwAuthenticate] == nil)
    }
  }
}
