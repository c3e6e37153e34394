import HTTPTypes
import Hummingbird
import JSON
import Log
import NIOCore
import Projections
import RevTree
import ServiceLifecycle

#if canImport(FoundationEssentials)
  import FoundationEssentials
#else
  import Foundation
#endif

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
  /// Reads a page of the feed: the store's, or the caller's view of it under access rules
  /// (made anew for each page, so that membership changes apply at once).
  var read: @Sendable (ChangesOptions) throws -> ChangesResult = { _ in
    ChangesResult(results: [], lastSeq: .start, pending: 0)
  }
}

extension CouchServer {
  /// `GET/POST /{db}/_changes`.
  ///
  /// Options: `feed` (`normal`, `longpoll`, `continuous` or its alias `live`, `eventsource`),
  /// `since` (`0`, `now` or a seq; `last-event-id` is the same option, and an eventsource feed's
  /// `Last-Event-ID` header overrides both), `limit` (`0` answers no rows), `descending`, `style`
  /// (`main_only`, `all_docs`), `include_docs`, `conflicts`, `heartbeat`, `timeout`,
  /// `filter=_doc_ids` (`doc_ids` in the query or the body), `filter=_design` (design
  /// documents), `filter=_selector` (`selector` in
  /// the body), `filter=NAME` for a filter registered with the data directory
  /// (``DocumentFilters``; the wiki's `filter=wiki&wiki=ID`: the wiki document and its pages)
  /// and `history=true` (every revision event, with actor and origin, instead of one row per
  /// document). As in CouchDB, option names are read without case and a flag is set only by
  /// `true` (any other value leaves it off). Seqs are integers (log positions).
  ///
  /// A `longpoll` with nothing to answer yet starts its response at once, as CouchDB does: the
  /// status, the headers and `{"results":[` (then a newline per heartbeat), and the rows and
  /// `last_seq` when a change comes or the timeout ends it.
  func changes(
    _ store: DocumentStore, request: Request, query: QueryParameters, access: DatabaseAccess
  ) async throws -> Response {
    var changesRequest = try await changesRequest(store, request: request, query: query)
    if access.restricted {
      if query.last(ofAny: ["since", "last-event-id"]) == "now" {
        changesRequest.options.since =
          try access.view(store)?.updateSeq ?? changesRequest.options.since
      }
      changesRequest.read = { options in
        guard let view = try access.view(store) else { return try store.changes(options) }
        return try view.changes(options)
      }
    } else {
      changesRequest.read = { options in try store.changes(options) }
    }
    let read = changesRequest.read
    let parsed = changesRequest
    switch parsed.feed {
    case .normal:
      let options = parsed.options
      if !access.restricted {
        // Rows written straight from the stored records, when they need nothing more.
        let written = try await reading(limit: options.limit) { () -> [UInt8]? in
          var bytes = Array(#"{"results":["#.utf8)
          bytes.append(0x0A)
          guard
            let written = try store.writeChangesJSON(
              options, into: &bytes, separator: Array(",\n".utf8), seqTag: store.sequenceTag)
          else { return nil }
          if written.rows > 0 { bytes.append(0x0A) }
          bytes.append(
            contentsOf:
              "],\n\"last_seq\":\"\(store.sequenceString(written.lastSeq))\",\"pending\":\(written.pending)}\n"
              .utf8)
          return bytes
        }
        if let written { return CouchResponse.raw(written) }
      }
      return changesResponse(
        try await reading(limit: options.limit) { try read(options) }, store: store)
    case .longpoll:
      let first = try read(parsed.options)
      if !first.results.isEmpty || parsed.options.descending {
        return changesResponse(first, store: store)
      }
      let hub = hubs.hub(for: store)
      let hubs = self.hubs
      var headers = HTTPFields()
      headers[.contentType] = "application/json"
      headers[.cacheControl] = "must-revalidate"
      return Response(
        status: .ok, headers: headers,
        body: ResponseBody { writer in
          // What CouchDB sends before it waits: the start of the object and a newline.
          try await writer.write(ByteBuffer(string: "{\"results\":[\n\n"))
          let result = try await withGracefulShutdownHandler {
            try await Self.longpoll(store, hub, parsed, after: first) {
              try await writer.write(ByteBuffer(string: "\n"))
            }
          } onGracefulShutdown: {
            hubs.shutDown()
          }
          try await writer.write(
            ByteBuffer(bytes: Self.changesJSON(result, store: store, opened: true)))
          try await writer.finish(nil)
        })
    case .continuous, .eventsource:
      return streamChanges(store, hubs.hub(for: store), parsed)
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
            throw CouchError.badRequest("Request body must be a JSON object")
          }
          body = object
        } catch let e as CouchError {
          throw e
        } catch {
          throw CouchError.badRequest("invalid UTF-8 JSON: \(error)")
        }
      }
    default:
      throw CouchError.methodNotAllowed(["GET", "HEAD", "POST"])
    }
    let maxTimeout = settings.current.maxChangesTimeoutMilliseconds
    var parsed = ChangesRequest(timeout: .milliseconds(maxTimeout))
    // CouchDB reads these options with their names lowercased, the last of a repeated one
    // counting; flags are set by `true` alone, any other value is ignored.
    func value(_ name: String) -> String? { query.last(ofAny: [name]) }
    func flag(_ name: String) -> Bool { value(name) == "true" }
    if let feed = value("feed") {
      guard let f = feed == "live" ? .continuous : ChangesFeed(rawValue: feed) else {
        throw CouchError.badRequest(
          "Supported `feed` types: normal, continuous, live, longpoll, eventsource")
      }
      parsed.feed = f
    }
    var o = ChangesOptions()
    // `last-event-id` is another name for `since`; for an eventsource feed the
    // `Last-Event-ID` header (a browser reconnecting) overrides both.
    var since = query.last(ofAny: ["since", "last-event-id"])
    if parsed.feed == .eventsource, let header = request.headers[Self.lastEventID] {
      since = header
    }
    if let since {
      if since == "now" {
        o.since = try store.info.updateSeq
      } else {
        guard let seq = store.position(ofSequence: since) else {
          throw CouchError.badRequest("Invalid since sequence: \"\(since)\"")
        }
        o.since = seq
      }
    }
    func nonNegative(_ name: String) throws(CouchError) -> Int? {
      guard let text = value(name) else { return nil }
      guard let n = Int(text) else {
        throw .badRequest("The \(name) parameter should be a non-negative integer")
      }
      guard n >= 0 else { throw .badRequest("The \(name) value should be a non-negative integer") }
      return n
    }
    o.limit = try nonNegative("limit")
    o.descending = flag("descending")
    switch value("style") {
    case nil, "main_only": o.style = .mainOnly
    case "all_docs": o.style = .allDocs
    case let other?:
      throw CouchError.badRequest("style must be main_only or all_docs, not \"\(other)\"")
    }
    o.includeDocs = flag("include_docs")
    o.conflicts = flag("conflicts")
    o.attachments = flag("attachments")
    o.attEncodingInfo = flag("att_encoding_info")
    o.history = flag("history")
    switch value("filter") {
    case nil: break
    case "_doc_ids":
      let ids: [String]?
      if let fromBody = body?["doc_ids"] {
        ids = fromBody.stringArray
      } else {
        ids = try query.stringArray("doc_ids")
      }
      guard let ids else {
        throw CouchError.badRequest("`doc_ids` filter parameter is not a list of doc ids.")
      }
      o.docIDs = Set(ids)
    case "_design":
      // CouchDB's built-in filter: design documents only.
      o.filter = DocumentFilter(
        name: "_design", parameters: [:], wakeKeys: ["_design"],
        keys: { $0.hasPrefix("_design/") ? ["_design"] : [] },
        includes: { $0.hasPrefix("_design/") })
    case "_selector":
      guard let selector = body?["selector"] else {
        throw CouchError.badRequest("Selector must be specified in POST payload")
      }
      o.selector = try Selector(selector)
    case let name? where name == "_view" || name.contains("/"):
      // A view's map function as a filter (`_view`), or a design document's JavaScript
      // filter (`ddoc/name`): a feature's (CouchQuery's).
      let asked = ChangesFilterRequest(
        store: store, name: name, request: request, query: query, body: body)
      var made: DocumentBodyFilter?
      for feature in options.features where made == nil {
        made = try feature.changesFilter?(asked)
      }
      guard let made else {
        throw CouchError.notImplemented("design document filters (filter=\(name))")
      }
      o.documentFilter = made
    case let name?:
      // A filter registered with the data directory (the wiki's `wiki`, say); its parameters
      // come from the query or the body.
      guard
        let filter = try dataDirectory.filters.make(
          name, parameter: { query[$0] ?? body?[$0]?.stringValue })
      else {
        let known = ["_doc_ids", "_selector", "_design"] + dataDirectory.filters.names
        throw CouchError.badRequest(
          "filter \"\(name)\" is not supported by wikilog; use \(known.joined(separator: ", "))")
      }
      o.filter = filter
    }
    parsed.options = o
    if let heartbeat = value("heartbeat") {
      if heartbeat == "true" {
        parsed.heartbeat = .milliseconds(maxTimeout)
      } else if heartbeat != "false" {
        // CouchDB's two answers.
        guard let ms = Int(heartbeat) else {
          throw CouchError.badRequest(
            "Invalid heartbeat value. Expecting a positive integer value (in milliseconds).")
        }
        guard ms >= 0 else {
          throw CouchError.badRequest(
            "The heartbeat value should be a positive integer (in milliseconds).")
        }
        parsed.heartbeat = .milliseconds(max(10, min(ms, maxTimeout)))
      }
    }
    if let timeout = try nonNegative("timeout") {
      parsed.timeout = .milliseconds(min(timeout, maxTimeout))
    }
    return parsed
  }

  /// The `Last-Event-ID` request header.
  static let lastEventID = HTTPField.Name("Last-Event-ID")!

  /// `{"results":[...],"last_seq":N,"pending":N}`, one row a line; with `opened`, without the
  /// `{"results":[` already sent.
  static func changesJSON(_ result: ChangesResult, store: DocumentStore, opened: Bool = false)
    -> [UInt8]
  {
    var bytes: [UInt8] = opened ? [] : Array(#"{"results":["#.utf8)
    for (i, row) in result.results.enumerated() {
      bytes.append(contentsOf: (i == 0 ? (opened ? "" : "\n") : ",\n").utf8)
      rowJSON(row, store: store).serialize(into: &bytes)
    }
    bytes.append(
      contentsOf:
        "\n],\n\"last_seq\":\"\(store.sequenceString(result.lastSeq))\",\"pending\":\(result.pending)}\n"
        .utf8)
    return bytes
  }

  /// A row as CouchDB shapes it; history rows also carry `time`, when the revision was
  /// committed (ISO-8601, UTC).
  static func rowJSON(_ row: ChangeRow, store: DocumentStore) -> JSONValue {
    var json = row.json
    if var object = json.objectValue {
      // CouchDB's opaque sequence string.
      object["seq"] = .string(store.sequenceString(row.seq))
      json = .object(object)
    }
    if let micros = row.timestampMicroseconds, var object = json.objectValue {
      let date = Date(timeIntervalSince1970: Double(micros) / 1_000_000)
      object.members.append(
        .init(
          key: "time",
          value: .string(date.formatted(Date.ISO8601FormatStyle(includingFractionalSeconds: true))))
      )
      json = .object(object)
    }
    return json
  }

  func changesResponse(_ result: ChangesResult, store: DocumentStore) -> Response {
    CouchResponse.raw(Self.changesJSON(result, store: store))
  }

  /// The rest of a longpoll whose first read (`first`) found nothing: waits for a row, calling
  /// `onHeartbeat` every `heartbeat`, until the timeout; then answers what there is (CouchDB
  /// answers an empty `results` with the current `last_seq` at the timeout).
  static func longpoll(
    _ store: DocumentStore, _ hub: ChangesHub, _ request: ChangesRequest,
    after first: ChangesResult, onHeartbeat: () async throws -> Void
  ) async throws -> ChangesResult {
    let clock = ContinuousClock()
    let deadline = clock.now + request.timeout
    var options = request.options
    options.since = first.lastSeq
    var waitAfter = first.readThrough ?? first.lastSeq
    let filter = ChangesHub.Filter(options)
    var lastBeat = clock.now
    while true {
      var until = deadline
      if let heartbeat = request.heartbeat { until = min(until, lastBeat + heartbeat) }
      switch await wait(hub, after: waitAfter, filter: filter, until: until) {
      case .changed:
        let result = try request.read(options)
        if !result.results.isEmpty { return result }
        options.since = result.lastSeq
        waitAfter = result.readThrough ?? result.lastSeq
      case .timeout:
        if clock.now >= deadline { return try request.read(options) }
        try await onHeartbeat()
        lastBeat = clock.now
      case .closed:
        var result = first
        result.lastSeq = options.since
        return result
      }
    }
  }

  enum WaitOutcome: Sendable {
    case changed, timeout, closed
  }

  /// Waits on the hub for a change after `after`, until `deadline`.
  static func wait(
    _ hub: ChangesHub, after: LogPosition, filter: ChangesHub.Filter,
    until deadline: ContinuousClock.Instant
  ) async -> WaitOutcome {
    await withTaskGroup(of: WaitOutcome.self) { group in
      group.addTask { await hub.wait(after: after, filter: filter) ? .changed : .closed }
      group.addTask {
        do {
          try await Task.sleep(until: deadline, clock: .continuous)
        } catch {
          return .closed
        }
        return .timeout
      }
      let first = await group.next() ?? .closed
      group.cancelAll()
      return first
    }
  }

  // MARK: continuous and eventsource

  /// A streamed feed: rows after `since` in pages (never the whole backlog at once), then, each
  /// time the hub reports a change, the new rows; a heartbeat after `heartbeat` of silence (the
  /// feed then stays open), or the end after `timeout` without a change. The server's graceful
  /// shutdown ends it too, with its `last_seq` line.
  func streamChanges(_ store: DocumentStore, _ hub: ChangesHub, _ request: ChangesRequest)
    -> Response
  {
    let eventSource = request.feed == .eventsource
    let hubs = self.hubs
    var headers = HTTPFields()
    headers[.contentType] = eventSource ? "text/event-stream" : "application/json"
    headers[.cacheControl] = "no-cache"
    return Response(
      status: .ok, headers: headers,
      body: ResponseBody { writer in
        var options = request.options
        options.descending = false
        let limit = options.limit ?? .max
        let filter = ChangesHub.Filter(options)
        let clock = ContinuousClock()
        var written = 0
        var lastWrite = clock.now
        var lastChange = clock.now

        func write(_ row: ChangeRow, to writer: inout any ResponseBodyWriter) async throws {
          var bytes: [UInt8] = []
          if eventSource {
            bytes.append(contentsOf: "data: ".utf8)
            Self.rowJSON(row, store: store).serialize(into: &bytes)
            bytes.append(contentsOf: "\nid: \(store.sequenceString(row.seq))\n\n".utf8)
          } else {
            Self.rowJSON(row, store: store).serialize(into: &bytes)
            bytes.append(UInt8(ascii: "\n"))
          }
          try await writer.write(ByteBuffer(bytes: bytes))
        }

        try await withGracefulShutdownHandler {
          feed: while written < limit {
            var page = options
            page.limit = min(500, limit - written)
            let result: ChangesResult
            do {
              result = try request.read(page)
            } catch {
              break feed  // the database closed
            }
            for row in result.results { try await write(row, to: &writer) }
            written += result.results.count
            options.since = result.lastSeq
            if !result.results.isEmpty {
              lastWrite = clock.now
              lastChange = lastWrite
            }
            if result.results.count >= page.limit! { continue }  // more backlog
            let until = request.heartbeat.map { lastWrite + $0 } ?? (lastChange + request.timeout)
            let after = result.readThrough ?? result.lastSeq
            switch await Self.wait(hub, after: after, filter: filter, until: until) {
            case .changed:
              continue
            case .closed:
              break feed
            case .timeout:
              guard let heartbeat = request.heartbeat else { break feed }
              if clock.now - lastWrite >= heartbeat {
                try await writer.write(
                  ByteBuffer(string: eventSource ? "event: heartbeat\ndata: \n\n" : "\n"))
                lastWrite = clock.now
              }
            }
          }
        } onGracefulShutdown: {
          hubs.shutDown()
        }
        if !eventSource {
          try await writer.write(
            ByteBuffer(
              string: "{\"last_seq\":\"\(store.sequenceString(options.since))\",\"pending\":0}\n"))
        }
        try await writer.finish(nil)
      })
  }
}
