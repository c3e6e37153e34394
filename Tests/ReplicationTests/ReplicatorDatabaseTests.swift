import CouchQuery
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

/// The `_replicator` database and `/_scheduler/docs`: persistent jobs written as documents,
/// run by the server, stopped when their document goes, resumed after a restart, backed off
/// when they crash, and for administrators only.
@Suite struct ReplicatorDatabaseTests {
  /// A scheduler that gives up a request after one retry and backs off 200 ms, doubling.
  static var fastReplicator: ReplicatorSchedulerOptions {
    var replicator = ReplicatorSchedulerOptions()
    replicator.backoff = .milliseconds(200)
    replicator.retriesPerRequest = 1
    replicator.retryDelay = .milliseconds(10)
    return replicator
  }

  static var fast: CouchServerOptions {
    var options = CouchServerOptions.standard
    options.useReplicator(fastReplicator)
    return options
  }

  static func app(_ dir: TestDirectory, options: CouchServerOptions = fast)
    -> some ApplicationProtocol
  {
    buildApplication(
      dataDirectory: dir.data, options: options,
      configuration: ApplicationConfiguration(address: .hostname("127.0.0.1", port: 0)),
      logger: quietLogger)
  }

  /// Polls `path` until `condition` holds (or `seconds` pass); the last answer.
  static func poll(
    _ client: any TestClientProtocol, _ path: String, seconds: Double = 20,
    headers: HTTPFields = [:], _ condition: (JSONResponse) -> Bool
  ) async throws -> JSONResponse {
    var response = try await client.call(.get, path, headers: headers)
    if condition(response) { return response }
    _ = try await eventually(seconds) {
      response = try await client.call(.get, path, headers: headers)
      return condition(response)
    }
    return response
  }

  @Test("a one-shot _replicator document completes and its state and stats are written back")
  func oneShot() async throws {
    let dir = TestDirectory("replicator-oneshot", replicator: true)
    let src = try dir.data.create("src")
    try ReplicationRobustnessTests.seed(src, count: 100)
    try await Self.app(dir).test(.live) { client in
      let port = try #require(client.port)
      // The server created `_replicator` when it started.
      #expect(try await eventually { dir.data.exists("_replicator") })
      let put = try await client.call(
        .put, "/_replicator/once",
        #"{"source":"http://u:secret@127.0.0.1:\#(port)/src","target":"http://127.0.0.1:\#(port)/dst","create_target":true}"#
      )
      #expect(put.code == 201)
      let doc = try await Self.poll(client, "/_replicator/once") {
        $0["_replication_state"] == .string("completed")
      }
      #expect(doc["_replication_state"] == .string("completed"))
      #expect(doc["_replication_state_time"]?.stringValue?.hasSuffix("Z") == true)
      // CouchDB 3.4 writes no `_replication_id` nor live states (`update_docs = false`).
      #expect(doc["_replication_id"] == nil)
      #expect(doc["_replication_state_reason"] == nil)
      let stats = try #require(doc["_replication_stats"])
      #expect((stats["docs_written"]?.int ?? 0) > 0)
      #expect(stats["docs_written"] == stats["missing_revisions_found"])
      #expect(stats["doc_write_failures"]?.int == 0)
      #expect(stats["start_time"]?.stringValue != nil)
      try ReplicationEndToEndTests.expectIdentical(src, try dir.data.open("dst"))

      // `/_scheduler/docs` shows it from the document: completed, with its stats.
      let row = try await client.call(.get, "/_scheduler/docs/_replicator/once")
      #expect(row.code == 200)
      #expect(row["state"] == .string("completed"))
      #expect(row["doc_id"] == .string("once") && row["database"] == .string("_replicator"))
      #expect(row["source"] == .string("http://127.0.0.1:\(port)/src/"))
      #expect(row["info"]?["docs_written"] == stats["docs_written"])
      #expect(row["info"]?["start_time"] == nil)
      #expect(row["start_time"] == stats["start_time"])
      #expect(row["error_count"]?.int == 0)
      #expect(!row.text.contains("secret"))
      let list = try await client.call(.get, "/_scheduler/docs")
      #expect(list["total_rows"]?.int == 1 && list["offset"]?.int == 0)
      #expect(list["docs"]?[0]?["doc_id"] == .string("once"))
      #expect(try await client.call(.get, "/_scheduler/docs/_replicator")["docs"] == list["docs"])
      // Done: no job left.
      #expect(try await client.call(.get, "/_scheduler/jobs")["total_rows"]?.int == 0)
    }
  }

