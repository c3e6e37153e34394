import CouchReplicator
import CouchTestSupport
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import JSON
import Logging
import Projections
import Query
import TestSupport
import Testing

@testable import CouchAPI
@testable import Replication

/// `_replicator` for users who are not administrators (CouchDB 3.4's `owner`,
/// `before_doc_update` and `after_doc_read`), jobs that run with their documents' credentials
/// only, `_replicate` cancelling a document's job, and the scheduler's rotation (`max_jobs`,
/// `max_churn`, `interval`).
@Suite struct ReplicatorOwnerTests {
  static func app(
    _ fixture: AccessFixture, configure: (inout CouchServerOptions) -> Void = { _ in }
  ) -> some ApplicationProtocol {
    var options = fixture.options
    options.useReplicator(ReplicatorDatabaseTests.fastReplicator)
    configure(&options)
    return ReplicatorDatabaseTests.app(fixture.dir, options: options)
  }

  static let alice = AccessFixture.basic("alice")
  static let bob = AccessFixture.basic("bob")
  static let carol = AccessFixture.basic("carol")
  static let admin = AccessFixture.basic("admin")

  /// Lets alice and bob use `_replicator` (its default security object admits administrators
  /// only, as CouchDB 3's `admin_only`).
  static func admitAliceAndBob(_ client: any TestClientProtocol) async throws {
    let r = try await client.call(
      .put, "/_replicator/_security", #"{"members":{"names":["alice","bob"]}}"#, headers: admin)
    #expect(r.code == 200)
  }

  /// Runs `body` with a live server whose `_replicator` admits alice and bob, beside a second
  /// live server to replicate into (`target`, its base URL; `b`, its directory).
  static func withTarget(
    _ name: String,
    _ body:
      @escaping @Sendable (
        _ fixture: AccessFixture, _ b: TestDirectory, _ target: String,
        _ client: any TestClientProtocol
      ) async throws -> Void
  ) async throws {
    let fixture = try AccessFixture(replicator: true)
    let b = TestDirectory(name)
    try await ReplicationRobustnessTests.live(b).test(.live) { clientB in
      let target = "http://127.0.0.1:\(try #require(clientB.port))"
      try await app(fixture).test(.live) { client in
        #expect(
          try await eventually { fixture.dir.data.exists("_replicator") })
        try await admitAliceAndBob(client)
        try await body(fixture, b, target, client)
      }
    }
  }

  @Test(
    "a member's documents get their owner; others may not change them and read them without credentials"
  )
  func ownerAndStripping() async throws {
    let fixture = try AccessFixture(replicator: true)
    try await Self.app(fixture).test(.router) { client in
      #expect(
        try await eventually { fixture.dir.data.exists("_replicator") })
      let doc =
        #"{"source":"http://alice:hunter2@127.0.0.1:1/a","target":{"url":"http://127.0.0.1:1/b","headers":{"Authorization":"Basic c2VjcmV0"}}}"#
      // The default security object: administrators only.
      let before = try await client.call(.put, "/_replicator/a1", doc, headers: Self.alice)
      #expect(before.code == 403 && before.error == "forbidden")
      #expect(try await client.call(.put, "/_replicator/a1", doc).code == 401)
      try await Self.admitAliceAndBob(client)
      // carol is not a member: CouchDB's member check.
      let carol = try await client.call(.put, "/_replicator/c1", doc, headers: Self.carol)
      #expect(
        carol.code == 403 && carol["reason"] == .string("You are not allowed to access this db."))

