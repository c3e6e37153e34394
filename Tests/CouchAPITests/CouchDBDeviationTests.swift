import Auth
import CouchAPI
import CouchTestSupport
import Formats
import Foundation
import HTTPTypes
import HummingbirdTesting
import JSON
import NIOCore
import Testing

/// Answers that differed from CouchDB 3.4.3's to the same requests (CouchDB's own test suite
/// and a side-by-side run), each fixed: the expectations are what CouchDB answered.
@Suite struct CouchDBDeviationTests {
  static let design = #"""
    {"views": {"v": {"map": "function(doc){ if (doc.v !== undefined) emit(doc.v, null); }"}},
     "lists": {
       "early": "function(head, req){ send('a'); var r = getRow(); send('b' + r.key); return 'c'; }",
       "none": "function(head, req){ return 'nothing'; }",
       "all": "function(head, req){ var r; while (r = getRow()) send(r.id + ','); }",
       "err": "function(head, req){ send('x'); getRow(); throw 'boom'; }",
       "typed": "function(head, req){ provides('json', function(){ send('[1]'); }); provides('html', function(){ send('<p>'); }); }",
       "hdr": "function(head, req){ return req.headers.Host + '|' + req.headers.Accept; }"},
     "shows": {"s": "function(doc, req){ return 'hi ' + (doc ? doc._id : 'none'); }"},
     "updates": {"form": "function(doc, req){ return [null, JSON.stringify(req.form)]; }"}}
    """#

  /// A raw request's status, body text and headers.
  static func raw(
    _ client: any TestClientProtocol, _ method: HTTPRequest.Method, _ uri: String,
    body: String? = nil, headers: HTTPFields = [:]
  ) async throws -> (Int, String, HTTPFields) {
    try await client.execute(
      uri: uri, method: method, headers: headers, body: body.map { ByteBuffer(string: $0) }
    ) { response in (response.status.code, String(buffer: response.body), response.headers) }
  }

  @Test(
    "list functions: returning early, an error after the start, provides and Accept, req.headers, _all_docs"
  )
  func lists() async throws {
    try await withServer { client, _ in
      #expect(try await client.call(.put, "/db").code == 201)
      for i in 0..<5 { _ = try await client.call(.put, "/db/d\(i)", #"{"v":\#(i)}"#) }
      #expect(try await client.call(.put, "/db/_design/l", Self.design).code == 201)
      let early = try await Self.raw(client, .get, "/db/_design/l/_list/early/v")
      #expect(early.0 == 200 && early.1 == "ab0c")
      #expect(try await Self.raw(client, .get, "/db/_design/l/_list/none/v").1 == "nothing")
      #expect(
        try await Self.raw(client, .get, "/db/_design/l/_list/all/v").1 == "d0,d1,d2,d3,d4,")
      // An error once the list started: its chunks, then the error inline, status 200.
      let failed = try await Self.raw(client, .get, "/db/_design/l/_list/err/v")
      #expect(failed.0 == 200)
      #expect(failed.1.hasPrefix("x\n{\"code\":500,\"error\":\"render_error\""))
      // provides: by Accept, by ?format=, else 406.
      var json = HTTPFields()
      json[.accept] = "application/json"
      let typed = try await Self.raw(client, .get, "/db/_design/l/_list/typed/v", headers: json)
      #expect(typed.1 == "[1]" && typed.2[.contentType] == "application/json")
      let html = try await Self.raw(client, .get, "/db/_design/l/_list/typed/v?format=html")
      #expect(html.1 == "<p>" && html.2[.contentType] == "text/html; charset=utf-8")
      var png = HTTPFields()
      png[.accept] = "image/png"
      let refused = try await Self.raw(client, .get, "/db/_design/l/_list/typed/v", headers: png)
      #expect(refused.0 == 406)
      #expect(refused.1.contains("not_acceptable"))
      // req.headers as the client named them, Host included.
      var plain = HTTPFields()
      plain[.accept] = "text/plain"
      let hdr = try await Self.raw(client, .get, "/db/_design/l/_list/hdr/v", headers: plain)
      #expect(hdr.1.hasSuffix("|text/plain"))
      #expect(!hdr.1.hasPrefix("undefined"))
      // A list over _all_docs.
      let all = try await Self.raw(client, .get, "/db/_design/l/_list/all/_all_docs")
      #expect(all.0 == 200 && all.1 == "_design/l,d0,d1,d2,d3,d4,")
    }
  }

  @Test(
    "_all_docs keys that are not strings, body options, X-HTTP-Method-Override, req.form, ETags")
  func answers() async throws {
    try await withServer { client, _ in
      #expect(try await client.call(.put, "/db").code == 201)
      var revs: [String: String] = [:]
      for i in 0..<4 {
        revs["d\(i)"] = try await client.call(.put, "/db/d\(i)", #"{"v":\#(i)}"#)["rev"]?
          .stringValue
      }
      #expect(try await client.call(.put, "/db/_design/l", Self.design).code == 201)
      // Keys that are not strings are not_found rows; offset is null with keys.
      let keyed = try await client.call(
        .post, "/db/_all_docs", #"{"keys":[1,"d1",null,{"a":1}]}"#)
      #expect(keyed.code == 200 && keyed["offset"] == .null)
      #expect(
        keyed["rows"]?.arrayValue?.map { $0["error"]?.stringValue ?? $0["id"]?.stringValue }
          == ["not_found", "d1", "not_found", "not_found"])
      #expect(keyed["rows"]?[0]?["key"] == .int(1))
      // A POST body's options, the query string's over them.
      let limited = try await client.call(
        .post, "/db/_all_docs", #"{"keys":["d3","d1","d2"],"limit":2}"#)
      #expect(limited["rows"]?.arrayValue?.count == 2)
      let overridden = try await client.call(
        .post, "/db/_all_docs?limit=3", #"{"keys":["d3","d1","d2"],"limit":1}"#)
      #expect(overridden["rows"]?.arrayValue?.count == 3)
      // X-HTTP-Method-Override on a POST.
      var override = HTTPFields()
      override[HTTPField.Name("X-HTTP-Method-Override")!] = "DELETE"
      let deleted = try await client.call(
        .post, "/db/d3?rev=\(revs["d3"]!)", nil, headers: override)
      #expect(deleted.code == 200 && deleted["ok"] == .bool(true))
      #expect(try await client.call(.get, "/db/d3").code == 404)
      var overrideGet = HTTPFields()
      overrideGet[HTTPField.Name("X-HTTP-Method-Override")!] = "DELETE"
      #expect(try await client.call(.get, "/db/d2", headers: overrideGet).code == 200)
      // req.form of an urlencoded body.
      var form = HTTPFields()
      form[.contentType] = "application/x-www-form-urlencoded"
      let posted = try await Self.raw(
        client, .post, "/db/_design/l/_update/form", body: "a=1&b=two+words", headers: form)
      #expect(posted.1 == #"{"a":"1","b":"two words"}"#)
      // If-None-Match on a document, and a show's ETag.
      let (_, _, headers) = try await Self.raw(client, .get, "/db/d1")
      let etag = try #require(headers[.eTag])
      var match = HTTPFields()
      match[.ifNoneMatch] = etag
      #expect(try await Self.raw(client, .get, "/db/d1", headers: match).0 == 304)
      #expect(try await Self.raw(client, .get, "/db/d1?conflicts=true", headers: match).0 == 200)
      let shown = try await Self.raw(client, .get, "/db/_design/l/_show/s/d1")
      let showTag = try #require(shown.2[.eTag])
      var showMatch = HTTPFields()
      showMatch[.ifNoneMatch] = showTag
      #expect(
        try await Self.raw(client, .get, "/db/_design/l/_show/s/d1", headers: showMatch).0 == 304)
      _ = try await client.call(.put, "/db/d1", #"{"_rev":"\#(revs["d1"]!)","v":10}"#)
      #expect(
        try await Self.raw(client, .get, "/db/_design/l/_show/s/d1", headers: showMatch).0 == 200)
    }
  }
}

/// `/_node/{node}/_config`: wikilog's settings under CouchDB's names, changed at run time where
/// they can change, refused with a reason where they cannot.
/// Error names and reasons as CouchDB 3.4.3 gives them (each checked against it).
@Suite struct CouchDBErrorTextTests {
  @Test(
    "bad_request, not query_parse_error, for bodies and JSON parameters; heartbeat, docs, etag and _local/ reasons"
  )
  func texts() async throws {
    try await withServer { client, _ in
      _ = try await client.call(.put, "/db")
      _ = try await client.call(
        .put, "/db/_design/t", #"{"views":{"v":{"map":"function(doc){emit(doc._id,null)}"}}}"#)
      func expect(_ r: JSONResponse, _ error: String, _ reason: String?) {
        #expect(r.code == 400 && r.error == error, "\(r.text)")
        if let reason { #expect(r["reason"] == .string(reason), "\(r.text)") }
      }
      expect(
        try await client.call(.post, "/db/_design/t/_view/v", #"{"keys":1}"#), "bad_request",
        "`keys` member must be an array.")
      expect(
        try await client.call(.post, "/db/_all_docs", #"{"keys":1}"#), "bad_request",
        "`keys` body member must be an array.")
      expect(
        try await client.call(.post, "/db/_all_docs", "[]"), "bad_request",
        "Request body must be a JSON object")
      expect(try await client.call(.get, "/db/_all_docs?startkey=foo"), "bad_request", nil)
      expect(
        try await client.call(.get, "/db/_changes?feed=longpoll&heartbeat=-1000"), "bad_request",
        "The heartbeat value should be a positive integer (in milliseconds).")
      expect(
        try await client.call(.get, "/db/_changes?feed=longpoll&heartbeat=a1000"), "bad_request",
        "Invalid heartbeat value. Expecting a positive integer value (in milliseconds).")
      expect(
        try await client.call(.post, "/db/_bulk_docs", #"{"docs":"x"}"#), "bad_request",
        "`docs` parameter must be an array.")
      expect(
        try await client.call(.post, "/db/_bulk_docs", #"{"doc":[]}"#), "bad_request",
        "POST body must include `docs` parameter.")
      expect(
        try await client.call(
          .put, "/db/d1", #"{"_rev":"1-a"}"#, headers: [.ifMatch: "1-b"]), "bad_request",
        "Document rev and etag have different values")
      expect(
        try await client.call(.put, "/db/d1?rev=1-b", #"{"_rev":"1-a"}"#), "bad_request",
        "Document rev from request body and query string have different values")
      // An edit's conflict row names the id, not the revision (a replicated one's does).
      let rev = try #require(try await client.call(.put, "/db/c", "{}")["rev"]?.stringValue)
      let both = try await client.call(
        .post, "/db/_bulk_docs",
        #"{"docs":[{"_id":"c","_rev":"\#(rev)","v":1},{"_id":"c","_rev":"\#(rev)","_deleted":true}]}"#
      )
      #expect(both.json?.arrayValue?.compactMap { $0["rev"] }.count == 1)
      #expect(both.json?.arrayValue?.last?["error"] == .string("conflict"))
      for path in ["/db/_local", "/db/_local/", "/db/_local%2F"] {
        expect(
          try await client.call(.put, path, "{}"), "bad_request", "Invalid _local document id.")
      }
    }
  }
}

/// A write quorum (`w`) above the one copy here: `202 Accepted`, as a single CouchDB node
/// answers (`cluster_with_quorum_test.exs`).
@Suite struct QuorumTests {
  @Test(
    "w above 1 makes 201 and 200 write answers 202; w=1, reads and database creation keep theirs")
  func quorum() async throws {
    try await withServer { client, _ in
      #expect(try await client.call(.put, "/db?w=3").code == 201)
      #expect(try await client.call(.post, "/db?w=3", #"{"_id":"0"}"#).code == 202)
      let rev = try #require(try await client.call(.get, "/db/0?r=3")["_rev"]?.stringValue)
      let put = try await client.call(.put, "/db/0?w=2", #"{"_rev":"\#(rev)","a":2}"#)
      #expect(put.code == 202 && put["ok"] == .bool(true))
      let now = try #require(put["rev"]?.stringValue)
      #expect(try await client.call(.delete, "/db/0?w=3&rev=\(now)").code == 202)
      #expect(try await client.call(.post, "/db/_bulk_docs?w=3", #"{"docs":[{}]}"#).code == 202)
      #expect(try await client.call(.post, "/db/_bulk_docs?w=1", #"{"docs":[{}]}"#).code == 201)
      #expect(try await client.call(.get, "/db/_all_docs?r=3").code == 200)
      // An attachment: its upload 202, its deletion 200 (CouchDB's).
      let doc = try await client.call(.post, "/db", #"{"_id":"a"}"#)
      let att = try await client.execute(
        uri: "/db/a/f.txt?w=3&rev=\(doc["rev"]?.stringValue ?? "")", method: .put,
        headers: [.contentType: "text/plain"], body: ByteBuffer(string: "x")
      ) { r in (Int(r.status.code), try? JSONValue(parsing: String(buffer: r.body))) }
      #expect(att.0 == 202)
      let attRev = att.1?["rev"]?.stringValue ?? ""
      #expect(try await client.call(.delete, "/db/a/f.txt?w=3&rev=\(attRev)").code == 200)
      // A refused write keeps its error.
      #expect(try await client.call(.put, "/db/1?w=3", #"{"_rev":"1-x"}"#).code == 409)
    }
  }
}

/// Design functions' errors as CouchDB's `couch_mrview_show` and `render.js` give them
/// (`show_documents_test.exs`, `update_documents_test.exs`).
@Suite struct DesignFunctionPathTests {
  @Test(
    "a function path without a name is 404 Invalid path.; a show failing on a missing document is its 404"
  )
  func paths() async throws {
    try await withServer { client, _ in
      _ = try await client.call(.put, "/db")
      _ = try await client.call(
        .put, "/db/_design/template",
        #"{"shows":{"fail":"function(doc, req) { return doc._id; }","hello":"function(doc, req) { return doc ? 'Hello ' + doc._id : 'Empty'; }"},"updates":{"u":"function(doc, req) { return [null, 'x']; }","empty":"function(doc, req) { return [{}, 'oops']; }"}}"#
      )
      _ = try await client.call(.put, "/db/d1", "{}")
      let show = try await client.call(.get, "/db/_design/template/_show/")
      #expect(
        show.code == 404 && show.error == "show_error" && show["reason"] == .string("Invalid path.")
      )
      let update = try await client.call(.post, "/db/_design/template/_update/")
      #expect(update.code == 404 && update.error == "update_error")
      // An update function's document names itself: the URL's id is not taken for it.
      let empty = try await client.call(.put, "/db/_design/template/_update/empty/foo")
      #expect(empty.code == 400 && empty["reason"] == .string("Document id must not be empty"))
      #expect(try await client.call(.get, "/db/foo").code == 404)
      #expect(try await client.call(.get, "/db/_design/template/_list/").code == 404)
      let missing = try await client.call(.get, "/db/_design/template/_show/fail/nonExistingDoc")
      #expect(missing.code == 404 && missing.error == "not_found")
      // With no document asked for, the failure stays the function's.
      #expect(try await client.call(.get, "/db/_design/template/_show/fail").code == 500)
      let hello = try await client.execute(
        uri: "/db/_design/template/_show/hello/d1", method: .get
      ) { String(buffer: $0.body) }
      #expect(hello == "Hello d1")
    }
  }
}

/// `include_docs` with an emitted `_rev` (`view_include_docs_test.exs`, "emitted _rev
/// controls things").
@Suite struct EmittedRevTests {
  @Test("an emitted {_rev} includes that revision of the row's document, with or without _id")
  func emittedRev() async throws {
    try await withServer { client, _ in
      _ = try await client.call(.put, "/db")
      let first = try #require(
        try await client.call(.put, "/db/0", #"{"integer":0}"#)["rev"]?.stringValue)
      _ = try await client.call(
        .put, "/db/0", #"{"_rev":"\#(first)","integer":100,"prev":"\#(first)"}"#)
      _ = try await client.call(
        .put, "/db/_design/test",
        #"{"views":{"with_prev":{"map":"function(doc){if(doc.prev) emit(doc._id,{'_rev':doc.prev}); else emit(doc._id,{'_rev':doc._rev});}"}}}"#
      )
      let rows = try await client.call(
        .post, "/db/_design/test/_view/with_prev?include_docs=true", #"{"keys":["0"]}"#)
      let doc = try #require(rows["rows"]?[0]?["doc"])
      #expect(doc["_rev"] == .string(first) && doc["integer"]?.int == 0 && doc["prev"] == nil)
    }
  }
}

/// CouchDB's `reduce_limit` (`view_errors_test.exs`, "reduce overflow error").
@Suite struct ReduceLimitTests {
  @Test(
    "a reduce that does not shrink is answered 200 with a reduce_overflow_error row; one that shrinks is not"
  )
  func overflow() async throws {
    try await withServer { client, _ in
      _ = try await client.call(.put, "/db")
      _ = try await client.call(.post, "/db", #"{"integer":1,"string":"1","array":[1,2,3]}"#)
      _ = try await client.call(
        .put, "/db/_design/testbig",
        #"{"views":{"reduce_too_big":{"map":"function (doc) {emit(doc.integer, doc.integer)};","reduce":"function (keys, values) { var chars = []; for (var i=0; i < 1000; i++) {chars.push('wazzap');};return chars; };"},"fine":{"map":"function (doc) {emit(doc.integer, doc.string)};","reduce":"function (keys, values) { return values.length; }"}}}"#
      )
      let big = try await client.call(.get, "/db/_design/testbig/_view/reduce_too_big")
      #expect(big.code == 200)
      let row = try #require(big["rows"]?.arrayValue?.first)
      #expect(row["error"] == .string("reduce_overflow_error") && row["key"] == .null)
      #expect(
        row["reason"]?.stringValue?.hasPrefix("Reduce output must shrink more rapidly") == true)
      let grouped = try await client.call(
        .get, "/db/_design/testbig/_view/reduce_too_big?group=true")
      #expect(grouped["rows"]?.arrayValue?.first?["error"] == .string("reduce_overflow_error"))
      let fine = try await client.call(.get, "/db/_design/testbig/_view/fine")
      #expect(fine.json == json(#"{"rows":[{"key":null,"value":1}]}"#))
    }
  }
}

/// `POST /{db}/{docid}` from an HTML form, as CouchDB 3.4.3's suite posts it
/// (`attachments_test.exs`, `form_submit_test.exs`).
@Suite struct FormPostTests {
  @Test(
    "a form's _rev and _attachments file make one new revision with the file; a _doc field; Referer and Content-Type checked first"
  )
  func formPost() async throws {
    try await withServer { client, _ in
      _ = try await client.call(.put, "/db")
      let made = try await client.call(.put, "/db/form_data_doc", #"{"kept":true}"#)
      let rev = try #require(made["rev"]?.stringValue)
      struct Answer {
        let code: Int
        let json: JSONValue?
        subscript(key: String) -> JSONValue? { json?[key] }
        var error: String? { json?["error"]?.stringValue }
      }
      func post(_ body: String, type: String, referer: String?) async throws -> Answer {
        var headers: HTTPFields = [.contentType: type]
        if let referer { headers[.referer] = referer }
        return try await client.execute(
          uri: "/db/form_data_doc", method: .post, headers: headers,
          body: ByteBuffer(string: body)
        ) { r in
          Answer(code: Int(r.status.code), json: try? JSONValue(parsing: String(buffer: r.body)))
        }
      }
      let form =
        "------TF\r\nContent-Disposition: form-data; name=\"_rev\"\r\n\r\n\(rev)\r\n"
        + "------TF\r\nContent-Disposition: form-data; name=\"_attachments\"; filename=\"file.txt\"\r\n"
        + "Content-Type: text/plain\r\n\r\ncontents of file.txt\r\n\r\n------TF--"
      let type = "multipart/form-data; boundary=----TF"
      // No Referer, another site's, another content type: refused, nothing written.
      let none = try await post(form, type: type, referer: nil)
      #expect(none.code == 400 && none["reason"] == .string("Referer header required."))
      let other = try await post(form, type: type, referer: "http://evil.example/page")
      #expect(other.code == 400 && other["reason"] == .string("Referer header must match host."))
      let urlencoded = try await post(
        "a=b", type: "application/x-www-form-urlencoded", referer: "http://localhost")
      #expect(urlencoded.code == 415 && urlencoded.error == "bad_content_type")
      #expect(urlencoded["reason"] == .string("Content-Type must be multipart/form-data"))
      #expect(try await client.call(.get, "/db/form_data_doc")["_rev"]?.stringValue == rev)

      let posted = try await post(form, type: type, referer: "http://localhost/db/_utils")
      #expect(posted.code == 201 && posted["ok"] == .bool(true))
      let doc = try await client.call(.get, "/db/form_data_doc")
      #expect(doc["kept"] == .bool(true) && doc["_rev"]?.stringValue?.hasPrefix("2-") == true)
      #expect(doc["_attachments"]?["file.txt"]?["length"]?.int == 22)
      #expect(doc["_attachments"]?["file.txt"]?["content_type"] == .string("text/plain"))
      let file = try await client.execute(uri: "/db/form_data_doc/file.txt", method: .get) {
        String(buffer: $0.body)
      }
      #expect(file == "contents of file.txt\r\n")

      // A `_doc` field: the whole document, its `_rev` inside; the file kept beside a new one.
      let now = try #require(doc["_rev"]?.stringValue)
      let second =
        "--b\r\nContent-Disposition: form-data; name=\"_doc\"\r\n\r\n"
        + #"{"_rev":"\#(now)","kept":false,"_attachments":{"file.txt":{"stub":true}}}"# + "\r\n"
        + "--b\r\nContent-Disposition: form-data; name=\"_attachments\"; filename=\"b.bin\"\r\n\r\nxyz\r\n--b--"
      let again = try await post(
        second, type: "multipart/form-data; boundary=b", referer: "http://localhost")
      #expect(again.code == 201)
      let after = try await client.call(.get, "/db/form_data_doc")
      #expect(after["kept"] == .bool(false))
      #expect(after["_attachments"]?["file.txt"]?["length"]?.int == 22)
      #expect(after["_attachments"]?["b.bin"]?["length"]?.int == 3)
      // A stale _rev is a conflict, as a PUT's is.
      #expect(try await post(form, type: type, referer: "http://localhost").code == 409)
    }
  }
}

/// A view with `"options": {"collation": "raw"}`, against the order CouchDB 3.4.3 gave the
/// same keys (Erlang's term order: numbers, false, null, true, objects, arrays, then strings by
/// their bytes).
@Suite struct RawCollationTests {
  static let keys =
    #"[-3, 1, 1.5, 2, 3, 4, false, null, true, {}, {"a": 1}, {"a": 2}, {"b": 1}, {"b": 2}, {"b": 2, "a": 1}, {"b": 2, "c": 2}, [], ["a"], ["a", 1], ["a", null], ["b"], ["b", "c"], ["b", "c", "a"], ["b", "d"], ["b", "d", "e"], "\u0000x", "A", "B", "Z", "a", "aa", "b", "ba", "bb", "e", "\u00e9"]"#

  @Test(
    "raw collation: CouchDB's order, ranges, descending, inclusive_end, group_level; the ICU view beside it keeps its order"
  )
  func raw() async throws {
    try await withServer { client, _ in
      _ = try await client.call(.put, "/db")
      let keys = try #require(json(Self.keys).arrayValue)
      // Written in another order than the answer's.
      let docs = keys.enumerated().reversed().map { i, key in
        JSONValue.object(JSONObject(["_id": .string("d\(i)"), "foo": key]))
      }
      _ = try await client.call(
        .post, "/db/_bulk_docs",
        String(
          decoding: JSONValue.object(JSONObject(["docs": .array(docs)])).serialized(), as: UTF8.self
        ))
      _ = try await client.call(
        .put, "/db/_design/t",
        #"{"views":{"raw":{"map":"function(doc){ emit(doc.foo, null); }","options":{"collation":"raw"}},"icu":{"map":"function(doc){ emit(doc.foo, null); }"},"g":{"map":"function(doc){ if (Array.isArray(doc.foo)) emit(doc.foo, 1); }","reduce":"_count","options":{"collation":"raw"}}}}"#
      )
      func rows(_ query: String) async throws -> [JSONValue] {
        let answer = try await client.call(.get, "/db/_design/t/_view/" + query)
        return (answer["rows"]?.arrayValue ?? []).compactMap { $0["key"] }
      }
      #expect(try await rows("raw") == keys)
      #expect(try await rows("raw?descending=true") == keys.reversed())
      #expect(
        try await rows("raw?startkey=%22aa%22&endkey=%22b%22") == [.string("aa"), .string("b")])
      #expect(
        try await rows("raw?startkey=%22a%22&endkey=%22b%22&inclusive_end=false")
          == [.string("a"), .string("aa")])
      #expect(try await rows("raw?startkey=true&endkey=%5B%5D").count == 9)  // true, 7 objects, []
      let icu = try await rows("icu")
      #expect(
        icu.first == .null && icu != keys
          && Set(icu.map { $0.serialized() }) == Set(keys.map { $0.serialized() }))
      let groups = try await client.call(.get, "/db/_design/t/_view/g?group_level=1")
      #expect(
        groups.json
          == json(
            #"{"rows":[{"key":[],"value":1},{"key":["a"],"value":3},{"key":["b"],"value":5}]}"#))
    }
  }
}

@Suite struct ConfigTests {
  @Test(
    "JSONP: ignored while chttpd/allow_jsonp is off; on, JSON answers (a document, a view, the changes feed, an error) are /* CouchDB */NAME(…); as application/javascript; a bad name is 400"
  )
  func jsonp() async throws {
    try await withServer { client, _ in
      func get(_ uri: String) async throws -> (Int, String?, String) {
        try await client.execute(uri: uri, method: .get) { r in
          (Int(r.status.code), r.headers[.contentType], String(buffer: r.body))
        }
      }
      _ = try await client.call(.put, "/db")
      _ = try await client.call(.put, "/db/0", #"{"a":0}"#)
      _ = try await client.call(.put, "/db/1", #"{"a":1}"#)
      _ = try await client.call(
        .put, "/db/_design/t",
        #"{"views":{"v":{"map":"function(doc){ if (doc.a) emit(null, doc.a); }"}}}"#)
      let off = try await get("/db/0?callback=cb")
      #expect(off.0 == 200 && off.1 == "application/json" && off.2.hasPrefix("{"))
      #expect(
        try await client.call(.put, "/_node/_local/_config/chttpd/allow_jsonp", #""maybe""#).code
          == 400)
      let set = try await client.call(.put, "/_node/_local/_config/chttpd/allow_jsonp", #""true""#)
      #expect(set.code == 200 && set.json == .string("false"))

      func unwrap(_ answer: (Int, String?, String), _ name: String) throws -> JSONValue {
        #expect(answer.1 == "application/javascript")
        let prefix = "/* CouchDB */\(name)("
        #expect(answer.2.hasPrefix(prefix) && answer.2.hasSuffix(");"), "\(answer.2.prefix(80))")
        return try JSONValue(parsing: String(answer.2.dropFirst(prefix.count).dropLast(2)))
      }
      let doc = try unwrap(try await get("/db/0?callback=jsonp_no_chunk"), "jsonp_no_chunk")
      #expect(doc["_id"] == .string("0") && doc["a"]?.int == 0)
      let view = try unwrap(try await get("/db/_design/t/_view/v?callback=a.b[0]"), "a.b[0]")
      #expect(view["total_rows"]?.int == 1)
      let changes = try unwrap(try await get("/db/_changes?callback=cb"), "cb")
      #expect(changes["results"]?.arrayValue?.count == 3)
      let missing = try await get("/db/nope?callback=cb")
      let error = try unwrap(missing, "cb")
      #expect(missing.0 == 404 && error["error"] == .string("not_found"))
      let bad = try await get("/db/0?callback=cb%22")
      #expect(bad.0 == 400 && bad.1 == "application/json" && bad.2.contains("invalid_callback"))

      // DELETE puts back the value the server started with.
      #expect(
        try await client.call(.delete, "/_node/_local/_config/chttpd/allow_jsonp").json
          == .string("true"))
      #expect(try await get("/db/0?callback=cb").1 == "application/json")
    }
  }

  @Test("read every setting, a section, a key; PUT one that applies, refuse the rest; admins")
  func config() async throws {
    try await withAccessServer { client, fixture in
      let admin = AccessFixture.basic("admin")
      try fixture.auth.addServerAdmin(name: "root", password: "pw-root")
      #expect(try await client.call(.get, "/_node/_local/_config").code == 401)
      #expect(
        try await client.call(.get, "/_node/_local/_config", headers: AccessFixture.basic("bob"))
          .code == 401)
      let all = try await client.call(.get, "/_node/_local/_config", headers: admin)
      #expect(all["uuids"]?["max_count"]?.stringValue == "1000")
      #expect(all["admins"]?["root"]?.stringValue?.hasPrefix("-pbkdf2-") == true)
      #expect(
        try await client.call(.get, "/_node/nonode@nohost/_config/uuids", headers: admin)[
          "max_count"] == .string("1000"))
      #expect(
        try await client.call(.get, "/_node/_local/_config/nosuch", headers: admin).json
          == .object(JSONObject()))
      let missing = try await client.call(.get, "/_node/_local/_config/uuids/x", headers: admin)
      #expect(missing.code == 404 && missing["reason"]?.stringValue == "unknown_config_value")
      // A setting that applies at once: the old value answers.
      let old = try await client.call(
        .put, "/_node/_local/_config/uuids/max_count", #""5""#, headers: admin)
      #expect(old.json == .string("1000"))
      #expect(try await client.call(.get, "/_uuids?count=6").code == 400)
      #expect(try await client.call(.get, "/_uuids?count=5").code == 200)
      // Refused: not a JSON string, a bad value, fixed at start, unknown.
      #expect(
        try await client.call(
          .put, "/_node/_local/_config/uuids/max_count", "5", headers: admin
        ).code == 400)
      #expect(
        try await client.call(
          .put, "/_node/_local/_config/uuids/max_count", #""many""#, headers: admin
        ).code == 400)
      let fixed = try await client.call(
        .put, "/_node/_local/_config/couchdb/max_document_size", #""10""#, headers: admin)
      #expect(fixed.code == 400)
      #expect(fixed["reason"]?.stringValue?.contains("set when the server starts") == true)
      // Its own value again is no change: accepted, the old value answered.
      let size = try #require(
        try await client.call(
          .get, "/_node/_local/_config/couchdb/max_document_size", headers: admin
        ).json?.stringValue)
      let same = try await client.call(
        .put, "/_node/_local/_config/couchdb/max_document_size", "\"\(size)\"", headers: admin)
      #expect(same.code == 200 && same.json == .string(size))
      #expect(
        try await client.call(.put, "/_node/_local/_config/foo/bar", #""1""#, headers: admin)
          .code == 400)
      // uuids: sequential by default (one random prefix, a growing tail), then utc_id.
      let sequential = try await client.call(.get, "/_uuids?count=3")["uuids"]?.strings ?? []
      #expect(sequential.count == 3 && Set(sequential.map { $0.prefix(26) }).count == 1)
      #expect(sequential == sequential.sorted())
      #expect(
        try await client.call(
          .put, "/_node/_local/_config/uuids/algorithm", #""utc_id""#, headers: admin
        ).json == .string("sequential"))
      _ = try await client.call(
        .put, "/_node/_local/_config/uuids/utc_id_suffix", #""-x""#, headers: admin)
      let timed = try await client.call(.get, "/_uuids?count=5")["uuids"]?.strings ?? []
      #expect(timed.count == 5 && timed.allSatisfy { $0.count == 16 && $0.hasSuffix("-x") })
      // Made within a few microseconds, yet each later than the one before (as CouchDB's).
      #expect(zip(timed, timed.dropFirst()).allSatisfy { $0 < $1 })
      #expect(
        try await client.call(.delete, "/_node/_local/_config/uuids/algorithm", headers: admin)
          .json == .string("utc_id"))
      #expect(
        try await client.call(.get, "/_node/_local/_config/uuids/algorithm", headers: admin).json
          == .string("sequential"))
      // A server administrator made and removed through [admins].
      #expect(
        try await client.call(
          .put, "/_node/_local/_config/admins/ops", #""pw-ops""#, headers: admin
        ).json == .string(""))
      var ops = HTTPFields()
      ops[.authorization] = "Basic " + Base64.encode(Array("ops:pw-ops".utf8))
      #expect(
        try await client.call(.get, "/_session", headers: ops)["userCtx"]?["roles"]?.strings
          == ["_admin"])
      #expect(
        try await client.call(.delete, "/_node/_local/_config/admins/ops", headers: admin).code
          == 200)
      #expect(try await client.call(.get, "/_session", headers: ops).code == 401)
    }
  }
}
