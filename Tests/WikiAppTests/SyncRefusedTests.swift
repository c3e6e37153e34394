import CouchAPI
import CouchReplicator
import Foundation
import Hummingbird
import HummingbirdTesting
import JSON
import Projections
import Replication
import TestSupport
import Testing
import WikiApp

/// The Sync page with a wiki edited after its pages (they come first in the feed) and a page
/// the other side never lets in.
@Suite struct SyncRefusedTests {
  @Test(
    "a sync sends a wiki edited after its pages whole, and lists what the other side refuses, with the reason, instead of 'up to date'"
  )
  func refusedListed() async throws {
    let a = try UIFixture("syncRefusedA", replicator: true)
    let b = try UIFixture("syncRefusedB")
    let made = try a.store.put(
      #"{"type":"wiki","title":"Team","owner_id":"alice","members":[]}"#, id: "t1", actor: "alice")
    for name in ["P1", "P2", "P3"] {
      try a.store.put(
        #"{"type":"page","wiki_id":"t1","markdown":"page \#(name)"}"#, id: "t1:\(name)",
        actor: "alice")
    }
    try a.store.put(
      #"{"type":"wiki","title":"Team, renamed","owner_id":"alice","members":[]}"#, id: "t1",
      rev: made.rev, actor: "alice")
    // x9 is alice's on A and carol's on B.
    try a.store.put(
      #"{"type":"wiki","title":"Mine","owner_id":"alice","members":[]}"#, id: "x9", actor: "alice")
    try a.store.put(#"{"type":"page","wiki_id":"x9","markdown":"q"}"#, id: "x9:Q", actor: "alice")
    try b.store.put(
      #"{"type":"wiki","title":"Carol's","owner_id":"carol","members":[]}"#, id: "x9",
      actor: "carol")
    try await a.withServer(
      .live,
      options: {
        var replicator = ReplicatorSchedulerOptions()
        replicator.backoff = .milliseconds(100)
        replicator.retryDelay = .milliseconds(50)
        replicator.retriesPerRequest = 2
        $0.useReplicator(replicator)
      }
    ) { clientA in
      let empty = try await clientA.page(.get, "/_wiki/_sync", as: "alice")
      let csrf = try #require(empty.csrf)
      try await b.withServer(.live) { clientB in
        let portB = try #require(clientB.port)
        let added = try await clientA.page(
          .post, "/_wiki/_sync", as: "alice",
          form: [
            "csrf": csrf, "action": "add", "remote": "http://127.0.0.1:\(portB)/wiki",
            "username": "alice", "password": "pw-alice",
          ])
        #expect(added.status == 303)
        #expect(
          try await eventually(20) {
            ["t1", "t1:P1", "t1:P2", "t1:P3"].allSatisfy { (try? b.store.get($0)) != nil }
          })
        var shown: Page? = nil
        #expect(
          try await eventually(20) {
            let page = try await clientA.page(.get, "/_wiki/_sync", as: "alice")
            shown = page
            // Listed while the refused ones are tried again (active), then the state says so.
            return page.text.contains("2 documents could not be sent")
              && page.text.contains(#"data-field="sync-state">not all sent<"#)
          })
        let page = try #require(shown)
        #expect(page.text.contains("<code>x9:Q</code>: forbidden: You may not write to the wiki"))
        #expect((try? b.store.get("x9:Q")) == nil)
        #expect(page.text.contains("ask their owners there to add you, then press Retry now"))
        // carol makes alice a member on B: the page goes (the pull brings the wiki's new
        // revision, after which the push offers what was refused again; Retry now, pressed
        // here as a user would, does too), and carol's wiki document, which only its owner may
        // change, stays refused.
        let carols = try b.store.get("x9")
        try await b.store.putAsync(
          #"{"type":"wiki","title":"Carol's","owner_id":"carol","members":["alice"]}"#,
          id: "x9", rev: carols["_rev"]?.stringValue, actor: "carol")
        let id = try #require(SyncPageTests.syncID(page))
        let retried = try await clientA.page(
          .post, "/_wiki/_sync", as: "alice", form: ["csrf": csrf, "action": "retry", "sync": id])
        #expect(retried.status == 303)
        #expect(try await eventually(20) { (try? b.store.get("x9:Q")) != nil })
        #expect(
          try await eventually(20) {
            let page = try await clientA.page(.get, "/_wiki/_sync", as: "alice")
            return page.text.contains("1 document could not be sent")
              && page.text.contains(#"data-field="sync-state">not all sent<"#)
          })
      }
    }
  }
}
