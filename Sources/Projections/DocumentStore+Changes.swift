public import JSON
public import Log
import RevTree

/// Options of `_changes`.
public struct ChangesOptions: Sendable, Hashable {
  public enum Style: Sendable, Hashable {
    /// The winning revision only.
    case mainOnly
    /// Every leaf revision, conflicts included.
    case allDocs
  }

  /// Rows after this position (exclusive), as CouchDB's `since`.
  public var since: LogPosition = .start
  /// At most this many rows; `0` reads none and leaves `lastSeq` at `since` (CouchDB).
  public var limit: Int?
  /// Newest first; `since` then bounds from above (0 means from the newest).
  public var descending = false
  public var style: Style = .mainOnly
  public var includeDocs = false
  /// With `includeDocs`: add `_conflicts` to each document.
  public var conflicts = false
  /// With `includeDocs`: attachments' data inline, `encoding` of gzip-stored ones.
  public var attachments = false
  public var attEncodingInfo = false
  /// `filter=_doc_ids`.
  public var docIDs: Set<String>?
  /// `filter=_selector`: conditions on top-level fields of the winning body.
  public var selector: Selector?
  /// `filter=NAME`: only the documents a registered ``DocumentFilter`` passes.
  public var filter: DocumentFilter?
  /// Every revision event in order, not one row per document (an event-log extension).
  public var history = false
  /// A test of each change's document (its winning revision, or in history mode the event's
  /// revision): a design document's JavaScript filter (`filter=ddoc/name`), run by the Query
  /// module's query server.
  public var documentFilter: DocumentBodyFilter?

  public init() {}

  var isFiltered: Bool {
    docIDs != nil || selector != nil || filter != nil || documentFilter != nil
  }
}

/// A test of a change's whole document, named for equality (``ChangesOptions/documentFilter``):
/// what a design document's filter function decides.
public struct DocumentBodyFilter: Sendable, Hashable {
  /// What it is (`ddoc/name` and its parameters), for equality and logs.
  public let name: String
  private let test: @Sendable (JSONValue) throws -> Bool

  public init(name: String, passes: @escaping @Sendable (JSONValue) throws -> Bool) {
    self.name = name
    self.test = passes
  }

  /// Whether document `doc` passes.
  public func passes(_ doc: JSONValue) throws -> Bool { try test(doc) }

  public static func == (a: DocumentBodyFilter, b: DocumentBodyFilter) -> Bool { a.name == b.name }
  public func hash(into hasher: inout Hasher) { hasher.combine(name) }
}

extension ChangeRow {
  /// The row of a document whose tree is `tree` (and winner `winner`), in `style`.
  init(
    seq: LogPosition, id: String, tree: RevisionTree, winner: RevisionTree.Revision,
    style: ChangesOptions.Style, doc: JSONValue?
  ) {
    self.init(
      seq: seq, id: id,
      changes: style == .allDocs ? tree.leaves.map(\.rev.text) : [winner.rev.text],
      deleted: winner.status != .available, doc: doc)
  }
}

/// One row of the changes feed.
public struct ChangeRow: Sendable, Hashable {
  public var seq: LogPosition
  public var id: String
  public var changes: [String]
  public var deleted: Bool
  public var doc: JSONValue?
  /// History rows: who wrote the revision, when (µs since 1970) and where from.
  public var actor: String?
  public var timestampMicroseconds: Int64?
  public var origin: String?

  /// `{"seq":N,"id":...,"changes":[{"rev":...}],"deleted":true?,"doc":...}`
  public var json: JSONValue {
    var members: [JSONObject.Member] = [
      .init(key: "seq", value: .number(JSONNumber(Int64(seq.rawValue)))),
      .init(key: "id", value: .string(id)),
      .init(
        key: "changes",
        value: .array(changes.map { .object(JSONObject([.init(key: "rev", value: .string($0))])) })),
    ]
    if deleted { members.append(.init(key: "deleted", value: .bool(true))) }
    if let doc { members.append(.init(key: "doc", value: doc)) }
    if let actor { members.append(.init(key: "actor", value: .string(actor))) }
    if let origin, !origin.isEmpty { members.append(.init(key: "origin", value: .string(origin))) }
    return .object(JSONObject(members))
  }
}

