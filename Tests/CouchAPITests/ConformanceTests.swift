import AsyncHTTPClient
import CouchAPI
import CouchTestSupport
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import JSON
import Log
import NIOCore
import NIOHTTP1
import Projections
import Query
import Replication
import Testing

/// CouchDB 3.4's answers, each checked against what its source (`chttpd_db.erl`,
/// `chttpd_misc.erl`, `couch_mrview_http.erl`, `fabric_*.erl`) and documentation say.
@Suite struct ConformanceTests {
  static let copy = HTTPRequest.Method("COPY")!

  @Test("PUT /db/docid: the URL's id wins over a different _id in the body, with new_edits too")
  func urlIDWins() async throws {
    try await withServer { client, _ in
      try await client.call(.put, "/db")
      let put = try await client.call(.put, "/db/a", #"{"_id":"b","x":1}"#)
      #expect(put.code == 201)
      #expect(put["id"]?.stringValue == "a")
      #expect(put.headers[.location] == "http://localhost/db/a")
      #expect(try await client.call(.get, "/db/a")["x"]?.int == 1)
      #expect(try await client.call(.get, "/db/b").code == 404)
      let replicated = try await client.call(
        .put, "/db/c?new_edits=false", #"{"_id":"zzz","_rev":"1-abc","x":2}"#)
      #expect(replicated.code == 201)
      #expect(replicated["id"]?.stringValue == "c")
      #expect(try await client.call(.get, "/db/c")["_rev"]?.stringValue == "1-abc")
      #expect(try await client.call(.get, "/db/zzz").code == 404)
    }
  }

  @Test("booleans: documents and _changes take only `true`; _all_docs reads any case, else 400")
  func booleans() async throws {
    try await withServer { client, _ in
      try await client.call(.put, "/db")
      let a = try await client.call(.put, "/db/a", #"{"x":1}"#)
      let rev = try #require(a["rev"]?.stringValue)
      // Documents (chttpd_db:parse_doc_query): anything but `true` is ignored.
      for option in [
        "revs", "revs_info", "conflicts", "deleted_conflicts", "local_seq", "meta", "latest",
        "att_encoding_info", "attachments", "deleted",
      ] {
        for value in ["True", "1", "yes", ""] {
          let r = try await client.call(.get, "/db/a?\(option)=\(value)")
          #expect(r.code == 200, "\(option)=\(value)")
          #expect(r.json == json(#"{"_id":"a","_rev":"\#(rev)","x":1}"#), "\(option)=\(value)")
        }
      }
      #expect(try await client.call(.get, "/db/a?revs=true")["_revisions"] != nil)
      #expect(try await client.call(.get, "/db/a?revs=True")["_revisions"] == nil)
      let bulkGet = try await client.call(
        .post, "/db/_bulk_get?revs=True&latest=nope", #"{"docs":[{"id":"a"}]}"#)
      #expect(bulkGet.code == 200)
      #expect(bulkGet["results"]?[0]?["docs"]?[0]?["ok"]?["_revisions"] == nil)

      // _changes (chttpd_db:parse_changes_query): the same, and names without case.
      let changes = try await client.call(.get, "/db/_changes?include_docs=True&descending=yes")
      #expect(changes.code == 200)
      #expect(changes["results"]?[0]?["doc"] == nil)
      #expect(
        try await client.call(.get, "/db/_changes?Include_Docs=true")["results"]?[0]?["doc"] != nil)
      #expect(try await client.call(.get, "/db/_changes?conflicts=1&history=x").code == 200)

      // _all_docs (couch_mrview_http:parse_boolean): true/false in any case; others are 400.
      let upper = try await client.call(.get, "/db/_all_docs?include_docs=True&descending=FALSE")
      #expect(upper.code == 200)
      #expect(upper["rows"]?[0]?["doc"]?["x"]?.int == 1)
      for option in ["include_docs", "descending", "inclusive_end", "conflicts", "update_seq"] {
        let bad = try await client.call(.get, "/db/_all_docs?\(option)=yes")
        #expect(bad.code == 400, "\(option)")
        #expect(bad.error == "query_parse_error", "\(option)")
        #expect(bad["reason"]?.stringValue == #"Invalid boolean parameter: "yes""#, "\(option)")
      }
    }
  }

  @Test("?batch=ok: 202 {ok,id} without a rev on PUT and POST; the document is written")
  func batchOK() async throws {
    try await withServer { client, _ in
      try await client.call(.put, "/db")
      let put = try await client.call(.put, "/db/a?batch=ok", #"{"x":1}"#)
      #expect(put.code == 202)
      #expect(put.json == json(#"{"ok":true,"id":"a"}"#))
      #expect(put.headers[.eTag] == nil)
      #expect(try await client.call(.get, "/db/a")["x"]?.int == 1)
      let post = try await client.call(.post, "/db?batch=ok", #"{"_id":"b","y":2}"#)
      #expect(post.code == 202)
      #expect(post.json == json(#"{"ok":true,"id":"b"}"#))
      let generated = try await client.call(.post, "/db?batch=ok", #"{"z":3}"#)
      #expect(generated.code == 202)
      let id = try #require(generated["id"]?.stringValue)
      #expect(generated["rev"] == nil)
      #expect(try await client.call(.get, "/db/\(id)")["z"]?.int == 3)
      // Bad input is still refused, and writes nothing.
      #expect(try await client.call(.put, "/db/c?batch=ok", "{").code == 400)
      #expect(try await client.call(.get, "/db/c").code == 404)
    }
  }

  @Test("_all_docs?update_seq=true: update_seq after offset, the seq _changes ends at")
  func allDocsUpdateSeq() async throws {
    try await withServer { client, _ in
      try await client.call(.put, "/db")
      for id in ["a", "b", "c"] { try await client.call(.put, "/db/\(id)", "{}") }
      let lastSeq = try await client.call(.get, "/db/_changes")["last_seq"]
      let r = try await client.call(.get, "/db/_all_docs?update_seq=true")
      #expect(r["update_seq"] == lastSeq)
      #expect(r["update_seq"]?.seq == 3)
      let text = r.text
      let order = ["\"total_rows\"", "\"offset\"", "\"update_seq\"", "\"rows\""].map {
        text.range(of: $0)?.lowerBound
      }
      #expect(order.allSatisfy { $0 != nil })
      #expect(order.compactMap { $0 } == order.compactMap { $0 }.sorted())
      #expect(try await client.call(.get, "/db/_all_docs")["update_seq"] == nil)
      #expect(try await client.call(.get, "/db/_all_docs?update_seq=false")["update_seq"] == nil)
      let keys = try await client.call(
        .post, "/db/_all_docs?update_seq=True", #"{"keys":["a","x"]}"#)
      #expect(keys["update_seq"]?.seq == 3)
      #expect(keys["rows"]?.arrayValue?.count == 2)
      let empty = try await client.call(.get, "/db/_all_docs?update_seq=true&startkey=%5B%5D")
      #expect(empty["update_seq"]?.seq == 3)
      #expect(empty["rows"] == .array([]))
    }
  }

  @Test("_changes: last-event-id is since; the Last-Event-ID header is since for eventsource")
  func lastEventID() async throws {
    try await withServer { client, _ in
      try await client.call(.put, "/db")
      for id in ["a", "b", "c"] { try await client.call(.put, "/db/\(id)", "{}") }
      func ids(_ r: JSONResponse) -> [String] {
        r["results"]?.arrayValue?.compactMap { $0["id"]?.stringValue } ?? []
      }
      #expect(ids(try await client.call(.get, "/db/_changes?last-event-id=1")) == ["b", "c"])
      // The later of since and last-event-id counts.
      #expect(ids(try await client.call(.get, "/db/_changes?since=0&last-event-id=2")) == ["c"])
      #expect(ids(try await client.call(.get, "/db/_changes?last-event-id=2&since=0")).count == 3)
      var headers = HTTPFields()
      headers[HTTPField.Name("Last-Event-ID")!] = "2"
      let events = try await client.call(
        .get, "/db/_changes?feed=eventsource&since=0&timeout=10", headers: headers)
      #expect(events.text.hasPrefix(#"data: {"seq":"3-"#))
      #expect(events.text.contains(#""id":"c""#))
      #expect(!events.text.contains(#""id":"a""#))
      // Other feeds do not read the header (a browser's EventSource sends it).
      let normal = try await client.call(.get, "/db/_changes?since=0", headers: headers)
      #expect(ids(normal) == ["a", "b", "c"])
      #expect(try await client.call(.get, "/db/_changes?last-event-id=x").code == 400)
    }
  }

  @Test("longpoll sends the status, headers and {\"results\":[ at once, the rows when they come")
  func longpollStartsAtOnce() async throws {
    try await withServer(.live) { client, dir in
      let store = try dir.data.create("db")
      try store.put(#"{"_id":"before"}"#, actor: "test")
      let port = try #require(client.port)
      var request = HTTPClientRequest(
        url: "http://127.0.0.1:\(port)/db/_changes?feed=longpoll&since=now&timeout=60000")
      request.method = .GET
      let start = ContinuousClock.now
      let response = try await HTTPClient.shared.execute(request, timeout: .seconds(120))
      #expect(response.status.code == 200)
      #expect(response.headers.first(name: "Content-Type") == "application/json")
      var iterator = response.body.makeAsyncIterator()
      var text = ""
      while !text.contains("[") {
        guard let chunk = try await iterator.next() else { break }
        text += String(buffer: chunk)
      }
      // Before any change (the change is written only after this), and well before the feed's
      // 60 s timeout. A feed that held its start back until a change or the timeout would end
      // with no "late" row below, so the bound only has to tell "at once" from "at the timeout".
      #expect(ContinuousClock.now - start < .seconds(30))
      #expect(text.hasPrefix(#"{"results":["#))
      try store.put(#"{"_id":"late"}"#, actor: "test")
      while let chunk = try await iterator.next() { text += String(buffer: chunk) }
      let body = json(text)
      #expect(body["results"]?.arrayValue?.compactMap { $0["id"]?.stringValue } == ["late"])
      #expect(body["last_seq"]?.seq == 2)
    }
  }

  @Test("_bulk_docs all_or_nothing: 417, not_implemented for every document, nothing written")
  func allOrNothing() async throws {
    try await withServer { client, _ in
      try await client.call(.put, "/db")
      let r = try await client.call(
        .post, "/db/_bulk_docs",
        #"{"all_or_nothing":true,"docs":[{"_id":"a","x":1},{"_id":"b","_rev":"1-abc"},{"y":2}]}"#)
      #expect(r.code == 417)
      let results = r.json?.arrayValue ?? []
      #expect(results.count == 3)
      #expect(
        results.map { $0["error"]?.stringValue } == Array(repeating: "not_implemented", count: 3))
      #expect(results.allSatisfy { $0["reason"]?.stringValue == "all_or_nothing is not supported" })
      #expect(results.map { $0["rev"]?.stringValue } == ["0-", "1-abc", "0-"])
      #expect(results[0]["id"]?.stringValue == "a")
      #expect(results[2]["id"]?.stringValue?.count == 32)
      let info = try await client.call(.get, "/db")
      #expect(info["update_seq"]?.seq == 0)
      #expect(info["doc_count"]?.int == 0)
      // A malformed document is a 400 first, as in CouchDB.
      let bad = try await client.call(
        .post, "/db/_bulk_docs", #"{"all_or_nothing":true,"docs":[{"_bad":1}]}"#)
      #expect(bad.code == 400)
      // With new_edits=false the option is ignored, as CouchDB does.
      let replicated = try await client.call(
        .post, "/db/_bulk_docs",
        #"{"all_or_nothing":true,"new_edits":false,"docs":[{"_id":"r","_rev":"1-abc"}]}"#)
      #expect(replicated.code == 201)
      // all_or_nothing: false is a normal batch.
      let normal = try await client.call(
        .post, "/db/_bulk_docs", #"{"all_or_nothing":false,"docs":[{"_id":"n"}]}"#)
      #expect(normal.code == 201)
      #expect(normal.json?[0]?["ok"] == .bool(true))
    }
  }

  @Test("limit=0: _all_docs and _changes answer no rows, over HTTP and in the store")
  func limitZero() async throws {
    try await withServer { client, dir in
      try await client.call(.put, "/db")
      for id in ["a", "b", "c"] { try await client.call(.put, "/db/\(id)", "{}") }
      let all = try await client.call(.get, "/db/_all_docs?limit=0")
      #expect(all.json == json(#"{"total_rows":3,"offset":0,"rows":[]}"#))
      let skipped = try await client.call(.get, "/db/_all_docs?limit=0&skip=1")
      #expect(skipped.json == json(#"{"total_rows":3,"offset":1,"rows":[]}"#))
      let ranged = try await client.call(.get, "/db/_all_docs?limit=0&startkey=%22b%22")
      #expect(ranged.json == json(#"{"total_rows":3,"offset":1,"rows":[]}"#))
      let keyed = try await client.call(.post, "/db/_all_docs?limit=0", #"{"keys":["a"]}"#)
      #expect(keyed["rows"] == .array([]))
      let changes = try await client.call(.get, "/db/_changes?limit=0&since=1")
      #expect(changes["results"] == .array([]) && changes["pending"] == .int(2))
      #expect(changes["last_seq"]?.seq == 1)
      let history = try await client.call(.get, "/db/_changes?limit=0&history=true")
      #expect(history["results"] == .array([]))
      #expect(history["last_seq"]?.seq == 0)

      let store = try dir.data.open("db")
      var options = AllDocsOptions()
      options.limit = 0
      #expect(try store.allDocs(options).rows.isEmpty)
      var changeOptions = ChangesOptions()
      changeOptions.limit = 0
      let result = try store.changes(changeOptions)
      #expect(result.results.isEmpty && result.lastSeq == .start && result.pending == 3)
      options.limit = 1
      #expect(try store.allDocs(options).rows.count == 1)
    }
  }

  @Test("COPY /db/docid with Destination: a new document, or an overwrite with ?rev=")
  func copyDocument() async throws {
    try await withServer { client, _ in
      try await client.call(.put, "/db")
      let first = try await client.call(.put, "/db/src", #"{"a":1}"#)
      let firstRev = try #require(first["rev"]?.stringValue)
      func copy(_ path: String, to destination: String?, headers: HTTPFields = [:]) async throws
        -> JSONResponse
      {
        var fields = headers
        if let destination { fields[HTTPField.Name("Destination")!] = destination }
        return try await client.call(Self.copy, path, headers: fields)
      }
      let copied = try await copy("/db/src", to: "dst")
      #expect(copied.code == 201)
      #expect(copied["ok"] == .bool(true))
      #expect(copied["id"]?.stringValue == "dst")
      let dstRev = try #require(copied["rev"]?.stringValue)
      #expect(dstRev.hasPrefix("1-"))
      #expect(copied.headers[.eTag] == "\"\(dstRev)\"")
      #expect(copied.headers[.location] == "http://localhost/db/dst")
      #expect(
        try await client.call(.get, "/db/dst").json
          == json(#"{"_id":"dst","_rev":"\#(dstRev)","a":1}"#))
      // The target exists: without its rev, a conflict; with it, a new revision.
      #expect(try await copy("/db/src", to: "dst").code == 409)
      try await client.call(.put, "/db/src?rev=\(firstRev)", #"{"a":2}"#)
      let overwrite = try await copy("/db/src", to: "dst?rev=\(dstRev)")
      #expect(overwrite.code == 201)
      #expect(overwrite["rev"]?.stringValue?.hasPrefix("2-") == true)
      #expect(try await client.call(.get, "/db/dst")["a"]?.int == 2)
      // An older revision of the source, by ?rev= or If-Match.
      let old = try await copy("/db/src?rev=\(firstRev)", to: "old")
      #expect(old.code == 201)
      #expect(try await client.call(.get, "/db/old")["a"]?.int == 1)
      var ifMatch = HTTPFields()
      ifMatch[.ifMatch] = "\"\(firstRev)\""
      #expect(try await copy("/db/src", to: "old2", headers: ifMatch).code == 201)
      #expect(try await client.call(.get, "/db/old2")["a"]?.int == 1)
      // The destination is percent-decoded.
      #expect(try await copy("/db/src", to: "new%20doc")["id"]?.stringValue == "new doc")
      #expect(try await client.call(.get, "/db/new%20doc")["a"]?.int == 2)
      // Errors, with nothing written.
      let before = try await client.call(.get, "/db")["update_seq"]
      let missing = try await copy("/db/src", to: nil)
      #expect(missing.code == 400)
      #expect(missing["reason"]?.stringValue == "Destination header is mandatory for COPY.")
      #expect(try await copy("/db/src", to: "http://example.com/db/x").code == 400)
      #expect(try await copy("/db/nothing", to: "x").code == 404)
      #expect(try await copy("/db/src?rev=9-abc", to: "x").code == 404)
      #expect(try await copy("/db/src", to: "dst?rev=1-bad").code == 409)
      #expect(try await client.call(.get, "/db")["update_seq"] == before)
      #expect(try await copy("/db/_local/x", to: "y").code == 501)
    }
  }

  @Test("_dbs_info: GET lists every database; POST answers each key, not_found for the others")
  func databasesInfo() async throws {
    try await withServer { client, _ in
      try await client.call(.put, "/beta")
      try await client.call(.put, "/alpha")
      try await client.call(.put, "/alpha/doc", "{}")
      let all = try await client.call(.get, "/_dbs_info")
      #expect(all.code == 200)
      let entries = all.json?.arrayValue ?? []
      #expect(entries.map { $0["key"]?.stringValue } == ["alpha", "beta"])
      #expect(entries[0]["info"]?["db_name"]?.stringValue == "alpha")
      #expect(entries[0]["info"]?["doc_count"]?.int == 1)
      #expect(entries[0]["info"] == (try await client.call(.get, "/alpha")).json)
      let some = try await client.call(.post, "/_dbs_info", #"{"keys":["beta","nope",1]}"#)
      #expect(some.code == 200)
      let answers = some.json?.arrayValue ?? []
      #expect(answers.count == 3)
      #expect(answers[0]["info"]?["db_name"]?.stringValue == "beta")
      #expect(answers[1] == json(#"{"key":"nope","error":"not_found"}"#))
      #expect(answers[2] == json(#"{"key":1,"error":"not_found"}"#))
      let noKeys = try await client.call(.post, "/_dbs_info", "{}")
      #expect(noKeys.code == 400)
      #expect(noKeys["reason"]?.stringValue == "`keys` member must exist.")
      let tooMany = (0...100).map { "\"d\($0)\"" }.joined(separator: ",")
      let over = try await client.call(.post, "/_dbs_info", #"{"keys":[\#(tooMany)]}"#)
      #expect(over.code == 400)
      #expect(over["reason"]?.stringValue == "too_many_keys")
      #expect(try await client.call(.put, "/_dbs_info").code == 405)
    }
  }

  @Test("_uuids: count limits and cache-busting headers; _up; _node/_local")
  func uuidsUpNode() async throws {
    try await withServer { client, _ in
      let r = try await client.call(.get, "/_uuids?count=3")
      #expect(r.code == 200)
      #expect(r["uuids"]?.strings.count == 3)
      #expect(r.headers[.cacheControl] == "no-cache")
      #expect(r.headers[HTTPField.Name("Pragma")!] == "no-cache")
      #expect(r.headers[HTTPField.Name("Expires")!] == "Mon, 01 Jan 1990 00:00:00 GMT")
      #expect(r.headers[.eTag]?.count == 34)
      #expect(try await client.call(.get, "/_uuids?count=0")["uuids"] == .array([]))
      #expect(try await client.call(.get, "/_uuids?count=1000")["uuids"]?.strings.count == 1000)
      let over = try await client.call(.get, "/_uuids?count=1001")
      #expect(over.code == 400 && over["reason"]?.stringValue == "count parameter too large")
      let negative = try await client.call(.get, "/_uuids?count=-1")
      #expect(negative.code == 400)
      #expect(negative["reason"]?.stringValue == "count must be a positive integer")
      #expect(try await client.call(.post, "/_uuids").code == 405)
      let up = try await client.call(.get, "/_up")
      #expect(up.code == 200 && up.json == json(#"{"status":"ok"}"#))
      #expect(try await client.call(.post, "/_up").code == 405)
      #expect(
        try await client.call(.get, "/_node/_local").json == json(#"{"name":"nonode@nohost"}"#))
      #expect(
        try await client.call(.get, "/_node/nonode@nohost")["name"]?.stringValue == "nonode@nohost")
      #expect(try await client.call(.get, "/_node").code == 400)
      #expect(try await client.call(.get, "/_node/other@host").code == 404)
    }
  }

  @Test("every CouchDB 3.4 endpoint wikilog does not serve answers 501 naming its feature")
  func unservedEndpoints() async throws {
    try await withServer { client, _ in
      try await client.call(.put, "/db")
      try await client.call(.put, "/db/doc", "{}")
      try await client.call(.put, "/db/_design/d", "{}")
      let unserved: [(HTTPRequest.Method, String, String)] = [
        (.post, "/_cluster_setup", "cluster setup"),
        (.get, "/_cluster_setup", "cluster setup"),
        (.get, "/_db_updates", "database updates"),
        (.get, "/_replicator", "replication"),
        (.put, "/_replicator/x", "replication"),
        (.get, "/_node/nonode@nohost/_system", "system statistics"),
        (.post, "/_node/_local/_restart", "restarting"),
        (.get, "/_node/_local/_smoosh/status", "smoosh"),
        (.get, "/_node/_local/_all_dbs", "node-local"),
        (.post, "/_search_analyze", "full-text search"),
        (.post, "/_nouveau_analyze", "full-text search"),
        (.post, "/_reload_query_servers", "query servers"),
        (.get, "/_reshard", "resharding"),
        (.get, "/_reshard/jobs", "resharding"),
        (.get, "/_utils", "Fauxton"),
        (.get, "/_utils/", "Fauxton"),
        (.get, "/_utils/index.html", "Fauxton"),
        (.get, "/db/_shards", "shards"),
        (.get, "/db/_shards/doc", "shards"),
        (.post, "/db/_sync_shards", "shards"),
        (.post, "/db/_search_cleanup", "full-text search"),
        (.post, "/db/_nouveau_cleanup", "full-text search"),
        (.get, "/db/_design/d/_search/i", "full-text search"),
        (.get, "/db/_design/d/_search_info/i", "full-text search"),
        (.get, "/db/_design/d/_search_disk_size/i", "full-text search"),
        (.get, "/db/_design/d/_nouveau/i", "full-text search"),
        (.get, "/db/_design/d/_nouveau_info/i", "full-text search"),
      ]
      for (method, path, feature) in unserved {
        let body = method == .post || method == .put ? "{}" : nil
        let r = try await client.call(method, path, body)
        #expect(r.code == 501, "\(method) \(path)")
        #expect(r.error == "not_implemented", "\(method) \(path)")
        let reason = r["reason"]?.stringValue ?? ""
        #expect(reason.contains("is not implemented by wikilog"), "\(method) \(path): \(reason)")
        #expect(reason.contains(feature), "\(method) \(path): \(reason)")
      }
      // CouchDB's own answers where they are the honest ones.
      let favicon = try await client.call(.get, "/favicon.ico")
      #expect(favicon.code == 404 && favicon.error == "not_found")
      let temp = try await client.call(.post, "/db/_temp_view", "{}")
      #expect(temp.code == 410 && temp.error == "gone")
      #expect(try await client.call(.get, "/db/_local").code == 400)
      #expect(try await client.call(.get, "/db/_local/x/att").code == 400)
      // Below a database that does not exist: 404 first.
      #expect(try await client.call(.post, "/nothing/_find", "{}").code == 404)
      #expect(try await client.call(.get, "/nothing/doc/att").code == 404)
      // Nothing was created or written.
      #expect(try await client.call(.get, "/_all_dbs").json == json(#"["db"]"#))
      #expect(try await client.call(.get, "/db")["update_seq"]?.seq == 2)

      // What is served still is.
      #expect(try await client.call(.post, "/db/_revs_diff", #"{"doc":["1-x"]}"#).code == 200)
      #expect(
        try await client.call(.post, "/db/_bulk_get", #"{"docs":[{"id":"doc"}]}"#).code == 200)
      #expect(try await client.call(.get, "/db/_changes").code == 200)
      #expect(try await client.call(.put, "/db/_local/x", "{}").code == 201)
      #expect(try await client.call(.get, "/db/_local/x").code == 200)
      #expect(try await client.call(.get, "/db/_design/d").code == 200)
      #expect(try await client.call(.get, "/_node/_local/_stats").code == 200)
      #expect(try await client.call(.get, "/db/_revs_limit").code == 200)
      let missing = try await client.call(
        .post, "/db/_missing_revs", #"{"doc":["1-x"],"new":["1-y"]}"#)
      #expect(missing.json == json(#"{"missing_revs":{"doc":["1-x"],"new":["1-y"]}}"#))
    }
  }

  @Test(
    "GET /_node/_local/_prometheus: CouchDB's metric names in Prometheus's text format, with the requests counted and wikilog's own metrics"
  )
  func prometheus() async throws {
    try await withServer { client, _ in
      try await client.call(.put, "/metrics")
      try await client.call(.put, "/metrics/a", "{}")
      _ = try await client.call(.get, "/metrics/missing")
      let answer = try await client.call(.get, "/_node/_local/_prometheus")
      #expect(answer.code == 200)
      #expect(answer.headers[.contentType]?.hasPrefix("text/plain; version=0.0.4") == true)
      let text = answer.text
      for line in [
        "# TYPE couchdb_database_writes_total counter", "couchdb_open_databases_total ",
        #"couchdb_httpd_status_codes{code="201"} "#, #"couchdb_httpd_status_codes{code="404"} "#,
        #"couchdb_httpd_request_methods{method="PUT"} 2"#, "couchdb_uptime_seconds ",
        "wikilog_commits_total ", "wikilog_waiting_feeds 0", "wikilog_replication_jobs 0",
      ] {
        #expect(text.contains(line), "\(line) not in \(text)")
      }
      // Every sample line is `name[{labels}] integer`.
      for line in text.split(separator: "\n") where !line.hasPrefix("#") {
        #expect(line.wholeMatch(of: #/[a-z_]+(\{[a-z]+="[^"]*"\})? [0-9]+/#) != nil, "\(line)")
      }
      #expect(try await client.call(.get, "/_node/nonode@nohost/_prometheus").code == 200)
      #expect(try await client.call(.get, "/_node/other/_prometheus").code == 404)
    }
  }

  @Test(
    "every answer has X-Couch-Request-ID and X-CouchDB-Body-Time; a 201's Location is absolute, behind a proxy its X-Forwarded-Host and scheme"
  )
  func couchHeaders() async throws {
    try await withServer { client, _ in
      let made = try await client.call(.put, "/hdr")
      #expect(made.headers[HTTPField.Name("X-Couch-Request-ID")!]?.count == 10)
      #expect(made.headers[HTTPField.Name("X-CouchDB-Body-Time")!] == "0")
      var proxied = HTTPFields()
      proxied[HTTPField.Name("X-Forwarded-Host")!] = "example.org:8080"
      proxied[HTTPField.Name("X-Forwarded-Proto")!] = "https"
      let put = try await client.call(.put, "/hdr/fwd", "{}", headers: proxied)
      #expect(put.headers[.location] == "https://example.org:8080/hdr/fwd")
      // chttpd/x_forwarded_host names another header (CouchDB's http_test).
      #expect(
        try await client.call(
          .put, "/_node/_local/_config/chttpd/x_forwarded_host", #""X-Host""#
        ).code == 200)
      var custom = HTTPFields()
      custom[HTTPField.Name("X-Host")!] = "mysite2.com"
      let put2 = try await client.call(.put, "/hdr/custom", "{}", headers: custom)
      #expect(put2.headers[.location] == "http://mysite2.com/hdr/custom")
      #expect(
        try await client.call(.delete, "/_node/_local/_config/chttpd/x_forwarded_host").code
          == 200)
      let put3 = try await client.call(.put, "/hdr/back", "{}", headers: proxied)
      #expect(put3.headers[.location] == "https://example.org:8080/hdr/back")
      let missing = try await client.call(.get, "/hdr/none")
      #expect(missing.headers[HTTPField.Name("X-Couch-Request-ID")!] != nil)
    }
  }

  @Test("GET /_membership: this one node, as a single-node CouchDB answers (administrators)")
  func membership() async throws {
    try await withServer { client, _ in
      let answer = try await client.call(.get, "/_membership")
      #expect(answer.code == 200)
      #expect(
        answer.json == json(#"{"all_nodes":["nonode@nohost"],"cluster_nodes":["nonode@nohost"]}"#))
      #expect(try await client.call(.post, "/_membership", "{}").code == 405)
    }
  }

  @Test(
    "GET /_node/_local/_versions: CouchDB's collation_driver (ICU's versions) and, with the query feature, javascript_engine"
  )
  func versions() async throws {
    try await withServer { client, _ in
      let answer = try await client.call(.get, "/_node/_local/_versions")
      #expect(answer.code == 200)
      let driver = try #require(answer["collation_driver"])
      #expect(driver["name"] == .string("libicu"))
      for key in ["library_version", "collation_algorithm_version", "collator_version"] {
        let version = try #require(driver[key]?.stringValue)
        #expect(version.wholeMatch(of: #/[0-9]+(\.[0-9]+)*/#) != nil && !version.hasSuffix(".0"))
      }
      #expect(answer["javascript_engine"]?["name"] == .string("spidermonkey"))
      #expect(answer["javascript_engine"]?["version"] == .string("102"))
      #expect(try await client.call(.get, "/_node/nonode@nohost/_versions").code == 200)
      #expect(try await client.call(.get, "/_node/other@host/_versions").code == 404)
    }
    try await withServer(options: CouchServerOptions()) { client, _ in
      let answer = try await client.call(.get, "/_node/_local/_versions")
      #expect(answer.code == 200 && answer["javascript_engine"] == nil)
    }
  }

  @Test(
    "PUT /db: q and n taken as a single-node CouchDB takes them (q reported, n 1); placement refused, nothing made"
  )
  func creationOptions() async throws {
    try await withServer { client, _ in
      for query in ["placement=a:1"] {
        let r = try await client.call(.put, "/db2?\(query)")
        #expect(r.code == 501, "\(query)")
        #expect(r.error == "not_implemented", "\(query)")
        #expect(r["reason"]?.stringValue?.contains("is not implemented by wikilog") == true)
      }
      // CouchDB 3.4.3 on one node: `?q=16` is 201 and its info says q 16; `?n=3` is 201, n 1.
      #expect(try await client.call(.put, "/sharded?q=16").code == 201)
      #expect(
        try await client.call(.get, "/sharded")["cluster"]
          == json(#"{"q":16,"n":1,"w":1,"r":1}"#))
      #expect(try await client.call(.put, "/copies?n=3").code == 201)
      #expect(try await client.call(.get, "/copies")["cluster"]?["n"] == .int(1))
      #expect(try await client.call(.get, "/copies")["cluster"]?["q"] == .int(1))
      for db in ["sharded", "copies"] { try await client.call(.delete, "/\(db)") }
      for query in ["partitioned=maybe", "q=abc", "n=0", "engine=couch"] {
        let r = try await client.call(.put, "/db2?\(query)")
        #expect(r.code == 400, "\(query)")
        #expect(r.error == "bad_request", "\(query)")
      }
      #expect(try await client.call(.get, "/_all_dbs").json == .array([]))
      #expect(try await client.call(.put, "/db2?q=1&n=1&partitioned=false").code == 201)
      #expect(try await client.call(.get, "/_all_dbs").json == json(#"["db2"]"#))
      // An existing database: 412 whatever the options ask (CouchDB checks it first), but a
      // malformed option is still 400.
      for query in ["partitioned=true", "q=16"] {
        let r = try await client.call(.put, "/db2?\(query)")
        #expect(r.code == 412 && r.error == "file_exists", "\(query)")
      }
      #expect(try await client.call(.get, "/db2")["cluster"]?["q"] == .int(1))
      #expect(try await client.call(.put, "/db2?q=abc").code == 400)
    }
  }
}
