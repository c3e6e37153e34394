import AsyncHTTPClient
import CouchAPI
import CouchQuery
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

@Suite struct ChangesRouteTests {
  /// `db` with docs a, b (updated), c (deleted) and a conflict on d.
  static func seed(_ client: any TestClientProtocol) async throws {
    try await client.call(.put, "/db")
    try await client.call(.put, "/db/a", #"{"type":"note","n":1}"#)
    let b = try await client.call(.put, "/db/b", #"{"type":"memo","n":2}"#)
    try await client.call(.put, "/db/b?rev=\(b["rev"]!.stringValue!)", #"{"type":"memo","n":3}"#)
    let c = try await client.call(.put, "/db/c", #"{"type":"note"}"#)
    try await client.call(.delete, "/db/c?rev=\(c["rev"]!.stringValue!)")
    try await client.call(
      .post, "/db/_bulk_docs",
      #"{"new_edits":false,"docs":[{"_id":"d","_rev":"1-aa","n":4},{"_id":"d","_rev":"1-bb","n":5}]}"#
    )
  }

  func ids(_ r: JSONResponse) -> [String] {
    r["results"]?.arrayValue?.compactMap { $0["id"]?.stringValue } ?? []
  }

  @Test("a since past the end is the end: last_seq never passes the database's update_seq")
  func sinceBeyondTheEnd() async throws {
    try await withServer { client, _ in
      try await client.call(.put, "/db")
      try await client.call(.put, "/db/a", #"{"n":1}"#)
      let seq = try await client.call(.get, "/db")["update_seq"]?.seq
      for feed in ["normal", "longpoll"] {
        let r = try await client.call(
          .get, "/db/_changes?since=99999999999&feed=\(feed)&timeout=50")
        #expect(r["last_seq"]?.seq == seq, "\(feed): \(r.text)")
        #expect(r["results"]?.arrayValue?.isEmpty == true)
      }
      // A later change is still delivered to a consumer that checkpointed that last_seq.
      try await client.call(.put, "/db/b", #"{"n":2}"#)
      let next = try await client.call(.get, "/db/_changes?since=\(seq ?? 0)")
      #expect(next["results"]?[0]?["id"]?.stringValue == "b")
    }
  }

  @Test("normal feed: one row per document, since, limit, descending, style, docs")
  func normalFeed() async throws {
    try await withServer { client, _ in
      try await Self.seed(client)
      let all = try await client.call(.get, "/db/_changes")
      #expect(all.code == 200)
      #expect(ids(all) == ["a", "b", "c", "d"])
      #expect(all["last_seq"]?.seq == 7)
      #expect(all["pending"]?.int == 0)
      #expect(all["results"]?[2]?["deleted"] == .bool(true))
      #expect(all["results"]?[3]?["changes"]?.arrayValue?.count == 1)
      let allDocs = try await client.call(.get, "/db/_changes?style=all_docs")
      #expect(allDocs["results"]?[3]?["changes"]?.arrayValue?.count == 2)
      let since = try await client.call(.get, "/db/_changes?since=3")
      #expect(ids(since) == ["c", "d"])
      #expect(ids(try await client.call(.get, "/db/_changes?since=%223%22")) == ["c", "d"])
      // Its own sequence strings; one of another database (a checkpoint taken before this one
      // was made again) starts over, as CouchDB does with a shard it does not know.
      let own = try #require(since["last_seq"]?.stringValue)
      #expect(own.hasPrefix("\(since["last_seq"]?.seq ?? -1)-") && own.count >= 14)
      let tag = own.dropFirst(2)
      #expect(ids(try await client.call(.get, "/db/_changes?since=3-\(tag)")) == ["c", "d"])
      #expect(ids(try await client.call(.get, "/db/_changes?since=3-g1AAAA")).count == 4)
      let limited = try await client.call(.get, "/db/_changes?limit=2")
      #expect(ids(limited) == ["a", "b"])
      #expect(limited["pending"]?.int == 2)
      #expect(
        ids(try await client.call(.get, "/db/_changes?descending=true&limit=2")) == ["d", "c"])
      let now = try await client.call(.get, "/db/_changes?since=now")
      #expect(ids(now) == [])
      #expect(now["last_seq"]?.seq == 7)
      let docs = try await client.call(.get, "/db/_changes?include_docs=true&conflicts=true")
      #expect(docs["results"]?[0]?["doc"]?["n"]?.int == 1)
      #expect(docs["results"]?[3]?["doc"]?["_conflicts"]?.strings == ["1-aa"])
      #expect(try await client.call(.get, "/db/_changes?feed=sideways").code == 400)
      #expect(try await client.call(.get, "/db/_changes?style=some").code == 400)
      #expect(try await client.call(.get, "/db/_changes?since=yesterday").code == 400)
      // A JavaScript filter of a design document that does not exist: CouchDB's 404.
      #expect(try await client.call(.get, "/db/_changes?filter=app/f").code == 404)
      #expect(try await client.call(.delete, "/db/_changes").code == 405)
    }
  }

  @Test("filters: _doc_ids, _selector, wiki; and the history mode")
  func filtersAndHistory() async throws {
    try await withServer { client, _ in
      try await Self.seed(client)
      for wiki in ["w1", "w10"] {
        try await client.call(
          .put, "/db/\(wiki)", #"{"type":"wiki","title":"T","owner_id":"ann","members":[]}"#)
        try await client.call(
          .put, "/db/\(wiki):Home", #"{"type":"page","wiki_id":"\#(wiki)","markdown":"Hi"}"#)
      }
      #expect(
        ids(
          try await client.call(.get, "/db/_changes?filter=_doc_ids&doc_ids=%5B%22b%22,%22d%22%5D"))
          == ["b", "d"])
      #expect(
        ids(try await client.call(.post, "/db/_changes?filter=_doc_ids", #"{"doc_ids":["a"]}"#))
          == ["a"])
      #expect(try await client.call(.get, "/db/_changes?filter=_doc_ids").code == 400)
      // CouchDB's built-in `_design`: design documents only.
      try await client.call(.put, "/db/_design/d1", "{}")
      #expect(ids(try await client.call(.get, "/db/_changes?filter=_design")) == ["_design/d1"])
      #expect(
        ids(
          try await client.call(
            .post, "/db/_changes?filter=_selector",
            #"{"selector":{"type":{"$in":["memo","wiki"]}}}"#))
          == ["b", "w1", "w10"])
      #expect(try await client.call(.get, "/db/_changes?filter=_selector").code == 400)
      #expect(
        try await client.call(.post, "/db/_changes?filter=_selector", #"{"selector":{"$or":{}}}"#)
          .code == 400)
      // An empty `$or` matches everything, as `mango_selector:match` has it.
      #expect(
        ids(
          try await client.call(
            .post, "/db/_changes?filter=_selector", #"{"selector":{"$or":[]}}"#))
          == ids(try await client.call(.get, "/db/_changes")))
      #expect(
        ids(try await client.call(.get, "/db/_changes?filter=wiki&wiki=w1")) == ["w1", "w1:Home"])
      #expect(try await client.call(.get, "/db/_changes?filter=wiki").code == 400)
      #expect(try await client.call(.post, "/db/_changes", "{").code == 400)

      let history = try await client.call(
        .get, "/db/_changes?history=true&filter=_doc_ids&doc_ids=%5B%22b%22%5D")
      let rows = try #require(history["results"]?.arrayValue)
      #expect(rows.count == 2)
      #expect(
        rows.allSatisfy { $0["id"]?.stringValue == "b" && $0["actor"]?.stringValue == "anonymous" })
      #expect(rows[0]["changes"]?[0]?["rev"]?.stringValue?.hasPrefix("1-") == true)
      let replicated = try await client.call(
        .get, "/db/_changes?history=true&filter=_doc_ids&doc_ids=%5B%22d%22%5D")
      #expect(replicated["results"]?.arrayValue?.count == 2)
      #expect(replicated["results"]?[0]?["origin"]?.stringValue == "http")
    }
  }

  @Test("longpoll waits for a change, then answers with it")
  func longpollWaits() async throws {
    try await withServer { client, dir in
      try await Self.seed(client)
      let answered = Mutex(false)
      async let response = {
        // From the seeded seq (7), not `now`: on a loaded machine the request may reach the
        // server only after the write below, and `now` would then wait past it.
        let r = try await client.call(.get, "/db/_changes?feed=longpoll&since=7&timeout=300000")
        answered.withLock { $0 = true }
        return r
      }()
      // Waiting on the server: nothing to answer yet.
      #expect(try await eventually(60) { try await waitingFeeds(client) == 1 })
      #expect(answered.withLock { $0 } == false)
      try dir.data.open("db").put(#"{"_id":"late","x":1}"#, actor: "test")
      let r = try await response
      #expect(ids(r) == ["late"])
      #expect(r["last_seq"]?.seq == 8)
    }
  }

  @Test("longpoll with results answers at once; without, it ends at its timeout")
  func longpollTimeout() async throws {
    try await withServer { client, _ in
      try await Self.seed(client)
      #expect(ids(try await client.call(.get, "/db/_changes?feed=longpoll&since=5")) == ["d"])
      let start = ContinuousClock.now
      let r = try await client.call(.get, "/db/_changes?feed=longpoll&since=now&timeout=200")
      #expect(ContinuousClock.now - start >= .milliseconds(190))
      #expect(ids(r) == [])
      #expect(r["last_seq"]?.seq == 7)
      let beat = try await client.call(
        .get, "/db/_changes?feed=longpoll&since=now&timeout=250&heartbeat=50")
      // CouchDB starts the object before it waits, then a newline per heartbeat.
      #expect(beat.text.hasPrefix("{\"results\":[\n\n\n"))
      #expect(beat["last_seq"]?.seq == 7)
    }
  }

  @Test("continuous feed: backlog, then the end line at its timeout, or after limit rows")
  func continuousTimeoutAndLimit() async throws {
    try await withServer { client, _ in
      try await Self.seed(client)
      let r = try await client.call(.get, "/db/_changes?feed=continuous&since=2&timeout=100")
      let lines = r.text.split(separator: "\n").map { json(String($0)) }
      #expect(lines.map { $0["id"]?.stringValue } == ["b", "c", "d", nil])
      #expect(lines.last?["last_seq"]?.seq == 7 && lines.last?["pending"] == .int(0))
      let limited = try await client.call(.get, "/db/_changes?feed=continuous&limit=2")
      #expect(limited.text.split(separator: "\n").count == 3)
      let events = try await client.call(.get, "/db/_changes?feed=eventsource&since=5&timeout=100")
      #expect(events.text.hasPrefix("data: {\"seq\":\"7-"))
      #expect(events.text.contains("\"id\":\"d\""))
      #expect(events.text.contains("\nid: 7-"))
      #expect(events.headers[.contentType] == "text/event-stream")
    }
  }

  @Test("continuous and eventsource feeds stream each change as it commits, with heartbeats")
  func continuousStreams() async throws {
    try await withServer(.live) { client, dir in
      let store = try dir.data.create("db")
      try store.put(#"{"_id":"before"}"#, actor: "test")
      let port = try #require(client.port)
      for feed in ["continuous", "eventsource"] {
        // One backlog row, then three live ones: limit=4 ends the feed after them.
        let since = try store.info.updateSeq.rawValue - 1
        let backlog = feed == "continuous" ? "before" : "continuous-2"
        var request = HTTPClientRequest(
          url:
            "http://127.0.0.1:\(port)/db/_changes?feed=\(feed)&since=\(since)&heartbeat=50&limit=4")
        request.method = .GET
        let response = try await HTTPClient.shared.execute(request, timeout: .seconds(30))
        #expect(response.status.code == 200)
        var text = ""
        var iterator = response.body.makeAsyncIterator()
        func read(until predicate: (String) -> Bool) async throws -> Bool {
          while !predicate(text) {
            guard let chunk = try await iterator.next() else { return false }
            text += String(buffer: chunk)
          }
          return true
        }
        #expect(try await read { $0.contains("\"\(backlog)\"") })
        // Nothing changes for a while: heartbeats arrive.
        let mark = text.count
        let heartbeat = feed == "continuous" ? "\n" : "event: heartbeat\n"
        #expect(try await read { String($0.dropFirst(mark)).contains(heartbeat) })
        for i in 0..<3 {
          try store.put(#"{"_id":"\#(feed)-\#(i)"}"#, actor: "test")
          #expect(try await read { $0.contains("\"\(feed)-\(i)\"") })
        }
        _ = try await read { _ in false }  // to the end of the response
        if feed == "continuous" {
          let rows = text.split(separator: "\n").map { json(String($0)) }
          #expect(
            rows.compactMap { $0["id"]?.stringValue } == [
              "before", "continuous-0", "continuous-1", "continuous-2",
            ])
          #expect(rows.last?["last_seq"]?.seq == 4)
        } else {
          #expect(text.components(separatedBy: "data: {\"seq\":").count == 5)
        }
      }
    }
  }

  @Test(
    "a filtered longpoll ignores other documents and answers when its own changes",
    arguments: [
      ("filter=_doc_ids&doc_ids=%5B%22x%22%5D", "x"),
      ("filter=_design", "_design/z"),
    ])
  func filteredLongpoll(filter: String, own: String) async throws {
    try await withServer { client, dir in
      try await client.call(.put, "/db")
      let store = try dir.data.open("db")
      let answered = Mutex(false)
      async let response = {
        let r = try await client.call(
          .get, "/db/_changes?feed=longpoll&since=now&\(filter)&timeout=300000")
        answered.withLock { $0 = true }
        return r
      }()
      #expect(try await eventually(60) { try await waitingFeeds(client) == 1 })
      // A second feed, for the last of the documents the first must not answer for: once it
      // has answered, the server has seen all three.
      async let witness = client.call(
        .get,
        "/db/_changes?feed=longpoll&since=now&filter=_doc_ids&doc_ids=%5B%22y2%22%5D&timeout=300000"
      )
      #expect(try await eventually(60) { try await waitingFeeds(client) == 2 })
      for i in 0..<3 { try store.put(#"{"_id":"y\#(i)"}"#, actor: "test") }
      #expect(ids(try await witness) == ["y2"])
      #expect(try await waitingFeeds(client) == 1)
      #expect(answered.withLock { $0 } == false)
      try store.put(#"{"_id":"\#(own)"}"#, actor: "test")
      let r = try await response
      #expect(ids(r) == [own])
      #expect(r["last_seq"]?.seq == 4)
    }
  }

  @Test("deleting a database ends its open feeds")
  func deletionEndsFeeds() async throws {
    try await withServer { client, _ in
      try await Self.seed(client)
      async let feed = client.call(.get, "/db/_changes?feed=continuous&since=now&heartbeat=50")
      async let poll = client.call(.get, "/db/_changes?feed=longpoll&since=now")
      #expect(try await eventually(60) { try await waitingFeeds(client) == 2 })
      #expect(try await client.call(.delete, "/db").code == 200)
      let lines = try await feed.text.split(separator: "\n")
      #expect(lines.last.map { json(String($0))["last_seq"]?.seq } == 7)
      #expect(try await poll["results"] == .array([]))
    }
  }

  @Test("the server's graceful shutdown ends open feeds", .timeLimit(.minutes(1)))
  func shutdownEndsFeeds() async throws {
    let rest = try await withServer(.live) { client, dir in
      try dir.data.create("db").put(#"{"_id":"a"}"#, actor: "test")
      let port = try #require(client.port)
      var request = HTTPClientRequest(
        url: "http://127.0.0.1:\(port)/db/_changes?feed=continuous&since=0&heartbeat=50")
      request.method = .GET
      let response = try await HTTPClient.shared.execute(request, timeout: .seconds(30))
      var iterator = response.body.makeAsyncIterator()
      var text = ""
      while !text.contains("\"a\""), let chunk = try await iterator.next() {
        text += String(buffer: chunk)
      }
      // Leave the feed open: the server stops when this closure returns.
      return Task {
        var text = text
        while let chunk = try await iterator.next() { text += String(buffer: chunk) }
        return text
      }
    }
    let text = try await rest.value
    #expect(text.hasSuffix(#"","pending":0}"# + "\n") && text.contains(#"{"last_seq":"1-"#))
  }

  @Test("CORS: preflight answered; the Origin echoed on every response, errors included")
  func cors() async throws {
    try await withServer { client, _ in
      let preflight = try await client.call(
        .options, "/db/_bulk_docs",
        headers: [
          .origin: "http://app.example", .accessControlRequestMethod: "POST",
          .accessControlRequestHeaders: "content-type, x-custom",
        ])
      #expect(preflight.code == 204)
      #expect(preflight.headers[.accessControlAllowOrigin] == "http://app.example")
      #expect(preflight.headers[.accessControlAllowCredentials] == "true")
      #expect(preflight.headers[.accessControlAllowMethods]?.contains("POST") == true)
      #expect(preflight.headers[.accessControlAllowHeaders]?.contains("x-custom") == true)
      #expect(preflight.headers[.accessControlMaxAge] == "600")
      // An OPTIONS that is not a preflight is any other method to its endpoint, as in CouchDB.
      #expect(try await client.call(.options, "/_up").code == 405)
      let error = try await client.call(.get, "/missing", headers: [.origin: "http://app.example"])
      #expect(error.code == 404)
      #expect(error.headers[.accessControlAllowOrigin] == "http://app.example")
      #expect(error.headers[.accessControlAllowCredentials] == "true")
      let ok = try await client.call(.get, "/", headers: [.origin: "http://other.example"])
      #expect(ok.headers[.accessControlAllowOrigin] == "http://other.example")
      #expect(try await client.call(.get, "/").headers[.accessControlAllowOrigin] == nil)
    }
    var options = CouchServerOptions.standard
    options.cors = .origins(["https://wiki.example"])
    try await withServer(options: options) { client, _ in
      let allowed = try await client.call(.get, "/_up", headers: [.origin: "https://wiki.example"])
      #expect(allowed.headers[.accessControlAllowOrigin] == "https://wiki.example")
      let refused = try await client.call(.get, "/_up", headers: [.origin: "https://evil.example"])
      #expect(refused.headers[.accessControlAllowOrigin] == nil)
      let preflight = try await client.call(
        .options, "/_up",
        headers: [.origin: "https://evil.example", .accessControlRequestMethod: "GET"])
      #expect(preflight.headers[.accessControlAllowMethods] == nil)
    }
  }
}
