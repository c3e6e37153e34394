import CouchAPI
import CouchTestSupport
import Foundation
import HTTPTypes
import HummingbirdTesting
import JSON
import Log
import Projections
import Query
import Replication
import Synchronization
import Testing

/// Access is checked in the transaction that commits a write: a member removed from a wiki by
/// a commit has no write committed after it, however many of theirs were under way.
@Suite struct AccessRaceTests {
  @Test("a member's concurrent writes stop at the commit that removes them from the wiki")
  func removalRace() async throws {
    try await withAccessServer { client, fixture in
      let alice = AccessFixture.basic("alice")
      let bob = AccessFixture.basic("bob")
      for round in 0..<5 {
        // bob is a member again; the owner removes him while 16 of his writers are at work.
        let rev = try #require(try fixture.store.get("w1")["_rev"]?.stringValue)
        let members =
          round == 0
          ? nil
          : try await client.call(
            .put, "/wiki/w1?rev=\(rev)",
            #"{"type":"wiki","title":"Secret w1","owner_id":"alice","members":["bob"]}"#,
            headers: alice)
        if let members { #expect(members.code == 201, "\(members.text)") }
        let current = try #require(try fixture.store.get("w1")["_rev"]?.stringValue)
        let accepted = Counter()
        let refused = Counter()
        try await withThrowingTaskGroup(of: Void.self) { group in
          for writer in 0..<16 {
            group.addTask {
              for i in 0..<40 {
                let r = try await client.call(
                  .put, "/wiki/w1:R\(round)-\(writer)-\(i)",
                  #"{"type":"page","wiki_id":"w1","markdown":"x"}"#, headers: bob)
                if r.code == 201 { accepted.add() }
                if r.code == 403 {
                  refused.add()
                  return
                }
              }
            }
          }
          group.addTask {
            // Once some of bob's writes are in.
            while accepted.value < 5 { try await Task.sleep(for: .milliseconds(1)) }
            let removed = try await client.call(
              .put, "/wiki/w1?rev=\(current)",
              #"{"type":"wiki","title":"Secret w1","owner_id":"alice","members":[]}"#,
              headers: alice)
            #expect(removed.code == 201, "\(removed.text)")
          }
          try await group.waitForAll()
        }
        // The removal's event, and every event of bob's after it: none.
        let events = try fixture.store.log.read(after: .start)
        let removal = try #require(
          events.last { $0.stream == "w1" && $0.actor == "alice" }?.position)
        let late = events.filter { $0.actor == "bob" && $0.position > removal }
        #expect(late.isEmpty, "round \(round): \(late.count) of bob's writes after his removal")
        #expect(accepted.value >= 5)
        #expect(refused.value > 0)
      }
    }
  }
}

/// A count several tasks add to.
final class Counter: Sendable {
  private let count = Atomic<Int>(0)
  var value: Int { count.load(ordering: .relaxed) }
  func add() { count.add(1, ordering: .relaxed) }
}
