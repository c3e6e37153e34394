import Formats
import Foundation
public import JSON
public import Log
public import Projections
public import RevTree
import Synchronization

/// The Mango indexes of a database, as one projection (`mango.*`).
///
/// | database | key | value |
/// | --- | --- | --- |
/// | `mango.live` | document id (as ``DocumentKey`` keys it) | log position of its winning revision's body (live documents), then the id when the key is not the id |
/// | `mango.conflicts` | document id (as ``DocumentKey`` keys it) | the document's `_conflicts` (a JSON array of revs), for documents that have any |
/// | `mango.defs` | design doc id · 0x00 · index name | the index's view, as JSON |
/// | `mango.entries` | index prefix · encoded field values (≤ 250 bytes) · doc key | document id (its length first), then the field values as a JSON array |
/// | `mango.byDoc` | index prefix · doc key | the document's row key in that index (its length first), then the field values as a JSON array |
///
/// The index prefix is the length (2 bytes) and bytes of `ddoc 0x00 name`; field values are
/// encoded by ``Collation`` (so LMDB's byte order is CouchDB's collation); a doc key is the
/// id, or for ids past 150 bytes a prefix and an MD5 (``MangoIndex/docKey(_:)``). The values
/// themselves are kept with the id, so that a query the index covers is answered from it
/// alone (``MangoIndex/covers(_:)``).
///
/// The definitions come from design documents: when a design document's winner changes, the
/// indexes it no longer defines (or defines differently) lose their rows, and new ones are
/// built in the same transaction from `mango.live`, `mango.conflicts` and the bodies in the log.
/// Every other change updates each index's row for the document; a change that leaves the
/// winner as it was (a conflicting revision) changes only `_conflicts`, which only indexes on
/// it read (CouchDB's indexes see each document's `_conflicts`). Everything depends on the change, the
/// log and these databases alone, so a replay rebuilds the same rows and `verify` compares
/// them; `mango.live` and `mango.conflicts` are what let an index defined later be built
/// without the documents projection's databases. Stores of the layouts before (`mango.docs`
/// for `mango.live`, no `mango.conflicts`; `mango.rows`, without the values, for
/// `mango.entries`) are refused when they open (``RetiredLayouts``).
public final class MangoProjection: DocumentChangeProjection, RetiredLayouts {
  public let name = "mango"
  /// 2: string keys are ICU sort keys (1 was wikilog's own approximation of them).
  public let layoutVersion = 2
  public let databaseNames = ["live", "conflicts", "defs", "entries", "byDoc"]
  public var retiredDatabaseNames: [String] { ["mango.docs", "mango.rows"] }

  /// Parsed definitions by their stored bytes (a definition is parsed once per process).
  private let parsed = Mutex<[[UInt8]: MangoIndex]>([:])

  /// The database's name, for the builds' progress (``IndexTasks``).
  let database: String
  /// Where builds show their progress: the data directory's (``DirectoryState/indexTasks``).
  let tasks: IndexTasks

  /// The projection of database `database`, its builds shown in `tasks` (give the data
  /// directory's ``DirectoryState/indexTasks``, so that `_active_tasks` lists them).
  public init(database: String = "", tasks: IndexTasks = IndexTasks()) {
    self.database = database
    self.tasks = tasks
  }

  public func apply(_ event: RecordedEvent, to storage: ProjectionStorage, in txn: WriteTransaction)
  {}