      // PUT, POST and _bulk_docs: the writer becomes the owner.
      let put = try await client.call(.put, "/_replicator/a1", doc, headers: Self.alice)
      #expect(put.code == 201)
      let mine = try await client.call(.get, "/_replicator/a1", headers: Self.alice)
      #expect(mine["owner"] == .string("alice"))
      #expect(mine["_rev"] == put["rev"])
      #expect(mine.text.contains("hunter2") && mine.text.contains("c2VjcmV0"))
      let post = try await client.call(
        .post, "/_replicator",
        #"{"_id":"a2","source":"http://127.0.0.1:1/a","target":"http://127.0.0.1:1/c"}"#,
        headers: Self.alice)
      #expect(post.code == 201)
      #expect(
        try await client.call(.get, "/_replicator/a2", headers: Self.alice)["owner"]
          == .string("alice"))
      let bulk = try await client.call(
        .post, "/_replicator/_bulk_docs",
        #"{"docs":[{"_id":"a3","source":"http://127.0.0.1:1/a","target":"http://127.0.0.1:1/d"}]}"#,
        headers: Self.alice)
      #expect(bulk.code == 201 && bulk.json?[0]?["ok"] == .bool(true))
      #expect(
        try await client.call(.get, "/_replicator/a3", headers: Self.admin)["owner"]
          == .string("alice"))
      // `null` is not alice's name: only a database admin may have it replaced by theirs.
      let nullOwner = try await client.call(
        .post, "/_replicator/_bulk_docs",
        #"{"docs":[{"_id":"a4","owner":null,"source":"http://127.0.0.1:1/a","target":"http://127.0.0.1:1/e"}]}"#,
        headers: Self.alice)
      #expect(nullOwner.code == 403 && nullOwner.error == "forbidden")

      // Naming another owner is refused, with CouchDB's reason.
      let forged = try await client.call(
        .put, "/_replicator/a5",
        #"{"owner":"bob","source":"http://127.0.0.1:1/a","target":"http://127.0.0.1:1/f"}"#,
        headers: Self.alice)
      #expect(forged.code == 403 && forged.error == "forbidden")
      #expect(forged["reason"] == .string("Can't update replication documents from other users."))

      // bob reads alice's document without its credentials, and a made-up revision.
      let seen = try await client.call(.get, "/_replicator/a1", headers: Self.bob)
      #expect(seen.code == 200)
      #expect(seen["owner"] == .string("alice"))
      #expect(seen["source"] == .string("http://127.0.0.1:1/a"))
      #expect(seen["target"] == .object(JSONObject(["url": .string("http://127.0.0.1:1/b")])))
      #expect(seen["_rev"] != put["rev"])
      #expect(seen["_rev"]?.stringValue?.hasPrefix("1-") == true)
      let realRev = try #require(put["rev"]?.stringValue)
      for (uri, body) in [
        ("/_replicator/a1?revs=true&revs_info=true", nil),
        ("/_replicator/a1?open_revs=all", nil),
      ] as [(String, String?)] {
        let r = try await client.call(
          .get, uri, body, headers: Self.bob.merging(["Accept": "application/json"]))
        #expect(r.code == 200, "\(uri)")
        #expect(!r.text.contains("hunter2") && !r.text.contains("c2VjcmV0"), "\(uri)")
      }
      let bulkGet = try await client.call(
        .post, "/_replicator/_bulk_get", #"{"docs":[{"id":"a1"},{"id":"a1","rev":"\#(realRev)"}]}"#,
        headers: Self.bob)
      #expect(bulkGet.code == 200)
      #expect(!bulkGet.text.contains("hunter2") && !bulkGet.text.contains("c2VjcmV0"))
      #expect(bulkGet.text.contains("127.0.0.1:1/a"))
      // `_find` gives bob his own documents only (a selector over alice's `source` would
      // otherwise tell her password one guess at a time).
      let found = try await client.call(
        .post, "/_replicator/_find", #"{"selector":{"source":{"$regex":"hunter2"}}}"#,
        headers: Self.bob)
      #expect(found.code == 200 && found["docs"] == .array([]))
      let aliceFinds = try await client.call(
        .post, "/_replicator/_find", #"{"selector":{"source":{"$regex":"hunter2"}}}"#,
        headers: Self.alice)
      #expect(aliceFinds["docs"]?.arrayValue?.count == 1)

      // bob may not change, delete or copy alice's document, even with its real revision.
      let edit = try await client.call(
        .put, "/_replicator/a1?rev=\(realRev)",
        #"{"source":"http://127.0.0.1:1/z","target":"http://127.0.0.1:1/y"}"#, headers: Self.bob)
      #expect(
        edit.code == 403
          && edit["reason"] == .string("Can't update replication documents from other users."))
      let takeover = try await client.call(
        .put, "/_replicator/a1?rev=\(realRev)",
        #"{"owner":"bob","source":"http://127.0.0.1:1/z","target":"http://127.0.0.1:1/y"}"#,
        headers: Self.bob)
      #expect(takeover.code == 403)
      #expect(
        try await client.call(.delete, "/_replicator/a1?rev=\(realRev)", headers: Self.bob).code
          == 403)
      var copyHeaders = Self.bob
      copyHeaders[HTTPField.Name("Destination")!] = "bobs-copy"
      let copy = try await client.call(
        HTTPRequest.Method("COPY")!, "/_replicator/a1", headers: copyHeaders)
      #expect(copy.code == 403)
      // In _bulk_docs, one such document fails the whole request, as in CouchDB.
      let mixed = try await client.call(
        .post, "/_replicator/_bulk_docs",
        #"{"docs":[{"_id":"b1","source":"http://127.0.0.1:1/a","target":"http://127.0.0.1:1/g"},{"_id":"a1","_rev":"\#(realRev)","owner":"alice","source":"http://127.0.0.1:1/a","target":"http://127.0.0.1:1/h"}]}"#,
        headers: Self.bob)
      #expect(mixed.code == 403 && mixed.error == "forbidden")
      #expect(try await client.call(.get, "/_replicator/b1", headers: Self.admin).code == 404)
      let deleted = try await client.call(
        .post, "/_replicator/_bulk_docs",
        #"{"docs":[{"_id":"a1","_rev":"\#(realRev)","_deleted":true}]}"#,
        headers: Self.bob)
      #expect(deleted.code == 201 && deleted.json?[0]?["error"] == .string("forbidden"))
      let replicated = try await client.call(
        .put, "/_replicator/a1?new_edits=false",
        #"{"_rev":"2-abc","owner":"bob","source":"http://127.0.0.1:1/a","target":"http://127.0.0.1:1/i"}"#,
        headers: Self.bob)
      #expect(replicated.code == 403)
      // alice still has her document, unchanged.
      #expect(
        try await client.call(.get, "/_replicator/a1", headers: Self.alice)["_rev"] == put["rev"])

      // bob's own document is his, with his credentials shown to him and to nobody else.
      #expect(
        try await client.call(
          .put, "/_replicator/b2",
          #"{"source":"http://bob:pw-bob@127.0.0.1:1/a","target":"http://127.0.0.1:1/j"}"#,
          headers: Self.bob
        ).code == 201)
      #expect(
        try await client.call(.get, "/_replicator/b2", headers: Self.bob).text.contains("pw-bob"))
      #expect(
        !(try await client.call(.get, "/_replicator/b2", headers: Self.alice).text.contains(
          "pw-bob")))

      // A database admin reads everything and may write any owner.
      #expect(
        try await client.call(.get, "/_replicator/a1", headers: Self.admin).text.contains("hunter2")
      )
      let adminPut = try await client.call(
        .put, "/_replicator/for-bob",
        #"{"owner":"bob","source":"http://127.0.0.1:1/a","target":"http://127.0.0.1:1/k"}"#,
        headers: Self.admin)
      #expect(adminPut.code == 201)
      #expect(
        try await client.call(.get, "/_replicator/for-bob", headers: Self.admin)["owner"]
          == .string("bob"))
      #expect(
        try await client.call(
          .put, "/_replicator/null-owner",
          #"{"owner":null,"source":"http://127.0.0.1:1/a","target":"http://127.0.0.1:1/l"}"#,
          headers: Self.admin
        ).code == 201)
      #expect(
        try await client.call(.get, "/_replicator/null-owner", headers: Self.admin)["owner"]
          == .string("admin"))

      // What CouchDB 3.4 keeps for server administrators.
      for uri in [
        "/_replicator/_all_docs", "/_replicator/_design_docs", "/_replicator/_local_docs",
        "/_replicator/_changes", "/_scheduler/docs",
        "/_scheduler/docs/_replicator/a1", "/_scheduler/jobs", "/_active_tasks",
      ] {
        let r = try await client.call(.get, uri, headers: Self.alice)
        #expect(r.code == 401 && r["reason"] == .string("You are not a server admin."), "\(uri)")
      }
      #expect(try await client.call(.delete, "/_replicator", headers: Self.alice).code == 401)
      #expect(try await client.call(.get, "/_replicator", headers: Self.alice).code == 200)
    }
  }

  @Test("a user's job reads only what the user may read, and nothing without credentials")
  func jobRunsAsOwner() async throws {
    try await Self.withTarget("replicator-owner-target") { fixture, b, target, client in
      let source = "127.0.0.1:\(try #require(client.port))/wiki"
      // bob is a member of w1, not of w2; `note` is for administrators.
      let put = try await client.call(
        .put, "/_replicator/bobs",
        #"{"source":"http://bob:pw-bob@\#(source)","target":"\#(target)/bobcopy","create_target":true}"#,
        headers: Self.bob)
      #expect(put.code == 201)
      let done = try await ReplicatorDatabaseTests.poll(
        client, "/_replicator/bobs", headers: Self.bob
      ) {
        $0["_replication_state"] == .string("completed")
      }
      #expect(done["_replication_state"] == .string("completed"))
      let copy = try b.data.open("bobcopy")
      #expect(try copy.record("w1") != nil && copy.record("w1:Home") != nil)
      for hidden in ["w2", "w2:Home", "note"] {
        #expect(try copy.record(hidden) == nil, "\(hidden)")
      }
      // The job is bob's.
      #expect(done["owner"] == .string("bob"))

      // Without credentials the job is anonymous on the source, and gets nothing.
      #expect(
        try await client.call(
          .put, "/_replicator/anon",
          #"{"source":"http://\#(source)","target":"\#(target)/anoncopy","create_target":true,"continuous":true}"#,
          headers: Self.bob
        ).code == 201)
      let row = try await ReplicatorDatabaseTests.poll(
        client, "/_scheduler/docs/_replicator/anon", headers: Self.admin
      ) { $0["state"] == .string("crashing") }
      #expect(row["state"] == .string("crashing"))
      #expect(row["info"]?["error"]?.stringValue?.contains("unauthorized") == true)
      let jobs = try await client.call(.get, "/_scheduler/jobs", headers: Self.admin)
      #expect(
        jobs["jobs"]?.arrayValue?.contains {
          $0["doc_id"] == .string("anon") && $0["user"] == .string("bob")
        }
          == true)
      let anon = try? b.data.open("anoncopy")
      #expect((try anon?.changes(ChangesOptions()).results.count ?? 0) == 0)
      for uri in ["/_scheduler/docs", "/_scheduler/jobs", "/_active_tasks"] {
        #expect(!(try await client.call(.get, uri, headers: Self.admin).text.contains("pw-bob")))
      }
    }
  }

  @Test("_replicate cancels a document's job by id, by body, and only for its owner or an admin")
  func cancelDocumentJob() async throws {
    try await Self.withTarget("replicator-cancel-target") { fixture, b, target, client in
      let source = "http://admin:pw-admin@127.0.0.1:\(try #require(client.port))/wiki"
      let body =
        #"{"source":"\#(source)","target":"\#(target)/copy","create_target":true,"continuous":true}"#
      #expect(
        try await client.call(.put, "/_replicator/live", body, headers: Self.admin).code == 201)
      let row = try await ReplicatorDatabaseTests.poll(
        client, "/_scheduler/docs/_replicator/live", headers: Self.admin
      ) { $0["state"] == .string("running") }
      let id = try #require(row["id"]?.stringValue)

      // Anonymous: CouchDB's `require_authenticated_user`; alice: not her job.
      let anonymous = try await client.call(
        .post, "/_replicate", #"{"id":"\#(id)","cancel":true}"#)
      #expect(
        anonymous.code == 401
          && anonymous["reason"] == .string("You are not an authenticated user"))
      let alice = try await client.call(
        .post, "/_replicate", #"{"id":"\#(id)","cancel":true}"#, headers: Self.alice)
      #expect(alice.code == 401 && alice["reason"] == .string("You are not a server admin."))
      let bogus = try await client.call(
        .post, "/_replicate", #"{"replication_id":"nope+continuous","cancel":true}"#,
        headers: Self.admin)
      #expect(
        bogus.code == 404 && bogus.error == "not_found" && bogus["reason"] == .string("missing"))
      let notBool = try await client.call(
        .post, "/_replicate", #"{"id":"\#(id)","cancel":"yes"}"#, headers: Self.admin)
      #expect(notBool.code == 400)

      // An administrator cancels it, by `id` with the `+` a URL decoding made a space.
      let spaced = id.replacingOccurrences(of: "+", with: " ")
      let cancel = try await client.call(
        .post, "/_replicate", #"{"id":"\#(spaced)","cancel":true}"#, headers: Self.admin)
      #expect(
        cancel.code == 200 && cancel["ok"] == .bool(true) && cancel["_local_id"] == .string(id))
      let jobs = try await client.call(.get, "/_scheduler/jobs", headers: Self.admin)
      #expect(jobs["total_rows"]?.int == 0)
      // The document stays, without a job, as CouchDB's scheduler leaves it.
      let doc = try await client.call(.get, "/_replicator/live", headers: Self.admin)
      #expect(doc.code == 200 && doc["_replication_state"] == nil)
      let after = try await client.call(
        .get, "/_scheduler/docs/_replicator/live", headers: Self.admin)
      #expect(after.code == 200 && after["state"] == .null && after["id"] == .null)
      #expect(
        try await client.call(
          .post, "/_replicate", #"{"id":"\#(id)","cancel":true}"#, headers: Self.admin
        )
        .code == 404)
      // Nothing flows any more: the job's changes feed on this server has ended (at its next
      // heartbeat after the job dropped its connection), so nothing reads the source for it.
      #expect(
        try await TestSupport.eventually(60) {
          try await waitingFeeds(client, headers: Self.admin) == 0
        })
      try fixture.store.put(#"{"type":"note","text":"later"}"#, id: "later", actor: "admin")
      #expect(try await waitingFeeds(client, headers: Self.admin) == 0)
      #expect(try b.data.open("copy").record("later") == nil)

      // bob cancels his own document's job by describing it, as CouchDB's docs say.
      let bobs =
        #"{"source":"http://bob:pw-bob@127.0.0.1:\#(try #require(client.port))/wiki","target":"\#(target)/bobcopy","create_target":true,"continuous":true}"#
      #expect(
        try await client.call(.put, "/_replicator/bobs", bobs, headers: Self.bob).code == 201)
      let bobRow = try await ReplicatorDatabaseTests.poll(
        client, "/_scheduler/docs/_replicator/bobs", headers: Self.admin
      ) { $0["state"] == .string("running") }
      #expect(bobRow["state"] == .string("running"))
      var cancelBody = try #require(try JSONValue(parsing: Array(bobs.utf8)).objectValue)
      cancelBody["cancel"] = .bool(true)
      let byBody = try await client.call(
        .post, "/_replicate",
        String(decoding: JSONValue.object(cancelBody).serialized(), as: UTF8.self),
        headers: Self.bob)
      #expect(byBody.code == 200 && byBody["_local_id"] == bobRow["id"])
      #expect(
        try await client.call(.get, "/_scheduler/jobs", headers: Self.admin)["total_rows"]?.int
          == 0)
    }
  }

  /// Four continuous jobs, two slots, one of churn: each rescheduling stops the job that has run
  /// longest and starts the one that waited longest.
  @Test(
    "beyond max_jobs, each interval rotates at most max_churn running jobs out for pending ones")
  func rotationByHand() async throws {
    let a = TestDirectory("replicator-rotation-a", replicator: true)
    let b = TestDirectory("replicator-rotation-b")
    for i in 0..<4 {
      let src = try b.data.create("s\(i)")
      try src.put(#"{"n":\#(i)}"#, id: "x", actor: "alice")
      try b.data.create("d\(i)")
    }
    try await ReplicationRobustnessTests.live(b).test(.live) { clientB in
      let url = "http://127.0.0.1:\(try #require(clientB.port))"
      var options = ReplicatorDatabaseTests.fastReplicator
      options.maxJobs = 2
      options.maxChurn = 1
      options.interval = .seconds(3600)  // rescheduled by hand below
      let jobs = ReplicationJobs()
      let documents = ReplicatorDocuments(
        data: a.data, jobs: jobs, options: options, logger: quietLogger)
      let runner = Task { await documents.run() }
      defer { runner.cancel() }
      #expect(try await eventually { a.data.exists("_replicator") })
      let store = try a.data.open("_replicator")
      for i in 0..<4 {
        try store.put(
          #"{"source":"\#(url)/s\#(i)","target":"\#(url)/d\#(i)","continuous":true}"#, id: "r\(i)",
          actor: "admin")
        // Added one after the other, so that the first two take the slots.
        #expect(try await eventually { jobs.snapshot.count == i + 1 })
      }
      func running() -> Set<String> { Set(jobs.snapshot.filter(\.running).compactMap(\.docID)) }
      func started(_ doc: String) -> Bool {
        jobs.snapshot.first { $0.docID == doc }?.history.contains { $0.type == "started" } ?? false
      }
      #expect(try await eventually { running().count == 2 })
      #expect(running() == ["r0", "r1"])
      #expect(!started("r2") && !started("r3"))

      await documents.reschedule()
      // One stopped (the one started first), one started (r2, waiting longest).
      #expect(running().count == 2)
      #expect(running().contains("r2"))
      let stopped = jobs.snapshot.filter { $0.history.first?.type == "stopped" }.compactMap(\.docID)
      #expect(stopped.count == 1)
      #expect(!started("r3"))
      #expect(
        try await eventually { try b.data.open("d2").record("x") != nil })

      await documents.reschedule()
      #expect(running().count == 2)
      #expect(started("r3"))
      #expect(
        try await eventually { try b.data.open("d3").record("x") != nil })
      // A stopped job is pending, not crashing, in `/_scheduler/docs`.
      let pendingDoc = try #require(jobs.snapshot.first { !$0.running })
      #expect(jobs.summaryState(of: pendingDoc).state == "pending")

      runner.cancel()
      await runner.value
      #expect(jobs.snapshot.isEmpty)
    }
  }

  @Test("the interval rotates jobs on its own; never more than max_jobs run")
  func rotationOverTime() async throws {
    let dir = TestDirectory("replicator-rotation-live", replicator: true)
    for i in 0..<4 {
      let src = try dir.data.create("s\(i)")
      try src.put(#"{"n":\#(i)}"#, id: "x", actor: "alice")
      try dir.data.create("d\(i)")
    }
    var options = ReplicatorDatabaseTests.fast
    var replicator = ReplicatorDatabaseTests.fastReplicator
    replicator.maxJobs = 2
    replicator.maxChurn = 2
    replicator.interval = .milliseconds(300)
    options.useReplicator(replicator)
    try await ReplicatorDatabaseTests.app(dir, options: options).test(.live) { client in
      let url = "http://127.0.0.1:\(try #require(client.port))"
      #expect(try await eventually { dir.data.exists("_replicator") })
      for i in 0..<4 {
        #expect(
          try await client.call(
            .put, "/_replicator/r\(i)",
            #"{"source":"\#(url)/s\#(i)","target":"\#(url)/d\#(i)","continuous":true}"#
          ).code == 201)
      }
      var most = 0
      var seenStopped = false
      let end = Date().addingTimeInterval(20)
      var allStarted = false
      while Date() < end && !(allStarted && seenStopped) {
        let jobs = try await client.call(.get, "/_scheduler/jobs")
        let rows = jobs["jobs"]?.arrayValue ?? []
        most = max(most, rows.filter { $0["pid"] != .null }.count)
        let histories = rows.map {
          ($0["history"]?.arrayValue ?? []).compactMap { $0["type"]?.stringValue }
        }
        allStarted = rows.count == 4 && histories.allSatisfy { $0.contains("started") }
        seenStopped = seenStopped || histories.contains { $0.contains("stopped") }
        let tasks = try await client.call(.get, "/_active_tasks").json?.arrayValue ?? []
        most = max(most, tasks.count)
        try await Task.sleep(for: .milliseconds(50))
      }
      #expect(allStarted && seenStopped)
      #expect(most <= 2 && most > 0)
      for i in 0..<4 {
        #expect(
          try await eventually {
            try dir.data.open("d\(i)").record("x") != nil
          })
      }
    }
  }
}

