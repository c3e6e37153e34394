#if canImport(FoundationEssentials)
  import FoundationEssentials
#else
  import Foundation
#endif

/// A write transaction: appends events and writes caller-owned databases atomically.
///
/// Everything done through one `WriteTransaction` commits together or not at all. This is how an
/// inline projection stays exactly in step with the log: append the event and update the
/// projection's databases in the same transaction.
///
/// ```swift
/// let pages = try log.database(named: "pages")
/// try log.write { txn in
///   let event = try txn.append(NewEvent(type: "page.saved", stream: "wiki1:Home", payload: body))
///   try txn.put(event.position.rawValue.bigEndianBytes, forKey: Array("wiki1:Home".utf8), in: pages)
/// }
/// ```
///
/// A write transaction can do every read a ``ReadTransaction`` can and sees its own writes.
///
/// ## LMDB limitations
/// The body may run more than once: when the map is full, the transaction is aborted, the map
/// grows and the body runs again. Keep side effects outside the transaction out of it.
public final class WriteTransaction: ReadTransaction {
  let writer: WriterState
  /// Events appended by this transaction (and committed savepoints inside it).
  var appendedCount = 0
  /// Write operations attempted through this transaction (and committed savepoints inside it):
  /// tells the group writer whether a failed write left anything behind.
  var mutationCount = 0
  /// Set when LMDB reported that the map or the transaction is full: the caller grows and retries.
  var sawMapFull = false
  /// A cursor on `log.streams` for single appends, opened on first use and closed by ``end()``.
  private var streamCursor: RawCursor?
  /// A cursor per caller-owned database for puts and point reads, by handle, opened on first
  /// use and closed by ``end()`` (and before a savepoint): an operation near the last one (a
  /// projection writing its rows in key order, or writing the row it just read) then skips the
  /// search from the root.
  private var pointCursors: [RawCursor?] = []
  /// Set when an append failed after writing part of its events: the transaction must not
  /// commit, and committing it throws this error instead.
  var poison: LogError?
  /// The ``TransactionBuffer``s opened in this transaction, in the order they were opened.
  private var buffers: [(key: ObjectIdentifier, buffer: any TransactionBuffer)] = []

  init(log: EventLog, raw: RawTransaction, writer: WriterState) {
    self.writer = writer
    super.init(log: log, raw: raw)
  }

  /// Ends the transaction's use: later calls fail their precondition. Called before the raw
  /// transaction commits or aborts, because a write transaction's cursors must be closed while
  /// it is live (lmdb.h, mdb_cursor_close).
  func end() {
    isLive = false
    closeCursors()
  }

  func closeCursors() {
    streamCursor?.close()
    streamCursor = nil
    for cursor in pointCursors { cursor?.close() }
    pointCursors.removeAll()
  }

  override func pointCursor(_ handle: UInt32) throws(LMDBError) -> RawCursor? {
    try cursor(for: handle)
  }

  /// The cursor puts and point reads of database `handle` go through (``pointCursors``).
  private func cursor(for handle: UInt32) throws(LMDBError) -> RawCursor {
    let i = Int(handle)
    if i < pointCursors.count, let cursor = pointCursors[i] { return cursor }
    let cursor = try raw.openCursor(handle)
    if i >= pointCursors.count {
      pointCursors.append(contentsOf: repeatElement(nil, count: i + 1 - pointCursors.count))
    }
    pointCursors[i] = cursor
    return cursor
  }

  @inline(__always)
  func ensureNotLending() {
    precondition(
      lending == 0, "a log transaction cannot write while it lends stored bytes to a closure")
  }

  @inline(__always)
  func performWrite<T>(_ operation: () throws -> T) throws(LogError) -> T {
    ensureLive()
    ensureNotLending()
    mutationCount &+= 1
    do {
      return try operation()
    } catch let error as LMDBError
      where error.code == LMDBError.mapFull || error.code == LMDBError.txnFull
    {
      sawMapFull = true
      throw log.logError(error)
    } catch {
      throw log.logError(error)
    }
  }

  // MARK: Appending

