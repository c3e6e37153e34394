import JSON
public import Log
import RevTree

// Streaming forms of the changes feed and the projections' checkpoints, for consumers that read
// far more rows than fit in memory (`wikilog tail --since 0` over millions of documents) or
// that follow the log themselves.

extension DocumentStore {
  /// Streams the changes feed to `body`, oldest first, without building the whole answer.
  ///
  /// Rows are those of ``changes(_:)`` (one per document at its latest change, or with
  /// ``ChangesOptions/history`` every revision event), read `chunk` at a time, each chunk in a
  /// read transaction of its own: rows committed while the stream runs may appear too, as in
  /// CouchDB's feed. Nothing is counted for `pending`, so a row costs the same wherever it is.
  ///
  /// ```swift
  /// var options = ChangesOptions()
  /// options.since = 0
  /// let last = try store.forEachChange(options, eventInfo: true) { row in
  ///   print(row.seq, row.id, row.actor ?? "")
  ///   return true
  /// }
  /// // follow from `last` with log.subscribe(after: last) and changeRow(for:options:eventInfo:)
  /// ```
  /// - Parameters:
  ///   - options: `since`, `limit`, the style, the filters and `includeDocs`; `descending` is
  ///     not supported (`bad_request`).
  ///   - eventInfo: also fill each row's ``ChangeRow/actor``, ``ChangeRow/timestampMicroseconds``
  ///     and ``ChangeRow/origin`` from the event at its `seq` (history rows always have them).
  ///   - body: returns false to stop.
  /// - Returns: the position read up to: the last row's `seq` when `body` or the limit stopped
  ///   the stream, else the end of the log as last seen. Pass it as the next `since`.
  @discardableResult
  public func forEachChange(
    _ options: ChangesOptions, eventInfo: Bool = false, chunk: Int = 8192,
    _ body: (ChangeRow) throws -> Bool
  ) throws -> LogPosition {
    guard !options.descending else {
      throw StoreError.badRequest("a streamed feed reads forwards only")
    }
    let chunk = max(1, chunk)
    return try streamChanges(options, chunk: chunk, body) { txn, since, read, deliver in
      if options.history {
        try txn.forEachEvent(from: since.next) { event in
          read += 1
          since = event.position
          if let row = try historyRow(event, options: options, txn: txn) {
            guard try deliver(row) else { return false }
          }
          return read < chunk
        }
      } else {
        try txn.scan(documentStorage["bySeq"], from: since.next.rawValue.bigEndianBytes) {
          key, value in
          guard let seq = Self.position(key) else { return true }
          read += 1
          since = LogPosition(seq)
          if let docID = try docID(byIdKey: value, txn: txn),
            var row = try changeRow(docID: docID, seq: seq, options: options, txn: txn)
          {
            if eventInfo, let event = try txn.event(at: row.seq) {
              try Self.addEventInfo(event, to: &row)
            }
            guard try deliver(row) else { return false }
          }
          return read < chunk
        }
      }
    }
  }

  /// The loop of the streamed feeds: read transactions of up to `chunk` entries each, from
  /// `options.since` on, until the log's end, `options.limit` rows or `body`'s false.
  /// `readChunk` reads one chunk in `txn`: it moves `since` to each entry it reads, counts
  /// them in `read`, and hands each row to `deliver`, which says whether to go on. Returns the
  /// position read up to.
  private func streamChanges<Row>(
    _ options: ChangesOptions, chunk: Int, _ body: (Row) throws -> Bool,
    readChunk: (
      _ txn: ReadTransaction, _ since: inout LogPosition, _ read: inout Int,
      _ deliver: (Row) throws -> Bool
    ) throws -> Void
  ) throws -> LogPosition {
    var remaining = options.limit ?? .max
    var since = options.since
    let chunk = max(1, chunk)
    guard remaining > 0 else { return since }
    // `deliver` calls `body` while `readChunk` runs; neither outlives this call.
    return try withoutActuallyEscaping(body) { body in
      while true {
        // One chunk: (entries read, stopped by body or limit).
        let (read, stopped) = try self.read { txn -> (Int, Bool) in
          var read = 0
          var stopped = false
          try readChunk(txn, &since, &read) { row in
            remaining -= 1
            if try !body(row) || remaining == 0 {
              stopped = true
              return false
            }
            return true
          }
          if !stopped && read < chunk { since = max(since, try txn.lastPosition) }
          return (read, stopped)
        }
        if stopped || read < chunk { return since }
      }
    }
  }

  /// The feed row that the event `event` makes, as a live feed shows it: nil when it is not a
  /// document revision, when a filter drops it, or (one row per document) when a later change
  /// of the same document exists. With `eventInfo` the row carries the event's actor, time and
  /// origin.
  ///
  /// ```swift
  /// for try await item in store.log.subscribe(after: last) {
  ///   if case .event(let e) = item, let row = try store.changeRow(for: e, options: options) { ... }
  /// }
  /// ```
  public func changeRow(for event: RecordedEvent, options: ChangesOptions, eventInfo: Bool = false)
    throws -> ChangeRow?
  {
    guard
      event.type == DocumentEvent.Kind.edit.eventType
        || event.type == DocumentEvent.Kind.replicated.eventType
    else { return nil }
    return try read { txn -> ChangeRow? in
      if options.history { return try historyRow(event, options: options, txn: txn) }
      guard
        let record = try documents.record(event.stream, storage: documentStorage, txn: txn),
        record.updateSeq == event.position.rawValue,
        var row = try changeRow(
          docID: event.stream, seq: record.updateSeq, options: options, txn: txn)
      else { return nil }
      if eventInfo { try Self.addEventInfo(event, to: &row) }
      return row
    }
  }

  /// The id of the document whose `docs.byId` key is `key` (a `docs.bySeq` value): the key
  /// itself for a short id, else read from the record; nil when there is none.
  func docID(byIdKey key: [UInt8], txn: ReadTransaction) throws -> String? {
    if let id = DocumentKey.inlineID(key) { return id }
    guard let bytes = try txn.get(key, in: documentStorage["byId"]) else { return nil }
    return try DocumentRecord(decoding: bytes).docID
  }

  /// A `bySeq` key as a position. (`UInt64(bigEndianBytes:)` is generic across modules and
  /// unspecialised, which made it a quarter of the time of streaming a large feed.)
  @inline(__always)
  static func position(_ key: [UInt8]) -> UInt64? {
    guard key.count == 8 else { return nil }
    return unsafe key.withUnsafeBytes {
      unsafe UInt64(bigEndian: $0.loadUnaligned(as: UInt64.self))
    }
  }

  static func addEventInfo(_ event: RecordedEvent, to row: inout ChangeRow) throws {
    row.actor = event.actor
    row.timestampMicroseconds = event.timestampMicroseconds
    row.origin = try DocumentEvent(decoding: event).origin
  }

  /// Each projection's checkpoint: the last log position applied to it, documents first.
  /// An index behind the log's is the position it is up to (``IndexFollower``).
  public func projectionCheckpoints() throws -> [(name: String, position: LogPosition)] {
    var all = try projections.checkpoints()
    for follower in indexes {
      all.append((follower.index.name, LogPosition(try follower.checkpoint())))
    }
    let order = projectionOrder
    return all.sorted {
      (order.firstIndex(of: $0.name) ?? order.count)
        < (order.firstIndex(of: $1.name) ?? order.count)
    }
  }
}
