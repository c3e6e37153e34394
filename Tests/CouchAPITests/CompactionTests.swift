import AsyncHTTPClient
import CouchAPI
import CouchTestSupport
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import JSON
import Log
import NIOHTTP1
import Projections
import Query
import Replication
import Synchronization
import TestSupport
import Testing

/// `POST /db/_compact` and ``DataDirectory/compact(_:)``: a compacted copy of the LMDB file is
/// swapped in, every event and projection record kept.
@Suite struct CompactionTests {
  static func allDocs(_ store: DocumentStore) throws -> [String] {
    var options = AllDocsOptions()
    options.includeDocs = true
    return try store.allDocs(options).rows.map { "\($0)" }
  }

  /// Every event of `store`'s log: position, type, stream and payload.
  static func events(_ store: DocumentStore) throws -> [String] {
    try store.log.read(from: 1).map {
      "\($0.position.rawValue) \($0.type) \($0.stream) \($0.actor) \($0.payload.count) \($0.payload.hashValue)"
    }
  }

  @Test("a churned database shrinks, keeps every event and document, and takes writes after")
  func compactKeepsEverything() throws {
    let dir = TestDirectory()
    let data = dir.data
    let store = try data.create("db")
    let pad = String(repeating: "x", count: 3_000)
    var rev: String? = nil
    for i in 0..<400 {
      let body = #"{"n":\#(i),"pad":"\#(pad)"}"#
      rev = try store.put(body, id: "churn", rev: rev, actor: "t").rev
      try store.put(#"{"i":\#(i)}"#, id: "doc-\(i)", actor: "t")
    }
    try store.putLocal("cp", Array(#"{"seq":1}"#.utf8), actor: "r")
    let eventsBefore = try Self.events(store)
    let docsBefore = try Self.allDocs(store)
    let position = try store.log.committedPosition

    let result = try data.compact("db")
    #expect(store.log.isClosed)
    #expect(result.bytesAfter < result.bytesBefore)
    #expect(!FileManager.default.fileExists(atPath: data.directory(of: "db") + "/compact.tmp"))

    let reopened = try data.open("db")
    #expect(reopened !== store)
    #expect(try reopened.log.committedPosition == position)
    #expect(try Self.events(reopened) == eventsBefore)
    #expect(try Self.allDocs(reopened) == docsBefore)
    #expect(try reopened.get("churn")["n"]?.numberValue?.int64Value == 399)
    #expect(try reopened.getLocal("cp")["seq"]?.numberValue?.int64Value == 1)
    for name in reopened.projectionNames {
      #expect(try reopened.verify(name).isEmpty, "\(name)")
    }
    #expect(try reopened.log.verify().isValid)
    let next = try reopened.put(#"{"after":true}"#, id: "after", actor: "t")
    #expect(next.ok)
    #expect(try reopened.log.committedPosition.rawValue == position.rawValue + 1)

    // A fresh process's view: close everything and open again.
    data.closeAll()
    let fresh = DataDirectory(path: dir.path)
    let again = try fresh.open("db")
    #expect(try again.get("after")["after"] == .bool(true))
    #expect(try Self.events(again).count == eventsBefore.count + 1)
    fresh.closeAll()
  }

  @Test("writes racing a compaction: every acknowledged one is there afterwards")
  func writesDuringCompaction() async throws {
    let dir = TestDirectory()
    let data = dir.data
    let store = try data.create("db")
    for i in 0..<300 {
      try store.put(
        #"{"i":\#(i),"pad":"\#(String(repeating: "y", count: 2_000))"}"#, id: "seed-\(i)",
        actor: "t")
    }
    final class Counter: Sendable { let value = Atomic<Int>(0) }
    let progress = Counter()
    let acked = await withTaskGroup(of: [String].self) { group in
      for writer in 0..<4 {
        group.addTask {
          var ids: [String] = []
          let deadline = Date().addingTimeInterval(1.5)
          var k = 0
          while Date() < deadline {
            let id = "w\(writer)-\(k)"
            k += 1
            // The store of the moment: a compaction swaps it.
            guard let s = try? data.open("db") else { continue }
            if (try? s.put(#"{"k":\#(k)}"#, id: id, actor: "t"))?.ok == true {
              ids.append(id)
              progress.value.add(1, ordering: .relaxed)
            }
          }
          return ids
        }
      }
      group.addTask {
        // Compacted while the writers are at work: once they have written some.
        _ = try? await eventually(60) { progress.value.load(ordering: .relaxed) >= 20 }
        _ = try? data.compact("db")
        return []
      }
      var all: [String] = []
      for await ids in group { all += ids }
      return all
    }
    #expect(acked.count > 10)
    let after = try data.open("db")
    for id in acked { #expect((try? after.get(id)) != nil, "\(id) was acknowledged") }
    #expect(try after.log.verify().isValid)
  }

  @Test("POST /db/_compact: 415 without JSON, 404 for a missing database, 202 and done")
  func compactOverHTTP() async throws {
    try await withServer { client, dir in
      try await client.call(.put, "/db")
      for i in 0..<50 { try await client.call(.put, "/db/d\(i)", #"{"i":\#(i)}"#) }
      #expect(try await client.call(.post, "/db/_compact").code == 415)
      #expect(try await client.call(.post, "/nodb/_compact", "{}").code == 404)
      #expect(try await client.call(.get, "/db/_compact").code == 405)
      let started = try await client.call(.post, "/db/_compact", "{}")
      #expect(started.code == 202)
      #expect(started["ok"] == .bool(true))
      var running = true
      for _ in 0..<500 where running {
        let info = try await client.call(.get, "/db")
        #expect(info.code == 200, "\(info.text)")
        running = info["compact_running"] == .bool(true)
        if running { try await Task.sleep(for: .milliseconds(10)) }
      }
      #expect(!running)
      let info = try await client.call(.get, "/db")
      #expect(info["doc_count"]?.int == 50)
      #expect(try await client.call(.get, "/db/d7")["i"]?.int == 7)
      #expect(try await client.call(.put, "/db/after", "{}").code == 201)
      let changes = try await client.call(.get, "/db/_changes")
      #expect(changes["results"]?.arrayValue?.count == 51)
      _ = dir
    }
  }

  @Test(
    "writes sent while POST /db/_compact runs all succeed: met with the log closed, they go again")
  func writesRightBehindCompact() async throws {
    // Over HTTP, as clients send them (with Content-Length).
    try await withServer(.live) { client, _ in
      try await client.call(.put, "/db")
      for i in 0..<200 { try await client.call(.put, "/db/seed\(i)", #"{"i":\#(i)}"#) }
      var written = 0
      for round in 0..<20 {
        #expect(try await client.call(.post, "/db/_compact", "{}").code == 202)
        // Right behind it, as py-couchdb's test does: a PUT, a POST, a _bulk_docs.
        let put = try await client.call(.put, "/db/r\(round)", #"{"round":\#(round)}"#)
        #expect(put.code == 201, "\(put.text)")
        let post = try await client.call(.post, "/db", #"{"_id":"p\#(round)"}"#)
        #expect(post.code == 201, "\(post.text)")
        let bulk = try await client.call(
          .post, "/db/_bulk_docs", #"{"docs":[{"_id":"b\#(round)"}]}"#)
        #expect(bulk.code == 201, "\(bulk.text)")
        written += 3
        while try await client.call(.get, "/db")["compact_running"] == .bool(true) {
          try await Task.sleep(for: .milliseconds(5))
        }
      }
      #expect(try await client.call(.get, "/db")["doc_count"]?.int == 200 + written)
    }
  }

  @Test("a database another process has open is not compacted: conflict, nothing changed")
  func otherProcessHasItOpen() async throws {
    let dir = TestDirectory()
    let store = try dir.data.create("db")
    try store.put(#"{"a":1}"#, id: "a", actor: "t")
    dir.data.closeAll()
    // `wikilog serve` opens the database on the first request for it.
    let (server, base) = try ChildProcess.serve(dir.path)
    defer { server.kill() }
    let status = try await httpStatus(.GET, base + "/db/a", nil)
    #expect(status == 200)
    let error = #expect(throws: StoreError.self) { try dir.data.compact("db") }
    #expect(error?.error == "conflict")
    #expect(try dir.data.open("db").get("a")["a"]?.numberValue?.int64Value == 1)
    server.kill()
    dir.data.closeAll()
    #expect(try dir.data.compact("db").bytesAfter > 0)
    #expect(try dir.data.open("db").get("a")["a"]?.numberValue?.int64Value == 1)
  }
}