  /// The position the next appended event will get in this transaction.
  public var nextPosition: LogPosition {
    ensureLive()
    return LogPosition(writer.nextPosition)
  }

  /// Appends one event and returns it as recorded.
  ///
  /// - Throws: ``LogError/wrongExpectedVersion(stream:expected:actual:)`` when the event's
  ///   expected version does not hold (nothing is written).
  @discardableResult
  public func append(_ event: NewEvent) throws(LogError) -> RecordedEvent {
    try performWrite { try appendOne(event) }
  }

  /// One event: its stream's head is read and moved with one B-tree search on `log.streams`
  /// (``RawTransaction/advanceStream(cursor:key:expected:position:streams:streamIndex:)``), and
  /// no arrays are built.
  ///
  /// Nothing is written when it throws a ``LogError``; when it fails after writing the head,
  /// the transaction is poisoned (``poison``) and cannot commit.
  ///
  /// In a batch whose leaves a ``LeafHasher`` hashes, the event is `leaves`'s `index`th: its
  /// record goes there rather than its leaf into the tree.
  private func appendOne(
    _ event: NewEvent, timestamp batchTimestamp: Int64? = nil, leaves: LeafHasher? = nil,
    index: Int = 0
  ) throws -> RecordedEvent {
    let position = writer.nextPosition
    var version: UInt64 = 0
    var previous: UInt64 = 0
    if event.stream.isEmpty {
      guard event.expectedVersion == .any else {
        throw LogError.invalidArgument("an event with no stream cannot expect a stream version")
      }
    } else {
      let cursor: RawCursor
      if let open = streamCursor {
        cursor = open
      } else {
        cursor = try raw.openCursor(log.dbs.streams)
        streamCursor = cursor
      }
      let expected = event.expectedVersion
      let advance = try raw.advanceStream(
        cursor: cursor, stream: event.stream, expected: expected, position: position,
        streams: log.dbs.streams, streamIndex: log.dbs.streamIndex)
      switch advance {
      case .advanced(let v, let p):
        version = v
        previous = p
      case .wrongVersion(let actual):
        throw LogError.wrongExpectedVersion(
          stream: event.stream, expected: expected, actual: actual)
      case .malformedHead:
        throw LogError.corruptDatabase(
          path: log.path, reason: "the head of stream '\(event.stream)' is malformed")
      }
      // Keep the batch path's cache of stream heads in step (it is empty unless batches ran).
      if !writer.streamCache.isEmpty {
        writer.streamCache[event.stream]?.head = StreamHead(version: version, last: position)
      }
    }
    let timestamp = batchTimestamp ?? max(Self.now(), writer.lastTimestamp)
    let leaf: MerkleDigest?
    do {
      leaf = try EventRecord.append(
        .init(position: position, timestamp: timestamp, streamVersion: version, previous: previous),
        event, into: log.dbs.events, of: raw, leafHash: log.options.merkleTree, hasher: leaves,
        index: index)
    } catch {
      // The stream's head has moved already.
      if !event.stream.isEmpty { poison = poison ?? log.logError(error) }
      throw error
    }
    do {
      try log.addLeaf(leaf, raw)
    } catch {
      // The event is written: without its leaf the transaction must not commit.
      poison = poison ?? log.logError(error)
      throw error
    }
    writer.nextPosition = position + 1
    writer.lastTimestamp = timestamp
    appendedCount += 1
    return RecordedEvent(
      position: LogPosition(position), streamVersion: version, timestampMicroseconds: timestamp,
      type: event.type, stream: event.stream, actor: event.actor, payload: event.payload)
  }

  /// Microseconds since 1970.
  @inline(__always)
  static func now() -> Int64 {
    Int64(Date().timeIntervalSince1970 * 1_000_000)
  }

