import AsyncAlgorithms
import HTTPTypes
import Hummingbird
import Log
import NIOCore
import Projections
import RevTree
import ServiceLifecycle

/// `feed=` of `_changes`.
enum ChangesFeed: String, Sendable {
  case normal, longpoll, continuous, eventsource
}

/// A parsed `_changes` request.
struct ChangesRequest: Sendable {
  var feed = ChangesFeed.normal
  var options = ChangesOptions()
  /// Send a heartbeat after this long without output; the feed then stays open (CouchDB).
  var heartbeat: Duration?
  /// How long `longpoll` waits, and `continuous` stays idle, before ending.
  var timeout: Duration
}

extension CouchServer {
  /// `GET/POST /{db}/_changes`.
  ///
  /// Options: `feed` (`normal`, `longpoll`, `continuous`, `eventsource`), `since` (`0`, `now` or
  /// a seq), `limit`, `descending`, `style` (`main_only`, `all_docs`), `include_docs`,
  /// `conflicts`, `heartbeat`, `timeout`, `filter=_doc_ids` (`doc_ids` in the query or the
  /// body), `filter=_selector` (`selector` in the body), `filter=wiki&wiki=ID` (the wiki document
  /// and its pages) and `history=true` (every revision event, with actor and origin, instead of
  /// one row per document). Seqs are integers (log positions).
  func changes(_ store: DocumentStore, request: Request, query: QueryParameters) async throws
    -> Response
  {
    let parsed = try await changesRequest(store, request: request, query: query)
    switch parsed.feed {
    case .normal:
      return changesResponse(try store.changes(parsed.options))
    case .longpoll:
      let first = try store.changes(parsed.options)
      if !first.results.isEmpty || parsed.options.descending {
        return changesResponse(first)
      }
      var waitOptions = parsed.options
      waitOptions.since = first.lastSeq
      let wait = waitOptions
      if let heartbeat = parsed.heartbeat {
        // Stream newlines while waiting, then the answer.
        let timeout = parsed.timeout
        return Response(
          status: .ok,
          headers: [.contentType: "application/json", .cacheControl: "must-revalidate"],
          body: ResponseBody { writer in
            _ = try await Self.waitForChange(
              store, wait, timeout: timeout, heartbeat: heartbeat
            ) {
              try await writer.write(ByteBuffer(string: "\n"))
            }
            try await writer.write(
              ByteBuffer(bytes: Self.changesJSON(try store.changes(wait))))
            try await writer.finish(nil)
          })
      }
      _ = try await Self.waitForChange(store, wait, timeout: parsed.timeout, heartbeat: nil) {}
      return changesResponse(try store.changes(wait))
    case .continuous, .eventsource:
      return streamChanges(store, parsed)
    }
  }

