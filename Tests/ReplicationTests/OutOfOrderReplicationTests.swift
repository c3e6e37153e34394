import CouchReplicator
import CouchTestSupport
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import JSON
import Projections
import TestSupport
import Testing

@testable import CouchAPI
@testable import Replication

/// A wiki edited after its pages: the changes feed gives the pages first, and a target where
/// the wiki does not exist yet cannot take them until the wiki arrives. Every page must arrive,
/// whatever the order, and what cannot is reported on every run.
@Suite struct OutOfOrderReplicationTests {
  static let alice = AccessFixture.basic("alice")
  static let admin = AccessFixture.basic("admin")

  /// alice's wiki `t1` with three pages, then its title edited (so that it is last in the
  /// feed); with `never`, also her page `x9:Q` of her wiki `x9`, which on the target is
  /// carol's and does not let alice in.
  static func seed(_ a: AccessFixture, _ b: AccessFixture, never: Bool = false) throws {
    let store = a.store
    let made = try store.put(
      #"{"type":"wiki","title":"Team","owner_id":"alice","members":[]}"#, id: "t1",
      actor: "alice")
    for name in ["P1", "P2", "P3"] {
      try store.put(
        #"{"type":"page","wiki_id":"t1","markdown":"Page \#(name)"}"#, id: "t1:\(name)",
        actor: "alice")
    }
    try store.put(
      #"{"type":"wiki","title":"Team, renamed","owner_id":"alice","members":[]}"#, id: "t1",
      rev: made.rev, actor: "alice")
    if never {
      try store.put(
        #"{"type":"wiki","title":"Mine","owner_id":"alice","members":[]}"#, id: "x9",
        actor: "alice")
      try store.put(
        #"{"type":"page","wiki_id":"x9","markdown":"q"}"#, id: "x9:Q", actor: "alice")
      try b.store.put(
        #"{"type":"wiki","title":"Carol's","owner_id":"carol","members":[]}"#, id: "x9",
        actor: "carol")
    }
  }

  static func endpoint(_ port: Int?, _ name: String) throws -> CouchEndpoint {
    try ReplicationRobustnessTests.endpoint(
      port, name, credentials: .basic(user: "alice", password: "pw-alice"))
  }

  /// Two live servers with sign-in (`a` replicating to `b` as alice).
  static func withServers(
    _ name: String, never: Bool = false, replicator: Bool = false,
    _ body:
      @Sendable (
        _ a: AccessFixture, _ b: AccessFixture, _ clientA: any TestClientProtocol,
        _ clientB: any TestClientProtocol
      ) async throws -> Void
  ) async throws {
    let a = try AccessFixture(name + "-a", replicator: replicator)
    let b = try AccessFixture(name + "-b")
    try seed(a, b, never: never)
    let optionsA = {
      var options = a.options
      options.useReplicator(ReplicatorDatabaseTests.fastReplicator)
      return options
    }()
    try await ReplicationRobustnessTests.live(b.dir, options: b.options).test(.live) { clientB in
      try await ReplicatorDatabaseTests.app(a.dir, options: optionsA).test(.live) { clientA in
        try await body(a, b, clientA, clientB)
      }
    }
  }

  @Test(
    "a wiki edited after its pages, pushed twice by the Replicator: every page arrives, nothing is refused"
  )
  func pushTwice() async throws {
    try await Self.withServers("ooo-push") { a, b, clientA, clientB in
      let replicator = Replicator(
        source: try Self.endpoint(clientA.port, "a"), target: try Self.endpoint(clientB.port, "b"))
      let first = try await replicator.replicate()
      #expect(first.refused.isEmpty, "\(first.refused)")
      for id in ["t1", "t1:P1", "t1:P2", "t1:P3"] {
        let got = try await clientB.call(.get, "/wiki/\(id)", headers: Self.alice)
        #expect(got.code == 200, "\(id): \(got.text)")
      }
      #expect(
        try await clientB.call(.get, "/wiki/t1", headers: Self.alice)["title"]
          == .string("Team, renamed"))
      let second = try await replicator.replicate()
      #expect(second.refused.isEmpty && second.docWriteFailures == 0)
      // Pulled the other way (b to a, as alice): nothing missing, nothing refused.
      let back = try await Replicator(
        source: try Self.endpoint(clientB.port, "b"), target: try Self.endpoint(clientA.port, "a")
      ).replicate()
      #expect(back.refused.isEmpty, "\(back.refused)")
      _ = (a, b)
    }
  }

  @Test(
    "a page for a wiki that never lets its writer in stays out and is reported on every run, with its reason"
  )
  func neverAllowed() async throws {
    try await Self.withServers("ooo-never", never: true) { a, b, clientA, clientB in
      let replicator = Replicator(
        source: try Self.endpoint(clientA.port, "a"), target: try Self.endpoint(clientB.port, "b"))
      for run in 1...2 {
        let report = try await replicator.replicate()
        #expect(Set(report.refused.map(\.id)) == ["x9", "x9:Q"], "run \(run): \(report.refused)")
        #expect(report.refused.allSatisfy { $0.error == "forbidden" && !$0.reason.isEmpty })
        #expect(report.docWriteFailures == 2, "run \(run)")
      }
      // The rest arrived; carol's x9 has no page of alice's.
      #expect(try b.store.record("t1:P3") != nil)
      #expect(try b.store.record("x9:Q") == nil)
      let x9 = try #require(try b.store.get("x9").objectValue)
      #expect(x9["owner_id"] == .string("carol"))
      _ = a
    }
  }

  @Test(
    "a _replicator document pushes a wiki edited after its pages: every page arrives; refusals show in _scheduler/docs"
  )
  func replicatorDocument() async throws {
    try await Self.withServers("ooo-doc", never: true, replicator: true) { a, b, clientA, clientB in
      #expect(try await eventually { a.dir.data.exists("_replicator") })
      let target = "http://alice:pw-alice@127.0.0.1:\(try #require(clientB.port))/wiki"
      let source = "http://alice:pw-alice@127.0.0.1:\(try #require(clientA.port))/wiki"
      let put = try await clientA.call(
        .put, "/_replicator/push", #"{"source":"\#(source)","target":"\#(target)"}"#,
        headers: Self.admin)
      #expect(put.code == 201, "\(put.text)")
      let done = try await ReplicatorDatabaseTests.poll(
        clientA, "/_replicator/push", headers: Self.admin
      ) { $0["_replication_state"] == .string("completed") }
      #expect(done["_replication_state"] == .string("completed"), "\(done.text)")
      for id in ["t1", "t1:P1", "t1:P2", "t1:P3"] {
        #expect(try b.store.record(id) != nil, "\(id)")
      }
      let refused =
        done["_replication_stats"]?["wikilog_refused"]?.arrayValue?.compactMap {
          $0["id"]?.stringValue
        } ?? []
      #expect(Set(refused) == ["x9", "x9:Q"], "\(done.text)")
      let row = try await clientA.call(
        .get, "/_scheduler/docs/_replicator/push", headers: Self.admin)
      #expect(row.text.contains("x9:Q"), "\(row.text)")
    }
  }
}