  /// Appends a batch of events atomically and returns them as recorded.
  ///
  /// Every event's expected version is checked first, in order (a later event of the same stream
  /// sees the earlier ones), and nothing is written if one fails.
  ///
  /// - Parameters:
  ///   - events: the events, in the order they get positions.
  ///   - idempotencyKey: when given and already used by an earlier append of the same events, the
  ///     earlier events are returned and nothing is written (``AppendResult/isDuplicate``).
  /// - Throws: ``LogError/wrongExpectedVersion(stream:expected:actual:)``,
  ///   ``LogError/idempotencyConflict(key:)`` when the key was used for different events.
  @discardableResult
  public func append(contentsOf events: [NewEvent], idempotencyKey: String? = nil) throws(LogError)
    -> AppendResult
  {
    try performWrite {
      var idempotencyEntry: [UInt8]?
      if let idempotencyKey {
        let key = StreamKey.idempotency(idempotencyKey)
        if let stored = try raw.get(log.dbs.idempotency, key) {
          return AppendResult(
            events: try replay(stored, of: events, key: idempotencyKey), isDuplicate: true)
        }
        idempotencyEntry = key
      }
      guard !events.isEmpty else { return AppendResult(events: [], isDuplicate: false) }
      if events.count == 1 && idempotencyKey == nil {
        return AppendResult(events: [try appendOne(events[0])], isDuplicate: false)
      }
      var checked = false
      for i in events.indices where events[i].expectedVersion != .any {
        checked = true
        break
      }
      if !checked {
        // Nothing to check before writing: each event moves its stream's head as it is written.
        let first = writer.nextPosition
        let timestamp = max(Self.now(), writer.lastTimestamp)
        var recorded: [RecordedEvent] = []
        recorded.reserveCapacity(events.count)
        var leaves = log.leafHasher(for: events)
        defer { leaves?.abandon() }
        do {
          for i in events.indices {
            recorded.append(
              try appendOne(events[i], timestamp: timestamp, leaves: leaves, index: i))
          }
          if let hasher = leaves {
            leaves = nil
            try log.addLeaves(hasher.finish(), raw)
          }
        } catch  where !recorded.isEmpty {
          // Part of the batch is written (a malformed stream head, say, in a corrupt database):
          // that part must not commit.
          poison = poison ?? log.logError(error)
          throw error
        }
        if let idempotencyEntry {
          try raw.put(
            log.dbs.idempotency, idempotencyEntry,
            first.bigEndianBytes + UInt64(events.count).bigEndianBytes)
        }
        return AppendResult(events: recorded, isDuplicate: false)
      }

      // Check every expectation before writing anything, working on the writer's stream cache
      // with an undo list, so that a failed check leaves the cache as it was.
      let first = writer.nextPosition
      var versions = [UInt64](repeating: 0, count: events.count)
      var previous = [UInt64](repeating: 0, count: events.count)
      writer.appendCall &+= 1
      let call = writer.appendCall
      var touched: [String] = []
      var undo: [(String, CachedStream?)] = []
      do {
        for i in events.indices {
          let stream = events[i].stream
          guard !stream.isEmpty else {
            guard events[i].expectedVersion == .any else {
              throw LogError.invalidArgument(
                "an event with no stream cannot expect a stream version")
            }
            continue
          }
          let expected = events[i].expectedVersion
          let position = first + UInt64(i)
          try withCachedStream(stream) { entry, wasCached in
            if entry.call != call {
              undo.append((stream, wasCached ? entry : nil))
              touched.append(stream)
              entry.call = call
            }
            guard expected.isSatisfied(by: entry.head.version) else {
              throw LogError.wrongExpectedVersion(
                stream: stream, expected: expected, actual: entry.head.version)
            }
            versions[i] = entry.head.version + 1
            previous[i] = entry.head.last
            entry.head = StreamHead(version: versions[i], last: position)
          }
        }
      } catch {
        for (stream, old) in undo.reversed() { writer.streamCache[stream] = old }
        throw error
      }

      let timestamp = max(Self.now(), writer.lastTimestamp)
      var recorded: [RecordedEvent] = []
      recorded.reserveCapacity(events.count)
      var leaves = log.leafHasher(for: events)
      defer { leaves?.abandon() }
      do {
        for i in events.indices {
          let position = first + UInt64(i)
          let leaf = try EventRecord.append(
            .init(
              position: position, timestamp: timestamp, streamVersion: versions[i],
              previous: previous[i]),
            events[i], into: log.dbs.events, of: raw, leafHash: log.options.merkleTree,
            hasher: leaves, index: i)
          try log.addLeaf(leaf, raw)
          if versions[i] > 0, versions[i] % StreamKey.checkpointInterval == 0,
            let prefix = writer.streamCache[events[i].stream]?.prefix
          {
            try raw.put(
              log.dbs.streamIndex, StreamKey.key(prefix: prefix, version: versions[i]),
              position.bigEndianBytes)
          }
          recorded.append(
            RecordedEvent(
              position: LogPosition(position), streamVersion: versions[i],
              timestampMicroseconds: timestamp,
              type: events[i].type, stream: events[i].stream, actor: events[i].actor,
              payload: events[i].payload))
        }
        if let hasher = leaves {
          leaves = nil
          try log.addLeaves(hasher.finish(), raw)
        }
        for stream in touched {
          guard let entry = writer.streamCache[stream] else { continue }
          try raw.putStreamHead(log.dbs.streams, prefix: entry.prefix, entry.head)
        }
        if let idempotencyEntry {
          try raw.put(
            log.dbs.idempotency, idempotencyEntry,
            first.bigEndianBytes + UInt64(events.count).bigEndianBytes)
        }
      } catch {
        // The stream cache has moved every head already, and part of the batch may be written
        // (the map is full, say): the transaction must not commit.
        poison = poison ?? log.logError(error)
        throw error
      }
      writer.nextPosition = first + UInt64(events.count)
      writer.lastTimestamp = timestamp
      appendedCount += events.count
      return AppendResult(events: recorded, isDuplicate: false)
    }
  }