/// A page of the changes feed.
public struct ChangesResult: Sendable, Hashable {
  public var results: [ChangeRow]
  /// The position the feed has read up to: pass it as the next `since`. Advances past
  /// filtered-out rows too, so a consumer can checkpoint while nothing matches.
  public var lastSeq: LogPosition
  /// Rows after `lastSeq` (for the unfiltered main feed; filtered feeds count candidates).
  public var pending: Int
  /// The log position the feed has read up to, when it differs from `lastSeq` (a user's
  /// feed under a ``DocumentAccess`` keeps `lastSeq` at the last row the user may see): what a
  /// waiting feed waits after.
  public var readThrough: LogPosition? = nil

  public init(
    results: [ChangeRow], lastSeq: LogPosition, pending: Int, readThrough: LogPosition? = nil
  ) {
    self.results = results
    self.lastSeq = lastSeq
    self.pending = pending
    self.readThrough = readThrough
  }
}

extension DocumentStore {
  /// The changes feed (`GET /db/_changes`, `feed=normal`).
  ///
  /// A `since` past the end of the log is taken as the end (CouchDB does the same), so a
  /// consumer never checkpoints a seq the database has not reached.
  public func changes(_ options: ChangesOptions = ChangesOptions()) throws -> ChangesResult {
    try read { txn in
      var options = options
      options.since = min(options.since, try txn.lastPosition)
      if options.history { return try historyChanges(options, txn: txn) }
      var rows: [ChangeRow] = []
      let (lastSeq, pending) = try scanFeed(options, txn: txn) { seq, key in
        guard let docID = try docID(byIdKey: Self.copy(key), txn: txn),
          let row = try changeRow(docID: docID, seq: seq, options: options, txn: txn)
        else { return false }
        rows.append(row)
        return true
      }
      return ChangesResult(results: rows, lastSeq: lastSeq, pending: pending)
    }
  }

  /// The walk of `docs.bySeq` under the one-row-per-document feed: calls `row` with each
  /// entry's seq and document key after `options.since` (or before it, descending), which
  /// says whether it made a row, until `options.limit` rows; then works out `last_seq` and,
  /// with `countPending`, the rows after it.
  func scanFeed(
    _ options: ChangesOptions, txn: ReadTransaction, countPending: Bool = true,
    _ row: (_ seq: UInt64, _ key: Span<UInt8>) throws -> Bool
  ) throws -> (lastSeq: LogPosition, pending: Int) {
    let limit = options.limit ?? .max
    var count = 0
    let last = try txn.lastPosition
    var lastSeq = options.descending ? last : options.since
    let bySeq = documentStorage["bySeq"]
    // `limit=0`, as in CouchDB: no rows, `last_seq` stays at `since`, every row is pending.
    var reachedLimit = limit == 0
    var visited = 0
    if limit > 0 {
      let from: [UInt8]? =
        options.descending
        ? (options.since == .start ? nil : options.since.rawValue.bigEndianBytes)
        : (options.since.rawValue + 1).bigEndianBytes
      try txn.scanBorrowed(bySeq, from: from, direction: options.descending ? .backward : .forward)
      { key, value in
        visited += 1
        guard key.count == 8 else { return true }
        var seq: UInt64 = 0
        for i in 0..<8 { seq = seq << 8 | UInt64(key[i]) }
        lastSeq = LogPosition(seq)
        if try row(seq, value) {
          count += 1
          if count >= limit {
            reachedLimit = true
            return false
          }
        }
        return true
      }
    }
    if !options.descending && !reachedLimit { lastSeq = max(lastSeq, last) }
    var pending = 0
    if countPending && !options.descending && lastSeq < last {
      // Rows after lastSeq, counted without copying, on whichever side has fewer rows at
      // most: seqs are distinct log positions, so at most `last - lastSeq` rows follow
      // lastSeq and at most `since` rows come before the scanned ones.
      let after = (lastSeq.rawValue + 1).bigEndianBytes
      if last.rawValue - lastSeq.rawValue <= options.since.rawValue {
        pending = try txn.count(of: bySeq, from: after)
      } else {
        let before =
          try txn.count(of: bySeq, from: nil, before: (options.since.rawValue + 1).bigEndianBytes)
        pending = try txn.count(of: bySeq) - before - visited
      }
    }
    return (lastSeq, pending)
  }

