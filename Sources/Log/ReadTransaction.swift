/// A consistent, read-only snapshot of the log and its databases.
///
/// Valid only inside the closure it is passed to (``EventLog/read(_:)``, or as the base class of
/// ``WriteTransaction``). Readers never block the writer and see nothing committed after they
/// began.
///
/// ```swift
/// let (last, value) = try log.read { txn in
///   (txn.lastPosition, try txn.get(Array("checkpoint".utf8), in: projectionDB))
/// }
/// ```
public class ReadTransaction {
  let log: EventLog
  let raw: RawTransaction
  var isLive = true
  /// How many ``withValue(forKey:in:_:)`` and ``scanBorrowed(_:from:direction:_:)`` bodies are
  /// running: their spans point into pages that a write could change or free, so a write
  /// transaction refuses to write meanwhile.
  var lending = 0
  /// The last event type and actor this transaction decoded: events read one by one reuse
  /// their strings.
  var strings = EventRecord.RepeatedStrings()

  init(log: EventLog, raw: RawTransaction) {
    self.log = log
    self.raw = raw
  }

  @inline(__always)
  func ensureLive() {
    precondition(isLive, "a log transaction was used after its closure returned")
  }

  /// Runs an LMDB operation, turning its failures into ``LogError``.
  @inline(__always)
  func perform<T>(_ operation: () throws -> T) throws(LogError) -> T {
    ensureLive()
    do {
      return try operation()
    } catch {
      throw log.logError(error)
    }
  }

  // MARK: The log

  /// The position of the last event in this snapshot (``LogPosition/start`` when empty).
  public var lastPosition: LogPosition {
    get throws(LogError) {
      try perform { LogPosition(try raw.lastEvent(log.dbs.events)?.position ?? 0) }
    }
  }

  /// The event at `position`, or nil if there is none.
  public func event(at position: LogPosition) throws(LogError) -> RecordedEvent? {
    try perform { try raw.event(log.dbs.events, at: position.rawValue, strings: &strings) }
  }

  /// Calls `body` with each event from `position` (inclusive) in `direction` until it returns
  /// false or the log ends.
  public func forEachEvent(
    from position: LogPosition, direction: ReadDirection = .forward,
    _ body: (RecordedEvent) throws -> Bool
  ) throws {
    ensureLive()
    // A copy: `body` may read events one by one (`event(at:)`) through this transaction.
    var strings = self.strings
    try translatingStorageErrors {
      try raw.forEachEvent(
        log.dbs.events, from: position.rawValue, forward: direction == .forward,
        strings: &strings, body)
    }
  }

  /// Calls `body` with each event of one of `types` from `position` (inclusive) in `direction`
  /// until it returns false or the log ends; events of other types are skipped.
  ///
  /// A skipped event's checksum is still verified, but no strings or payload array are made of
  /// it: a projection that cares about a few types replays the log at a fraction of the cost of
  /// ``forEachEvent(from:direction:_:)``.
  ///
  /// ```swift
  /// try txn.forEachEvent(from: .start, ofTypes: ["doc.edit", "doc.replicated"]) { event in
  ///   try apply(event)
  ///   return true
  /// }
  /// ```
  public func forEachEvent(
    from position: LogPosition, direction: ReadDirection = .forward, ofTypes types: [String],
    _ body: (RecordedEvent) throws -> Bool
  ) throws {
    ensureLive()
    var strings = self.strings
    try translatingStorageErrors {
      try raw.forEachEvent(
        log.dbs.events, from: position.rawValue, forward: direction == .forward,
        types: types.map { Array($0.utf8) }, strings: &strings, body)
    }
  }

  /// The number of events in `stream` (0 if it does not exist).
  public func streamVersion(of stream: String) throws(LogError) -> UInt64 {
    try perform {
      try raw.streamHead(log.dbs.streams, prefix: StreamKey.prefix(stream))?.version ?? 0
    }
  }