  /// Runs `body` on the cached head of `stream`, loading it from `log.streams` on a miss: one
  /// hash lookup when it is cached. `wasCached` tells the body whether the entry existed before.
  private func withCachedStream(
    _ stream: String, _ body: (inout CachedStream, _ wasCached: Bool) throws -> Void
  )
    throws
  {
    var failure: (any Error)?
    var loadFailed = false
    modify(&writer.streamCache[stream, default: .placeholder]) { entry in
      let wasCached = !entry.prefix.isEmpty
      if !wasCached {
        do {
          let prefix = StreamKey.prefix(stream)
          let head =
            try raw.streamHead(log.dbs.streams, prefix: prefix) ?? StreamHead(version: 0, last: 0)
          entry = CachedStream(prefix: prefix, head: head, call: 0)
        } catch {
          failure = error
          loadFailed = true
          return
        }
      }
      do { try body(&entry, wasCached) } catch { failure = error }
    }
    if loadFailed { writer.streamCache[stream] = nil }
    if let failure { throw failure }
  }

  /// The events an idempotency key recorded, after checking they are the events being retried.
  private func replay(_ stored: [UInt8], of events: [NewEvent], key: String) throws
    -> [RecordedEvent]
  {
    guard stored.count == 16, let first = UInt64(bigEndianBytes: stored),
      let count = UInt64(bigEndianBytes: stored[8...])
    else {
      throw LogError.corruptDatabase(
        path: log.path, reason: "idempotency entry for '\(key)' is malformed")
    }
    guard count == UInt64(events.count) else { throw LogError.idempotencyConflict(key: key) }
    var originals: [RecordedEvent] = []
    for (i, event) in events.enumerated() {
      guard let original = try raw.event(log.dbs.events, at: first + UInt64(i)) else {
        throw LogError.corruptDatabase(
          path: log.path, reason: "idempotency key '\(key)' points past the log")
      }
      guard original.type == event.type, original.stream == event.stream,
        original.actor == event.actor,
        original.payload == event.payload
      else { throw LogError.idempotencyConflict(key: key) }
      originals.append(original)
    }
    return originals
  }

  // MARK: Caller-owned databases

  /// Stores `value` under `key`, replacing what was there.
  public func put(_ value: [UInt8], forKey key: [UInt8], in database: Database) throws(LogError) {
    try checkKey(key.count)
    try performWrite { try cursor(for: database.handle).put(key, value) }
  }

