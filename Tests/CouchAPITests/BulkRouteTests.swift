import CouchAPI
import CouchTestSupport
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import JSON
import Log
import Projections
import Query
import Replication
import RevTree
import Testing
import Wiki

@Suite struct BulkRouteTests {
  @Test("_bulk_docs: one result per document, errors listed in place")
  func bulkDocs() async throws {
    try await withServer { client, _ in
      try await client.call(.put, "/db")
      let r = try await client.call(
        .post, "/db/_bulk_docs", #"{"docs":[{"_id":"a","v":1},{"_id":"b","v":2},{"v":3}]}"#)
      #expect(r.code == 201)
      let results = try #require(r.json?.arrayValue)
      #expect(results.count == 3)
      #expect(results[0]["ok"] == .bool(true) && results[0]["id"]?.stringValue == "a")
      #expect(results[2]["id"]?.stringValue?.count == 32)
      let again = try await client.call(
        .post, "/db/_bulk_docs", #"{"docs":[{"_id":"a","v":1},{"_id":"c"},{"_id":"d","v":[]}]}"#)
      let second = try #require(again.json?.arrayValue)
      #expect(second[0]["error"]?.stringValue == "conflict")
      #expect(second[0]["id"]?.stringValue == "a")
      #expect(second[1]["ok"] == .bool(true))
      #expect(second[2]["ok"] == .bool(true))
      #expect(try await client.call(.get, "/db")["doc_count"]?.int == 5)
      #expect(try await client.call(.get, "/db/_bulk_docs").code == 405)
    }
  }

  @Test(
    "_bulk_docs: a malformed special member fails the whole request, as couch_doc:from_json_obj_validate does",
    arguments: [
      (
        #"{"_id":"a","_revisions":{"start":"1","ids":["x"]}}"#, "_revisions.start isn't an integer."
      ),
      (#"{"_id":"a","_revisions":{"start":1,"ids":"x"}}"#, "_revisions.ids isn't a array."),
      (#"{"_id":"a","_revisions":{"start":1,"ids":[1]}}"#, "RevId isn't a string"),
      (
        #"{"_id":"a","_revisions":{"start":1,"ids":["zz000000000000000000000000000000"]}}"#,
        "RevId isn't a valid hexadecimal"
      ),
      (#"{"_id":"a","_revisions":[1]}"#, "Bad special document member: _revisions"),
      (#"{"_id":"a","_rev":"x"}"#, "Invalid rev format"),
      (#"{"_id":"a","_bogus":1}"#, "Bad special document member: _bogus"),
      (#"{"_id":7}"#, "Document id must be a string"),
      (#"{"_id":"_nope"}"#, "Only reserved document ids may start with underscore."),
      ("[1]", "Document must be a JSON object"),
    ])
  func bulkDocsRefusesMalformedShapes(doc: String, reason: String) async throws {
    try await withServer { client, _ in
      try await client.call(.put, "/db")
      for newEdits in ["true", "false"] {
        let r = try await client.call(
          .post, "/db/_bulk_docs",
          #"{"new_edits":\#(newEdits),"docs":[{"_id":"fine","_rev":"1-abc","v":1},\#(doc)]}"#)
        #expect(r.code == 400, "\(r.text)")
        #expect(r["reason"]?.stringValue == reason, "\(r.text)")
        // As couch_doc:validate_docid names its refusals.
        if reason.contains("Document id") || reason.contains("reserved document ids") {
          #expect(r["error"]?.stringValue == "illegal_docid", "\(r.text)")
        }
        // Nothing of the request was written.
        #expect(try await client.call(.get, "/db/fine").code == 404)
      }
    }
  }

  @Test(
    "_bulk_docs: a large request's shapes are checked in two halves, and the first malformed document's error is the answer"
  )
  func largeRequestShapeChecks() async throws {
    try await withServer { client, _ in
      try await client.call(.put, "/db")
      let count = 603  // past the size checked in halves (256)
      func body(_ bad: [Int: String], newEdits: Bool = true) -> String {
        let docs = (0..<count).map { i in
          bad[i] ?? #"{"_id":"d\#(i)","_rev":"1-abc","v":\#(i)}"#
        }
        return #"{"new_edits":\#(newEdits),"docs":[\#(docs.joined(separator: ","))]}"#
      }
      let badRev = #"{"_id":"x","_rev":"x"}"#
      let badMember = #"{"_id":"y","_bogus":1}"#
      // One bad document in either half, or one in each: the earlier one's error.
      for (bad, reason) in [
        ([count - 1: badRev], "Invalid rev format"),
        ([1: badMember], "Bad special document member: _bogus"),
        ([2: badRev, count - 2: badMember], "Invalid rev format"),
        ([count / 2 - 1: badMember, count / 2 + 1: badRev], "Bad special document member: _bogus"),
      ] {
        for newEdits in [true, false] {
          let r = try await client.call(.post, "/db/_bulk_docs", body(bad, newEdits: newEdits))
          #expect(r.code == 400 && r["reason"]?.stringValue == reason, "\(r.text)")
        }
      }
      // A replicated document without `_rev` or `_revisions` in the second half.
      let r = try await client.call(
        .post, "/db/_bulk_docs", body([count - 3: #"{"_id":"z"}"#], newEdits: false))
      #expect(r.code == 400, "\(r.text)")
      // Nothing of those requests was written; a well-formed one writes every document.
      #expect(try await client.call(.get, "/db")["doc_count"]?.int == 0)
      let ok = try await client.call(.post, "/db/_bulk_docs", body([:], newEdits: false))
      #expect(ok.code == 201, "\(ok.text)")
      #expect(try await client.call(.get, "/db")["doc_count"]?.int == count)
    }
  }

  @Test(
    "_design_docs, _local_docs and /queries answer as CouchDB's chttpd_db tests expect: their own documents, keys of their namespace, offsets"
  )
  func designAndLocalDocs() async throws {
    try await withServer { client, _ in
      try await client.call(.put, "/db")
      for i in 1...10 {
        try await client.call(.put, "/db/testdoc\(i)", "{}")
        try await client.call(.put, "/db/_design/ddoc\(i)", "{}")
        try await client.call(.put, "/db/_local/doc\(i)", #"{"n":\#(i)}"#)
      }
      // limit 5, skip 2 (chttpd_db_test's helper_queries_with_limit_skip).
      let design = try await client.call(.get, "/db/_design_docs?limit=5&skip=2")
      #expect(design.code == 200)
      #expect(design["total_rows"]?.int == 10 && design["offset"]?.int == 2)
      #expect(
        design["rows"]?.arrayValue?.map { $0["id"]?.stringValue ?? "" }
          == ["_design/ddoc2", "_design/ddoc3", "_design/ddoc4", "_design/ddoc5", "_design/ddoc6"])
      let local = try await client.call(.get, "/db/_local_docs?limit=5&skip=2")
      #expect(local["total_rows"] == .null && local["offset"] == .null)
      #expect(
        local["rows"]?.arrayValue?.map { $0["id"]?.stringValue ?? "" }
          == ["_local/doc2", "_local/doc3", "_local/doc4", "_local/doc5", "_local/doc6"])
      #expect(local["rows"]?[0]?["value"]?["rev"]?.stringValue == "0-1")
      // keys of another namespace are left out (helper_queries_with_keys: one row each).
      let keys = #"{"keys":["testdoc1","_design/ddoc3","_local/doc5"]}"#
      let designKeys = try await client.call(.post, "/db/_design_docs", keys)
      #expect(designKeys["rows"]?.arrayValue?.map { $0["id"]?.stringValue } == ["_design/ddoc3"])
      let localKeys = try await client.call(.post, "/db/_local_docs?include_docs=true", keys)
      #expect(localKeys["rows"]?.arrayValue?.count == 1)
      #expect(localKeys["rows"]?[0]?["doc"] == json(#"{"_id":"_local/doc5","_rev":"0-1","n":5}"#))
      let missing = try await client.call(.get, #"/db/_local_docs?keys=["_local/nope"]"#)
      #expect(missing["rows"]?[0]?["error"]?.stringValue == "not_found")
      // Ranges, both directions.
      let down = try await client.call(
        .get,
        #"/db/_design_docs?descending=true&startkey="_design/ddoc5"&endkey="_design/ddoc2"&inclusive_end=false"#
      )
      #expect(
        down["rows"]?.arrayValue?.map { $0["id"]?.stringValue ?? "" }
          == ["_design/ddoc5", "_design/ddoc4", "_design/ddoc3"])
      #expect(down["offset"]?.int == 4)  // ddoc9, ddoc8, ddoc7, ddoc6 come first
      let range = try await client.call(
        .get, #"/db/_local_docs?startkey="_local/doc3"&endkey="_local/doc5""#)
      #expect(
        range["rows"]?.arrayValue?.map { $0["id"]?.stringValue ?? "" }
          == ["_local/doc3", "_local/doc4", "_local/doc5"])
      // Several queries in one request (chttpd_db_test's helper_queries_with_keys_limit_skip).
      let queries =
        #"{"queries":[{"keys":["testdoc1","_design/ddoc3","_local/doc5"]},{"limit":5,"skip":2}]}"#
      for (path, offset, keyed) in [
        ("_all_docs", JSONValue.number(2), 3), ("_design_docs", .number(2), 1),
        ("_local_docs", .null, 1),
      ] {
        let r = try await client.call(.post, "/db/\(path)/queries", queries)
        #expect(r.code == 200, "\(path)")
        let results = try #require(r["results"]?.arrayValue, "\(path)")
        #expect(results.count == 2)
        #expect(results[0]["rows"]?.arrayValue?.count == keyed, "\(path)")
        #expect(results[1]["offset"] == offset, "\(path)")
        #expect(results[1]["rows"]?.arrayValue?.count == 5, "\(path)")
      }
      let ranged = try await client.call(
        .post, "/db/_all_docs/queries",
        #"{"queries":[{"startkey":"testdoc3","endkey":"testdoc5","include_docs":true}]}"#)
      #expect(
        ranged["results"]?[0]?["rows"]?.arrayValue?.map { $0["doc"]?["_id"]?.stringValue }
          == ["testdoc3", "testdoc4", "testdoc5"])
      #expect(
        try await client.call(.post, "/db/_all_docs/queries", #"{"queries":3}"#).code == 400)
      #expect(
        try await client.call(.post, "/db/_all_docs/queries", #"{"queries":[{"limit":-1}]}"#)
          .code == 400)
      #expect(try await client.call(.get, "/db/_all_docs/queries").code == 405)
      let none = try await client.call(.get, "/db/_design_docs?limit=0")
      #expect(none["total_rows"]?.int == 10 && none["rows"]?.arrayValue?.isEmpty == true)
      #expect(try await client.call(.get, "/db/_local_docs?limit=x").code == 400)
      // Bounds that are not strings collate as in _all_docs: before or after every id.
      for (query, count) in [
        ("startkey=1", 10), ("startkey=%5B%5D", 0), ("endkey=null", 0), ("endkey=%7B%7D", 10),
        ("descending=true&startkey=null", 0), ("descending=true&endkey=1", 10), ("key=1", 0),
      ] {
        let r = try await client.call(.get, "/db/_local_docs?" + query)
        #expect(r.code == 200 && r["rows"]?.arrayValue?.count == count, "\(query)")
      }
    }
  }

  @Test("_bulk_docs writes _local documents as PUT does, in both modes, never in _changes")
  func bulkLocalDocuments() async throws {
    try await withServer { client, _ in
      try await client.call(.put, "/db")
      let r = try await client.call(
        .post, "/db/_bulk_docs",
        #"{"docs":[{"_id":"_local/x","a":1},{"_id":"n"},{"_id":"_local/x","_rev":"0-1","a":2},{"_id":"_local/z","_rev":"1-abc"}]}"#
      )
      #expect(r.code == 201)
      let results = try #require(r.json?.arrayValue)
      #expect(results.count == 4)
      #expect(results[0] == json(#"{"ok":true,"id":"_local/x","rev":"0-1"}"#))
      #expect(results[1]["id"]?.stringValue == "n" && results[1]["ok"] == .bool(true))
      #expect(results[2] == json(#"{"ok":true,"id":"_local/x","rev":"0-2"}"#))
      #expect(results[3]["error"]?.stringValue == "bad_request")
      #expect(try await client.call(.get, "/db/_local/x")["a"]?.int == 2)
      // Replicated: written, and only failures listed.
      let replicated = try await client.call(
        .post, "/db/_bulk_docs",
        #"{"new_edits":false,"docs":[{"_id":"_local/y","_rev":"0-5","v":1},{"_id":"_local/q","_rev":"2-ab"}]}"#
      )
      #expect(replicated.code == 201)
      let failures = try #require(replicated.json?.arrayValue)
      #expect(failures.count == 1 && failures[0]["id"]?.stringValue == "_local/q")
      let y = try await client.call(.get, "/db/_local/y")
      #expect(y["_rev"]?.stringValue == "0-6" && y["v"]?.int == 1)
      // Deleted by a _deleted member.
      let deleted = try await client.call(
        .post, "/db/_bulk_docs", #"{"docs":[{"_id":"_local/x","_deleted":true}]}"#)
      #expect(deleted.json?[0]?["ok"] == .bool(true))
      #expect(try await client.call(.get, "/db/_local/x").code == 404)
      let changes = try await client.call(.get, "/db/_changes")
      #expect(changes["results"]?.arrayValue?.map { $0["id"]?.stringValue } == ["n"])
      #expect(try await client.call(.get, "/db")["doc_count"]?.int == 1)
    }
  }

  @Test("_bulk_docs new_edits=false answers [] and lists only failures")
  func replicatedBulkDocs() async throws {
    try await withServer { client, _ in
      try await client.call(.put, "/db")
      let docs = (0..<20).map { i in
        #"{"_id":"d\#(i)","_rev":"2-\#(String(i, radix: 16))aa","_revisions":{"start":2,"ids":["\#(String(i, radix: 16))aa","bb"]},"n":\#(i)}"#
      }
      let r = try await client.call(
        .post, "/db/_bulk_docs", #"{"new_edits":false,"docs":[\#(docs.joined(separator: ","))]}"#)
      #expect(r.code == 201)
      #expect(r.json == .array([]))
      #expect(try await client.call(.get, "/db")["doc_count"]?.int == 20)
      #expect(
        try await client.call(.get, "/db/d3?revs=true")["_revisions"]?["ids"]?.strings == [
          "3aa", "bb",
        ])
      // Sending the same again writes nothing.
      let seq = try await client.call(.get, "/db")["update_seq"]
      _ = try await client.call(
        .post, "/db/_bulk_docs", #"{"new_edits":false,"docs":[\#(docs.joined(separator: ","))]}"#)
      #expect(try await client.call(.get, "/db")["update_seq"] == seq)
      let bad = try await client.call(
        .post, "/db/_bulk_docs",
        #"{"new_edits":false,"docs":[{"_id":"x"},{"_id":"y","_rev":"1-ab"}]}"#)
      // A document with neither `_rev` nor `_revisions` fails the whole request (CouchDB's
      // `validate_revs`).
      #expect(bad.code == 400 && bad.error == "bad_request")
      #expect(try await client.call(.get, "/db/y").code == 404)
      #expect(
        try await client.call(
          .post, "/db/_bulk_docs?new_edits=false", #"{"docs":[{"_id":"z","_rev":"1-cd"}]}"#
        )
        .json == .array([]))
      #expect(
        try await client.call(.post, "/db/_bulk_docs", #"{"docs":[],"new_edits":"no"}"#).code == 400
      )
      // A document refused on its own (a _revisions CouchDB reads, but no revision path) keeps
      // its id in its row.
      let malformed = try await client.call(
        .post, "/db/_bulk_docs",
        #"{"new_edits":false,"docs":[{"_id":"m","_rev":"2-aa","_revisions":{"start":2,"ids":[]}}]}"#
      )
      #expect(malformed.json?[0]?["id"]?.stringValue == "m", "\(malformed.text)")
      // The body must be declared JSON, as CouchDB checks it.
      let plain = try await client.execute(
        uri: "/db/_bulk_docs", method: .post, headers: [.contentType: "text/plain"],
        body: ByteBuffer(string: #"{"docs":[{"_id":"t"}]}"#)
      ) { $0.status.code }
      #expect(plain == 415)
      let post = try await client.execute(
        uri: "/db", method: .post, headers: [.contentType: "text/plain"],
        body: ByteBuffer(string: #"{"_id":"t"}"#)
      ) { $0.status.code }
      #expect(post == 415)
      #expect(try await client.call(.get, "/db/t").code == 404)
    }
  }

  @Test("_bulk_get: revisions with history, the winner without rev, errors per revision")
  func bulkGet() async throws {
    try await withServer { client, _ in
      try await client.call(.put, "/db")
      let rev1 = try #require(try await client.call(.put, "/db/a", #"{"v":1}"#)["rev"]?.stringValue)
      let rev2 = try #require(
        try await client.call(.put, "/db/a?rev=\(rev1)", #"{"v":2}"#)["rev"]?.stringValue)
      let r = try await client.call(
        .post, "/db/_bulk_get?revs=true",
        #"{"docs":[{"id":"a","rev":"\#(rev2)"},{"id":"a"},{"id":"missing"},{"id":"a","rev":"9-ff"},{"nope":1}]}"#
      )
      #expect(r.code == 200)
      let results = try #require(r["results"]?.arrayValue)
      #expect(results.count == 5)
      let first = try #require(results[0]["docs"]?[0]?["ok"])
      #expect(first["_rev"]?.stringValue == rev2)
      #expect(first["_revisions"]?["start"]?.int == 2)
      #expect(results[1]["docs"]?[0]?["ok"]?["v"]?.int == 2)
      #expect(results[2]["id"]?.stringValue == "missing")
      #expect(results[2]["docs"]?[0]?["error"]?["error"]?.stringValue == "not_found")
      #expect(results[2]["docs"]?[0]?["error"]?["rev"]?.stringValue == "undefined")
      #expect(results[3]["docs"]?[0]?["error"]?["rev"]?.stringValue == "9-ff")
      #expect(results[4]["docs"]?[0]?["error"]?["error"]?.stringValue == "bad_request")
      let latest = try await client.call(
        .post, "/db/_bulk_get?latest=true", #"{"docs":[{"id":"a","rev":"\#(rev1)"}]}"#)
      #expect(latest["results"]?[0]?["docs"]?[0]?["ok"]?["_rev"]?.stringValue == rev2)
      #expect(try await client.call(.post, "/db/_bulk_get", #"{"doc":[]}"#).code == 400)
    }
  }

  @Test("_revs_diff: missing revisions and possible ancestors")
  func revsDiff() async throws {
    try await withServer { client, _ in
      try await client.call(.put, "/db")
      let rev1 = try #require(try await client.call(.put, "/db/a", #"{"v":1}"#)["rev"]?.stringValue)
      let r = try await client.call(
        .post, "/db/_revs_diff",
        #"{"a":["\#(rev1)","2-abc"],"b":["1-def"],"c":[]}"#)
      #expect(r.code == 200)
      #expect(r["a"]?["missing"]?.strings == ["2-abc"])
      #expect(r["a"]?["possible_ancestors"]?.strings == [rev1])
      #expect(r["b"]?["missing"]?.strings == ["1-def"])
      #expect(r["c"] == nil)
      let none = try await client.call(.post, "/db/_revs_diff", #"{"a":["\#(rev1)"]}"#)
      #expect(none.json == json("{}"))
      #expect(try await client.call(.post, "/db/_revs_diff", #"{"a":"1-x"}"#).code == 400)
      #expect(try await client.call(.post, "/db/_revs_diff", #"{"a":["bogus"]}"#).code == 400)
    }
  }

  @Test("_all_docs: ranges, keys, paging, docs")
  func allDocs() async throws {
    try await withServer { client, _ in
      try await client.call(.put, "/db")
      for id in ["a", "b", "c", "d", "e"] {
        try await client.call(.put, "/db/\(id)", #"{"name":"\#(id)"}"#)
      }
      let deleted = try await client.call(.put, "/db/f", "{}")
      try await client.call(.delete, "/db/f?rev=\(deleted["rev"]!.stringValue!)")
      func ids(_ uri: String, _ body: String? = nil) async throws -> [String] {
        let r = try await client.call(body == nil ? .get : .post, uri, body)
        return r["rows"]?.arrayValue?.compactMap { $0["id"]?.stringValue } ?? []
      }
      let all = try await client.call(.get, "/db/_all_docs")
      #expect(all["total_rows"]?.int == 5)
      #expect(all["offset"]?.int == 0)
      #expect(all["rows"]?[0]?["value"]?["rev"]?.stringValue?.hasPrefix("1-") == true)
      #expect(try await ids("/db/_all_docs") == ["a", "b", "c", "d", "e"])
      #expect(try await ids("/db/_all_docs?startkey=%22b%22&endkey=%22d%22") == ["b", "c", "d"])
      #expect(
        try await ids("/db/_all_docs?start_key=%22b%22&end_key=%22d%22&inclusive_end=false") == [
          "b", "c",
        ])
      #expect(try await ids("/db/_all_docs?descending=true&limit=2") == ["e", "d"])
      #expect(try await ids("/db/_all_docs?skip=1&limit=2") == ["b", "c"])
      #expect(try await ids("/db/_all_docs?key=%22c%22") == ["c"])
      #expect(try await ids("/db/_all_docs?endkey=1") == [])
      #expect(try await ids("/db/_all_docs?startkey=%5B%5D") == [])
      let keyed = try await client.call(.get, "/db/_all_docs?keys=%5B%22c%22,%22f%22,%22zz%22%5D")
      let rows = try #require(keyed["rows"]?.arrayValue)
      #expect(rows[0]["id"]?.stringValue == "c")
      #expect(rows[1]["value"]?["deleted"] == .bool(true))
      #expect(rows[2]["error"]?.stringValue == "not_found")
      #expect(try await ids("/db/_all_docs", #"{"keys":["e","a"]}"#) == ["e", "a"])
      let docs = try await client.call(.get, "/db/_all_docs?include_docs=true&limit=1")
      #expect(docs["rows"]?[0]?["doc"]?["name"]?.stringValue == "a")
      let bad = try await client.call(.get, "/db/_all_docs?startkey=b")
      #expect(bad.code == 400)
      #expect(bad.error == "bad_request")  // CouchDB's: not JSON
      #expect(try await client.call(.get, "/db/_all_docs?limit=-1").code == 400)
      let keys = try await client.call(.post, "/db/_all_docs", #"{"keys":"a"}"#)
      #expect(keys.code == 400 && keys.error == "bad_request")
      #expect(keys["reason"] == .string("`keys` body member must be an array."))
      // A body not declared JSON: 415, as CouchDB's view_errors_test expects.
      var form = HTTPFields()
      form[.contentType] = "application/x-www-form-urlencoded"
      let formPost = try await client.raw(
        .post, "/db/_all_docs", Array(#"{"keys":["a"]}"#.utf8), headers: form)
      #expect(formPost.code == 415)
      #expect(try await client.call(.delete, "/db/_all_docs").code == 405)
    }
  }
}