  /// The row of a document whose latest change is at `seq`, or nil if a filter drops it (or
  /// the document is absent).
  public func changeRow(docID: String, seq: UInt64, options: ChangesOptions, txn: ReadTransaction)
    throws
    -> ChangeRow?
  {
    if let ids = options.docIDs, !ids.contains(docID) { return nil }
    if let filter = options.filter, !filter.includes(docID) { return nil }
    guard let record = try documents.record(docID, storage: documentStorage, txn: txn),
      let winner = record.tree.winner
    else { return nil }
    var doc: JSONValue?
    if options.includeDocs || options.selector != nil || options.documentFilter != nil {
      doc = try documentJSON(
        record, winner,
        options: GetOptions(
          conflicts: options.conflicts, attachments: options.attachments,
          attEncodingInfo: options.attEncodingInfo), txn: txn)
      if let selector = options.selector, !selector.matches(doc!) { return nil }
      if let test = options.documentFilter, try !test.passes(doc!) { return nil }
    }
    return ChangeRow(
      seq: LogPosition(seq), id: docID, tree: record.tree, winner: winner, style: options.style,
      doc: options.includeDocs ? doc : nil)
  }

  /// Every document revision event after `since`, in log order; up to `through` (the end of
  /// the log when nil).
  func historyChanges(_ options: ChangesOptions, txn: ReadTransaction, through: LogPosition? = nil)
    throws -> ChangesResult
  {
    let limit = options.limit ?? .max
    var rows: [ChangeRow] = []
    let last = try through.map { min($0, try txn.lastPosition) } ?? txn.lastPosition
    var lastSeq = options.descending ? last : options.since
    var reachedLimit = limit == 0
    let start =
      options.descending
      ? (options.since == .start ? last : min(last, LogPosition(options.since.rawValue - 1)))
      : options.since.next
    if limit > 0 && start.rawValue > 0 {
      try txn.forEachEvent(from: start, direction: options.descending ? .backward : .forward) {
        event in
        if event.position > last { return false }
        lastSeq = event.position
        if let row = try historyRow(event, options: options, txn: txn) {
          rows.append(row)
          if rows.count >= limit {
            reachedLimit = true
            return false
          }
        }
        return true
      }
    }
    if !options.descending && !reachedLimit { lastSeq = max(lastSeq, last) }
    return ChangesResult(
      results: rows, lastSeq: lastSeq,
      pending: options.descending ? 0 : Int(last.rawValue - min(last.rawValue, lastSeq.rawValue)))
  }

  /// The history row of a document revision event, or nil (other events, filtered out).
  func historyRow(_ event: RecordedEvent, options: ChangesOptions, txn: ReadTransaction) throws
    -> ChangeRow?
  {
    guard
      event.type == DocumentEvent.Kind.edit.eventType
        || event.type == DocumentEvent.Kind.replicated.eventType
    else { return nil }
    let docID = event.stream
    if let ids = options.docIDs, !ids.contains(docID) { return nil }
    if let filter = options.filter, !filter.includes(docID) { return nil }
    let e = try DocumentEvent(decoding: event)
    var doc: JSONValue?
    if options.includeDocs || options.selector != nil || options.documentFilter != nil {
      var members: [JSONObject.Member] = [
        .init(key: "_id", value: .string(docID)), .init(key: "_rev", value: .string(e.rev)),
      ]
      if let body = try? JSONValue(parsing: e.body).objectValue {
        members.append(contentsOf: body.members)
      }
      if e.deleted { members.append(.init(key: "_deleted", value: .bool(true))) }
      if let attachments = e.attachments, !attachments.isEmpty {
        var atts: [JSONObject.Member] = []
        for a in attachments {
          let data = options.attachments ? try attachmentData(a) : nil
          atts.append(
            .init(key: a.name, value: a.json(data: data, showEncoding: options.attEncodingInfo)))
        }
        members.append(.init(key: "_attachments", value: .object(JSONObject(atts))))
      }
      doc = .object(JSONObject(members))
      if let selector = options.selector, !selector.matches(doc!) { return nil }
      if let test = options.documentFilter, try !test.passes(doc!) { return nil }
    }
    return ChangeRow(
      seq: event.position, id: docID, changes: [e.rev], deleted: e.deleted,
      doc: options.includeDocs ? doc : nil,
      actor: event.actor, timestampMicroseconds: event.timestampMicroseconds, origin: e.origin)
  }