  /// Stores `value` under the UTF-8 bytes of `key` (the key `Array(key.utf8)` names), using
  /// them where they lie: no array is made of them.
  public func put(_ value: [UInt8], forKey key: String, in database: Database) throws(LogError) {
    try checkKey(key.utf8.count)
    try performWrite { try cursor(for: database.handle).put(key, value) }
  }

  /// Stores `value` under `key`, which must sort after every key already in `database`
  /// (LMDB's `MDB_APPEND`): for indexes keyed by something that only grows, such as a log
  /// position. It skips the search a ``put(_:forKey:in:)`` makes and fills pages instead of
  /// splitting them in half.
  ///
  /// - Throws: ``LogError/invalidArgument(_:)`` when `key` does not sort after the last key; the
  ///   database and the transaction are unchanged and stay usable.
  public func putLast(_ value: [UInt8], forKey key: [UInt8], in database: Database)
    throws(LogError)
  {
    try checkKey(key.count)
    let appended = try performWrite {
      try raw.putIfLast(database.handle, key, value)
    }
    guard appended else {
      throw LogError.invalidArgument(
        "putLast: the key does not sort after the last key of \(database.name)")
    }
  }

  /// Removes `key`; false if it was not there.
  @discardableResult
  public func delete(_ key: [UInt8], in database: Database) throws(LogError) -> Bool {
    try checkKey(key.count)
    return try performWrite { try raw.delete(database.handle, key) }
  }

  /// Removes the key made of the UTF-8 bytes of `key`; false if it was not there.
  @discardableResult
  public func delete(_ key: String, in database: Database) throws(LogError) -> Bool {
    try checkKey(key.utf8.count)
    return try performWrite { try raw.delete(database.handle, key) }
  }

  /// Removes every entry of `database` whose key starts with `prefix` (at least one byte), one
  /// cursor walking them in key order: cheaper than a ``delete(_:in:)`` of each, which searches
  /// from the root. Returns how many it removed.
  @discardableResult
  public func removeAll(withPrefix prefix: [UInt8], in database: Database) throws(LogError) -> Int {
    try checkKey(prefix.count)
    return try performWrite { try cursor(for: database.handle).deleteAll(withPrefix: prefix) }
  }

  /// Removes every entry of `database` (to rebuild a projection, say).
  public func removeAll(in database: Database) throws(LogError) {
    try performWrite { try raw.clear(database.handle) }
  }

  private func checkKey(_ count: Int) throws(LogError) {
    guard count > 0, count <= log.maxKeySize else {
      throw LogError.invalidArgument(
        "keys must be 1 to \(log.maxKeySize) bytes; this one is \(count)")
    }
  }

  // MARK: Buffers

  /// The buffer `key` names in this transaction, made by `make` on first use: writes gathered
  /// in memory and written by ``TransactionBuffer/flush(into:)`` before the transaction (or the
  /// savepoint it belongs to) commits, before a savepoint begins in it, and when
  /// ``flushBuffers()`` is called. A transaction that aborts drops its buffers unwritten.
  ///
  /// For a projection that writes many rows per transaction to the same keys (an inverted index
  /// whose terms recur across the documents of a batch): each key is written once.
  public func buffer<B: TransactionBuffer>(_ key: ObjectIdentifier, make: () -> B) -> B {
    ensureLive()
    mutationCount &+= 1
    if let found = buffers.first(where: { $0.key == key })?.buffer as? B { return found }
    let made = make()
    buffers.append((key, made))
    return made
  }

  /// Writes every open buffer into the transaction and closes them, so that reads see them.
  public func flushBuffers() throws {
    while !buffers.isEmpty {
      let open = buffers
      buffers.removeAll()
      for (_, buffer) in open { try buffer.flush(into: self) }
    }
  }

  // MARK: Savepoints