  /// Calls `body` with the events of `stream` from `version` (1-based, inclusive) in `direction`
  /// until it returns false.
  ///
  /// Each record points to its stream's previous event; the walk starts from the stream's head or
  /// from the nearest checkpoint at or after where it is going, so it reads at most
  /// ``StreamKey/checkpointInterval`` records it does not return.
  public func forEachEvent(
    inStream stream: String, fromVersion version: UInt64, direction: ReadDirection = .forward,
    _ body: (RecordedEvent) throws -> Bool
  ) throws {
    ensureLive()
    try translatingStorageErrors {
      let prefix = StreamKey.prefix(stream)
      guard let head = try raw.streamHead(log.dbs.streams, prefix: prefix), head.version > 0 else {
        return
      }
      switch direction {
      case .forward:
        var from = max(version, 1)
        while from <= head.version {
          let blockEnd = min(
            head.version,
            (from - 1) / StreamKey.checkpointInterval * StreamKey.checkpointInterval
              + StreamKey.checkpointInterval)
          var block = try walkBack(
            stream, prefix: prefix, head: head, from: blockEnd, through: from)
          block.reverse()
          for event in block {
            guard try body(event) else { return }
          }
          from = blockEnd + 1
        }
      case .backward:
        let start = min(version, head.version)
        guard start >= 1 else { return }
        let checkpoint = min(
          head.version,
          (start + StreamKey.checkpointInterval - 1) / StreamKey.checkpointInterval
            * StreamKey.checkpointInterval)
        var position = try checkpointPosition(prefix: prefix, head: head, version: checkpoint)
        var current = checkpoint
        while position != 0 {
          guard let (event, previous) = try raw.eventWithPrevious(log.dbs.events, at: position),
            event.streamVersion == current, event.stream == stream
          else { throw brokenChain(stream, at: position) }
          if current <= start {
            guard try body(event) else { return }
          }
          position = previous
          current -= 1
        }
      }
    }
  }

  /// Runs `body`, turning LMDB's and the record decoder's errors into ``LogError``s; errors of
  /// the caller's own closures pass through unchanged.
  private func translatingStorageErrors(_ body: () throws -> Void) throws {
    do {
      try body()
    } catch let error as LMDBError {
      throw log.logError(error)
    } catch let error as RecordFailure {
      throw log.logError(error)
    }
  }

  /// The events of `stream` from version `high` down to `low`, newest first.
  private func walkBack(
    _ stream: String, prefix: [UInt8], head: StreamHead, from high: UInt64, through low: UInt64
  )
    throws -> [RecordedEvent]
  {
    var events: [RecordedEvent] = []
    events.reserveCapacity(Int(high - low + 1))
    var position = try checkpointPosition(prefix: prefix, head: head, version: high)
    var current = high
    while current >= low {
      guard position != 0,
        let (event, previous) = try raw.eventWithPrevious(log.dbs.events, at: position),
        event.streamVersion == current, event.stream == stream
      else { throw brokenChain(stream, at: position) }
      events.append(event)
      position = previous
      current -= 1
    }
    return events
  }

  /// The position of version `version` of a stream, which is its head or a checkpoint.
  private func checkpointPosition(prefix: [UInt8], head: StreamHead, version: UInt64) throws
    -> UInt64
  {
    if version == head.version { return head.last }
    guard
      let value = try raw.get(log.dbs.streamIndex, StreamKey.key(prefix: prefix, version: version)),
      let position = UInt64(bigEndianBytes: value)
    else {
      throw LogError.corruptDatabase(
        path: log.path, reason: "stream checkpoint \(version) is missing")
    }
    return position
  }

  private func brokenChain(_ stream: String, at position: UInt64) -> LogError {
    .corruptDatabase(
      path: log.path, reason: "the chain of stream '\(stream)' breaks at position \(position)")
  }

  /// The first position whose event was committed at or after `microseconds` since 1970, or nil
  /// if every event is older. Timestamps never decrease along the log, so this is a binary search.
  public func firstPosition(atOrAfterMicroseconds microseconds: Int64) throws(LogError)
    -> LogPosition?
  {
    try perform {
      guard let last = try raw.lastEvent(log.dbs.events), last.timestamp >= microseconds else {
        return nil
      }
      var low: UInt64 = 1
      var high = last.position
      while low < high {
        let mid = low + (high - low) / 2
        guard let t = try raw.timestamp(log.dbs.events, at: mid) else {
          throw LogError.corruptDatabase(path: log.path, reason: "position \(mid) is missing")
        }
        if t < microseconds { low = mid + 1 } else { high = mid }
      }
      return LogPosition(low)
    }
  }

  // MARK: Caller-owned databases

  /// The value stored under `key`, or nil.
  public func get(_ key: [UInt8], in database: Database) throws(LogError) -> [UInt8]? {
    try perform {
      if let cursor = try pointCursor(database.handle) { return try cursor.value(key) }
      return try raw.get(database.handle, key)
    }
  }

  /// The value stored under the UTF-8 bytes of `key` (the key `Array(key.utf8)` names), or nil;
  /// the key's bytes are used where they lie, no array is made of them.
  public func get(_ key: String, in database: Database) throws(LogError) -> [UInt8]? {
    try perform {
      if let cursor = try pointCursor(database.handle) { return try cursor.value(key) }
      return try raw.get(database.handle, key)
    }
  }