  func changesRequest(_ store: DocumentStore, request: Request, query: QueryParameters)
    async throws -> ChangesRequest
  {
    var body: JSONObject?
    switch request.method {
    case .get, .head: break
    case .post:
      let bytes = try await self.body(of: request)
      if !bytes.isEmpty {
        do {
          guard let object = try JSONValue(parsing: bytes).objectValue else {
            throw ReplicationError.badRequest("Request body must be a JSON object")
          }
          body = object
        } catch let e as ReplicationError {
          throw e
        } catch {
          throw ReplicationError.badRequest("invalid UTF-8 JSON: \(error)")
        }
      }
    default:
      throw ReplicationError.methodNotAllowed(["GET", "HEAD", "POST"])
    }
    let maxTimeout = options.maxChangesTimeoutMilliseconds
    var parsed = ChangesRequest(timeout: .milliseconds(maxTimeout))
    if let feed = query["feed"] {
      guard let f = ChangesFeed(rawValue: feed) else {
        throw ReplicationError.badRequest(
          "feed must be normal, longpoll, continuous or eventsource, not \"\(feed)\"")
      }
      parsed.feed = f
    }
    var o = ChangesOptions()
    o.since = try query.seq("since") { try store.info.updateSeq } ?? .start
    o.limit = try query.int("limit")
    o.descending = try query.bool("descending")
    switch query["style"] {
    case nil, "main_only": o.style = .mainOnly
    case "all_docs": o.style = .allDocs
    case let other?:
      throw ReplicationError.badRequest("style must be main_only or all_docs, not \"\(other)\"")
    }
    o.includeDocs = try query.bool("include_docs")
    o.conflicts = try query.bool("conflicts")
    o.history = try query.bool("history")
    switch query["filter"] {
    case nil: break
    case "_doc_ids":
      let ids: [String]?
      if let fromBody = body?["doc_ids"] {
        ids = fromBody.stringArray
      } else {
        ids = try query.stringArray("doc_ids")
      }
      guard let ids else {
        throw ReplicationError.badRequest("`doc_ids` filter parameter is not a list of doc ids.")
      }
      o.docIDs = Set(ids)
    case "_selector":
      guard let selector = body?["selector"] else {
        throw ReplicationError.badRequest("Selector must be specified in POST payload")
      }
      o.selector = try Selector(selector)
    case "wiki":
      guard let wiki = query["wiki"] ?? body?["wiki"]?.stringValue, !wiki.isEmpty else {
        throw ReplicationError.badRequest("filter=wiki requires wiki=<wiki id>")
      }
      o.wiki = wiki
    case let other?:
      throw ReplicationError.badRequest(
        "filter \"\(other)\" is not supported by wikilog; use _doc_ids, _selector or wiki")
    }
    parsed.options = o
    if let heartbeat = query["heartbeat"] {
      if heartbeat == "true" {
        parsed.heartbeat = .milliseconds(maxTimeout)
      } else if heartbeat != "false" {
        guard let ms = Int(heartbeat), ms >= 0 else {
          throw ReplicationError.badRequest(
            "heartbeat must be true or milliseconds, not \"\(heartbeat)\"")
        }
        parsed.heartbeat = .milliseconds(max(10, min(ms, maxTimeout)))
      }
    }
    if let timeout = try query.int("timeout") {
      parsed.timeout = .milliseconds(min(timeout, maxTimeout))
    }
    return parsed
  }