  public func apply(
    _ change: DocumentChange, share: Void?, to storage: ProjectionStorage, in txn: WriteTransaction
  ) throws {
    let design = change.docID.hasPrefix("_design/")
    if design && !change.winnerChanged { return }
    // Keyed like `docs.byId`; a long id's key is not the id, so its value carries the id.
    let id = DocumentKey.key(change.docID)
    var live: UInt64? = nil
    if let winner = change.tree.winner, !winner.isDeleted, let at = winner.body { live = at }
    if change.winnerChanged {
      if let at = live {
        let value =
          DocumentKey.isHashed(id)
          ? at.bigEndianBytes + Array(change.docID.utf8) : at.bigEndianBytes
        try txn.put(value, forKey: id, in: storage["live"])
      } else {
        _ = try txn.delete(id, in: storage["live"])
      }
    }
    // Only a tree with branches has conflicts (the common, linear one costs nothing here).
    var conflicts: JSONValue? = nil
    if !design && change.tree.hasBranches {
      let revs = change.tree.conflicts
      if revs.isEmpty {
        _ = try txn.delete(id, in: storage["conflicts"])
      } else {
        let list = JSONValue.array(revs.map { .string($0.description) })
        try txn.put(list.serialized(), forKey: id, in: storage["conflicts"])
        conflicts = list
      }
    }
    let cache = txn.buffer(ObjectIdentifier(self)) { DefinitionsCache() }
    if design {
      cache.indexes = nil
      let body = live == nil ? nil : try change.winnerBody(in: txn)
      try updateDefinitions(
        change.docID, MangoIndex.indexes(inDesignDocument: change.docID, body: body),
        storage: storage, txn: txn)
      return
    }
    let indexes: [MangoIndex]
    if let known = cache.indexes, cache.database == storage["defs"].name {
      indexes = known
    } else {
      indexes = try definitions(storage: storage, txn: txn)
      cache.indexes = indexes
      cache.database = storage["defs"].name
    }
    let touched = change.winnerChanged ? indexes : indexes.filter(\.needsConflicts)
    guard !touched.isEmpty else { return }
    var body = live == nil ? nil : try change.winnerBody(in: txn)
    if touched.contains(where: \.needsID) { body = Self.withID(change.docID, body) }
    if let conflicts, touched.contains(where: \.needsConflicts) {
      body = Self.withConflicts(conflicts, body)
    }
    // The document's first event: no index has a row of it yet.
    let isFirst = change.event.streamVersion == 1
    for index in touched {
      try update(
        index, docID: change.docID, body: body, isFirst: isFirst, storage: storage, txn: txn)
    }
  }

  /// A body with the document's `_conflicts`, as CouchDB's indexes see a document.
  static func withConflicts(_ conflicts: JSONValue, _ body: JSONValue?) -> JSONValue? {
    guard case .object(var object) = body else { return body }
    object.members.append(.init(key: "_conflicts", value: conflicts))
    return .object(object)
  }

  /// A stored body with its `_id` (which bodies are stored without), as selectors and index
  /// fields see a document.
  static func withID(_ id: String, _ body: JSONValue?) -> JSONValue? {
    guard case .object(var object) = body else { return body }
    object.members.insert(.init(key: "_id", value: .string(id)), at: 0)
    return .object(object)
  }

  /// The indexes defined now, in definition-key order (design doc, then name).
  func definitions(storage: ProjectionStorage, txn: ReadTransaction) throws -> [MangoIndex] {
    var out: [MangoIndex] = []
    try txn.scan(storage["defs"]) { key, value in
      if let index = parsed.withLock({ $0[key + value] }) {
        out.append(index)
        return true
      }
      guard let zero = key.firstIndex(of: 0) else { return true }
      let ddoc = String(decoding: key[..<zero], as: UTF8.self)
      let name = String(decoding: key[(zero + 1)...], as: UTF8.self)
      let view = try JSONValue(parsing: value)
      let body = JSONValue.object(
        JSONObject([
          .init(key: "language", value: .string("query")),
          .init(key: "views", value: .object(JSONObject([.init(key: name, value: view)]))),
        ]))
      if let index = MangoIndex.indexes(inDesignDocument: ddoc, body: body).first {
        parsed.withLock { $0[key + value] = index }
        out.append(index)
      }
      return true
    }
    return out
  }

