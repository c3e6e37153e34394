import AsyncHTTPClient
import CouchAPI
import CouchQuery
import CouchTestSupport
import Foundation
import Hummingbird
import HummingbirdTesting
import JSON
import Log
import Projections
import Query
import Replication
import RevTree
import Synchronization
import TestSupport
import Testing
import Wiki

/// The replicator against failures: a proxy that drops connections, answers 500, truncates
/// and delays; an outage under a continuous replication; a peer without `_bulk_get`; a target
/// that refuses some documents; odd ids and large documents.
@Suite struct ReplicationRobustnessTests {
  /// `count` documents: every 5th with three revisions, every 7th with a conflicting branch,
  /// every 11th deleted.
  static func seed(_ store: DocumentStore, count: Int, prefix: String = "doc") throws {
    var revs: [String: String] = [:]
    let docs = (0..<count).map { i in
      json(#"{"_id":"\#(prefix)-\#(i)","type":"note","markdown":"Page \#(i)"}"#)
    }
    for result in try store.bulkDocs(docs, actor: "alice") { revs[result.id] = result.rev }
    for round in 2...3 {
      let edits = stride(from: 0, to: count, by: 5).map { i in
        json(
          #"{"_id":"\#(prefix)-\#(i)","_rev":"\#(revs["\(prefix)-\(i)"]!)","markdown":"v\#(round)"}"#
        )
      }
      for result in try store.bulkDocs(edits, actor: "bob") { revs[result.id] = result.rev }
    }
    var branches: [JSONValue] = []
    for i in stride(from: 3, to: count, by: 7) {
      let id = "\(prefix)-\(i)"
      branches.append(
        try ReplicationEndToEndTests.sibling(
          of: try RevID(revs[id]!), in: store, id: id, hash: "c0ffee\(i)"))
    }
    #expect(try store.bulkDocs(branches, newEdits: false, actor: "dave", origin: "test").isEmpty)
    let deletions = stride(from: 1, to: count, by: 11).map { i in
      json(#"{"_id":"\#(prefix)-\#(i)","_rev":"\#(revs["\(prefix)-\(i)"]!)","_deleted":true}"#)
    }
    #expect(try store.bulkDocs(deletions, actor: "alice").allSatisfy(\.ok))
  }

  static func live(_ dir: TestDirectory, options: CouchServerOptions = CouchServerOptions.standard)
    -> some ApplicationProtocol
  {
    buildApplication(
      dataDirectory: dir.data, options: options,
      configuration: ApplicationConfiguration(address: .hostname("127.0.0.1", port: 0)),
      logger: quietLogger)
  }

  static func proxyApp(_ proxy: FaultProxy) -> some ApplicationProtocol {
    Application(
      responder: proxy,
      configuration: ApplicationConfiguration(address: .hostname("127.0.0.1", port: 0)),
      logger: quietLogger)
  }

  static func endpoint(_ port: Int?, _ name: String, credentials: HTTPTransport.Credentials? = nil)
    throws -> CouchEndpoint
  {
    CouchEndpoint(
      transport: HTTPTransport(
        baseURL: "http://127.0.0.1:\(try #require(port))", credentials: credentials,
        requestTimeout: .seconds(30)),
      database: "wiki", identity: name)
  }

  static var quickRetries: RetryPolicy {
    RetryPolicy(maximumRetries: 30, initialDelay: .milliseconds(5), maximumDelay: .milliseconds(50))
  }

  @Test(
    "through a proxy that answers 500, drops connections, truncates and delays, replication converges"
  )
  func faultyProxy() async throws {
    let a = TestDirectory("robust-a")
    let b = TestDirectory("robust-b")
    let storeA = try a.data.create("wiki")
    let storeB = try b.data.create("wiki")
    try Self.seed(storeA, count: 1_000)
    try await Self.live(a).test(.live) { clientA in
      try await Self.live(b).test(.live) { clientB in
        let faults: @Sendable (Int, Request) -> FaultProxy.Fault? = { n, _ in
          switch n % 17 {
          case 3: .status(500)
          case 7: .dropAfterForwarding
          case 11: .truncate
          case 14: .slow
          default: nil
          }
        }
        let toA = FaultProxy(
          upstream: "http://127.0.0.1:\(try #require(clientA.port))", fault: faults)
        let toB = FaultProxy(
          upstream: "http://127.0.0.1:\(try #require(clientB.port))", fault: faults)
        try await Self.proxyApp(toA).test(.live) { proxyA in
          try await Self.proxyApp(toB).test(.live) { proxyB in
            var options = ReplicationOptions()
            options.batchSize = 50
            options.retry = Self.quickRetries
            let replicator = Replicator(
              source: try Self.endpoint(proxyA.port, "a/wiki"),
              target: try Self.endpoint(proxyB.port, "b/wiki"), options: options)
            let report = try await replicator.replicate()
            #expect(report.docWriteFailures == 0)
            #expect(report.retries > 5)
            #expect(toA.injectedCount + toB.injectedCount > 10)
            try ReplicationEndToEndTests.expectIdentical(storeA, storeB)
            // Changes on B flow back through the same faults.
            try Self.seed(storeB, count: 200, prefix: "b")
            let back = try await Replicator(
              source: try Self.endpoint(proxyB.port, "b/wiki"),
              target: try Self.endpoint(proxyA.port, "a/wiki"), options: options
            ).replicate()
            #expect(back.docWriteFailures == 0)
            try ReplicationEndToEndTests.expectIdentical(storeA, storeB)
          }
        }
      }
    }
  }

  @Test("a one-shot replication gives up with a clear error after its retries")
  func oneShotGivesUp() async throws {
    let a = TestDirectory("giveup-a")
    _ = try a.data.create("wiki")
    try await Self.live(a).test(.live) { clientA in
      let proxy = FaultProxy(upstream: "http://127.0.0.1:\(try #require(clientA.port))") { _, _ in
        .status(503)
      }
      try await Self.proxyApp(proxy).test(.live) { proxyClient in
        var options = ReplicationOptions()
        options.retry = RetryPolicy(
          maximumRetries: 3, initialDelay: .milliseconds(1), maximumDelay: .milliseconds(4))
        let replicator = Replicator(
          source: try Self.endpoint(proxyClient.port, "p/wiki"),
          target: try Self.endpoint(clientA.port, "a/wiki"), options: options)
        await #expect {
          try await replicator.replicate()
        } throws: { error in
          guard case ReplicatorError.gaveUp(let what, let attempts, let last) = error else {
            return false
          }
          return what.hasPrefix("GET source database ") && what.contains("p/wiki") && attempts == 4
            && last.contains("503")
        }
        #expect(proxy.injectedCount == 4)
      }
    }
  }

  @Test("continuous: edits made during an outage pile up and flow when the peer returns")
  func continuousOutage() async throws {
    let a = TestDirectory("outage-a")
    let b = TestDirectory("outage-b")
    let storeA = try a.data.create("wiki")
    let storeB = try b.data.create("wiki")
    try Self.seed(storeA, count: 100)
    try await Self.live(a).test(.live) { clientA in
      try await Self.live(b).test(.live) { clientB in
        let proxy = FaultProxy(upstream: "http://127.0.0.1:\(try #require(clientB.port))") {
          _, _ in nil
        }
        try await Self.proxyApp(proxy).test(.live) { proxyB in
          var options = ReplicationOptions()
          options.continuous = true
          options.retry = Self.quickRetries
          options.feedTimeout = .seconds(2)
          options.heartbeat = .milliseconds(500)
          let states = Mutex([ReplicationStatus.State]())
          let lastError = Mutex<String?>(nil)
          let replicator = Replicator(
            source: try Self.endpoint(clientA.port, "a/wiki"),
            target: try Self.endpoint(proxyB.port, "b/wiki"), options: options)
          let task = Task {
            try await replicator.replicate { status in
              states.withLock { list in
                if list.last != status.state { list.append(status.state) }
              }
              if status.state == .offline { lastError.withLock { $0 = status.lastError } }
            }
          }
          #expect(try await eventually { try storeB.info.docCount == storeA.info.docCount })
          #expect(try await eventually { states.withLock { $0.last == .idle } })
          // A write on the source reaches the idle target through the longpoll feed.
          try storeA.put(#"{"text":"live"}"#, id: "live-1", actor: "alice")
          #expect(try await eventually { try storeB.record("live-1") != nil })

          // The target goes away; edits pile up on the source.
          proxy.down.withLock { $0 = true }
          try Self.seed(storeA, count: 150, prefix: "offline")
          #expect(try await eventually { states.withLock { $0.last == .offline } })
          #expect(lastError.withLock { $0 } != nil)
          #expect(try storeB.record("offline-0") == nil)
          // It returns: everything flows.
          proxy.down.withLock { $0 = false }
          #expect(
            try await eventually {
              try storeB.info.docCount == storeA.info.docCount
                && storeB.record("offline-149") != nil
            })
          task.cancel()
          let report = try await task.value
          #expect(report.cancelled)
          #expect(report.docWriteFailures == 0)
          try ReplicationEndToEndTests.expectIdentical(storeA, storeB)
        }
      }
    }
  }

  @Test("ids with / + % spaces and non-ASCII, a 3 MB document, and a source without _bulk_get")
  func oddIDsAndFallback() async throws {
    let a = TestDirectory("odd-a")
    let b = TestDirectory("odd-b")
    let storeA = try a.data.create("wiki")
    let storeB = try b.data.create("wiki")
    let ids = ["a/b", "c+d", "e%20f", "g h", "ünïcødé/ß", "日本語", "q?x=1&y#z"]
    for id in ids {
      var object = JSONObject()
      object["_id"] = .string(id)
      object["text"] = .string("body of \(id)")
      let first = try storeA.put(JSONValue.object(object).serialized(), actor: "alice")
      object["_rev"] = .string(try #require(first.rev))
      object["text"] = .string("second body of \(id)")
      try storeA.put(JSONValue.object(object).serialized(), actor: "alice")
    }
    let big = String(repeating: "0123456789abcdef", count: 3 << 16)  // 3 MB
    try storeA.put(#"{"text":"\#(big)"}"#, id: "big", actor: "alice")
    try await Self.live(a).test(.live) { clientA in
      try await Self.live(b).test(.live) { clientB in
        // The source's proxy answers `_bulk_get` as CouchDB 1.x answers an unknown `_` path.
        let proxy = FaultProxy(upstream: "http://127.0.0.1:\(try #require(clientA.port))") {
          _, request in request.uri.path.hasSuffix("/_bulk_get") ? .status(400) : nil
        }
        try await Self.proxyApp(proxy).test(.live) { proxyA in
          let report = try await Replicator(
            source: try Self.endpoint(proxyA.port, "a/wiki"),
            target: try Self.endpoint(clientB.port, "b/wiki")
          ).replicate()
          #expect(report.docWriteFailures == 0)
          #expect(report.docsWritten == ids.count + 1)
          #expect(proxy.injectedCount == 1)  // asked once, then per document
          try ReplicationEndToEndTests.expectIdentical(storeA, storeB)
          for id in ids {
            #expect(try storeB.get(id)["text"] == .string("second body of \(id)"))
          }
          #expect(try storeB.get("big")["text"]?.stringValue?.utf8.count == big.utf8.count)
        }
      }
    }
  }

  @Test("documents the target refuses are write failures; the rest is written and checkpointed")
  func refusedDocuments() async throws {
    let fixture = try AccessFixture()
    let a = TestDirectory("refused-a")
    let storeA = try a.data.create("wiki")
    // Pages of wikis the source does not have: written as replicated revisions, whose
    // requirements are not checked.
    let pages = (0..<20).map { i in
      let wiki = i % 4 == 0 ? "w2" : "w1"  // bob may edit w1, not carol's w2
      return json(
        #"{"_id":"\#(wiki):P\#(i)","_rev":"1-abc\#(i)","type":"page","wiki_id":"\#(wiki)","markdown":"page \#(i)"}"#
      )
    }
    #expect(try storeA.bulkDocs(pages, newEdits: false, actor: "alice", origin: "test").isEmpty)
    let target = buildApplication(
      dataDirectory: fixture.dir.data, options: fixture.options,
      configuration: ApplicationConfiguration(address: .hostname("127.0.0.1", port: 0)),
      logger: quietLogger)
    try await Self.live(a).test(.live) { clientA in
      try await target.test(.live) { clientB in
        let replicator = Replicator(
          source: try Self.endpoint(clientA.port, "a/wiki"),
          target: try Self.endpoint(
            clientB.port, "b/wiki", credentials: .basic(user: "bob", password: "pw-bob")))
        let report = try await replicator.replicate()
        #expect(report.docWriteFailures == 5)
        #expect(report.docsWritten == 15)
        #expect(report.failures.allSatisfy { $0.hasPrefix("w2:") && $0.contains("forbidden") })
        #expect(try fixture.store.record("w1:P1") != nil)
        #expect(try fixture.store.record("w2:P0") == nil)
        // The checkpoint was written: the next run reads nothing.
        let again = try await replicator.replicate()
        #expect(again.startSeq == report.endSeq && again.docsRead == 0)
      }
    }
  }
}