extension ReplicatorOwnerTests {
  @Test("credentials: CouchDB's precedence (auth, userinfo, header) and stripping")
  func credentials() throws {
    func chosen(_ spec: String) throws -> HTTPTransport.Credentials? {
      let endpoint = try Replicator.endpoint(try JSONValue(parsing: Array(spec.utf8)), "source")
      return ((endpoint.peer as? HTTPPeer)?.transport as? HTTPTransport)?.credentials
    }
    let all =
      #"{"url":"http://u:p@h/db","auth":{"basic":{"username":"a","password":"b"}},"headers":{"Authorization":"Basic eDp5"}}"#
    #expect(try chosen(all) == .basic(user: "a", password: "b"))
    #expect(
      try chosen(#"{"url":"http://u:p@h/db","headers":{"Authorization":"Basic eDp5"}}"#)
        == .basic(user: "u", password: "p"))
    #expect(
      try chosen(#"{"url":"http://h/db","headers":{"Authorization":"Basic eDp5"}}"#)
        == .header("Basic eDp5"))
    #expect(try chosen(#""http://h/db""#) == nil)

    #expect(
      ReplicatorOwnership.strippedUserinfo("https://u:p%40x@h:5984/db") == "https://h:5984/db")
    #expect(ReplicatorOwnership.strippedUserinfo("http://h/db?x=a@b") == "http://h/db?x=a@b")
    #expect(ReplicatorOwnership.strippedUserinfo("http://h/a@b") == "http://h/a@b")
    #expect(ReplicatorOwnership.strippedUserinfo("not a url") == "not a url")
    let object = ReplicatorOwnership.stripCredentials(
      try JSONValue(parsing: Array(all.utf8)))
    #expect(object == .object(JSONObject(["url": .string("http://h/db")])))
  }
}

extension HTTPFields {
  /// These fields with `extra` added (by field name).
  func merging(_ extra: [String: String]) -> HTTPFields {
    var fields = self
    for (name, value) in extra { fields[HTTPField.Name(name)!] = value }
    return fields
  }
}
