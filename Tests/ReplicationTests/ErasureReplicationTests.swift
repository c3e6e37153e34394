import CouchAPI
import CouchQuery
import CouchReplicator
import CouchTestSupport
import Foundation
import Hummingbird
import HummingbirdTesting
import JSON
import Projections
import Replication
import Testing

/// What replication carries after a purge or a redaction.
@Suite struct ErasureReplicationTests {
  @Test("after a redaction, a replication to a peer carries no erased body; a purge stays local")
  func erasedBodiesDoNotTravel() async throws {
    let a = TestDirectory("erasure-a")
    let b = TestDirectory("erasure-b")
    let storeA = try a.data.create("db")
    _ = try b.data.create("db")
    // A document with a conflict: its losing leaf and an old revision hold secrets.
    let first = try storeA.put(#"{"_id":"d","v":"OLD-SECRET"}"#, actor: "ann")
    let hash1 = String(try #require(first.rev).dropFirst(2))
    try storeA.put(#"{"_id":"d","_rev":"\#(first.rev!)","v":"current"}"#, actor: "ann")
    let branch = "2-00000000000000000000000000000001"
    _ = try storeA.bulkDocs(
      [
        try JSONValue(
          parsing: Array(
            #"{"_id":"d","_rev":"\#(branch)","v":"BRANCH-SECRET","_revisions":{"start":2,"ids":["00000000000000000000000000000001","\#(hash1)"]}}"#
              .utf8))
      ], newEdits: false, actor: "replicator")
    #expect(try storeA.get("d")["v"] == .string("current"))
    _ = try await a.data.erase(.redact, [("d", [first.rev!, branch])], in: "db", actor: "admin")
    // Another document, purged: the purge does not travel.
    let gone = try a.data.open("db").put(#"{"_id":"p","v":"PURGED-SECRET"}"#, actor: "ann")
    let app = buildApplication(
      dataDirectory: a.data, options: .standard,
      configuration: ApplicationConfiguration(address: .hostname("127.0.0.1", port: 0)),
      logger: quietLogger)
    try await app.test(.live) { client in
      let port = try #require(client.port)
      let source = CouchEndpoint(
        transport: HTTPClientTransport(baseURL: "http://127.0.0.1:\(port)"), database: "db",
        identity: "a/db")
      let target = CouchEndpoint(
        transport: LocalTransport(
          server: CouchServer(dataDirectory: b.data, options: .standard, logger: quietLogger)),
        database: "db", identity: "b/db")
      _ = try await Replicator(source: source, target: target).replicate()
      let storeB = try b.data.open("db")
      #expect(try storeB.get("d")["v"] == .string("current"))
      #expect(try storeB.get("p")["v"] == .string("PURGED-SECRET"))
      // The redacted branch did not arrive with a body.
      #expect((try? storeB.get("d", options: GetOptions(rev: branch))) == nil)
      _ = try await a.data.erase(.purge, [("p", [gone.rev!])], in: "db", actor: "admin")
      _ = try await Replicator(source: source, target: target).replicate()
      #expect(try storeB.get("p")["v"] == .string("PURGED-SECRET"))
    }
    let files = FileManager.default.enumerator(atPath: b.path)
    var holders: [String] = []
    while let name = files?.nextObject() as? String {
      if let data = FileManager.default.contents(atPath: b.path + "/" + name) {
        for secret in ["OLD-SECRET", "BRANCH-SECRET"] where data.range(of: Data(secret.utf8)) != nil
        {
          holders.append("\(secret) in \(name)")
        }
      }
    }
    #expect(holders == [])
  }
}

/// What a replication says while its peer cannot be reached.
@Suite struct NetworkFailureTextTests {
  @Test("a refused connection reads 'connection refused', with the address")
  func refused() async throws {
    let dir = TestDirectory("refused-peer")
    _ = try dir.data.create("db")
    let local = CouchEndpoint(
      transport: LocalTransport(
        server: CouchServer(dataDirectory: dir.data, options: .standard, logger: quietLogger)),
      database: "db", identity: "local/db")
    // Port 1 on loopback: nothing listens there.
    let nowhere = CouchEndpoint(
      transport: HTTPTransport(baseURL: "http://127.0.0.1:1"), database: "db",
      identity: "http://127.0.0.1:1/db")
    var options = ReplicationOptions()
    options.retry = RetryPolicy(maximumRetries: 1, initialDelay: .milliseconds(1))
    let seen = Seen()
    do {
      _ = try await Replicator(source: local, target: nowhere, options: options).replicate {
        status in seen.add(status.lastError)
      }
      Issue.record("a replication to a closed port succeeded")
    } catch let error as ReplicatorError {
      #expect(error.description.contains("connection refused"), "\(error)")
      #expect(error.description.contains("127.0.0.1:1"), "\(error)")
      #expect(!error.description.contains("errno"), "\(error)")
    }
    #expect(seen.texts.contains { $0.contains("connection refused") })
  }

  final class Seen: @unchecked Sendable {
    private let lock = NSLock()
    private var list: [String] = []
    var texts: [String] { lock.withLock { list } }
    func add(_ text: String?) { if let text { lock.withLock { list.append(text) } } }
  }
}