  /// The live changes feed: rows after `options.since`, then new ones as they commit (from any
  /// process), as an `AsyncSequence`. See ``LiveChanges``.
  public func liveChanges(_ options: ChangesOptions = ChangesOptions()) -> LiveChanges {
    LiveChanges(store: self, options: options)
  }
}

/// Follows the changes feed: ``Item/change(_:)`` for each row, ``Item/progress(_:)`` when the
/// feed has read up to a position without a row to show (filtered feeds, or once caught up), so
/// a consumer can checkpoint. Ends when its task is cancelled or the store closes.
public struct LiveChanges: AsyncSequence, Sendable {
  public enum Item: Sendable, Hashable {
    case change(ChangeRow)
    case progress(LogPosition)
  }
  public typealias Element = Item

  let store: DocumentStore
  let options: ChangesOptions

  public func makeAsyncIterator() -> Iterator {
    Iterator(
      store: store, options: options,
      events: store.log.headings(after: options.since).makeAsyncIterator())
  }

  /// Reads the events' heads (``EventHeading``) to learn which document each changed, then the
  /// document's record; a history feed reads the event itself.
  public struct Iterator: AsyncIteratorProtocol {
    let store: DocumentStore
    let options: ChangesOptions
    var events: EventHeadings.Iterator
    var skippedSince: LogPosition?

    public mutating func next() async throws -> Item? {
      while let item = try await events.next() {
        switch item {
        case .caughtUp(let position):
          skippedSince = nil
          return .progress(position)
        case .heading(let event):
          if let row = try row(for: event) {
            skippedSince = nil
            return .change(row)
          }
          // Report progress now and then while nothing matches.
          if let since = skippedSince {
            if event.position.rawValue - since.rawValue >= 1000 {
              skippedSince = event.position
              return .progress(event.position)
            }
          } else {
            skippedSince = event.position
          }
        }
      }
      return nil
    }

    func row(for event: EventHeading) throws -> ChangeRow? {
      guard
        event.type == DocumentEvent.Kind.edit.eventType
          || event.type == DocumentEvent.Kind.replicated.eventType
      else { return nil }
      return try store.read { txn in
        if options.history {
          guard let recorded = try txn.event(at: event.position) else { return nil }
          return try store.historyRow(recorded, options: options, txn: txn)
        }
        // Only the document's latest change makes a row, as in CouchDB's feed.
        guard
          let record = try store.documents.record(
            event.stream, storage: store.documentStorage, txn: txn),
          record.updateSeq == event.position.rawValue
        else { return nil }
        return try store.changeRow(
          docID: event.stream, seq: record.updateSeq, options: options, txn: txn)
      }
    }
  }
}

/// That the log moved past ``position``, and which document the event there changed, if any:
/// what a server needs to wake the feeds waiting on a database without reading anything.
public struct ChangeNotice: Sendable, Hashable {
  public let position: LogPosition
  /// The document a document edit or replicated revision changed; nil for other events
  /// (`_local` documents, drafts, settings).
  public let docID: String?
}

extension DocumentStore {
  /// A notice for every event committed after `position` (by any process), as it commits:
  /// cheaper than ``liveChanges(_:)``, which reads each row. Ends when its task is cancelled
  /// or the store closes.
  public func changeNotices(after position: LogPosition) -> ChangeNotices {
    ChangeNotices(log: log, after: position)
  }
}

/// See ``DocumentStore/changeNotices(after:)``.
public struct ChangeNotices: AsyncSequence, Sendable {
  public typealias Element = ChangeNotice
  let log: EventLog
  let after: LogPosition

  public func makeAsyncIterator() -> Iterator {
    Iterator(headings: log.headings(after: after).makeAsyncIterator())
  }

  public struct Iterator: AsyncIteratorProtocol {
    var headings: EventHeadings.Iterator

    /// Read from the events' heads (``EventHeading``): no payload is copied or checked.
    public mutating func next() async throws -> ChangeNotice? {
      var next: EventHeading?
      while next == nil {
        switch try await headings.next() {
        case nil: return nil
        case .caughtUp: continue
        case .heading(let heading): next = heading
        }
      }
      let heading = next.unsafelyUnwrapped
      let isDocument =
        heading.type == DocumentEvent.Kind.edit.eventType
        || heading.type == DocumentEvent.Kind.replicated.eventType
      // A document event's stream is its document id.
      return ChangeNotice(position: heading.position, docID: isDocument ? heading.stream : nil)
    }
  }
}
