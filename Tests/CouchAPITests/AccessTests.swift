import AsyncHTTPClient
import Auth
import CouchAPI
import CouchQuery
import CouchTestSupport
import Crypto
import Formats
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
import Synchronization
import Testing
import Wiki

@Suite struct AccessTests {
  /// Who may read which document: the wiki's owner and member read `w1` and its page;
  /// the outsider and anonymous do not; `note` follows the admin-only security object.
  static let readers: [String: Set<String>] = [
    "w1": ["admin", "alice", "bob"], "w1:Home": ["admin", "alice", "bob"],
    "w2": ["admin", "carol"], "w2:Home": ["admin", "carol"], "note": ["admin"],
  ]
  static let everyone: [String?] = ["admin", "alice", "bob", "carol", nil]

  @Test("the read matrix: every read endpoint shows each user exactly what they may read")
  func readMatrix() async throws {
    try await withAccessServer { client, fixture in
      let revs = try Dictionary(
        uniqueKeysWithValues: Self.readers.keys.map {
          ($0, try fixture.store.get($0)["_rev"]!.stringValue!)
        })
      for who in Self.everyone {
        let h = AccessFixture.headers(who)
        let label = who ?? "anonymous"
        // Anonymous: the database is not theirs at all (CouchDB's 401).
        if who == nil {
          for uri in ["/wiki", "/wiki/w1", "/wiki/note", "/wiki/_all_docs", "/wiki/_changes"] {
            let r = try await client.call(.get, uri, headers: h)
            #expect(r.code == 401, "\(label) \(uri)")
            #expect(!r.text.contains("Secret"))
          }
          continue
        }
        var outputs: [String] = []
        for (id, allowed) in Self.readers.sorted(by: { $0.key < $1.key }) {
          let may = allowed.contains(who!)
          let path = "/wiki/" + encodeID(id)
          for query in ["", "?revs_info=true", "?conflicts=true", "?open_revs=all", "?revs=true"] {
            let r = try await client.call(.get, path + query, headers: h)
            #expect(r.code == (may ? 200 : 404), "\(label) GET \(id)\(query)")
            outputs.append(r.text)
          }
          let head = try await client.call(.head, path, headers: h)
          #expect(head.code == (may ? 200 : 404), "\(label) HEAD \(id)")
          let bulkGet = try await client.call(
            .post, "/wiki/_bulk_get", #"{"docs":[{"id":"\#(id)"}]}"#, headers: h)
          #expect(
            (bulkGet["results"]?[0]?["docs"]?[0]?["ok"] != nil) == may, "\(label) _bulk_get \(id)")
          // (Answers about an id the request named echo it; they are checked above.)
          // _revs_diff: a hidden document lacks even its real revision.
          let diff = try await client.call(
            .post, "/wiki/_revs_diff", #"{"\#(id)":["\#(revs[id]!)"]}"#, headers: h)
          #expect((diff[id] == nil) == may, "\(label) _revs_diff \(id)")
          let keys = try await client.call(
            .post, "/wiki/_all_docs", #"{"keys":["\#(id)"]}"#, headers: h)
          #expect(
            (keys["rows"]?[0]?["error"]?.stringValue == "not_found") == !may,
            "\(label) _all_docs keys \(id)")
        }
        let visible = Set(Self.readers.filter { $0.value.contains(who!) }.keys)
        // Listings and feeds: exactly the visible ids, counted as such.
        func ids(_ r: JSONResponse, _ key: String) -> Set<String> {
          Set((r[key]?.arrayValue ?? []).compactMap { $0["id"]?.stringValue })
        }
        let all = try await client.call(.get, "/wiki/_all_docs?include_docs=true", headers: h)
        #expect(ids(all, "rows") == visible, "\(label) _all_docs")
        #expect(all["total_rows"]?.int == visible.count, "\(label) total_rows")
        outputs.append(all.text)
        for query in [
          "", "?style=all_docs", "?include_docs=true", "?history=true", "?descending=true",
          "?feed=longpoll", "?filter=wiki&wiki=w1",
        ] {
          let r = try await client.call(.get, "/wiki/_changes" + query, headers: h)
          #expect(r.code == 200, "\(label) _changes\(query)")
          let expected = query.contains("wiki=w1") ? visible.filter { $0.hasPrefix("w1") } : visible
          #expect(ids(r, "results") == expected, "\(label) _changes\(query)")
          outputs.append(r.text)
        }
        let continuous = try await client.call(
          .get, "/wiki/_changes?feed=continuous&timeout=50", headers: h)
        let lines = continuous.text.split(separator: "\n").compactMap {
          try? JSONValue(parsing: String($0))
        }
        #expect(Set(lines.compactMap { $0["id"]?.stringValue }) == visible, "\(label) continuous")
        outputs.append(continuous.text)
        let info = try await client.call(.get, "/wiki", headers: h)
        #expect(info["doc_count"]?.int == visible.count, "\(label) doc_count")
        outputs.append(info.text)
        // No leak: nothing of a wiki the user is not in shows anywhere.
        let hidden = Self.readers.keys.filter { !visible.contains($0) }
        for text in outputs {
          for id in hidden {
            #expect(!text.contains("\"\(id)\""), "\(label) sees \(id)")
            #expect(!text.contains(revs[id]!), "\(label) sees the rev of \(id)")
          }
          if !visible.contains("w1") {
            #expect(!text.contains("Secret w1") && !text.contains("Hidden text"), "\(label)")
          }
        }
      }
    }
  }

  @Test("the write matrix: members edit pages, owners alone change membership, outsiders nothing")
  func writeMatrix() async throws {
    try await withAccessServer { client, fixture in
      func put(_ who: String?, _ id: String, _ body: String) async throws -> JSONResponse {
        try await client.call(
          .put, "/wiki/" + encodeID(id), body, headers: AccessFixture.headers(who))
      }
      let page = #"{"type":"page","wiki_id":"w1","markdown":"new"}"#
      let r1 = try await put(nil, "w1:New", page)
      #expect(r1.code == 401)
      let r2 = try await put("carol", "w1:New", page)
      #expect(r2.code == 403)
      let r3 = try await put("carol", "w9:New", page.replacingOccurrences(of: "w1", with: "w9"))
      #expect(r3.code == 403)
      let r4 = try await put("bob", "w1:New", page)
      #expect(r4.code == 201)
      // The write is recorded as bob's.
      let rows = try fixture.store.changes(ChangesOptions.history()).results
      #expect(rows.last { $0.id == "w1:New" }?.actor == "bob")
      // And where it came from.
      #expect(rows.last { $0.id == "w1:New" }?.origin?.hasPrefix("http") == true)

      var w1 = try fixture.store.get("w1").objectValue!
      w1["members"] = .array([.string("bob"), .string("carol")])
      let member = try await put("bob", "w1", JSONValue.object(w1).serialized().string)
      #expect(member.code == 403)
      #expect(member.text.contains("owner"))
      var retitled = try fixture.store.get("w1").objectValue!
      retitled["title"] = .string("Renamed")
      let r5 = try await put("bob", "w1", JSONValue.object(retitled).serialized().string)
      #expect(r5.code == 403)
      var edited = try fixture.store.get("w1").objectValue!
      edited["markdown"] = .string("members may edit the text")
      let r6 = try await put("bob", "w1", JSONValue.object(edited).serialized().string)
      #expect(r6.code == 201)
      w1 = try fixture.store.get("w1").objectValue!
      w1["members"] = .array([.string("bob"), .string("carol")])
      let r7 = try await put("alice", "w1", JSONValue.object(w1).serialized().string)
      #expect(r7.code == 201)
      // carol is a member now.
      let r8 = try await client.call(.get, "/wiki/w1", headers: AccessFixture.basic("carol"))
      #expect(r8.code == 200)

      // A new wiki belongs to its creator.
      let foreign = #"{"type":"wiki","title":"x","owner_id":"alice","members":[]}"#
      let r9 = try await put("carol", "w3", foreign)
      #expect(r9.code == 403)
      let own = #"{"type":"wiki","title":"x","owner_id":"carol","members":[]}"#
      let r10 = try await put("carol", "w3", own)
      #expect(r10.code == 201)
      // Deleting a wiki: its owner only.
      let rev = try fixture.store.get("w1")["_rev"]!.stringValue!
      let deleteByMember = try await client.call(
        .delete, "/wiki/w1?rev=\(rev)", headers: AccessFixture.basic("bob"))
      #expect(deleteByMember.code == 403)
      // Other documents: the security object's members (admin-only here).
      let r11 = try await put("bob", "other", #"{"a":1}"#)
      #expect(r11.code == 403)
      // A database never given one answers CouchDB 3's default, as CouchDB writes it.
      let initial = try await client.call(
        .get, "/wiki/_security", headers: AccessFixture.basic("admin"))
      #expect(
        initial.text == #"{"members":{"roles":["_admin"]},"admins":{"roles":["_admin"]}}"# + "\n")
      let security = try await client.call(
        .put, "/wiki/_security", #"{"members":{"names":["bob"]}}"#,
        headers: AccessFixture.basic("bob"))
      #expect(security.code == 403)
      #expect(
        try await client.call(
          .put, "/wiki/_security", #"{"members":{"names":["bob"]}}"#,
          headers: AccessFixture.basic("admin")
        ).code == 200)
      // Read back as it was set, not rewritten.
      let set = try await client.call(
        .get, "/wiki/_security", headers: AccessFixture.basic("admin"))
      #expect(set.text == #"{"members":{"names":["bob"]}}"# + "\n")
      let r12 = try await put("bob", "other", #"{"a":1}"#)
      #expect(r12.code == 201)
      let r13 = try await client.call(.get, "/wiki/note", headers: AccessFixture.basic("bob"))
      #expect(r13.code == 200)
      let r14 = try await client.call(.get, "/wiki/note", headers: AccessFixture.basic("carol"))
      #expect(r14.code == 404)
      // Design documents: database admins only.
      let r15 = try await put("bob", "_design/x", #"{"views":{}}"#)
      #expect(r15.code == 403)
      // _view_cleanup: database admins only, as in CouchDB.
      let cleanup = try await client.call(
        .post, "/wiki/_view_cleanup", "", headers: AccessFixture.basic("bob"))
      #expect(cleanup.code == 403 && cleanup.error == "forbidden")
      let anonymousCleanup = try await client.call(.post, "/wiki/_view_cleanup", "")
      #expect(anonymousCleanup.code == 401)

      // _bulk_docs, replicated: the page of a wiki the writer may not edit is refused on its
      // own, the rest written.
      let bulk = try await client.call(
        .post, "/wiki/_bulk_docs",
        #"{"new_edits":false,"docs":[{"_id":"w2:Sneak","_rev":"1-aaaa","type":"page","wiki_id":"w2","markdown":"x"},{"_id":"w1:Ok","_rev":"1-bbbb","type":"page","wiki_id":"w1","markdown":"y"}]}"#,
        headers: AccessFixture.basic("bob"))
      #expect(bulk.code == 201)
      #expect(bulk.json?.arrayValue?.count == 1)
      #expect(bulk.json?[0]?["error"]?.stringValue == "forbidden")
      #expect(bulk.json?[0]?["id"]?.stringValue == "w2:Sneak")
      #expect(try fixture.store.record("w1:Ok") != nil)
      #expect(try fixture.store.record("w2:Sneak") == nil)
      // new_edits=true: every document has its result, in order.
      let edits = try await client.call(
        .post, "/wiki/_bulk_docs",
        #"{"docs":[{"_id":"w2:A","type":"page","wiki_id":"w2","markdown":"x"},{"_id":"w4","type":"wiki","title":"b","owner_id":"bob","members":[]},{"_id":"w4:P","type":"page","wiki_id":"w4","markdown":"z"}]}"#,
        headers: AccessFixture.basic("bob"))
      #expect(edits.json?[0]?["error"]?.stringValue == "forbidden")
      // A document without an id is checked with the id it gets: a note (bob is a member of
      // the security object by now), not a wiki of alice's.
      let anonymousIDs = try await client.call(
        .post, "/wiki/_bulk_docs",
        #"{"docs":[{"type":"note"},{"type":"wiki","title":"t","owner_id":"alice","members":["bob"]}]}"#,
        headers: AccessFixture.basic("bob"))
      #expect(anonymousIDs.json?[0]?["ok"] == .bool(true))
      #expect(anonymousIDs.json?[1]?["error"]?.stringValue == "forbidden")
      #expect(anonymousIDs.json?[1]?["id"]?.stringValue?.count == 32)
      #expect(edits.json?[1]?["ok"] == .bool(true))
      #expect(edits.json?[2]?["ok"] == .bool(true))
    }
  }

  @Test(
    "with a server administrator (wikilog serve --admin), DELETE /_users works as in CouchDB: the administrator still signs in, no one else, no admin party; PUT /_users makes it again"
  )
  func usersDatabaseDeleted() async throws {
    try await withAccessServer { client, fixture in
      try fixture.auth.addServerAdmin(name: "root", password: "pw-root")
      var root = HTTPFields()
      root[.authorization] = "Basic " + Base64.encode(Array("root:pw-root".utf8))
      // alice signs in first, so her user is cached, and makes a token.
      #expect(
        try await client.call(.get, "/_session", headers: AccessFixture.basic("alice"))
          .json?["userCtx"]?["name"]?.stringValue == "alice")
      let token = try fixture.auth.tokens.create(user: "alice", label: "t", actor: "alice").token
      var bearer = HTTPFields()
      bearer[.authorization] = "Token token=\(token)"
      #expect(try await client.call(.get, "/_session", headers: bearer).code == 200)
      // A user of _users cannot delete it; the server administrator can.
      #expect(
        try await client.call(.delete, "/_users", headers: AccessFixture.basic("alice")).code
          == 401)
      let deleted = try await client.call(.delete, "/_users", headers: root)
      #expect(deleted.code == 200)
      #expect(!fixture.auth.users.exists)
      // The server administrator signs in; everyone else's user went with _users.
      let session = try await client.call(.get, "/_session", headers: root)
      #expect(session.json?["userCtx"]?["roles"]?.strings == ["_admin"])
      #expect(
        try await client.call(.get, "/_all_dbs", headers: root).json?.strings.contains("_users")
          == false)
      #expect(try await client.call(.get, "/", headers: AccessFixture.basic("alice")).code == 401)
      #expect(try await client.call(.get, "/_session", headers: bearer).code == 401)
      // No admin party: an anonymous request is not an administrator.
      #expect(try await client.call(.get, "/_all_dbs").code == 401)
      // A cookie of the server administrator works too.
      let signIn = try await client.call(
        .post, "/_session", #"{"name":"root","password":"pw-root"}"#)
      #expect(signIn.code == 200)
      // PUT /_users makes it again, empty; alice's cached user and token are gone for good.
      #expect(try await client.call(.put, "/_users", headers: root).code == 201)
      #expect(fixture.auth.users.exists)
      #expect(
        try await client.call(
          .put, "/_users/org.couchdb.user:zed",
          #"{"name":"zed","password":"pw-zed","roles":[],"type":"user"}"#, headers: root
        ).code == 201)
      var zed = HTTPFields()
      zed[.authorization] = "Basic " + Base64.encode(Array("zed:pw-zed".utf8))
      #expect(
        try await client.call(.get, "/_session", headers: zed).json?["userCtx"]?["name"]?
          .stringValue == "zed")
      #expect(try await client.call(.get, "/", headers: AccessFixture.basic("alice")).code == 401)
      #expect(try await client.call(.get, "/_session", headers: bearer).code == 401)
    }
  }

  @Test("_users cannot be deleted: it signs every request in, and holds the administrators")
  func usersDatabaseStays() async throws {
    try await withAccessServer { client, _ in
      let r = try await client.call(.delete, "/_users", headers: AccessFixture.basic("admin"))
      #expect(r.code == 403 && r.error == "forbidden")
      #expect(try await client.call(.get, "/", headers: AccessFixture.basic("bob")).code == 200)
      let dbs = try await client.call(.get, "/_all_dbs", headers: AccessFixture.basic("admin"))
      #expect(dbs.json?.arrayValue?.contains(.string("_users")) == true)
      #expect(
        try await client.call(.get, "/wiki/w1", headers: AccessFixture.basic("bob")).code == 200)
    }
  }

  @Test("a conflict about membership grants only what every live leaf grants")
  func conflictingMembership() async throws {
    try await withAccessServer { client, fixture in
      let rev = try fixture.store.get("w1")["_rev"]!.stringValue!
      let gen = Int(rev.split(separator: "-")[0])!
      // Two replicated leaves: one adds carol, the other drops bob.
      let docs = [
        #"{"_id":"w1","_rev":"\#(gen + 1)-aaaa","_revisions":{"start":\#(gen + 1),"ids":["aaaa","\#(rev.split(separator: "-")[1])"]},"type":"wiki","title":"Secret w1","owner_id":"alice","members":["bob","carol"]}"#,
        #"{"_id":"w1","_rev":"\#(gen + 1)-bbbb","_revisions":{"start":\#(gen + 1),"ids":["bbbb","\#(rev.split(separator: "-")[1])"]},"type":"wiki","title":"Secret w1","owner_id":"alice","members":[]}"#,
      ]
      _ = try fixture.store.bulkDocs(
        docs.map { try JSONValue(parsing: $0) }, newEdits: false, actor: "alice")
      for who in ["bob", "carol"] {
        let r = try await client.call(.get, "/wiki/w1:Home", headers: AccessFixture.basic(who))
        // Neither finds such a document meanwhile (bob, in no other wiki, reads an empty
        // database; carol, owner of w2, hers).
        #expect(r.code == 404, "\(who) while the leaves disagree")
      }
      let r16 = try await client.call(.get, "/wiki/w1:Home", headers: AccessFixture.basic("alice"))
      #expect(r16.code == 200)
      // Resolving the conflict (deleting the leaf that drops bob) gives access back.
      let delete = try await client.call(
        .delete, "/wiki/w1?rev=\(gen + 1)-bbbb", headers: AccessFixture.basic("alice"))
      #expect(delete.code == 200)
      for who in ["bob", "carol"] {
        let r = try await client.call(.get, "/wiki/w1:Home", headers: AccessFixture.basic(who))
        #expect(r.code == 200, "\(who) after the resolution")
      }
    }
  }

  @Test("backfill: a user added at seq G gets the wiki's older documents at G; removed, no more")
  func backfillAndRemoval() async throws {
    try await withAccessServer { client, fixture in
      let carol = AccessFixture.basic("carol")
      let before = try await client.call(.get, "/wiki/_changes", headers: carol)
      let since = try #require(before["last_seq"]?.seq)
      // More changes carol may not see: her last_seq stays.
      try fixture.store.put(
        #"{"type":"page","wiki_id":"w1","markdown":"more"}"#, id: "w1:More", actor: "alice")
      let still = try await client.call(.get, "/wiki/_changes?since=\(since)", headers: carol)
      #expect(still["results"]?.arrayValue?.isEmpty == true)
      #expect(still["last_seq"]?.seq == since)
      // alice adds carol at G.
      var w1 = try fixture.store.get("w1").objectValue!
      w1["members"] = .array([.string("bob"), .string("carol")])
      let added = try fixture.store.put(
        JSONValue.object(w1).serialized(), id: "w1", rev: w1["_rev"]!.stringValue!, actor: "alice")
      let g = try fixture.store.info.updateSeq.rawValue
      _ = added
      // A replication checkpointed at `since` (before G) gets every w1 document, at G.
      let feed = try await client.call(.get, "/wiki/_changes?since=\(since)", headers: carol)
      let rows = feed["results"]?.arrayValue ?? []
      #expect(Set(rows.compactMap { $0["id"]?.stringValue }) == ["w1", "w1:Home", "w1:More"])
      #expect(rows.allSatisfy { $0["seq"]?.seq == Int(g) })
      #expect(feed["last_seq"]?.seq == Int(g))
      // Paged with limit=1: rows sharing a seq stay together.
      let paged = try await client.call(
        .get, "/wiki/_changes?since=\(since)&limit=1", headers: carol)
      #expect(paged["results"]?.arrayValue?.count == 3)
      // Removed: later changes of w1 no longer reach her.
      w1 = try fixture.store.get("w1").objectValue!
      w1["members"] = .array([.string("bob")])
      try fixture.store.put(
        JSONValue.object(w1).serialized(), id: "w1", rev: w1["_rev"]!.stringValue!, actor: "alice")
      try fixture.store.put(
        #"{"type":"page","wiki_id":"w1","markdown":"after"}"#, id: "w1:After", actor: "alice")
      let after = try await client.call(.get, "/wiki/_changes?since=\(g)", headers: carol)
      #expect(after["results"]?.arrayValue?.isEmpty == true)
      let r17 = try await client.call(.get, "/wiki/w1:Home", headers: carol)
      #expect(r17.code == 404)
      // Her count is hers: w2 and its page.
      let r18 = try await client.call(.get, "/wiki", headers: carol)
      #expect(r18["doc_count"]?.int == 2)
    }
  }

  @Test(
    "_users: each user reads and changes their own document, not their roles; no clear password is stored"
  )
  func usersDatabase() async throws {
    try await withAccessServer { client, fixture in
      let bob = AccessFixture.basic("bob")
      let own = try await client.call(.get, "/_users/org.couchdb.user:bob", headers: bob)
      #expect(own.code == 200)
      let r19 = try await client.call(.get, "/_users/org.couchdb.user:alice", headers: bob)
      #expect(r19.code == 404)
      let r20 = try await client.call(.get, "/_users/_all_docs", headers: bob)
      #expect(r20.code == 403)
      let r21 = try await client.call(.get, "/_users/_changes", headers: [:])
      #expect(r21.code == 401)
      var doc = own.json!.objectValue!
      doc["password"] = .string("clear-secret-of-bob")
      let changed = try await client.call(
        .put, "/_users/org.couchdb.user:bob", JSONValue.object(doc).serialized().string,
        headers: bob)
      #expect(changed.code == 201)
      var escalate = try await client.call(
        .get, "/_users/org.couchdb.user:bob",
        headers: [
          .authorization: "Basic " + Data("bob:clear-secret-of-bob".utf8).base64EncodedString()
        ]
      ).json!.objectValue!
      escalate["roles"] = .array([.string("_admin")])
      let refused = try await client.call(
        .put, "/_users/org.couchdb.user:bob", JSONValue.object(escalate).serialized().string,
        headers: [
          .authorization: "Basic " + Data("bob:clear-secret-of-bob".utf8).base64EncodedString()
        ])
      #expect(refused.code == 403)
      // An administrator creates a user over HTTP; the password is hashed before the write.
      let created = try await client.call(
        .put, "/_users/org.couchdb.user:dave",
        #"{"name":"dave","roles":[],"type":"user","password":"clear-secret-of-dave"}"#,
        headers: AccessFixture.basic("admin"))
      #expect(created.code == 201)
      // And through _bulk_docs, as couch_users_db hashes every write; design documents (a
      // Mango index) are an administrator's to add.
      let bulk = try await client.call(
        .post, "/_users/_bulk_docs",
        #"{"docs":[{"_id":"org.couchdb.user:erin","name":"erin","roles":[],"type":"user","password":"clear-secret-of-erin"}]}"#,
        headers: AccessFixture.basic("admin"))
      #expect(bulk.json?[0]?["ok"] == .bool(true))
      #expect(
        try await client.call(
          .get, "/_users/org.couchdb.user:erin", headers: AccessFixture.basic("admin"))[
            "derived_key"] != nil)
      let index = try await client.call(
        .post, "/_users/_index", #"{"index":{"fields":["name"]}}"#,
        headers: AccessFixture.basic("admin"))
      #expect(index["result"] == .string("created"))
      let byBob = try await client.call(
        .put, "/_users/_design/x", "{}",
        headers: [
          .authorization: "Basic " + Data("bob:clear-secret-of-bob".utf8).base64EncodedString()
        ]
      ).code
      #expect(byBob == 403 || byBob == 404, "\(byBob)")
      let log = Array(
        try Data(
          contentsOf: URL(
            fileURLWithPath: fixture.dir.data.directory(of: "_users") + "/data.mdb")))
      for secret in ["clear-secret-of-bob", "clear-secret-of-dave", "clear-secret-of-erin"] {
        #expect(!String(decoding: log, as: UTF8.self).contains(secret))
      }
      let dave = try await client.call(
        .get, "/_session",
        headers: [
          .authorization: "Basic " + Data("dave:clear-secret-of-dave".utf8).base64EncodedString()
        ])
      #expect(dave["userCtx"]?["name"]?.stringValue == "dave")
    }
  }

  @Test(
    "_users' policy: a user writes their document by PUT and DELETE only, no replicated revision; its information is an administrator's; every write path hashes a clear password"
  )
  func usersPolicy() async throws {
    try await withAccessServer { client, fixture in
      let bob = AccessFixture.basic("bob")
      let admin = AccessFixture.basic("admin")
      let own = try await client.call(.get, "/_users/org.couchdb.user:bob", headers: bob)
      let rev = own["_rev"]?.stringValue ?? ""
      // The database's information: not for a user (403), nor anonymous (401).
      #expect(try await client.call(.get, "/_users", headers: bob).code == 403)
      #expect(try await client.call(.get, "/_users", headers: [:]).code == 401)
      #expect(try await client.call(.get, "/_users", headers: admin).code == 200)
      // Writes other than PUT and DELETE of a JSON document: a server administrator's.
      let post = try await client.call(
        .post, "/_users", #"{"_id":"org.couchdb.user:bob","name":"bob"}"#, headers: bob)
      #expect(post.code == 401 && post["reason"] == .string("You are not a server admin."))
      var copy = bob
      copy[HTTPField.Name("Destination")!] = "org.couchdb.user:bob2"
      #expect(
        try await client.call(
          HTTPRequest.Method("COPY")!, "/_users/org.couchdb.user:bob", headers: copy
        ).code == 401)
      var text = bob
      text[.contentType] = "text/plain"
      let attachment = try await client.raw(
        .put, "/_users/org.couchdb.user:bob/a.txt?rev=\(rev)", Array("x".utf8), headers: text)
      #expect(attachment.code == 401)
      // A replicated revision of their own document: refused (it could start a winning branch).
      var replicated = own.json?.objectValue ?? JSONObject()
      replicated["_rev"] = .string("9-abcdef")
      let forced = try await client.call(
        .put, "/_users/org.couchdb.user:bob?new_edits=false",
        JSONValue.object(replicated).serialized().string, headers: bob)
      #expect(forced.code == 403)
      // An administrator's multipart PUT stores no clear password either.
      let boundary = "xYz"
      let body = Array(
        "--\(boundary)\r\nContent-Type: application/json\r\n\r\n{\"name\":\"fay\",\"type\":\"user\",\"roles\":[],\"password\":\"clear-secret-of-fay\"}\r\n--\(boundary)--"
          .utf8)
      var multipart = admin
      multipart[.contentType] = "multipart/related; boundary=\"\(boundary)\""
      let made = try await client.raw(
        .put, "/_users/org.couchdb.user:fay", body, headers: multipart)
      #expect(made.code == 201)
      let fay = try await client.call(.get, "/_users/org.couchdb.user:fay", headers: admin)
      #expect(fay["derived_key"] != nil && fay["password"] == nil)
      let log = String(
        decoding: try Data(
          contentsOf: URL(
            fileURLWithPath: fixture.dir.data.directory(of: "_users") + "/data.mdb")),
        as: UTF8.self)
      #expect(!log.contains("clear-secret-of-fay"))
    }
  }

  @Test(
    "_session: cookies refreshed and expiring, tokens revoked, JWTs checked, failures in CouchDB's shape"
  )
  func sessions() async throws {
    try await withAccessServer { client, fixture in
      let signIn = try await client.call(
        .post, "/_session", #"{"name":"bob","password":"pw-bob"}"#)
      #expect(signIn.code == 200)
      #expect(signIn["name"]?.stringValue == "bob")
      let setCookie = try #require(signIn.headers[.setCookie])
      let cookie = String(setCookie.prefix { $0 != ";" })
      var withCookie = HTTPFields()
      withCookie[.cookie] = cookie
      let info = try await client.call(.get, "/_session", headers: withCookie)
      #expect(info["userCtx"]?["name"]?.stringValue == "bob")
      #expect(info["info"]?["authenticated"]?.stringValue == "cookie")
      let r22 = try await client.call(.get, "/wiki/w1", headers: withCookie)
      #expect(r22.code == 200)
      // Past 10% of its life, a request gets a fresh cookie.
      fixture.clock.advance(120)
      let refreshed = try await client.call(.get, "/wiki/w1", headers: withCookie)
      #expect(refreshed.headers[.setCookie]?.hasPrefix("AuthSession=") == true)
      // Expired: anonymous again.
      fixture.clock.advance(600)
      let expired = try await client.call(.get, "/_session", headers: withCookie)
      #expect(expired["userCtx"]?["name"] == .null)
      let r23 = try await client.call(.get, "/wiki/w1", headers: withCookie)
      #expect(r23.code == 401)
      // A form sign-in with a wrong password: 401, the same whether the user exists.
      for name in ["bob", "nobody"] {
        let wrong = try await client.execute(
          uri: "/_session", method: .post,
          headers: [.contentType: "application/x-www-form-urlencoded"],
          body: ByteBuffer(string: "name=\(name)&password=wrong")
        ) { response in (response.status.code, String(buffer: response.body)) }
        #expect(wrong.0 == 401)
        #expect(wrong.1.contains("Name or password is incorrect."))
      }
      // Neither a form nor JSON: 415, as CouchDB's handle_session_req answers.
      let plain = try await client.execute(
        uri: "/_session", method: .post, headers: [.contentType: "text/plain"],
        body: ByteBuffer(string: #"{"name":"bob","password":"pw-bob"}"#)
      ) { response in (response.status.code, String(buffer: response.body)) }
      #expect(plain.0 == 415 && plain.1.contains("bad_content_type"))
      // API tokens: accepted until revoked.
      let token = try fixture.auth.tokens.create(user: "bob", actor: "bob")
      var tokenHeader = HTTPFields()
      tokenHeader[.authorization] = "Token token=\(token.token)"
      let r24 = try await client.call(.get, "/wiki/w1", headers: tokenHeader)
      #expect(r24.code == 200)
      try fixture.auth.tokens.revoke(id: token.record.id, actor: "bob")
      let r25 = try await client.call(.get, "/wiki/w1", headers: tokenHeader)
      #expect(r25.code == 401)
      // JWT: a good signature signs in; a wrong one is refused.
      func jwt(_ key: String) -> String {
        func b64(_ bytes: [UInt8]) -> String {
          Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
        }
        let header = b64(Array(#"{"alg":"HS256","typ":"JWT"}"#.utf8))
        let claims = b64(
          Array(#"{"sub":"bob","exp":\#(Int(Date().timeIntervalSince1970) + 600)}"#.utf8))
        let mac = HMAC<SHA256>.authenticationCode(
          for: Array((header + "." + claims).utf8), using: SymmetricKey(data: Array(key.utf8)))
        return header + "." + claims + "." + b64(Array(mac))
      }
      var bearer = HTTPFields()
      bearer[.authorization] = "Bearer " + jwt("jwt-secret")
      let r26 = try await client.call(.get, "/wiki/w1", headers: bearer)
      #expect(r26.code == 200)
      bearer[.authorization] = "Bearer " + jwt("guessed")
      let bad = try await client.call(.get, "/wiki/w1", headers: bearer)
      #expect(bad.code == 400 || bad.code == 401)
      #expect(bad.error != nil)
      // Sign-out clears the cookie.
      let out = try await client.call(.delete, "/_session", headers: withCookie)
      #expect(out.headers[.setCookie]?.hasPrefix("AuthSession=;") == true)
    }
  }

  @Test(
    "server endpoints: _all_dbs, _dbs_info, stats, creating and deleting databases need an administrator"
  )
  func serverAdminOnly() async throws {
    try await withAccessServer { client, _ in
      for who in ["bob", nil] as [String?] {
        let h = AccessFixture.headers(who)
        let r27 = try await client.call(.get, "/_all_dbs", headers: h)
        #expect(r27.code == 401)
        let r28 = try await client.call(.get, "/_dbs_info", headers: h)
        #expect(r28.code == 401)
        let r29 = try await client.call(.get, "/_node/_local/_stats", headers: h)
        #expect(r29.code == 401)
        let r30 = try await client.call(.put, "/newdb", headers: h)
        #expect(r30.code == 401)
        let r31 = try await client.call(.delete, "/wiki", headers: h)
        #expect(r31.code == 401)
      }
      let admin = AccessFixture.basic("admin")
      let r32 = try await client.call(.get, "/_all_dbs", headers: admin)
      #expect(r32.code == 200)
      let r33 = try await client.call(.put, "/newdb", headers: admin)
      #expect(r33.code == 201)
      let r34 = try await client.call(.get, "/", headers: [:])
      #expect(r34.code == 200)
    }
  }
}

/// A document id percent-encoded for a URL path segment.
func encodeID(_ id: String) -> String {
  id.addingPercentEncoding(
    withAllowedCharacters: .alphanumerics.union(.init(charactersIn: "-_.~:")))!
}

@Suite struct AccessProjectionTests {
  @Test("the access projection after random edits, deletions and recreations equals its replay")
  func replayEqualsLive() throws {
    let fixture = try AccessFixture()
    let store = fixture.store
    var rng = SystemRandomNumberGenerator()
    var revs: [String: String] = [:]
    for step in 0..<400 {
      let id = ["w1:P\(step % 7)", "w2:Q\(step % 5)", "note\(step % 3)", "w\(3 + step % 2)"][
        Int.random(in: 0..<4, using: &rng)]
      let isWiki = !id.contains(":") && id.hasPrefix("w")
      let body =
        isWiki
        ? #"{"type":"wiki","title":"t","owner_id":"alice","members":["\#(["bob", "carol"][step % 2])"]}"#
        : #"{"type":"page","wiki_id":"\#(id.split(separator: ":").first ?? "")","markdown":"\#(step)"}"#
      if let rev = revs[id], Bool.random(using: &rng) && step % 3 == 0 {
        revs[id] = try store.delete(id, rev: rev, actor: "alice").rev
        revs[id] = nil
      } else {
        let json = id.hasPrefix("note") ? #"{"n":\#(step)}"# : body
        revs[id] = try store.put(json, id: id, rev: revs[id], actor: "alice").rev
      }
    }
    #expect(try store.verify("access") == [])
  }
}

@Suite struct AccessReplicationTests {
  @Test(
    "pull and push as a member: exactly the user's wikis come, a foreign wiki's page is refused alone"
  )
  func replicateAsMember() async throws {
    let fixture = try AccessFixture()
    let local = TestDirectory("access-local")
    let localStore = try local.data.create("wiki")
    let server = buildApplication(
      dataDirectory: fixture.dir.data, options: fixture.options,
      configuration: ApplicationConfiguration(address: .hostname("127.0.0.1", port: 0)),
      logger: quietLogger)
    let device = buildApplication(
      dataDirectory: local.data, options: .standard,
      configuration: ApplicationConfiguration(address: .hostname("127.0.0.1", port: 0)),
      logger: quietLogger)
    try await server.test(.live) { serverClient in
      try await device.test(.live) { deviceClient in
        let bob = "Basic " + Data("bob:pw-bob".utf8).base64EncodedString()
        let remote = CouchEndpoint(
          transport: HTTPClientTransport(
            baseURL: "http://127.0.0.1:\(try #require(serverClient.port))", authorization: bob),
          database: "wiki", identity: "server/wiki")
        let mine = CouchEndpoint(
          transport: HTTPClientTransport(
            baseURL: "http://127.0.0.1:\(try #require(deviceClient.port))"),
          database: "wiki", identity: "device/wiki")
        let pull = try await Replicator(source: remote, target: mine).replicate()
        #expect(pull.docWriteFailures == 0)
        let ids = Set(
          try localStore.allDocs().rows.compactMap { $0["id"]?.stringValue })
        #expect(ids == ["w1", "w1:Home"])
        // Offline edits on the device: one in bob's wiki, one slipped into carol's.
        try localStore.put(
          #"{"type":"page","wiki_id":"w1","markdown":"from the device"}"#, id: "w1:Device",
          actor: "bob")
        try localStore.put(
          #"{"type":"wiki","title":"Secret w2","owner_id":"carol","members":[]}"#, id: "w2",
          actor: "bob")
        let push = try await Replicator(source: mine, target: remote).replicate()
        #expect(push.docWriteFailures == 1)
        #expect(try fixture.store.get("w1:Device")["markdown"]?.stringValue == "from the device")
        #expect(try fixture.store.get("w2")["owner_id"]?.stringValue == "carol")
        #expect((try fixture.store.openRevs("w2", .all)).count == 1)
        // The writes are bob's, from the device's replicator.
        let history = try fixture.store.changes(ChangesOptions.history()).results
        #expect(history.last { $0.id == "w1:Device" }?.actor == "bob")
        // A second pull finds nothing new for bob (his feed checkpoint holds).
        let again = try await Replicator(source: remote, target: mine).replicate()
        #expect(again.docsWritten == 0)
      }
    }
  }
}

extension ChangesOptions {
  static func history() -> ChangesOptions {
    var o = ChangesOptions()
    o.history = true
    return o
  }
}

extension [UInt8] {
  var string: String { String(decoding: self, as: UTF8.self) }
}
