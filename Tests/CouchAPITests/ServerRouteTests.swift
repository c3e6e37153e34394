import CouchAPI
import CouchQuery
import CouchTestSupport
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import JSON
import Log
import NIOCore
import Projections
import Query
import Replication
import RevTree
import Testing
import Wiki

@Suite struct ServerRouteTests {
  @Test("GET / is CouchDB's welcome; other methods are 405")
  func welcome() async throws {
    try await withServer { client, _ in
      let r = try await client.call(.get, "/")
      #expect(r.code == 200)
      #expect(r["couchdb"]?.stringValue == "Welcome")
      #expect(r["version"]?.stringValue != nil)
      #expect(r["vendor"]?["name"]?.stringValue == "wikilog")
      #expect(r.headers[.contentType] == "application/json")
      let post = try await client.call(.post, "/", "{}")
      #expect(post.code == 405)
      #expect(post.error == "method_not_allowed")
      #expect(post.headers[.allow] != nil)
    }
  }

  @Test("_up, _uuids and _all_dbs")
  func serverEndpoints() async throws {
    try await withServer { client, dir in
      #expect(try await client.call(.get, "/_up")["status"]?.stringValue == "ok")
      let one = try await client.call(.get, "/_uuids")
      #expect(one["uuids"]?.strings.count == 1)
      let many = try await client.call(.get, "/_uuids?count=5")
      let ids = many["uuids"]?.strings ?? []
      #expect(ids.count == 5 && Set(ids).count == 5)
      #expect(ids.allSatisfy { $0.count == 32 && $0.allSatisfy(\.isHexDigit) })
      #expect(try await client.call(.get, "/_uuids?count=1001").code == 400)
      #expect(try await client.call(.get, "/_uuids?count=abc").error == "bad_request")
      #expect(try await client.call(.get, "/_all_dbs").json == .array([]))
      _ = try dir.data.create("beta")
      _ = try dir.data.create("alpha")
      #expect(try await client.call(.get, "/_all_dbs").json?.strings == ["alpha", "beta"])
    }
  }