  @Test("a continuous document keeps syncing; editing it replaces its job; deleting it stops it")
  func continuousEditDelete() async throws {
    let dir = TestDirectory("replicator-continuous", replicator: true)
    let src = try dir.data.create("src")
    let dst = try dir.data.create("dst")
    for i in 0..<3 { try src.put(#"{"n":\#(i)}"#, id: "d\(i)", actor: "alice") }
    try await Self.app(dir).test(.live) { client in
      let port = try #require(client.port)
      let url = "http://127.0.0.1:\(port)"
      let put = try await client.call(
        .put, "/_replicator/live",
        #"{"source":"\#(url)/src","target":"\#(url)/dst","continuous":true}"#)
      #expect(put.code == 201)
      #expect(try await eventually { try dst.record("d2") != nil })
      let row = try await Self.poll(client, "/_scheduler/docs/_replicator/live") {
        $0["state"] == .string("running")
      }
      #expect(row["state"] == .string("running"))
      let id = try #require(row["id"]?.stringValue)
      #expect(id.hasSuffix("+continuous"))
      #expect(row["node"] == .string("nonode@nohost"))
      #expect(row["error_count"]?.int == 0)
      #expect(row["info"]?["docs_read"] != nil)

      let jobs = try await client.call(.get, "/_scheduler/jobs")
      #expect(jobs["total_rows"]?.int == 1)
      let job = try #require(jobs["jobs"]?[0])
      #expect(job["id"] == .string(id))
      #expect(job["doc_id"] == .string("live") && job["database"] == .string("_replicator"))
      #expect(job["pid"]?.stringValue != nil)
      let types = (job["history"]?.arrayValue ?? []).compactMap { $0["type"]?.stringValue }
      #expect(types == ["started", "added"])
      let tasks = try await client.call(.get, "/_active_tasks")
      // The replication's task, alone: this server lists its own tasks, never another test's.
      #expect(tasks.json?.arrayValue?.count == 1)
      let task = tasks.json?.arrayValue?.first
      #expect(task?["type"] == .string("replication"))
      #expect(task?["doc_id"] == .string("live"))
      #expect(task?["continuous"] == .bool(true))

      // It keeps syncing.
      try src.put(#"{"n":"later"}"#, id: "later", actor: "alice")
      #expect(try await eventually { try dst.record("later") != nil })

      // An edit into another replication: the old job stops, the new one runs.
      let rev = try #require(put["rev"]?.stringValue)
      let edited = try await client.call(
        .put, "/_replicator/live?rev=\(rev)",
        #"{"source":"\#(url)/src","target":"\#(url)/dst2","continuous":true,"create_target":true}"#
      )
      #expect(edited.code == 201)
      #expect(try await eventually { (try? dir.data.open("dst2").record("later")) != nil })
      let after = try await Self.poll(client, "/_scheduler/jobs") {
        $0["total_rows"]?.int == 1 && $0["jobs"]?[0]?["id"] != .string(id)
      }
      #expect(after["total_rows"]?.int == 1)
      #expect(after["jobs"]?[0]?["id"] != .string(id))

      // Deleted: the job stops, and nothing more flows.
      let rev2 = try #require(edited["rev"]?.stringValue)
      #expect(try await client.call(.delete, "/_replicator/live?rev=\(rev2)").code == 200)
      let none = try await Self.poll(client, "/_scheduler/jobs") { $0["total_rows"]?.int == 0 }
      #expect(none["total_rows"]?.int == 0)
      // No task.
      #expect(try await client.call(.get, "/_active_tasks").json == .array([]))
      // Its changes feed on this server has ended too (at the feed's next heartbeat after the
      // job dropped its connection): nothing reads `src` for it any more.
      #expect(try await TestSupport.eventually(60) { try await waitingFeeds(client) == 0 })
      try src.put(#"{"n":"after"}"#, id: "after-delete", actor: "alice")
      #expect(try await waitingFeeds(client) == 0)
      #expect(try dir.data.open("dst2").record("after-delete") == nil)
      #expect(try await client.call(.get, "/_scheduler/docs/_replicator/live").code == 404)
      #expect(try await client.call(.get, "/_scheduler/docs")["docs"] == .array([]))
    }
  }

  @Test("beyond max_jobs a job is pending until a slot frees")
  func pendingBeyondMaxJobs() async throws {
    let dir = TestDirectory("replicator-pending", replicator: true)
    for name in ["s1", "d1", "s2", "d2"] { try dir.data.create(name) }
    let s2 = try dir.data.open("s2")
    try s2.put(#"{"n":1}"#, id: "x", actor: "alice")
    var options = Self.fast
    var replicator = Self.fastReplicator
    replicator.maxJobs = 1
    options.useReplicator(replicator)
    try await Self.app(dir, options: options).test(.live) { client in
      let url = "http://127.0.0.1:\(try #require(client.port))"
      let first = try await client.call(
        .put, "/_replicator/first",
        #"{"source":"\#(url)/s1","target":"\#(url)/d1","continuous":true}"#)
      #expect(first.code == 201)
      let running = try await Self.poll(client, "/_scheduler/docs/_replicator/first") {
        $0["state"] == .string("running")
      }
      #expect(running["state"] == .string("running"))
      #expect(
        try await client.call(
          .put, "/_replicator/second", #"{"source":"\#(url)/s2","target":"\#(url)/d2"}"#
        ).code == 201)
      let pending = try await Self.poll(client, "/_scheduler/docs/_replicator/second") {
        $0["state"] == .string("pending")
      }
      #expect(pending["state"] == .string("pending"))
      #expect(pending["error_count"]?.int == 0)
      // The running job goes on (a write to its source arrives, and its feed waits again),
      // while the pending one reads nothing: one feed waits on this server, the first's.
      try dir.data.open("s1").put(#"{"n":1}"#, id: "y", actor: "alice")
      #expect(try await eventually { try dir.data.open("d1").record("y") != nil })
      #expect(try await TestSupport.eventually(60) { try await waitingFeeds(client) == 1 })
      #expect(try dir.data.open("d2").record("x") == nil)
      let jobs = try await client.call(.get, "/_scheduler/jobs")
      #expect(jobs["total_rows"]?.int == 2)
      let tasks = try await client.call(.get, "/_active_tasks").json?.arrayValue ?? []
      #expect(tasks.count == 1)
      #expect(tasks.first?["type"] == .string("replication"))

      // The first document goes: its slot runs the second job, which completes.
      let rev = try #require(first["rev"]?.stringValue)
      #expect(try await client.call(.delete, "/_replicator/first?rev=\(rev)").code == 200)
      let done = try await Self.poll(client, "/_replicator/second") {
        $0["_replication_state"] == .string("completed")
      }
      #expect(done["_replication_state"] == .string("completed"))
      #expect(try dir.data.open("d2").record("x") != nil)
    }
  }

  @Test("a continuous job survives a restart of its server and resumes from its checkpoint")
  func restart() async throws {
    let a = TestDirectory("replicator-restart-a", replicator: true)
    let b = TestDirectory("replicator-restart-b")
    let src = try b.data.create("src")
    let dst = try b.data.create("dst")
    for i in 0..<50 { try src.put(#"{"n":\#(i)}"#, id: "d\(i)", actor: "alice") }
    try await ReplicationRobustnessTests.live(b).test(.live) { clientB in
      let url = "http://127.0.0.1:\(try #require(clientB.port))"
      try await Self.app(a).test(.live) { clientA in
        let put = try await clientA.call(
          .put, "/_replicator/sync",
          #"{"source":"\#(url)/src","target":"\#(url)/dst","continuous":true}"#)
        #expect(put.code == 201)
        #expect(try await eventually { try dst.record("d49") != nil })
        // Its checkpoint is written after the batch.
        let job = try await Self.poll(clientA, "/_scheduler/jobs") {
          $0["jobs"]?[0]?["info"]?["docs_written"]?.int == 50
        }
        #expect(job["jobs"]?[0]?["info"]?["docs_written"]?.int == 50)
      }
      // The server is down, and its job with it (the test closure returns once the server's
      // services, the replicator's among them, have stopped).
      for i in 0..<5 { try src.put(#"{"n":"new"}"#, id: "new\(i)", actor: "alice") }
      #expect(try dst.record("new0") == nil)
      try await Self.app(a).test(.live) { clientA in
        #expect(try await eventually { try dst.record("new4") != nil })
        // Resumed from the checkpoint: this session wrote only the five new documents.
        let job = try await Self.poll(clientA, "/_scheduler/jobs") {
          $0["jobs"]?[0]?["info"]?["docs_written"]?.int == 5
        }
        #expect(job["jobs"]?[0]?["info"]?["docs_written"]?.int == 5)
        #expect(job["jobs"]?[0]?["info"]?["docs_read"]?.int == 5)
        #expect(job["jobs"]?[0]?["doc_id"] == .string("sync"))
        let doc = try await clientA.call(.get, "/_replicator/sync")
        #expect(doc["_replication_state"] == nil)
      }
      try ReplicationEndToEndTests.expectIdentical(src, dst)
    }
  }

  @Test(
    "an unreachable source crashes: crashing with a growing error count, a history, backoff, no credentials shown"
  )
  func crashing() async throws {
    let dir = TestDirectory("replicator-crashing", replicator: true)
    try dir.data.create("dst")
    try await Self.app(dir).test(.router) { client in
      #expect(try await eventually { dir.data.exists("_replicator") })
      let body =
        #"{"source":{"url":"http://127.0.0.1:1/src","headers":{"Authorization":"Basic c2VjcmV0OnNlY3JldA=="}},"target":"http://bob:hunter2@127.0.0.1:1/dst","continuous":true}"#
      #expect(try await client.call(.put, "/_replicator/down", body).code == 201)
      let row = try await Self.poll(client, "/_scheduler/docs/_replicator/down") {
        $0["state"] == .string("crashing")
      }
      #expect(row["state"] == .string("crashing"))
      #expect((row["error_count"]?.int ?? 0) >= 1)
      #expect(row["info"]?["error"]?.stringValue?.isEmpty == false)
      #expect(row["source"] == .string("http://127.0.0.1:1/src/"))
      let id = try #require(row["id"]?.stringValue)
      let path = "/_scheduler/jobs/" + id.replacingOccurrences(of: "+", with: "%2B")
      // Restarted after its backoff, and crashed again.
      let job = try await Self.poll(client, path) { response in
        (response["history"]?.arrayValue ?? []).filter { $0["type"] == .string("crashed") }.count
          >= 2
      }
      let history = job["history"]?.arrayValue ?? []
      let types = history.compactMap { $0["type"]?.stringValue }
      #expect(types.filter { $0 == "crashed" }.count >= 2)
      #expect(types.last == "added")
      #expect(types.contains("started"))
      #expect(history.first { $0["type"] == .string("crashed") }?["reason"]?.stringValue != nil)
      #expect(job["pid"] == .null || types.first == "started")
      let again = try await client.call(.get, "/_scheduler/docs/_replicator/down")
      #expect((again["error_count"]?.int ?? 0) >= 2 || again["state"] == .string("running"))

      // States filter.
      #expect(
        try await client.call(.get, "/_scheduler/docs?states=crashing,running")["docs"]?[0]?[
          "doc_id"] == .string("down"))
      #expect(
        try await client.call(.get, "/_scheduler/docs?states=completed")["docs"] == .array([]))
      let bogus = try await client.call(.get, "/_scheduler/docs?states=bogus")
      #expect(bogus.code == 400 && bogus.error == "query_parse_error")

      // A second document for the same replication fails, with its reason written back.
      #expect(try await client.call(.put, "/_replicator/twin", body).code == 201)
      let twin = try await Self.poll(client, "/_replicator/twin") {
        $0["_replication_state"] == .string("failed")
      }
      #expect(twin["_replication_state_reason"]?.stringValue?.contains("already started") == true)
      let twinRow = try await client.call(.get, "/_scheduler/docs/_replicator/twin")
      #expect(twinRow["state"] == .string("failed") && twinRow["error_count"]?.int == 1)
      #expect(twinRow["info"]?["error"]?.stringValue?.contains("`down`") == true)

      // Credentials are never shown.
      for uri in [
        "/_scheduler/docs", path, "/_scheduler/jobs", "/_active_tasks",
        "/_scheduler/docs/_replicator/twin",
      ] {
        let text = try await client.call(.get, uri).text
        #expect(!text.contains("hunter2") && !text.contains("c2VjcmV0"), "\(uri)")
      }
    }
  }

  @Test("documents that are not replications are refused with CouchDB's reasons")
  func badDocuments() async throws {
    let dir = TestDirectory("replicator-bad", replicator: true)
    try await Self.app(dir).test(.router) { client in
      #expect(try await eventually { dir.data.exists("_replicator") })
      let cases: [(String, String)] = [
        (#"{"source":"src","target":"dst"}"#, "Local endpoints"),
        (#"{"source":"http://h/a"}"#, "Missing replicator database"),
        (#"{"source":"http://h/a","target":"http://h/b","continuous":"yes"}"#, "boolean"),
        (#"{"source":"http://h/a","target":"http://h/b","doc_ids":"x"}"#, "array"),
        (
          #"{"source":"http://h/a","target":"http://h/b","doc_ids":["x"],"selector":{}}"#,
          "mutually exclusive"
        ),
      ]
      for (body, reason) in cases {
        let r = try await client.call(.put, "/_replicator/bad", body)
        #expect(r.code == 403 && r.error == "forbidden", "\(body)")
        #expect(r["reason"]?.stringValue?.contains(reason) == true, "\(body): \(r.text)")
      }
      // A failed document and a design document are not checked.
      #expect(
        try await client.call(
          .put, "/_replicator/old", #"{"source":"x","_replication_state":"failed"}"#
        ).code == 201)
      #expect(try await client.call(.put, "/_replicator/_design/d", "{}").code == 201)
      #expect(try await client.call(.get, "/_scheduler/docs/_replicator/nope").code == 404)
      #expect(try await client.call(.get, "/_scheduler/docs/other").code == 400)
      let old = try await client.call(.get, "/_scheduler/docs/_replicator/old")
      #expect(old["state"] == .string("failed"))
      let list = try await client.call(.get, "/_scheduler/docs")
      #expect(list["docs"]?.arrayValue?.count == 1)
    }
  }

  @Test(
    "_replicator follows its security object (admin_only by default); _scheduler is for server administrators"
  )
  func adminOnly() async throws {
    let fixture = try AccessFixture(replicator: true)
    var options = fixture.options
    options.useReplicator(Self.fastReplicator)
    try await Self.app(fixture.dir, options: options).test(.router) { client in
      #expect(try await eventually { fixture.dir.data.exists("_replicator") })
      let admin = AccessFixture.basic("admin")
      let doc = #"{"source":"http://127.0.0.1:1/a","target":"http://127.0.0.1:1/b"}"#
      #expect(try await client.call(.put, "/_replicator/r", doc, headers: admin).code == 201)
      let written = try await client.call(.get, "/_replicator/r", headers: admin)
      #expect(written.code == 200)
      // CouchDB's `owner`: the writer, shown as the job's user.
      #expect(written["owner"] == .string("admin"))
      var jobs = try await client.call(.get, "/_scheduler/jobs", headers: admin)
      for _ in 0..<400 where jobs["total_rows"]?.int != 1 {
        try await Task.sleep(for: .milliseconds(25))
        jobs = try await client.call(.get, "/_scheduler/jobs", headers: admin)
      }
      #expect(jobs["jobs"]?[0]?["user"] == .string("admin"))
      #expect(jobs["jobs"]?[0]?["doc_id"] == .string("r"))
      let page = try await client.call(.get, "/_scheduler/jobs?skip=1&limit=5", headers: admin)
      #expect(page["offset"]?.int == 1 && page["jobs"] == .array([]))
      // By default (`admin_only`) users are refused; a member named in its security object
      // reaches the documents, not `_all_docs`, `_changes` nor the database's deletion.
      let alice = AccessFixture.basic("alice")
      #expect(try await client.call(.get, "/_replicator/r", headers: alice).code == 403)
      #expect(
        try await client.call(
          .put, "/_replicator/_security", #"{"members":{"names":["alice"]}}"#, headers: admin
        ).code == 200)
      let carol = AccessFixture.basic("carol")
      for (method, uri, body, member, anonymous) in [
        (HTTPRequest.Method.get, "/_replicator/r", nil, 200, 401),
        (.put, "/_replicator/mine", doc, 201, 401),
        (.get, "/_replicator/_all_docs", nil, 401, 401),
        (.get, "/_replicator/_changes", nil, 401, 401),
        (.get, "/_replicator", nil, 200, 401), (.delete, "/_replicator", nil, 401, 401),
      ] as [(HTTPRequest.Method, String, String?, Int, Int)] {
        let r = try await client.call(method, uri, body, headers: alice)
        #expect(r.code == member, "\(method) \(uri)")
        #expect(
          try await client.call(method, uri, body).code == anonymous, "anonymous \(method) \(uri)")
        let outsider = try await client.call(method, uri, body, headers: carol)
        #expect(outsider.code == 403 || outsider.code == 401, "carol \(method) \(uri)")
      }
      for uri in ["/_scheduler/docs", "/_scheduler/docs/_replicator/r", "/_scheduler/jobs"] {
        #expect(try await client.call(.get, uri, headers: alice).code == 401, "\(uri)")
        #expect(try await client.call(.get, uri, headers: admin).code == 200, "\(uri)")
      }
    }
  }

  @Test("without _replicator in the data directory: 501 for it, an empty /_scheduler/docs")
  func notKnown() async throws {
    try await withServer { client, _ in
      #expect(try await client.call(.get, "/_replicator").code == 501)
      #expect(try await client.call(.put, "/_replicator/x", "{}").code == 501)
      let list = try await client.call(.get, "/_scheduler/docs")
      #expect(list.code == 200 && list["total_rows"]?.int == 0 && list["docs"] == .array([]))
      #expect(try await client.call(.get, "/_scheduler/docs/_replicator/x").code == 404)
    }
  }

  @Test("backoff doubles from its base up to 2^10 times; crashes count as CouchDB counts them")
  func backoffAndCrashCount() throws {
    let dir = TestDirectory("replicator-backoff")
    var options = ReplicatorSchedulerOptions()
    options.backoff = .seconds(30)
    let jobs = ReplicationJobs(maxHistory: 20, healthThreshold: .seconds(120))
    let documents = ReplicatorDocuments(
      data: dir.data, jobs: jobs, options: options, logger: quietLogger)
    #expect(documents.backoff(1) == .seconds(30))
    #expect(documents.backoff(2) == .seconds(60))
    #expect(documents.backoff(4) == .seconds(240))
    #expect(documents.backoff(11) == .seconds(30 * 1024))
    #expect(documents.backoff(50) == .seconds(30 * 1024))

    let start = Date(timeIntervalSince1970: 1_000_000)
    func job(_ events: [(Double, String)]) -> ReplicationJobs.Job {
      var job = ReplicationJobs.Job(
        id: "j", source: "s", target: "t", continuous: true, user: nil, startTime: start,
        status: ReplicationStatus(
          state: .starting,
          report: ReplicationReport(sessionID: "", startSeq: .number(0), endSeq: .number(0))))
      job.history = events.reversed().map { (start.addingTimeInterval($0.0), $0.1, nil) }
      job.database = "_replicator"
      job.docID = "d"
      job.running = false
      return job
    }
    // added, started, crashed at once, started, crashed at once: two.
    let quick = job([(1, "started"), (2, "crashed"), (40, "started"), (41, "crashed")])
    #expect(jobs.errorCount(of: quick) == 2)
    #expect(jobs.summaryState(of: quick).state == "crashing")
    // A crash after a long healthy run ends the streak: no backoff before its restart.
    let healthy = job([(1, "started"), (2, "crashed"), (40, "started"), (1000, "crashed")])
    #expect(jobs.errorCount(of: healthy) == 0)
    #expect(jobs.summaryState(of: healthy).state == "crashing")
    #expect(documents.backoff(0) == .zero)
    // Stopped after it started: no crashes count.
    let stopped = job([(1, "started"), (2, "crashed"), (40, "started"), (50, "stopped")])
    #expect(jobs.errorCount(of: stopped) == 0)
    #expect(jobs.summaryState(of: stopped).state == "pending")
  }
}
