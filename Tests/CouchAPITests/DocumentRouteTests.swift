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

@Suite struct DocumentRouteTests {
  @Test("PUT, GET, update with rev or If-Match, DELETE")
  func lifecycle() async throws {
    try await withServer { client, _ in
      try await client.call(.put, "/db")
      let orphan = try await client.call(
        .put, "/db/w1:Home", #"{"type":"page","wiki_id":"w1","markdown":"Hi"}"#)
      #expect(orphan.code == 403)
      #expect(orphan["error"]?.stringValue == "forbidden")
      let untyped = try await client.call(
        .put, "/db/w1", #"{"type":"wiki","title":7,"owner_id":"ann","members":[]}"#)
      #expect(untyped.code == 403)
      #expect(untyped["reason"]?.stringValue?.contains("title") == true)
      #expect(
        try await client.call(
          .put, "/db/w1", #"{"type":"wiki","title":"W","owner_id":"ann","members":[]}"#
        ).code == 201)
      let created = try await client.call(
        .put, "/db/w1:Home", #"{"type":"page","wiki_id":"w1","markdown":"Hi"}"#)
      #expect(created.code == 201)
      #expect(created["ok"] == .bool(true))
      #expect(created["id"]?.stringValue == "w1:Home")
      let rev1 = try #require(created["rev"]?.stringValue)
      #expect(rev1.hasPrefix("1-"))
      #expect(created.headers[.eTag] == "\"\(rev1)\"")

      let doc = try await client.call(.get, "/db/w1:Home")
      #expect(doc.code == 200)
      #expect(doc["_id"]?.stringValue == "w1:Home")
      #expect(doc["_rev"]?.stringValue == rev1)
      #expect(doc["markdown"]?.stringValue == "Hi")
      #expect(doc.headers[.eTag] == "\"\(rev1)\"")
      #expect(try await client.call(.head, "/db/w1:Home").code == 200)

      let conflict = try await client.call(.put, "/db/w1:Home", #"{"markdown":"no rev"}"#)
      #expect(conflict.code == 409)
      #expect(conflict.error == "conflict")

      let rev2 = try #require(
        try await client.call(.put, "/db/w1:Home?rev=\(rev1)", #"{"markdown":"v2"}"#)["rev"]?
          .stringValue)
      #expect(rev2.hasPrefix("2-"))
      let viaHeader = try await client.call(
        .put, "/db/w1:Home", #"{"markdown":"v3"}"#, headers: [.ifMatch: "\"\(rev2)\""])
      #expect(viaHeader.code == 201)
      let rev3 = try #require(viaHeader["rev"]?.stringValue)
      let mismatch = try await client.call(
        .put, "/db/w1:Home?rev=\(rev3)", #"{"markdown":"x"}"#, headers: [.ifMatch: "\"\(rev2)\""])
      #expect(mismatch.code == 400)

      let revs = try await client.call(.get, "/db/w1:Home?revs=true&revs_info=true&local_seq=true")
      #expect(revs["_revisions"]?["start"]?.int == 3)
      #expect(revs["_revisions"]?["ids"]?.arrayValue?.count == 3)
      #expect(revs["_revs_info"]?.arrayValue?.count == 3)
      #expect(revs["_local_seq"]?.seq == 4)  // after the wiki and two edits of the page
      let old = try await client.call(.get, "/db/w1:Home?rev=\(rev1)")
      #expect(old["markdown"]?.stringValue == "Hi")
      #expect(try await client.call(.get, "/db/w1:Home?rev=9-abc").code == 404)
      #expect(try await client.call(.get, "/db/w1:Home?rev=bogus").code == 400)
      // As CouchDB, a flag is set by `true` alone; other values are ignored.
      let maybe = try await client.call(.get, "/db/w1:Home?revs=maybe")
      #expect(maybe.code == 200 && maybe["_revisions"] == nil)

      #expect(try await client.call(.delete, "/db/w1:Home").code == 409)
      let deleted = try await client.call(.delete, "/db/w1:Home?rev=\(rev3)")
      #expect(deleted.code == 200)
      let tombstone = try #require(deleted["rev"]?.stringValue)
      #expect(tombstone.hasPrefix("4-"))
      let gone = try await client.call(.get, "/db/w1:Home")
      #expect(gone.code == 404)
      #expect(gone.json == json(#"{"error":"not_found","reason":"deleted"}"#))
      #expect(
        try await client.call(.get, "/db/w1:Home?rev=\(tombstone)")["_deleted"] == .bool(true))
      #expect(
        try await client.call(.get, "/db/nothing").json
          == json(#"{"error":"not_found","reason":"missing"}"#))
    }
  }

  @Test(
    "a revision CouchDB parses but no tree holds (0-abc, 1-, a huge generation, 1-xyz!) is a 409 conflict; one it cannot parse is 400"
  )
  func unmatchableRevisions() async throws {
    try await withServer { client, _ in
      try await client.call(.put, "/db")
      try await client.call(.put, "/db/a", "{}")
      for rev in ["0-abc", "1-", "99999999999999999999-abc", "1-xyz!", "01-abc"] {
        let new = try await client.call(.put, "/db/new", #"{"_rev":"\#(rev)"}"#)
        #expect(new.code == 409 && new.error == "conflict", "\(rev)")
        let existing = try await client.call(.put, "/db/a", #"{"_rev":"\#(rev)"}"#)
        #expect(existing.code == 409, "\(rev)")
        let delete = try await client.call(
          .delete, "/db/a?rev=" + rev.replacingOccurrences(of: "!", with: "%21"))
        #expect(delete.code == 409, "\(rev)")
      }
      for rev in ["abc", "-1-abc", "x-1"] {
        let r = try await client.call(.put, "/db/a", #"{"_rev":"\#(rev)"}"#)
        #expect(r.code == 400 && r["reason"]?.stringValue == "Invalid rev format", "\(rev)")
      }
      let bulk = try await client.call(
        .post, "/db/_bulk_docs", #"{"docs":[{"_id":"a","_rev":"0-abc"},{"_id":"b","_rev":"1-"}]}"#)
      #expect(bulk.json?.arrayValue?.map { $0["error"]?.stringValue } == ["conflict", "conflict"])
      let huge = try await client.call(
        .post, "/db/_bulk_docs", #"{"docs":[{"_id":"a","_rev":"99999999999999999999-abc"}]}"#)
      #expect(huge.code == 201 && huge.json?[0]?["error"]?.stringValue == "conflict")
      #expect(try await client.call(.get, "/db")["doc_count"]?.int == 1)
      // Reads: missing, not malformed.
      #expect(try await client.call(.get, "/db/a?rev=0-abc").code == 404)
      #expect(try await client.call(.get, "/db/a?rev=abc").code == 400)
      let open = try await client.call(
        .get, #"/db/a?open_revs=["0-abc","1-"]"#, headers: [.accept: "application/json"])
      #expect(open.json == json(#"[{"missing":"0-abc"},{"missing":"1-"}]"#))
      let diff = try await client.call(
        .post, "/db/_revs_diff", #"{"a":["1-xyz!","2-abc"],"b":["0-x"]}"#)
      #expect(diff["a"]?["missing"] == json(#"["2-abc","1-xyz!"]"#))
      #expect(diff["b"] == json(#"{"missing":["0-x"]}"#))
      #expect(try await client.call(.post, "/db/_revs_diff", #"{"a":["abc"]}"#).code == 400)
      let missingRevs = try await client.call(.post, "/db/_missing_revs", #"{"b":["0-x"]}"#)
      #expect(missingRevs.json == json(#"{"missing_revs":{"b":["0-x"]}}"#))
    }
  }

  @Test("POST /{db} creates a document with a generated id")
  func postDocument() async throws {
    try await withServer { client, _ in
      try await client.call(.put, "/db")
      let r = try await client.call(.post, "/db", #"{"type":"note"}"#)
      #expect(r.code == 201)
      let id = try #require(r["id"]?.stringValue)
      #expect(id.count == 32)
      #expect(r.headers[.location] == "http://localhost/db/\(id)")
      #expect(try await client.call(.get, "/db/\(id)")["type"]?.stringValue == "note")
      let named = try await client.call(.post, "/db/", #"{"_id":"given"}"#)
      #expect(named["id"]?.stringValue == "given")
    }
  }

  @Test("malformed JSON and invalid ids are 400 and write nothing")
  func badInput() async throws {
    try await withServer { client, dir in
      try await client.call(.put, "/db")
      for (uri, body) in [
        ("/db/doc", #"{"a":"#), ("/db/doc", "[1,2]"), ("/db/doc", ""), ("/db/_bad", "{}"),
        ("/db/doc", #"{"_unknown":1}"#),
      ] {
        let r = try await client.call(.put, uri, body)
        #expect(r.code == 400, "\(uri) \(body)")
        #expect(r.json?["reason"]?.stringValue != nil)
      }
      // Malformed attachments, as CouchDB refuses them; no blob is written either.
      for (body, code, error, reason) in [
        (
          #"{"_attachments":{"a":{"data":"AA=="},"b":{"data":"!!"}}}"#, 400, "bad_request",
          "Invalid attachment data for b"
        ),
        (
          #"{"_attachments":{"a":{"content_type":"text/plain"}}}"#, 400, "bad_request",
          "Invalid attachment data for a"
        ),
        (
          #"{"_attachments":{"_a":{"data":"AA=="}}}"#, 400, "bad_request",
          "Attachment name '_a' starts with prohibited character '_'"
        ),
        (
          #"{"_attachments":{"a":{"data":"AA=="},"a":{"data":"AQ=="}}}"#, 400, "bad_request",
          "Duplicate attachments"
        ),
        (
          #"{"_attachments":[1]}"#, 400, "doc_validation",
          "Bad special document member: _attachments"
        ),
        (
          #"{"_attachments":{"a":{"data":"AA=="},"b":{"follows":true}}}"#, 400, "bad_request",
          "Attachment b says follows, but the request is not multipart/related"
        ),
        (
          #"{"_attachments":{"a":{"stub":true}}}"#, 412, "missing_stub",
          "Invalid attachment stub in doc for a"
        ),
      ] {
        let r = try await client.call(.put, "/db/doc", body)
        #expect(r.code == code && r.error == error, "\(body): \(r.text)")
        #expect(r["reason"]?.stringValue == reason)
      }
      #expect(
        !FileManager.default.fileExists(atPath: dir.data.directory(of: "db") + "/attachments"))
      #expect(try await client.call(.post, "/db", "nope").code == 400)
      #expect(try await client.call(.post, "/db/_bulk_docs", #"{"docs":[{"a":}]}"#).code == 400)
      #expect(try await client.call(.post, "/db/_bulk_docs", #"{"nodocs":[]}"#).code == 400)
      #expect(try dir.data.open("db").info.updateSeq == 0)
      #expect(try await client.call(.patch, "/db/doc").code == 405)
    }
  }

  @Test("percent-encoded ids: %2F and %3D are part of the id")
  func encodedIDs() async throws {
    try await withServer { client, _ in
      try await client.call(.put, "/db")
      let r = try await client.call(.put, "/db/w1%3AHome%2FSub%3Dx", #"{"v":1}"#)
      #expect(r.code == 201)
      #expect(r["id"]?.stringValue == "w1:Home/Sub=x")
      let doc = try await client.call(.get, "/db/w1%3AHome%2FSub%3Dx")
      #expect(doc["_id"]?.stringValue == "w1:Home/Sub=x")
      let all = try await client.call(.get, "/db/_all_docs")
      #expect(all["rows"]?[0]?["id"]?.stringValue == "w1:Home/Sub=x")
      // A `+` is a space, as CouchDB's `chttpd/decode_plus_to_space` (on by default) has it;
      // `%2B` is a plus; with the setting off, `+` is itself.
      let space = try await client.call(.put, "/db/Getting%20Started+", #"{}"#)
      #expect(space["id"]?.stringValue == "Getting Started ")
      let plus = try await client.call(.put, "/db/one%2Btwo", #"{}"#)
      #expect(plus["id"]?.stringValue == "one+two")
      _ = try await client.call(
        .put, "/_node/_local/_config/chttpd/decode_plus_to_space", #""false""#)
      let literal = try await client.call(.put, "/db/three+four", #"{}"#)
      #expect(literal["id"]?.stringValue == "three+four")
      let design = try await client.call(.put, "/db/_design/app", #"{"language":"none"}"#)
      #expect(design["id"]?.stringValue == "_design/app")
      #expect(try await client.call(.get, "/db/_design%2Fapp")["_id"]?.stringValue == "_design/app")
    }
  }

  @Test("conflicts, open_revs, latest and deleted_conflicts")
  func conflictsAndOpenRevs() async throws {
    try await withServer { client, _ in
      try await client.call(.put, "/db")
      let base = #""_revisions":{"start":2,"ids":["#
      for (rev, parent, body) in [
        ("2-aaaa", "1111", #""v":"a""#), ("2-bbbb", "1111", #""v":"b""#),
      ] {
        let doc =
          #"{"_id":"d","_rev":"\#(rev)",\#(body),\#(base)"\#(rev.dropFirst(2))","\#(parent)"]}}"#
        let r = try await client.call(.put, "/db/d?new_edits=false", doc)
        #expect(r.code == 201, "\(r.text)")
        #expect(r["rev"]?.stringValue == rev)
      }
      let doc = try await client.call(.get, "/db/d?conflicts=true")
      #expect(doc["_rev"]?.stringValue == "2-bbbb")
      #expect(doc["_conflicts"]?.strings == ["2-aaaa"])

      let all = try await client.call(.get, "/db/d?open_revs=all")
      #expect(all.json?.arrayValue?.count == 2)
      #expect(all.json?[0]?["ok"]?["_id"]?.stringValue == "d")
      let some = try await client.call(
        .get, "/db/d?open_revs=%5B%222-aaaa%22,%223-ffff%22%5D&revs=true")
      #expect(some.json?[0]?["ok"]?["_rev"]?.stringValue == "2-aaaa")
      #expect(some.json?[0]?["ok"]?["_revisions"]?["ids"]?.strings == ["aaaa", "1111"])
      #expect(some.json?[1]?["missing"]?.stringValue == "3-ffff")
      #expect(try await client.call(.get, "/db/d?open_revs=nope").code == 400)
      let latest = try await client.call(.get, "/db/d?open_revs=%5B%221-1111%22%5D&latest=true")
      #expect(latest.json?.arrayValue?.count == 2)
      #expect(
        try await client.call(.get, "/db/d?open_revs=all", nil).headers[.contentType]
          == "application/json")
      let latestRev = try await client.call(.get, "/db/d?rev=1-1111&latest=true")
      #expect(latestRev["_rev"]?.stringValue == "2-bbbb")

      // Delete the losing branch: it becomes a deleted conflict.
      #expect(try await client.call(.delete, "/db/d?rev=2-aaaa").code == 200)
      let meta = try await client.call(.get, "/db/d?conflicts=true&deleted_conflicts=true")
      #expect(meta["_conflicts"] == nil)
      #expect(meta["_deleted_conflicts"]?.strings.count == 1)
      #expect(try await client.call(.get, "/db/d?meta=true")["_revs_info"] != nil)

      // new_edits=false needs a _rev; the URL's id wins over the body's, as in CouchDB.
      #expect(try await client.call(.put, "/db/e?new_edits=false", #"{"v":1}"#).code == 400)
      #expect(
        try await client.call(.put, "/db/e?new_edits=false", #"{"_id":"f","_rev":"1-ab"}"#).json
          == json(#"{"ok":true,"id":"e","rev":"1-ab"}"#))
    }
  }

  @Test("_local documents: put, get, update, delete; not in _all_docs or _changes")
  func localDocuments() async throws {
    try await withServer { client, _ in
      try await client.call(.put, "/db")
      let put = try await client.call(.put, "/db/_local/rep%2Fid%3D1", #"{"last_seq":5}"#)
      #expect(put.code == 201)
      #expect(put["id"]?.stringValue == "_local/rep/id=1")
      #expect(put["rev"]?.stringValue == "0-1")
      let got = try await client.call(.get, "/db/_local/rep%2Fid%3D1")
      #expect(got["_id"]?.stringValue == "_local/rep/id=1")
      #expect(got["last_seq"]?.seq == 5)
      // CouchDB 3 does not compare the named revision with the stored one: 0-7 gives 0-8.
      let named = try await client.call(
        .put, "/db/_local/rep%2Fid%3D1", #"{"_rev":"0-7","last_seq":6}"#)
      #expect(named.code == 201 && named["rev"]?.stringValue == "0-8")
      let updated = try await client.call(
        .put, "/db/_local/rep%2Fid%3D1", #"{"_rev":"0-1","last_seq":6}"#)
      #expect(updated["rev"]?.stringValue == "0-2")
      let viaQuery = try await client.call(
        .put, "/db/_local/rep%2Fid%3D1?rev=0-2", #"{"last_seq":7}"#)
      #expect(viaQuery["rev"]?.stringValue == "0-3")
      #expect(try await client.call(.get, "/db/_local/rep%2Fid%3D1")["last_seq"]?.seq == 7)
      #expect(try await client.call(.get, "/db/_all_docs")["rows"]?.arrayValue?.count == 0)
      #expect(try await client.call(.get, "/db/_changes")["results"]?.arrayValue?.count == 0)
      #expect(try await client.call(.put, "/db/_local/x?rev=1-abc", "{}").code == 400)
      let deleted = try await client.call(.delete, "/db/_local/rep%2Fid%3D1?rev=0-1")
      #expect(deleted.code == 200 && deleted["rev"]?.stringValue == "0-0")
      #expect(try await client.call(.delete, "/db/_local/rep%2Fid%3D1?rev=0-3").code == 404)
      #expect(try await client.call(.get, "/db/_local/rep%2Fid%3D1").code == 404)
      #expect(try await client.call(.get, "/db/_local/a/b").code == 400)
      #expect(try await client.call(.put, "/db/_local/x", "{").code == 400)
    }
  }

  /// CouchDB 3.4.3's replicator updating its checkpoint: `_rev` 0-1 and `_revisions` with start
  /// 0 in the body; CouchDB answers 0-2, then 0-3 (`couch_db_updater:update_local_doc_revs`).
  @Test("a CouchDB replicator's checkpoint update, twice in a row, as CouchDB answers it")
  func couchDBCheckpointUpdates() async throws {
    try await withServer { client, _ in
      try await client.call(.put, "/db")
      let path = "/db/_local/0a1b2c3d4e5f60718293a4b5c6d7e8f9"
      let first = try await client.call(
        .put, path, #"{"session_id":"s1","source_last_seq":"5","history":[]}"#)
      #expect(first.code == 201 && first["rev"]?.stringValue == "0-1")
      let second = try await client.call(
        .put, path,
        #"{"_id":"_local/0a1b2c3d4e5f60718293a4b5c6d7e8f9","_rev":"0-1","_revisions":{"start":0,"ids":["1"]},"session_id":"s1","source_last_seq":"9","history":[]}"#
      )
      #expect(second.code == 201)
      #expect(second["rev"]?.stringValue == "0-2")
      let third = try await client.call(
        .put, path,
        #"{"_id":"_local/0a1b2c3d4e5f60718293a4b5c6d7e8f9","_rev":"0-2","_revisions":{"start":0,"ids":["2"]},"session_id":"s1","source_last_seq":"12","history":[]}"#
      )
      #expect(third["rev"]?.stringValue == "0-3")
      let got = try await client.call(.get, path)
      #expect(got["_rev"]?.stringValue == "0-3")
      #expect(got["source_last_seq"]?.stringValue == "12")
      #expect(got["_revisions"] == nil)
      // `_revisions` wins over `_rev`; a revision that is not 0-<integer> is refused.
      let fromRevisions = try await client.call(
        .put, path, #"{"_revisions":{"start":0,"ids":["41"]},"_rev":"0-3"}"#)
      #expect(fromRevisions["rev"]?.stringValue == "0-42")
      let bad = try await client.call(.put, path, #"{"_rev":"0-x"}"#)
      #expect(bad.code == 400 && bad["reason"]?.stringValue == "Invalid rev format")
      #expect(try await client.call(.get, path)["_rev"]?.stringValue == "0-42")
      // Attachments of a local document are read and dropped, as CouchDB does.
      let withAttachment = try await client.call(
        .put, path, #"{"a":1,"_attachments":{"x.txt":{"data":"aGk="}}}"#)
      #expect(withAttachment.code == 201)
      #expect(try await client.call(.get, path)["_attachments"] == nil)
      let badData = try await client.call(.put, path, #"{"_attachments":{"x.txt":{"data":"!"}}}"#)
      #expect(badData.code == 400)
      // `_deleted` in the body deletes it.
      let gone = try await client.call(.put, path, #"{"_rev":"0-43","_deleted":true}"#)
      #expect(gone.code == 201 && gone["rev"]?.stringValue == "0-0")
      #expect(try await client.call(.get, path).code == 404)
    }
  }
}
