import CouchAPI
import CouchTestSupport
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import JSON
import Projections
import Query
import Replication
import TestSupport
import Testing

/// `POST /_replicate`, `/_active_tasks` and `/_scheduler/jobs`, between two live servers.
@Suite struct ReplicateRouteTests {
  @Test(
    "_replicate: one-shot with its history, continuous listed in _active_tasks and _scheduler/jobs, cancel"
  )
  func replicateEndpoint() async throws {
    let a = TestDirectory("replicate-route-a")
    let b = TestDirectory("replicate-route-b")
    let storeA = try a.data.create("wiki")
    let storeB = try b.data.create("wiki")
    try ReplicationRobustnessTests.seed(storeA, count: 200)
    try await ReplicationRobustnessTests.live(a).test(.live) { clientA in
      try await ReplicationRobustnessTests.live(b).test(.live) { clientB in
        let urlB = "http://127.0.0.1:\(try #require(clientB.port))/wiki"
        // Refused: missing fields, a missing source.
        #expect(try await clientA.call(.post, "/_replicate", #"{"source":"\#(urlB)"}"#).code == 400)
        // A port past 65535 (or 0) is no URL: 400, and the server lives on (NIO trapped on it).
        for port in ["99999", "70000", "0"] {
          for host in ["127.0.0.1", "localhost"] {
            let bad = try await clientA.call(
              .post, "/_replicate",
              #"{"source":"http://\#(host):\#(port)/x","target":"\#(urlB)"}"#)
            #expect(bad.code == 400, "\(host):\(port)")
          }
        }
        #expect(CouchURL("http://127.0.0.1:65535/db") != nil)
        #expect(CouchURL("http://127.0.0.1:65536/db") == nil)
        let missing = try await clientA.call(
          .post, "/_replicate",
          #"{"source":"http://127.0.0.1:\#(try #require(clientB.port))/nope","target":"\#(urlB)"}"#)
        #expect(missing.code == 404 && missing.error == "db_not_found")

        // One-shot, from A (through its own URL) to B: answered when done, with the history.
        let urlA = "http://u:secret@127.0.0.1:\(try #require(clientA.port))/wiki"
        let once = try await clientA.call(
          .post, "/_replicate", #"{"source":"\#(urlA)","target":"\#(urlB)"}"#)
        #expect(once.code == 200)
        #expect(once["ok"] == .bool(true))
        #expect(
          once["history"]?[0]?["docs_written"]?.int == once["history"]?[0]?["missing_found"]?.int)
        #expect(!once.text.contains("secret"))
        try ReplicationEndToEndTests.expectIdentical(storeA, storeB)
        // Again after one more write: the earlier session is in the history, and the counts
        // are the replication's so far (CouchDB's replication_test).
        try storeA.put(#"{"text":"one more"}"#, id: "one-more", actor: "alice")
        let twice = try await clientA.call(
          .post, "/_replicate", #"{"source":"\#(urlA)","target":"\#(urlB)"}"#)
        #expect(twice["history"]?.arrayValue?.count == 2)
        #expect(twice["history"]?[1]?["session_id"] == once["session_id"])
        #expect(
          twice["history"]?[0]?["docs_written"]?.int
            == (once["history"]?[0]?["docs_written"]?.int ?? 0) + 1)

        // Continuous: listed while it runs, credentials never shown; a new write flows.
        let body = #"{"source":"\#(urlA)","target":"\#(urlB)","continuous":true}"#
        let started = try await clientA.call(.post, "/_replicate", body)
        #expect(started.code == 202)
        let id = try #require(started["_local_id"]?.stringValue)
        #expect(id.hasSuffix("+continuous"))
        try storeA.put(#"{"text":"live"}"#, id: "live", actor: "alice")
        #expect(
          try await eventually { try storeB.record("live") != nil })
        // The task's counters move once the batch is checkpointed.
        var tasks = try await clientA.call(.get, "/_active_tasks")
        // The replication's task, alone: the server lists its own tasks only.
        func replication(_ tasks: JSONResponse) -> JSONValue? {
          tasks.json?.arrayValue?.count == 1 ? tasks.json?.arrayValue?.first : nil
        }
        for _ in 0..<250 where (replication(tasks)?["docs_written"]?.int ?? 0) < 1 {
          try await Task.sleep(for: .milliseconds(20))
          tasks = try await clientA.call(.get, "/_active_tasks")
        }
        let task = try #require(replication(tasks))
        #expect(task["type"] == .string("replication"))
        #expect(task["replication_id"] == .string(id))
        #expect(task["continuous"] == .bool(true))
        #expect(task["docs_written"]?.int ?? 0 >= 1)
        #expect(!tasks.text.contains("secret"))
        let jobs = try await clientA.call(.get, "/_scheduler/jobs")
        #expect(jobs["total_rows"]?.int == 1)
        #expect(jobs["jobs"]?[0]?["id"] == .string(id))
        #expect(jobs["jobs"]?[0]?["source"]?.stringValue?.contains("secret") == false)
        #expect(
          try await clientA.call(
            .get, "/_scheduler/jobs/\(id.replacingOccurrences(of: "+", with: "%2B"))"
          ).code == 200)
        #expect(try await clientA.call(.get, "/_scheduler/jobs/nope").code == 404)

        let cancel = try await clientA.call(
          .post, "/_replicate", #"{"replication_id":"\#(id)","cancel":true}"#)
        #expect(cancel.code == 200 && cancel["_local_id"] == .string(id))
        #expect(replication(try await clientA.call(.get, "/_active_tasks")) == nil)
        #expect(
          try await clientA.call(
            .post, "/_replicate", #"{"replication_id":"\#(id)","cancel":true}"#
          )
          .code == 404)
      }
    }
  }

  @Test(
    "a one-shot _replicate from a peer that does not answer fails as CouchDB's does: 500 after 5 retries, about 8 s"
  )
  func unreachablePeer() async throws {
    let a = TestDirectory("replicate-route-unreachable")
    _ = try a.data.create("wiki")
    try await ReplicationRobustnessTests.live(a).test(.live) { client in
      let target = "http://127.0.0.1:\(try #require(client.port))/wiki"
      let start = ContinuousClock.now
      let failed = try await client.call(
        .post, "/_replicate", #"{"source":"http://127.0.0.1:1/src","target":"\#(target)"}"#)
      let took = ContinuousClock.now - start
      #expect(failed.code == 500)
      #expect(failed["reason"]?.stringValue?.contains("127.0.0.1:1") == true, "\(failed.text)")
      // 0.25 + 0.5 + 1 + 2 + 4 s of waits.
      #expect(took > .seconds(7) && took < .seconds(30), "\(took)")
      // `retries_per_request` as CouchDB takes it: none, so it fails at once.
      let quick = ContinuousClock.now
      let once = try await client.call(
        .post, "/_replicate",
        #"{"source":"http://127.0.0.1:1/src","target":"\#(target)","retries_per_request":0}"#)
      #expect(once.code == 500)
      #expect(ContinuousClock.now - quick < .seconds(5))
    }
  }

  @Test(
    "_active_tasks and _scheduler/jobs are for server administrators, _replicate for signed-in users"
  )
  func adminOnly() async throws {
    let fixture = try AccessFixture()
    let app = buildApplication(
      dataDirectory: fixture.dir.data, options: fixture.options,
      configuration: ApplicationConfiguration(address: .hostname("127.0.0.1", port: 0)),
      logger: quietLogger)
    try await app.test(.router) { client in
      for uri in ["/_active_tasks", "/_scheduler/jobs"] {
        let r = try await client.call(.get, uri, headers: AccessFixture.basic("alice"))
        #expect(r.code == 401, "\(uri)")
      }
      // `_replicate` is for signed-in users (CouchDB's `require_authenticated_user`).
      let anonymous = try await client.call(.post, "/_replicate", #"{"source":"a","target":"b"}"#)
      #expect(anonymous.code == 401)
      let alice = try await client.call(
        .post, "/_replicate", #"{"source":"a","target":"b"}"#, headers: AccessFixture.basic("alice")
      )
      // Plain names are this server's databases, reached as alice: `a` does not exist.
      #expect(alice.code == 404 && alice.error == "db_not_found", "\(alice.text)")
      #expect(
        try await client.call(.get, "/_active_tasks", headers: AccessFixture.basic("admin")).code
          == 200)
    }
  }
}