  @Test("databases: create, info, head, delete, and their errors")
  func databases() async throws {
    try await withServer { client, _ in
      let created = try await client.call(.put, "/wiki")
      #expect(created.code == 201)
      #expect(created.json == json(#"{"ok":true}"#))
      #expect(created.headers[.location] == "http://localhost/wiki")  // absolute, as CouchDB gives it
      let again = try await client.call(.put, "/wiki")
      #expect(again.code == 412)
      #expect(again.error == "file_exists")
      #expect(try await client.call(.head, "/wiki").code == 200)
      #expect(try await client.call(.head, "/nothing").code == 404)

      let info = try await client.call(.get, "/wiki")
      #expect(info.code == 200)
      #expect(info["db_name"]?.stringValue == "wiki")
      #expect(info["update_seq"]?.seq == 0)
      #expect(info["doc_count"]?.int == 0)
      #expect(info["doc_del_count"]?.int == 0)
      #expect(info["instance_start_time"]?.stringValue == "0")
      #expect(info["purge_seq"] != nil)
      #expect((info["sizes"]?["file"]?.int ?? 0) > 0)
      // `/{db}/` behaves as `/{db}`.
      #expect(try await client.call(.get, "/wiki/")["db_name"]?.stringValue == "wiki")

      try await client.call(.put, "/wiki/a", #"{"x":1}"#)
      let after = try await client.call(.get, "/wiki")
      #expect(after["doc_count"]?.int == 1)
      #expect(after["update_seq"]?.seq == 1)

      let illegal = try await client.call(.put, "/Wiki")
      #expect(illegal.code == 400)
      #expect(illegal.error == "illegal_database_name")
      // Reading or deleting a name no database can have: 404, as CouchDB 3.4 answers.
      #expect(try await client.call(.get, "/_nope").code == 404)
      #expect(try await client.call(.get, "/Wiki").code == 404)
      #expect(try await client.call(.delete, "/Wiki").code == 404)
      let missing = try await client.call(.get, "/nothing")
      #expect(missing.code == 404)
      #expect(missing.error == "not_found")
      #expect(try await client.call(.get, "/nothing/doc").code == 404)

      #expect(try await client.call(.delete, "/wiki?rev=1-abc").code == 400)
      #expect(try await client.call(.delete, "/wiki").json == json(#"{"ok":true}"#))
      #expect(try await client.call(.get, "/wiki").code == 404)
      #expect(try await client.call(.delete, "/wiki").code == 404)
      #expect(try await client.call(.patch, "/wiki").code == 405)
    }
  }

  @Test("a database name with a slash arrives percent-encoded")
  func slashInDatabaseName() async throws {
    try await withServer { client, _ in
      let created = try await client.call(.put, "/team%2Fwiki")
      #expect(created.code == 201)
      #expect(try await client.call(.get, "/_all_dbs").json?.strings == ["team/wiki"])
      #expect(try await client.call(.get, "/team%2Fwiki")["db_name"]?.stringValue == "team/wiki")
      #expect(try await client.call(.put, "/team%2Fwiki/d", "{}").code == 201)
      #expect(try await client.call(.get, "/team%2Fwiki/d")["_id"]?.stringValue == "d")
    }
  }

  @Test("_ensure_full_commit and _revs_limit")
  func commitAndRevsLimit() async throws {
    try await withServer { client, _ in
      try await client.call(.put, "/db")
      let commit = try await client.call(.post, "/db/_ensure_full_commit", "")
      #expect(commit.code == 201)
      #expect(commit.json == json(#"{"ok":true,"instance_start_time":"0"}"#))
      #expect(try await client.call(.get, "/db/_ensure_full_commit").code == 405)
      #expect(try await client.call(.get, "/db/_revs_limit").json == json("1000"))
      #expect(try await client.call(.put, "/db/_revs_limit", "7").json == json(#"{"ok":true}"#))
      #expect(try await client.call(.get, "/db/_revs_limit").json == json("7"))
      #expect(try await client.call(.put, "/db/_revs_limit", "0").code == 400)
      #expect(try await client.call(.put, "/db/_revs_limit", #""x""#).code == 400)
      #expect(try await client.call(.put, "/db/_revs_limit", "{").error == "bad_request")
    }
  }

  @Test(
    "_view_cleanup: 202 ok for POST (no index is ever left behind), 405 otherwise, 404 without the db"
  )
  func viewCleanup() async throws {
    try await withServer { client, _ in
      try await client.call(.put, "/db")
      let index = try await client.call(
        .post, "/db/_index", #"{"index":{"fields":["a"]},"ddoc":"d","name":"byA"}"#)
      #expect(index.code == 200)
      try await client.call(.put, "/db/x", #"{"a":1}"#)
      let ddoc = try await client.call(.get, "/db/_design/d")
      let rev = ddoc["_rev"]?.stringValue ?? ""
      #expect(try await client.call(.delete, "/db/_design/d?rev=\(rev)").code == 200)
      let cleanup = try await client.call(.post, "/db/_view_cleanup", "")
      #expect(cleanup.code == 202)
      #expect(cleanup.json == json(#"{"ok":true}"#))
      // The deleted design document's index was gone before the cleanup, and stays gone.
      let indexes = try await client.call(.get, "/db/_index")
      #expect(indexes["total_rows"]?.int == 1)
      #expect(try await client.call(.get, "/db/_view_cleanup").code == 405)
      #expect(try await client.call(.post, "/nodb/_view_cleanup", "").code == 404)
      #expect(try await client.call(.get, "/db/x")["a"]?.int == 1)
    }
  }

  @Test("DELETE: 404 missing or deleted first, as CouchDB opens the document; then 409 without rev")
  func deleteMissingOrDeleted() async throws {
    try await withServer { client, _ in
      try await client.call(.put, "/db")
      let missing = try await client.call(.delete, "/db/nope?rev=1-abc")
      #expect(missing.code == 404 && missing["reason"]?.stringValue == "missing")
      let created = try await client.call(.put, "/db/d", "{}")
      let rev = created["rev"]?.stringValue ?? ""
      #expect(try await client.call(.delete, "/db/d").code == 409)
      let deleted = try await client.call(.delete, "/db/d?rev=\(rev)")
      #expect(deleted.code == 200)
      let again = try await client.call(.delete, "/db/d?rev=\(deleted["rev"]?.stringValue ?? "")")
      #expect(again.code == 404 && again["reason"]?.stringValue == "deleted")
    }
  }

  @Test("a JSON body sent Content-Encoding: gzip is gunzipped; other encodings are 415")
  func gzippedRequestBodies() async throws {
    try await withServer { client, _ in
      try await client.call(.put, "/db")
      func send(_ method: HTTPRequest.Method, _ uri: String, _ body: [UInt8], _ encoding: String)
        async throws -> (Int, JSONValue?)
      {
        var headers = HTTPFields()
        headers[.contentType] = "application/json"
        headers[.contentEncoding] = encoding
        headers[.accept] = "application/json"
        return try await client.execute(
          uri: uri, method: method, headers: headers, body: ByteBuffer(bytes: body)
        ) { ($0.status.code, try? JSONValue(parsing: Array($0.body.readableBytesView))) }
      }
      let doc = AttachmentEncoding.gzip(Array(#"{"a":1}"#.utf8))
      #expect(try await send(.put, "/db/zipped", doc, "gzip").0 == 201)
      #expect(try await client.call(.get, "/db/zipped")["a"]?.int == 1)
      let bulk = AttachmentEncoding.gzip(Array(#"{"docs":[{"_id":"b1"},{"_id":"b2"}]}"#.utf8))
      #expect(try await send(.post, "/db/_bulk_docs", bulk, "gzip").0 == 201)
      #expect(try await client.call(.get, "/db/b2").code == 200)
      let notGzip = try await send(.put, "/db/bad", Array(#"{"a":1}"#.utf8), "gzip")
      #expect(notGzip.0 == 400)
      let brotli = try await send(.put, "/db/br", Array(#"{"a":1}"#.utf8), "br")
      #expect(brotli.0 == 415 && brotli.1?["error"]?.stringValue == "bad_content_type")
      #expect(try await send(.put, "/db/plain", Array(#"{"a":2}"#.utf8), "identity").0 == 201)
      #expect(try await client.call(.get, "/db/bad").code == 404)
    }
  }

  @Test("new_edits=false without _rev or _revisions fails the whole _bulk_docs, as in CouchDB")
  func replicatedWithoutRev() async throws {
    try await withServer { client, _ in
      try await client.call(.put, "/db")
      let r = try await client.call(
        .post, "/db/_bulk_docs",
        #"{"new_edits":false,"docs":[{"_id":"ok","_rev":"1-a"},{"_id":"norev"}]}"#)
      #expect(r.code == 400 && r.error == "bad_request")
      #expect(r["reason"]?.stringValue?.contains("needs `_rev` or `_revisions`") == true)
      #expect(try await client.call(.get, "/db/ok").code == 404)
      // _revisions alone names the revision.
      let revisions = try await client.call(
        .post, "/db/_bulk_docs",
        #"{"new_edits":false,"docs":[{"_id":"r","_revisions":{"start":2,"ids":["b","a"]}}]}"#)
      #expect(revisions.code == 201, "\(revisions.text)")
      #expect(try await client.call(.get, "/db/r")["_rev"]?.stringValue == "2-b")
    }
  }

  @Test("/{db}/_local%2F{id} is the local document, as /{db}/_local/{id} is")
  func encodedLocalPath() async throws {
    try await withServer { client, _ in
      try await client.call(.put, "/db")
      let put = try await client.call(.put, "/db/_local%2Fcp", #"{"seq":3}"#)
      #expect(put.code == 201 && put["id"]?.stringValue == "_local/cp")
      #expect(try await client.call(.get, "/db/_local/cp")["seq"]?.seq == 3)
      #expect(try await client.call(.get, "/db/_local%2Fcp")["seq"]?.seq == 3)
      #expect(try await client.call(.get, "/db")["doc_count"]?.int == 0)
    }
  }

  @Test("_all_dbs takes CouchDB's startkey, endkey, inclusive_end, descending, skip and limit")
  func allDbsOptions() async throws {
    try await withServer { client, _ in
      for name in ["a", "b", "c", "d"] { try await client.call(.put, "/" + name) }
      func names(_ query: String) async throws -> [String] {
        try await client.call(.get, "/_all_dbs" + query).json?.strings ?? ["(error)"]
      }
      #expect(try await names("") == ["a", "b", "c", "d"])
      #expect(try await names("?limit=2") == ["a", "b"])
      #expect(try await names("?skip=1&limit=2") == ["b", "c"])
      #expect(try await names("?descending=true") == ["d", "c", "b", "a"])
      #expect(try await names("?startkey=%22b%22") == ["b", "c", "d"])
      #expect(try await names("?start_key=%22b%22&endkey=%22c%22") == ["b", "c"])
      #expect(try await names("?startkey=%22b%22&endkey=%22c%22&inclusive_end=false") == ["b"])
      #expect(try await names("?descending=true&startkey=%22c%22&endkey=%22b%22") == ["c", "b"])
      for bad in ["?limit=abc", "?limit=-1", "?descending=yes", "?startkey=1"] {
        let r = try await client.call(.get, "/_all_dbs" + bad)
        #expect(r.code == 400 && r.error == "query_parse_error", "\(bad)")
      }
      // Not JSON: CouchDB's `bad_request`.
      let notJSON = try await client.call(.get, "/_all_dbs?startkey=b")
      #expect(notJSON.code == 400 && notJSON.error == "bad_request")
    }
  }

  @Test("requests larger than the limit are 413 too_large and write nothing")
  func bodyLimit() async throws {
    var options = CouchServerOptions.standard
    options.maxRequestBytes = 1000
    try await withServer(options: options) { client, dir in
      try await client.call(.put, "/db")
      let big = #"{"text":""# + String(repeating: "x", count: 2000) + #""}"#
      let r = try await client.call(.put, "/db/big", big)
      #expect(r.code == 413)
      #expect(r.error == "too_large")
      #expect(try dir.data.open("db").info.updateSeq == 0)
      #expect(try await client.call(.put, "/db/small", #"{"text":"x"}"#).code == 201)
    }
  }

  @Test("unsupported paths say why")
  func unsupported() async throws {
    try await withServer { client, _ in
      try await client.call(.put, "/db")
      let attachment = try await client.call(.get, "/db/doc/file.txt")
      #expect(attachment.code == 404 && attachment["reason"] == .string("missing"))
      // A view of a design document that does not exist: CouchDB's 404.
      #expect(try await client.call(.get, "/db/_design/x/_view/v").code == 404)
      #expect(try await client.call(.get, "/db/_design/x/_rewrite/v").code == 404)
      #expect(try await client.call(.get, "/db/%zz").error == "bad_request")
    }
  }
}