  /// `{"results":[...],"last_seq":N,"pending":N}`, one row a line.
  static func changesJSON(_ result: ChangesResult) -> [UInt8] {
    var bytes: [UInt8] = Array(#"{"results":["#.utf8)
    for (i, row) in result.results.enumerated() {
      bytes.append(contentsOf: (i == 0 ? "\n" : ",\n").utf8)
      row.json.serialize(into: &bytes)
    }
    bytes.append(
      contentsOf: "\n],\n\"last_seq\":\(result.lastSeq.rawValue),\"pending\":\(result.pending)}\n"
        .utf8)
    return bytes
  }

  func changesResponse(_ result: ChangesResult) -> Response {
    CouchResponse.raw(Self.changesJSON(result))
  }

  /// Waits until `options` has a change after `options.since`, or `timeout` passes; calls
  /// `onHeartbeat` each `heartbeat` meanwhile. Holds no read transaction while waiting.
  /// Returns whether a change came.
  static func waitForChange(
    _ store: DocumentStore, _ options: ChangesOptions, timeout: Duration, heartbeat: Duration?,
    onHeartbeat: () async throws -> Void
  ) async throws -> Bool {
    enum Signal: Sendable { case changed, ended, heartbeat, timeout }
    // The server's graceful shutdown ends the wait too.
    let (shutdown, trigger) = AsyncStream<Void>.makeStream()
    return try await withGracefulShutdownHandler {
      try await withThrowingTaskGroup(of: Signal.self) { group in
        group.addTask {
          for try await item in store.liveChanges(options) {
            if case .change = item { return .changed }
          }
          return .ended
        }
        group.addTask {
          try? await Task.sleep(for: timeout)
          return .timeout
        }
        group.addTask {
          for await _ in shutdown {}
          return .ended
        }
        if let heartbeat {
          group.addTask {
            try? await Task.sleep(for: heartbeat)
            return .heartbeat
          }
        }
        defer { group.cancelAll() }
        while let signal = try await group.next() {
          switch signal {
          case .changed: return true
          case .ended, .timeout: return false
          case .heartbeat:
            try await onHeartbeat()
            if let heartbeat {
              group.addTask {
                try? await Task.sleep(for: heartbeat)
                return .heartbeat
              }
            }
          }
        }
        return false
      }
    } onGracefulShutdown: {
      trigger.finish()
    }
  }

  // MARK: continuous and eventsource

  enum FeedSignal: Sendable {
    case item(LiveChanges.Item)
    case ended
    case tick
  }

  /// A streamed feed: rows after `since` (read in pages), then each new change as it commits;
  /// heartbeats after `heartbeat` of silence, or the end after `timeout` without a change.
  func streamChanges(_ store: DocumentStore, _ request: ChangesRequest) -> Response {
    let eventSource = request.feed == .eventsource
    var headers = HTTPFields()
    headers[.contentType] = eventSource ? "text/event-stream" : "application/json"
    headers[.cacheControl] = "no-cache"
    return Response(
      status: .ok, headers: headers,
      body: ResponseBody { writer in
        var options = request.options
        options.descending = false
        let limit = options.limit ?? .max
        var written = 0
        var lastSeq = options.since

        func write(_ row: ChangeRow, to writer: inout any ResponseBodyWriter) async throws {
          var bytes: [UInt8] = []
          if eventSource {
            bytes.append(contentsOf: "data: ".utf8)
            row.json.serialize(into: &bytes)
            bytes.append(contentsOf: "\nid: \(row.seq.rawValue)\n\n".utf8)
          } else {
            row.json.serialize(into: &bytes)
            bytes.append(UInt8(ascii: "\n"))
          }
          try await writer.write(ByteBuffer(bytes: bytes))
        }

        // Catch up in pages, never holding the whole backlog.
        var page = options
        while written < limit {
          page.limit = min(500, limit - written)
          let result = try store.changes(page)
          for row in result.results { try await write(row, to: &writer) }
          written += result.results.count
          lastSeq = result.lastSeq
          page.since = result.lastSeq
          if result.results.count < page.limit! { break }
        }

        if written < limit {
          let channel = AsyncChannel<FeedSignal>()
          var liveOptions = options
          liveOptions.since = lastSeq
          let live = liveOptions
          let tick = Self.tickInterval(heartbeat: request.heartbeat, timeout: request.timeout)
          // The server's graceful shutdown ends the feed (with its last_seq line).
          try await withGracefulShutdownHandler {
            try await withThrowingTaskGroup(of: Void.self) { group in
              group.addTask {
                do {
                  for try await item in store.liveChanges(live) { await channel.send(.item(item)) }
                } catch {}
                await channel.send(.ended)
              }
              group.addTask {
                while !Task.isCancelled {
                  do { try await Task.sleep(for: tick) } catch { return }
                  await channel.send(.tick)
                }
              }
              let clock = ContinuousClock()
              var lastWrite = clock.now
              var lastChange = clock.now
              feed: for await signal in channel {
                switch signal {
                case .item(.change(let row)):
                  try await write(row, to: &writer)
                  written += 1
                  lastSeq = row.seq
                  lastWrite = clock.now
                  lastChange = lastWrite
                  if written >= limit { break feed }
                case .item(.progress(let position)):
                  lastSeq = max(lastSeq, position)
                case .tick:
                  if let heartbeat = request.heartbeat {
                    if clock.now - lastWrite >= heartbeat {
                      try await writer.write(
                        ByteBuffer(string: eventSource ? "event: heartbeat\ndata: \n\n" : "\n"))
                      lastWrite = clock.now
                    }
                  } else if clock.now - lastChange >= request.timeout {
                    break feed
                  }
                case .ended:
                  break feed
                }
              }
              group.cancelAll()
              channel.finish()
            }
          } onGracefulShutdown: {
            channel.finish()
          }
        }
        if !eventSource {
          try await writer.write(
            ByteBuffer(string: "{\"last_seq\":\(lastSeq.rawValue),\"pending\":0}\n"))
        }
        try await writer.finish(nil)
      })
  }

  /// How often a streamed feed checks its heartbeat (or, without one, its timeout): a quarter of
  /// it, between 5 ms and 1 s.
  static func tickInterval(heartbeat: Duration?, timeout: Duration) -> Duration {
    let base = heartbeat ?? timeout
    return min(max(base / 4, .milliseconds(5)), .seconds(1))
  }
}