  /// Calls `body` with the value stored under `key` without copying it, and returns what `body`
  /// returns; nil, without calling `body`, when there is no such key.
  ///
  /// The span points into the database's memory map and cannot escape `body`; copy what must
  /// outlive it. Cheaper than ``get(_:in:)`` when only part of the value is needed, or when it
  /// is decoded straight away. `body` may read but not write through the transaction: LMDB may
  /// move or free the page under the span (a write in `body` stops the process).
  ///
  /// ```swift
  /// let position = try txn.withValue(forKey: key, in: index) { bytes in
  ///   (0..<8).reduce(UInt64(0)) { $0 << 8 | UInt64(bytes[$1]) }
  /// }
  /// ```
  @inlinable
  public final func withValue<R>(
    forKey key: [UInt8], in database: Database, _ body: (Span<UInt8>) throws -> R
  ) throws -> R? {
    // Generic only here, where it is inlined and specialized: the lookup below is not generic.
    var result: R?
    try lendValue(forKey: key, in: database) { result = try body($0) }
    return result
  }

  /// Lends the value stored under the UTF-8 bytes of `key` (the key `Array(key.utf8)` names),
  /// as the `[UInt8]` key's overload does; no array is made of the key.
  @inlinable
  public final func withValue<R>(
    forKey key: String, in database: Database, _ body: (Span<UInt8>) throws -> R
  ) throws -> R? {
    var result: R?
    try lendValue(forKey: key, in: database) { result = try body($0) }
    return result
  }

  @usableFromInline
  final func lendValue(
    forKey key: [UInt8], in database: Database, _ body: (Span<UInt8>) throws -> Void
  )
    throws
  {
    try lend {
      if let cursor = try pointCursor(database.handle) { return try cursor.withValue(key, body) }
      return try raw.withValue(database.handle, key, body)
    }
  }

  @usableFromInline
  final func lendValue(
    forKey key: String, in database: Database, _ body: (Span<UInt8>) throws -> Void
  )
    throws
  {
    try lend {
      if let cursor = try pointCursor(database.handle) { return try cursor.withValue(key, body) }
      return try raw.withValue(database.handle, key, body)
    }
  }

  /// The cursor that point reads of database `handle` go through, nil for `mdb_get`: a write
  /// transaction reads with the cursor it writes with (``WriteTransaction``), so that a read
  /// and then a write of the same key, or of keys in order, search from the root once.
  func pointCursor(_ handle: UInt32) throws(LMDBError) -> RawCursor? { nil }

  /// Runs an operation that lends stored bytes to a closure, refusing writes meanwhile.
  private func lend<R>(_ operation: () throws -> R) throws -> R {
    ensureLive()
    lending += 1
    defer { lending -= 1 }
    do {
      return try operation()
    } catch let error as LMDBError {
      throw log.logError(error)
    }
  }

  /// ``scan(_:from:direction:_:)`` without copies: `body` gets each key and value where they
  /// lie in the database's memory map, as spans that cannot escape it. As in
  /// ``withValue(forKey:in:_:)``, `body` may read but not write through the transaction.
  ///
  /// ```swift
  /// var total = 0
  /// try txn.scanBorrowed(sizes) { _, value in
  ///   total += value.count
  ///   return true
  /// }
  /// ```
  public func scanBorrowed(
    _ database: Database, from start: [UInt8]? = nil, direction: ReadDirection = .forward,
    _ body: (_ key: Span<UInt8>, _ value: Span<UInt8>) throws -> Bool
  ) throws {
    try lend {
      try raw.scanInPlace(database.handle, from: start, reverse: direction == .backward, body)
    }
  }

  /// Calls `body` with each entry from `start` (inclusive; nil = from the first entry, or the
  /// last one when `direction` is `.backward`) until it returns false.
  public func scan(
    _ database: Database, from start: [UInt8]? = nil, direction: ReadDirection = .forward,
    _ body: (_ key: [UInt8], _ value: [UInt8]) throws -> Bool
  ) throws {
    ensureLive()
    do {
      try raw.scan(database.handle, from: start, reverse: direction == .backward, body)
    } catch let error as LMDBError {
      throw log.logError(error)
    }
  }

  /// The number of entries in `database`.
  public func count(of database: Database) throws(LogError) -> Int {
    try perform { try raw.count(database.handle) }
  }

  /// The bytes of the pages `database` uses (immediate, like ``count(of:)``).
  public func pageBytes(of database: Database) throws(LogError) -> Int {
    try perform { try raw.pageBytes(database.handle) }
  }

  /// The number of entries of `database` with keys from `start` (inclusive; nil: from the first)
  /// and before `end` (exclusive; nil: through the last), in the database's key order.
  ///
  /// Walks the entries without copying them: its cost grows with the count, unlike
  /// ``count(of:)``, which is immediate.
  public func count(of database: Database, from start: [UInt8]?, before end: [UInt8]? = nil)
    throws(LogError) -> Int
  {
    try perform { try raw.countEntries(database.handle, from: start, before: end) }
  }
}

/// Which way a read walks.
public enum ReadDirection: Sendable, Hashable {
  case forward, backward
}
