import AsyncHTTPClient
import CouchAPI
import CouchTestSupport
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import JSON
import Log
import NIOCore
import NIOHTTP1
import Projections
import Query
import Replication
import RevTree
import Synchronization
import TestSupport
import Testing
import Wiki

#if canImport(Glibc)
  import Glibc
#endif

/// The server's writes go through the log's writer queue: concurrent HTTP writes share synced
/// commits, and none is answered before its commit is on disk.
@Suite struct GroupCommitTests {
  @Test("64 concurrent HTTP writes share commits, and every one is there afterwards")
  func concurrentWritesShareCommits() async throws {
    var logOptions = EventLog.Options()
    logOptions.durability = .groupCommit
    try await withServer(.live, logOptions: logOptions) { client, dir in
      let base = "http://127.0.0.1:\(try #require(client.port))"
      try await client.call(.put, "/db")
      let before = try await client.call(.get, "/_node/_local/_stats/wikilog")
      let commitsBefore = try #require(before["commits"]?["value"]?.int)
      let writes = 64
      let codes = try await withThrowingTaskGroup(of: Int.self) { group in
        for i in 0..<writes {
          group.addTask {
            // Each on a connection of its own (the test client has one).
            let body = #"{"n":\#(i),"text":"\#(String(repeating: "x", count: 250))"}"#
            return try await httpStatus(.PUT, base + "/db/doc-\(i)", body)
          }
        }
        var codes: [Int] = []
        for try await code in group { codes.append(code) }
        return codes
      }
      #expect(codes.allSatisfy { $0 == 201 }, "\(codes)")

      let after = try await client.call(.get, "/_node/_local/_stats/wikilog")
      let commits = try #require(after["commits"]?["value"]?.int) - commitsBefore
      let grouped = try #require(after["grouped_writes"]?["value"]?.int)
      #expect(grouped >= writes, "every write went through the writer queue")
      #expect(commits >= 1 && commits < writes, "\(commits) commits for \(writes) writes")
      let stats = try await client.call(.get, "/_node/nonode@nohost/_stats/couchdb/database_writes")
      #expect(stats["type"]?.stringValue == "counter")
      #expect(try await client.call(.get, "/_node/other@host/_stats").code == 404)
      #expect(try await client.call(.get, "/_node/_local/_stats/nothing").code == 404)

      let info = try await client.call(.get, "/db")
      #expect(info["doc_count"]?.int == writes)
      let store = try dir.data.open("db")
      for i in 0..<writes {
        #expect(try store.get("doc-\(i)")["n"]?.int == i)
      }
    }
  }

  /// Trials of ``killDuringHTTPWrites()``: 3 in `make test`; `WIKILOG_KILL_TRIALS=50` for the
  /// long run.
  static let killTrials =
    ProcessInfo.processInfo.environment["WIKILOG_KILL_TRIALS"].flatMap { Int($0) } ?? 3

  @Test("SIGKILL of wikilog serve during concurrent HTTP writes loses no acknowledged write")
  func killDuringHTTPWrites() async throws {
    let path = NSTemporaryDirectory() + "wikilog-httpkill-\(UUID().uuidString)"
    defer { try? FileManager.default.removeItem(atPath: path) }
    try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    var everyAck: [String] = []
    for trial in 0..<Self.killTrials {
      // Each trial restarts the server on what the last one left, and kills it at a random
      // moment while 16 writers on keep-alive connections write.
      let (server, base) = try ChildProcess.serve(path)
      defer { server.kill() }
      let send: @Sendable (HTTPMethod, String, String?) async throws -> Int = {
        method, path, body in
        try await httpStatus(method, base + path, body)
      }
      if trial == 0 { #expect(try await send(.PUT, "/db", nil) == 201) }
      let killAfter = Duration.milliseconds(Int.random(in: 300...1_500))
      // The kill waits for 32 acknowledged writes too (for at most 20 s): on a loaded machine
      // the first writes can take most of the random delay, and the trial must kill the
      // server while writes are going on, not before they start.
      let acknowledgedSoFar = AcknowledgedCount()
      let acks = await withTaskGroup(of: [String].self) { group in
        for writer in 0..<16 {
          group.addTask {
            var acknowledged: [String] = []
            // Until the server is gone: a write either gets its 201 or fails.
            while case let id = "t\(trial)-w\(writer)-\(acknowledged.count)",
              let code = try? await send(.PUT, "/db/\(id)", #"{"n":\#(acknowledged.count)}"#),
              code == 201
            {
              acknowledged.append(id)
              acknowledgedSoFar.count.add(1, ordering: .relaxed)
            }
            return acknowledged
          }
        }
        group.addTask {
          try? await Task.sleep(for: killAfter)
          let deadline = ContinuousClock.now + .seconds(20)
          while acknowledgedSoFar.count.load(ordering: .relaxed) < 32
            && ContinuousClock.now < deadline
          {
            try? await Task.sleep(for: .milliseconds(10))
          }
          server.kill()
          return []
        }
        var all: [String] = []
        for await ids in group { all += ids }
        return all
      }
      #expect(acks.count > 16, "trial \(trial)")
      everyAck += acks

      let data = DataDirectory.wiki(path: path)
      defer { data.closeAll() }
      let store = try data.open("db")
      for id in everyAck {
        #expect(throws: Never.self, "trial \(trial): acknowledged \(id) is lost") {
          try store.get(id)
        }
      }
      for name in store.projectionNames {
        #expect(try store.verify(name) == [], "trial \(trial): projection \(name)")
      }
      #expect(try store.log.verify().isValid, "trial \(trial)")
      data.closeAll()
    }
  }
}

/// Sends one request through AsyncHTTPClient's shared pool (a connection per concurrent
/// request) and returns its status.
func httpStatus(_ method: HTTPMethod, _ url: String, _ body: String?) async throws -> Int {
  var request = HTTPClientRequest(url: url)
  request.method = method
  if let body {
    request.headers.add(name: "Content-Type", value: "application/json")
    request.body = .bytes(ByteBuffer(string: body))
  }
  let response = try await HTTPClient.shared.execute(request, timeout: .seconds(60))
  _ = try await response.body.collect(upTo: 1 << 20)
  return Int(response.status.code)
}

/// Writes acknowledged so far in a kill trial, shared by its writers and its killer.
private final class AcknowledgedCount: Sendable {
  let count = Atomic<Int>(0)
}