  /// Runs `body` in a nested transaction: if it throws, only its own writes are undone and the
  /// error is rethrown; this transaction goes on.
  public func savepoint<T>(_ body: (WriteTransaction) throws -> T) throws -> T {
    ensureLive()
    ensureNotLending()
    // The savepoint must read what this transaction has buffered.
    try flushBuffers()
    // lmdb.h: a parent "and its cursors may not issue any other operations" while a child is
    // active, so this one's cursor is closed before the child begins, and reopened when needed.
    closeCursors()
    let childRaw: RawTransaction
    do throws(LMDBError) {
      childRaw = try log.env.beginWrite(parent: raw)
    } catch {
      throw log.logError(error)
    }
    let saved = (writer.nextPosition, writer.lastTimestamp, writer.frontier)
    let child = WriteTransaction(log: log, raw: childRaw, writer: writer)
    isLive = false
    defer { isLive = true }
    let value: T
    do {
      value = try body(child)
      try child.flushBuffers()
    } catch {
      child.end()
      childRaw.abort()
      writer.nextPosition = saved.0
      writer.lastTimestamp = saved.1
      writer.frontier = saved.2
      writer.streamCache.removeAll()
      if child.sawMapFull { sawMapFull = true }
      throw error
    }
    child.end()
    if let poison = child.poison {
      childRaw.abort()
      writer.nextPosition = saved.0
      writer.lastTimestamp = saved.1
      writer.frontier = saved.2
      writer.streamCache.removeAll()
      throw poison
    }
    do throws(LMDBError) {
      try childRaw.commit()
    } catch {
      writer.nextPosition = saved.0
      writer.lastTimestamp = saved.1
      writer.frontier = saved.2
      writer.streamCache.removeAll()
      if error.code == LMDBError.mapFull || error.code == LMDBError.txnFull { sawMapFull = true }
      throw log.logError(error)
    }
    appendedCount += child.appendedCount
    mutationCount &+= child.mutationCount
    return value
  }
}

/// Writes gathered over one write transaction (``WriteTransaction/buffer(_:make:)``), written
/// into it by `flush` before it commits. `flush` must leave the databases as writing each
/// change at once would have: whatever the transaction boundaries, the result is the same.
public protocol TransactionBuffer: AnyObject {
  func flush(into txn: WriteTransaction) throws
}

/// What an append produced.
public struct AppendResult: Sendable, Hashable {
  /// The events as recorded (for a duplicate, as recorded the first time).
  public let events: [RecordedEvent]
  /// True when an idempotency key matched an earlier append and nothing was written.
  public let isDuplicate: Bool
}

/// What the one writer of this process knows between transactions. Used only under the write lock.
final class WriterState: @unchecked Sendable {
  /// The id of the last transaction this process committed; if the next write transaction's id
  /// is one more, no other process has written since, and the cached values below still hold.
  var lastTransactionID = -1
  var cacheValid = false
  var nextPosition: UInt64 = 1
  var lastTimestamp: Int64 = 0
  /// Stream heads that batches with expectations loaded (appends without expectations read
  /// and move heads in `log.streams` directly, updating entries found here); cleared when
  /// another process writes.
  var streamCache: [String: CachedStream] = [:]
  /// Counts append calls, to tell the streams one call has touched.
  var appendCall: UInt64 = 0
  /// Hashes the leaves of large batches on another core (made on the first one).
  var leafHasher: LeafHasher?
  /// The right edge of the Merkle tree over the events up to `nextPosition - 1`.
  var frontier = MerkleFrontier()
  /// Whether this transaction changed the tree, so that its head must be stored at commit.
  var merkleDirty = false

  static let streamCacheLimit = 100_000
}

/// What the writer remembers of a stream between appends.
struct CachedStream {
  var prefix: [UInt8]
  var head: StreamHead
  /// The append call that last touched it.
  var call: UInt64
}

extension CachedStream {
  /// Stands in for a stream not loaded yet (a real prefix is never empty).
  static let placeholder = CachedStream(prefix: [], head: StreamHead(version: 0, last: 0), call: 0)
}

/// Applies `body` to `value` in place: with a dictionary's `default:` subscript, one lookup.
@inline(__always)
func modify<T>(_ value: inout T, _ body: (inout T) -> Void) {
  body(&value)
}