  /// Moves document `docID`'s row in `index` to what `body` (nil: deleted) gives; `isFirst`
  /// when the document had no row (its first event), which spares looking for one.
  func update(
    _ index: MangoIndex, docID: String, body: JSONValue?, isFirst: Bool,
    storage: ProjectionStorage, txn: WriteTransaction
  ) throws {
    let byDocKey = index.prefix + MangoIndex.docKey(docID)
    let rows = body.flatMap { index.entry(docID, $0) }.map { Self.rows(index, docID, $0) }
    if !isFirst, let old = try txn.get(byDocKey, in: storage["byDoc"]) {
      if old == rows?.byDoc { return }
      var r = ByteReader(old)
      _ = try txn.delete(Array(try r.data()), in: storage["entries"])
    }
    if let rows {
      try txn.put(rows.value, forKey: rows.key, in: storage["entries"])
      try txn.put(rows.byDoc, forKey: byDocKey, in: storage["byDoc"])
    } else {
      _ = try txn.delete(byDocKey, in: storage["byDoc"])
    }
  }

  /// Document `docID`'s rows for its `entry` in `index`: the `mango.entries` key (index prefix,
  /// encoded values, doc key) and value (the id, its length first, then the values), and the
  /// `mango.byDoc` value (that key, its length first, then the values).
  static func rows(_ index: MangoIndex, _ docID: String, _ entry: MangoIndex.Entry) -> (
    key: [UInt8], value: [UInt8], byDoc: [UInt8]
  ) {
    let key = index.prefix + entry.key + MangoIndex.docKey(docID)
    var value = ByteWriter(capacity: docID.utf8.count + entry.values.count + 2)
    value.string(docID)
    value.raw(entry.values)
    var byDoc = ByteWriter(capacity: key.count + entry.values.count + 2)
    byDoc.data(key)
    byDoc.raw(entry.values)
    return (key, value.bytes, byDoc.bytes)
  }

  /// Replaces design document `ddoc`'s indexes by `indexes`: those gone or changed lose their
  /// rows, those new or changed are built from every live document.
  func updateDefinitions(
    _ ddoc: String, _ indexes: [MangoIndex], storage: ProjectionStorage, txn: WriteTransaction
  ) throws {
    let ddocPrefix = Array(ddoc.utf8) + [0]
    var existing: [[UInt8]: [UInt8]] = [:]
    try txn.scan(storage["defs"], from: ddocPrefix) { key, value in
      guard key.starts(with: ddocPrefix) else { return false }
      existing[key] = value
      return true
    }
    var wanted: [[UInt8]: (MangoIndex, [UInt8])] = [:]
    for index in indexes {
      wanted[ddocPrefix + Array(index.name.utf8)] = (index, index.view.serialized())
    }
    for (key, value) in existing where wanted[key]?.1 != value {
      let name = String(decoding: key[ddocPrefix.count...], as: UTF8.self)
      try drop(MangoIndex(ddoc: ddoc, name: name, fields: []).prefix, storage: storage, txn: txn)
      _ = try txn.delete(key, in: storage["defs"])
    }
    for (key, (index, value)) in wanted.sorted(by: { $0.key.lexicographicallyPrecedes($1.key) })
    where existing[key] != value {
      try txn.put(value, forKey: key, in: storage["defs"])
      try build(index, storage: storage, txn: txn)
    }
  }

  /// Removes every row of the index whose rows start with `prefix`.
  func drop(_ prefix: [UInt8], storage: ProjectionStorage, txn: WriteTransaction) throws {
    for db in [storage["entries"], storage["byDoc"]] {
      var keys: [[UInt8]] = []
      try txn.scan(db, from: prefix) { key, _ in
        guard key.starts(with: prefix) else { return false }
        keys.append(key)
        return true
      }
      for key in keys { _ = try txn.delete(key, in: db) }
    }
  }

