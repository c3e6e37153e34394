import Auth
import CouchAPI
import CouchReplicator
import Foundation
import Hummingbird
import HummingbirdTesting
import JSON
import Logging
import Projections
import Replication
import ServiceLifecycle
import Synchronization
import TestSupport
import Testing
import WikiApp

/// The Sync page between two live servers: set up in the UI, edits flowing both ways, the
/// remote going away and coming back, pause and remove.
@Suite struct SyncPageTests {
  /// The id of the first sync on a Sync page.
  static func syncID(_ page: Page) -> String? {
    page.text.firstMatch(of: #/data-sync="([0-9a-f]+)"/#).map { String($0.1) }
  }

  @Test(
    "the Sync page syncs two ways with another server, says offline with the next try when it goes, catches up when it returns; pause and remove"
  )
  func twoWay() async throws {
    let a = try UIFixture("syncA", replicator: true)
    let b = try UIFixture("syncB")
    // carol's wiki w2 is hidden from alice on both sides: her sync carries none of it.
    try a.store.put(
      #"{"type":"page","wiki_id":"w2","markdown":"carol's, on A"}"#, id: "w2:On A",
      actor: "carol")
    try b.store.put(
      #"{"type":"page","wiki_id":"w2","markdown":"carol's, on B"}"#, id: "w2:On B",
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
      #expect(empty.status == 200)
      #expect(empty.text.contains(#"id="no-syncs""#))
      #expect(!empty.text.contains("sync-indicator"))
      let csrf = try #require(empty.csrf)
      let portBox = Mutex(0)
      try await b.withServer(.live) { clientB in
        let portB = try #require(clientB.port)
        portBox.withLock { $0 = portB }
        // A remote URL with credentials in it is refused, nothing written.
        let refused = try await clientA.page(
          .post, "/_wiki/_sync", as: "alice",
          form: [
            "csrf": csrf, "action": "add", "remote": "http://alice:pw@127.0.0.1:\(portB)/wiki",
          ])
        #expect(refused.status == 400)
        #expect(refused.text.contains(#"id="sync-error""#))
        let added = try await clientA.page(
          .post, "/_wiki/_sync", as: "alice",
          form: [
            "csrf": csrf, "action": "add", "remote": "http://127.0.0.1:\(portB)/wiki",
            "username": "alice", "password": "pw-alice",
          ])
        #expect(added.status == 303)
        // Both ways.
        try await a.store.putAsync(
          #"{"type":"page","wiki_id":"w1","markdown":"from A"}"#, id: "w1:From A",
          actor: "alice")
        #expect(try await eventually(20) { (try? b.store.get("w1:From A")) != nil })
        try await b.store.putAsync(
          #"{"type":"page","wiki_id":"w1","markdown":"from B"}"#, id: "w1:From B",
          actor: "alice")
        #expect(try await eventually(20) { (try? a.store.get("w1:From B")) != nil })
        // The page and the header say so; the credentials are not shown back.
        var synced: Page? = nil
        #expect(
          try await eventually(20) {
            let page = try await clientA.page(.get, "/_wiki/_sync", as: "alice")
            synced = page
            return page.text.contains(#"data-field="sync-state">up to date<"#)
          })
        let page = try #require(synced)
        #expect(page.text.contains("http://127.0.0.1:\(portB)/wiki"))
        #expect(page.text.contains(#"id="sync-indicator""#))
        #expect(!page.text.contains("pw-alice"))
        // What alice may not read on either side stayed where it was.
        #expect((try? a.store.get("w2:On B")) == nil)
        #expect((try? b.store.get("w2:On A")) == nil)
        // Another user sees none of alice's syncs.
        let bobs = try await clientA.page(.get, "/_wiki/_sync", as: "bob")
        #expect(bobs.text.contains(#"id="no-syncs""#))
        // The replication reads and writes this side as alice: with a token of hers.
        #expect(try a.auth.tokens.list(user: "alice").count == 1)
      }
      let portB = portBox.withLock { $0 }
      // B is gone: an edit on A cannot go, and the page says offline, with the next try.
      try await a.store.putAsync(
        #"{"type":"page","wiki_id":"w1","markdown":"made while B was away"}"#,
        id: "w1:Offline", actor: "alice")
      var offline: Page? = nil
      #expect(
        try await eventually(10) {
          let page = try await clientA.page(.get, "/_wiki/_sync", as: "alice")
          offline = page
          return page.text.contains(#"data-field="sync-state">offline<"#)
        })
      #expect(offline?.text.contains("Next try <time datetime=") == true)
      // The header says so on every page (its state is read when the page is made: waited for,
      // as a retry under way can show another state for a moment).
      #expect(
        try await eventually(10) {
          try await clientA.page(.get, "/_wiki/", as: "alice").text.contains("sync-offline")
        })
      // B returns on its address (Hummingbird's live tests take a new port each time: B is run
      // here as `wikilog serve` runs it): the edit made meanwhile arrives.
      var options = CouchServerOptions()
      options.authenticator = b.auth
      let listening = AsyncStream<Void>.makeStream()
      let app = buildWikiApplication(
        dataDirectory: b.data, options: options,
        configuration: ApplicationConfiguration(address: .hostname("127.0.0.1", port: portB)),
        logger: Logger(label: "test") { _ in SwiftLogNoOpLogHandler() },
        onServerRunning: { _ in listening.continuation.yield() })
      let group = ServiceGroup(
        configuration: .init(
          services: [app], logger: Logger(label: "test") { _ in SwiftLogNoOpLogHandler() }))
      try await withThrowingTaskGroup(of: Void.self) { tasks in
        tasks.addTask { try await group.run() }
        for await _ in listening.stream { break }
        let arrived = try await eventually(20) { (try? b.store.get("w1:Offline")) != nil }
        if !arrived {
          let page = try await clientA.page(.get, "/_wiki/_sync", as: "alice")
          Issue.record("not arrived: \(page.text.split(separator: "<tbody>").last ?? "")")
        }
        // And the page says so again.
        #expect(
          try await eventually(20) {
            let page = try await clientA.page(.get, "/_wiki/_sync", as: "alice")
            return page.text.contains(#"data-field="sync-state">up to date<"#)
          })
        await group.triggerGracefulShutdown()
        try await tasks.waitForAll()
      }
      // Pause, resume, remove.
      let current = try await clientA.page(.get, "/_wiki/_sync", as: "alice")
      let id = try #require(Self.syncID(current))
      var answer = try await clientA.page(
        .post, "/_wiki/_sync", as: "alice", form: ["csrf": csrf, "action": "pause", "sync": id])
      #expect(answer.status == 303)
      let replicator = try a.data.open(ReplicatorDocuments.databaseName)
      #expect(
        try replicator.get("wikisync-\(id)-push")[ReplicatorDocuments.pausedField] == .bool(true))
      let paused = try await clientA.page(.get, "/_wiki/_sync", as: "alice")
      #expect(paused.text.contains(#"data-field="sync-state">paused<"#))
      #expect(paused.text.contains(#"value="resume""#))
      // Bob may not remove alice's sync.
      let bobsPage = try await clientA.page(.get, "/_wiki/_sync", as: "bob")
      answer = try await clientA.page(
        .post, "/_wiki/_sync", as: "bob",
        form: ["csrf": try #require(bobsPage.csrf), "action": "remove", "sync": id])
      #expect(answer.status == 404)
      // Remove asks first; nothing goes until it is confirmed.
      answer = try await clientA.page(
        .post, "/_wiki/_sync", as: "alice", form: ["csrf": csrf, "action": "remove", "sync": id])
      #expect(answer.status == 200)
      #expect(answer.text.contains(#"id="sync-remove""#))
      #expect(answer.text.contains("Nothing is deleted on either side"))
      #expect((try? replicator.get("wikisync-\(id)-push")) != nil)
      answer = try await clientA.page(
        .post, "/_wiki/_sync", as: "alice",
        form: ["csrf": csrf, "action": "remove", "sync": id, "confirm": "yes"])
      #expect(answer.status == 303)
      let gone = try await clientA.page(.get, "/_wiki/_sync", as: "alice")
      #expect(gone.text.contains(#"id="no-syncs""#))
      #expect((try? replicator.get("wikisync-\(id)-push")) == nil)
      #expect(try a.auth.tokens.list(user: "alice").isEmpty)
    }
  }

  /// The section of the sync with `remote` on a Sync page.
  static func section(_ page: Page, _ remote: String) -> String? {
    page.text.components(separatedBy: #"<section class="sync""#).dropFirst().first {
      $0.contains("<h2>\(remote) ")
    }
  }

  @Test(
    "a permanent failure needs attention and says what to fix (wrong password, missing database, no rights); Change credentials and Retry now mend it without waiting out the backoff"
  )
  func permanentStates() async throws {
    let a = try UIFixture("syncStatesA", replicator: true)
    let b = try UIFixture("syncStatesB")
    try await a.withServer(
      .live,
      options: {
        // A crashed job waits a minute: only Retry now or a changed document starts it sooner.
        var replicator = ReplicatorSchedulerOptions()
        replicator.backoff = .seconds(60)
        replicator.retryDelay = .milliseconds(50)
        replicator.retriesPerRequest = 1
        $0.useReplicator(replicator)
      }
    ) { clientA in
      let csrf = try #require(try await clientA.page(.get, "/_wiki/_sync", as: "alice").csrf)
      try await b.withServer(.live) { clientB in
        let port = try #require(clientB.port)
        func add(_ db: String, password: String) async throws {
          let added = try await clientA.page(
            .post, "/_wiki/_sync", as: "alice",
            form: [
              "csrf": csrf, "action": "add", "remote": "http://127.0.0.1:\(port)/\(db)",
              "username": "alice", "password": password,
            ])
          #expect(added.status == 303)
        }
        /// Waits until the section of `db`'s sync contains every one of `texts`.
        func shows(_ db: String, _ texts: [String]) async throws -> String? {
          var last: String? = nil
          let found = try await eventually(20) {
            let page = try await clientA.page(.get, "/_wiki/_sync", as: "alice")
            last = Self.section(page, "http://127.0.0.1:\(port)/\(db)")
            return texts.allSatisfy { last?.contains($0) == true }
          }
          if !found { Issue.record("\(db): \(texts) not in \(last ?? "no section")") }
          return last
        }
        try await add("wiki", password: "wrong")
        try await add("missing", password: "pw-alice")
        // `_users` is for administrators only: alice may neither read nor write it.
        try await add("_users", password: "pw-alice")
        let wrong = try await shows(
          "wiki",
          [
            #"data-field="sync-state">needs attention<"#,
            "The remote refuses the user name and password",
          ])
        #expect(wrong?.contains("offline") == false)
        _ = try await shows(
          "missing",
          [#"data-field="sync-state">needs attention<"#, "The remote database does not exist"])
        _ = try await shows(
          "_users",
          [
            #"data-field="sync-state">needs attention<"#,
            "The remote does not let this user read or write the database",
          ])
        let header = try await clientA.page(.get, "/_wiki/", as: "alice")
        #expect(header.text.contains("Sync: needs attention"))

        // Change credentials: the right password, and a new token for this side.
        let tokens = try a.auth.tokens.list(user: "alice").map(\.id)
        let page = try await clientA.page(.get, "/_wiki/_sync", as: "alice")
        let wikiID = try #require(
          Self.section(page, "http://127.0.0.1:\(port)/wiki").flatMap { text in
            text.firstMatch(of: #/data-sync="([0-9a-f]+)"/#).map { String($0.1) }
          })
        let changed = try await clientA.page(
          .post, "/_wiki/_sync", as: "alice",
          form: [
            "csrf": csrf, "action": "credentials", "sync": wikiID, "username": "alice",
            "password": "pw-alice",
          ])
        #expect(changed.status == 303)
        _ = try await shows("wiki", [#"data-field="sync-state">up to date<"#])
        let after = try a.auth.tokens.list(user: "alice").map(\.id)
        #expect(after.count == tokens.count)
        #expect(Set(after) != Set(tokens))
        let replicator = try a.data.open(ReplicatorDocuments.databaseName)
        #expect(
          !String(
            decoding: try replicator.get("wikisync-\(wikiID)-push").serialized(), as: UTF8.self
          ).contains("wrong"))

        // Retry now: the database made on B is found at once, not after the minute's backoff.
        let missingID = try #require(
          Self.section(page, "http://127.0.0.1:\(port)/missing").flatMap { text in
            text.firstMatch(of: #/data-sync="([0-9a-f]+)"/#).map { String($0.1) }
          })
        let missing = try b.data.open("missing", create: true)
        try await missing.setSecurityAsync(
          SecurityObject(members: .init(names: ["alice"])), actor: "admin")

        let retried = try await clientA.page(
          .post, "/_wiki/_sync", as: "alice",
          form: ["csrf": csrf, "action": "retry", "sync": missingID])
        #expect(retried.status == 303)
        #expect(try await eventually(20) { (try? missing.get("w1:Home")) != nil })
        _ = try await shows("missing", [#"data-field="sync-state">up to date<"#])
      }
    }
  }

  @Test(
    "the Sync page lists the readable wikis with conflicted pages, linked to their Conflicts page")
  func conflicts() async throws {
    let fixture = try UIFixture(replicator: true)
    // A second leaf of w1:Home, as a sync brings one.
    _ = try fixture.store.bulkDocs(
      [
        try JSONValue(
          parsing: Array(
            #"{"_id":"w1:Home","_rev":"1-ffff","type":"page","wiki_id":"w1","markdown":"theirs"}"#
              .utf8))
      ], newEdits: false, actor: "alice")
    try await fixture.withServer { client in
      let alice = try await client.page(.get, "/_wiki/_sync", as: "alice")
      #expect(alice.text.contains(#"<a href="/_wiki/w1/?action=conflicts">Secret w1</a>: 1 page"#))
      let carol = try await client.page(.get, "/_wiki/_sync", as: "carol")
      #expect(!carol.text.contains("Secret w1"))
      #expect(carol.text.contains("None in your wikis."))
    }
  }

  @Test("without a _replicator database the Sync page says the server runs no replications")
  func disabled() async throws {
    let fixture = try UIFixture()
    try await fixture.withServer { client in
      let page = try await client.page(.get, "/_wiki/_sync", as: "alice")
      #expect(page.status == 200)
      #expect(page.text.contains("runs no replications of its own"))
      #expect(!page.text.contains("sync-add"))
    }
  }
}
