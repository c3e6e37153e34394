import CouchTestSupport
import Foundation
import JSON
import Projections
import Query
import TestSupport
import Testing

@testable import CouchAPI
@testable import Log
@testable import Replication

/// A server whose feeds have all ended does nothing: no task follows a log for waiters that
/// left, and no poller runs for them. (The waits are long: with the whole suite running, the
/// two cooperative threads of this machine can be taken for many seconds.)
@Suite struct IdleTests {
  @Test("the last waiter leaving stops the hub's follower and the log's poller")
  func followerStops() async throws {
    let dir = TestDirectory("idle-hub")
    let store = try dir.data.create("db")
    _ = try store.put(#"{"_id":"a"}"#, actor: "test")
    let hub = ChangesHub(store: store) {}
    let end = try store.log.committedPosition
    for round in 0..<3 {
      let waiters = (0..<3).map { _ in Task { await hub.wait(after: end, filter: .any) } }
      #expect(try await eventually(120) { hub.isFollowing && store.log.notifier.isPolling })
      for waiter in waiters { waiter.cancel() }
      for waiter in waiters { #expect(await waiter.value == false, "round \(round)") }
      #expect(try await eventually(120) { !hub.isFollowing }, "round \(round)")
      #expect(try await eventually(120) { !store.log.notifier.isPolling }, "round \(round)")
    }
    // A waiter after that is woken by the next write, from a new follower.
    let waiter = Task { await hub.wait(after: end, filter: .any) }
    #expect(try await eventually(120) { hub.isFollowing })
    _ = try store.put(#"{"_id":"b"}"#, actor: "test")
    #expect(await waiter.value == true)
    #expect(try await eventually(120) { !hub.isFollowing && !store.log.notifier.isPolling })
  }

  @Test("a waiter that leaves while others wait keeps the follower for them")
  func othersKeepIt() async throws {
    let dir = TestDirectory("idle-hub-others")
    let store = try dir.data.create("db")
    let hub = ChangesHub(store: store) {}
    let end = try store.log.committedPosition
    let staying = Task { await hub.wait(after: end, filter: .docIDs(["x"])) }
    let leaving = Task { await hub.wait(after: end, filter: .any) }
    #expect(try await eventually(120) { hub.isFollowing })
    leaving.cancel()
    #expect(await leaving.value == false)
    #expect(hub.isFollowing)
    _ = try store.put(#"{"_id":"x"}"#, actor: "test")
    #expect(await staying.value == true)
  }
}