  /// Adds every live document's row to `index` (bodies read from the log).
  ///
  /// In chunks of ``buildChunk`` documents: their events are read on the writer's thread, then
  /// decoded, parsed and keyed on two threads, and the rows written in key order. The index is
  /// new (``updateDefinitions(_:_:storage:txn:)`` dropped any rows of its name), so nothing is
  /// read back from `mango.byDoc`.
  func build(_ index: MangoIndex, storage: ProjectionStorage, txn: WriteTransaction) throws {
    let total = try txn.count(of: storage["live"])
    let task = tasks.start(
      database: database, designDocument: index.ddoc, index: index.name, total: total)
    defer { tasks.finish(task) }
    var docs: [(String, UInt64)] = []
    try txn.scan(storage["live"]) { key, value in
      let id = DocumentKey.inlineID(key) ?? String(decoding: value.dropFirst(8), as: UTF8.self)
      docs.append((id, UInt64(bigEndianBytes: value.prefix(8)) ?? 0))
      return true
    }
    let prefix = index.prefix
    var done = 0
    for start in stride(from: 0, to: docs.count, by: Self.buildChunk) {
      tasks.progress(task, done: done)
      let chunk = docs[start..<min(docs.count, start + Self.buildChunk)].filter {
        !$0.0.hasPrefix("_design/")
      }
      var events: [RecordedEvent] = []
      events.reserveCapacity(chunk.count)
      for (_, at) in chunk {
        guard let event = try txn.event(at: LogPosition(at)) else {
          throw StoreError.internalError("the body at \(at) is missing from the log")
        }
        events.append(event)
      }
      var conflicts: [[UInt8]?] = []
      if index.needsConflicts {
        conflicts = try chunk.map { try txn.get(DocumentKey.key($0.0), in: storage["conflicts"]) }
      }
      let entries = Self.entries(
        index, ids: chunk.map(\.0), events: events, conflicts: conflicts)
      var rows: [(key: [UInt8], value: [UInt8])] = []
      rows.reserveCapacity(chunk.count)
      for (i, (id, _)) in chunk.enumerated() {
        guard let entry = entries[i] else { continue }
        let (key, value, byDoc) = Self.rows(index, id, entry)
        try txn.put(byDoc, forKey: prefix + MangoIndex.docKey(id), in: storage["byDoc"])
        rows.append((key, value))
      }
      rows.sort { $0.key.lexicographicallyPrecedes($1.key) }
      for (key, value) in rows { try txn.put(value, forKey: key, in: storage["entries"]) }
      done += chunk.count
    }
  }

  /// Documents a build keys at a time.
  static let buildChunk = 16_384

  /// The entries of documents `ids` whose winning revisions are `events` (nil: not in the
  /// index), worked out on two threads. `conflicts` (empty, or one per document) holds each
  /// one's stored `_conflicts`.
  static func entries(
    _ index: MangoIndex, ids: [String], events: [RecordedEvent], conflicts: [[UInt8]?]
  ) -> [MangoIndex.Entry?] {
    let parts = ids.count < 256 ? 1 : 2
    let results = Mutex<[[MangoIndex.Entry?]]>(Array(repeating: [], count: parts))
    DispatchQueue.concurrentPerform(iterations: parts) { part in
      let range =
        (ids.count * part / parts)..<(ids.count * (part + 1) / parts)
      var out: [MangoIndex.Entry?] = []
      out.reserveCapacity(range.count)
      for i in range {
        var body = (try? DocumentEvent(decoding: events[i])).flatMap {
          try? JSONValue(parsing: $0.body)
        }
        if !conflicts.isEmpty, let stored = conflicts[i],
          let revs = try? JSONValue(parsing: stored)
        {
          body = withConflicts(revs, body)
        }
        out.append(withID(ids[i], body).flatMap { index.entry(ids[i], $0) })
      }
      results.withLock { $0[part] = out }
    }
    return results.withLock { $0.flatMap { $0 } }
  }
}

/// The indexes defined, read once per transaction (a design document's change in it forgets
/// them): nothing to write at commit.
final class DefinitionsCache: TransactionBuffer {
  var indexes: [MangoIndex]?
  var database = ""
  func flush(into txn: WriteTransaction) {}
}
