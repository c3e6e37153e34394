import CLMDB

/// A stored event that failed to decode.
struct RecordFailure: Error {
  let position: UInt64
  let reason: String
}

/// The log's own reads and writes over raw pages; everything returned is copied out of the map.
extension RawTransaction {
  // MARK: Events

  /// The last event's position and timestamp, or nil for an empty log.
  /// The position of the last event (0 for an empty log), read from its key alone.
  func lastEventPosition(_ events: UInt32) throws(LMDBError) -> UInt64 {
    let cursor = try openCursor(events)
    defer { cursor.close() }
    guard let entry = try unsafe cursor.get(.last) else { return 0 }
    return unsafe Keys.position(entry.key)
  }

  func lastEvent(_ events: UInt32) throws -> (position: UInt64, timestamp: Int64)? {
    let cursor = try openCursor(events)
    defer { cursor.close() }
    guard let entry = try unsafe cursor.get(.last) else { return nil }
    let position = unsafe Keys.position(entry.key)
    do {
      return (position, try unsafe EventRecord.timestamp(of: entry.value))
    } catch {
      throw RecordFailure(position: position, reason: error.reason)
    }
  }

  /// The event at `position`; with `strings`, its type and actor reuse the strings of earlier
  /// events when they are the same.
  func event(
    _ events: UInt32, at position: UInt64, strings: inout EventRecord.RepeatedStrings
  ) throws -> RecordedEvent? {
    var key = position.bigEndian
    let found = try unsafe withUnsafeBytes(of: &key) { k throws(LMDBError) in
      try unsafe get(events, k)
    }
    guard let bytes = unsafe found else { return nil }
    do {
      let fields = try unsafe EventRecord.fields(position: position, bytes: bytes)
      return unsafe EventRecord.event(
        position: position, bytes: bytes, fields: fields, strings: &strings)
    } catch {
      throw RecordFailure(position: position, reason: error.reason)
    }
  }

  func event(_ events: UInt32, at position: UInt64) throws -> RecordedEvent? {
    var strings = EventRecord.RepeatedStrings()
    return try event(events, at: position, strings: &strings)
  }

  func timestamp(_ events: UInt32, at position: UInt64) throws -> Int64? {
    var key = position.bigEndian
    let found = try unsafe withUnsafeBytes(of: &key) { k throws(LMDBError) in
      try unsafe get(events, k)
    }
    guard let bytes = unsafe found else { return nil }
    do {
      return try unsafe EventRecord.timestamp(of: bytes)
    } catch {
      throw RecordFailure(position: position, reason: error.reason)
    }
  }

  /// Calls `body` with each event from `position` on (inclusive), forwards or backwards, until it
  /// returns false or the log ends. With `types`, only events whose type has one of these UTF-8
  /// spellings are decoded and passed; the others are checked (checksum and structure) and
  /// skipped before any string or array is made of them.
  func forEachEvent(
    _ events: UInt32, from position: UInt64, forward: Bool, types: [[UInt8]]? = nil,
    strings: inout EventRecord.RepeatedStrings, _ body: (RecordedEvent) throws -> Bool
  ) throws {
    let cursor = try openCursor(events)
    defer { cursor.close() }
    var entry = try unsafe start(cursor, at: position, forward: forward)
    while let e = unsafe entry {
      let p = unsafe Keys.position(e.key)
      let fields: EventRecord.Fields
      do {
        fields = try unsafe EventRecord.fields(position: p, bytes: e.value)
      } catch {
        throw RecordFailure(position: p, reason: error.reason)
      }
      if let types,
        unsafe !EventRecord.matches(e.value, fields.typeStart, fields.typeEnd, anyOf: types)
      {
        // Not wanted: checked, not decoded.
      } else {
        let event = unsafe EventRecord.event(
          position: p, bytes: e.value, fields: fields, strings: &strings)
        guard try body(event) else { return }
      }
      unsafe entry = try unsafe cursor.get(forward ? .next : .previous)
    }
  }

  /// Up to `limit` events from `position` (inclusive), decoded straight from the cursor.
  func readEvents(_ events: UInt32, from position: UInt64, forward: Bool, limit: Int) throws
    -> [RecordedEvent]
  {
    var out: [RecordedEvent] = []
    out.reserveCapacity(min(limit, 4096))
    let cursor = try openCursor(events)
    defer { cursor.close() }
    var entry = try unsafe start(cursor, at: position, forward: forward)
    var strings = EventRecord.RepeatedStrings()
    while let e = unsafe entry, out.count < limit {
      let p = unsafe Keys.position(e.key)
      do {
        let fields = try unsafe EventRecord.fields(position: p, bytes: e.value)
        out.append(
          unsafe EventRecord.event(position: p, bytes: e.value, fields: fields, strings: &strings))
      } catch {
        throw RecordFailure(position: p, reason: error.reason)
      }
      unsafe entry = try unsafe cursor.get(forward ? .next : .previous)
    }
    return out
  }

  /// The headings of up to `limit` events from `position` on (``EventRecord/heading``).
  func readEventHeadings(_ events: UInt32, from position: UInt64, limit: Int) throws
    -> [EventHeading]
  {
    var out: [EventHeading] = []
    out.reserveCapacity(min(limit, 4096))
    let cursor = try openCursor(events)
    defer { cursor.close() }
    var entry = try unsafe start(cursor, at: position, forward: true)
    while let e = unsafe entry, out.count < limit {
      let p = unsafe Keys.position(e.key)
      do {
        out.append(try unsafe EventRecord.heading(position: p, bytes: e.value))
      } catch {
        throw RecordFailure(position: p, reason: error.reason)
      }
      unsafe entry = try unsafe cursor.get(.next)
    }
    return out
  }

  /// Positions `cursor` at `position`, or the nearest entry in the walking direction.
  private func start(_ cursor: RawCursor, at position: UInt64, forward: Bool) throws(LMDBError)
    -> RawCursor.Entry?
  {
    var key = position.bigEndian
    var entry = try unsafe withUnsafeBytes(of: &key) { k throws(LMDBError) in
      try unsafe cursor.get(.atOrAfter, key: k)
    }
    if !forward {
      if let e = unsafe entry {
        if unsafe Keys.position(e.key) != position {
          unsafe entry = try unsafe cursor.get(.previous)
        }
      } else {
        unsafe entry = try unsafe cursor.get(.last)
      }
    }
    return unsafe entry
  }

  // MARK: Streams

  /// The event at `position` and the position of its stream's previous event.
  func eventWithPrevious(_ events: UInt32, at position: UInt64) throws -> (
    event: RecordedEvent, previous: UInt64
  )? {
    var key = position.bigEndian
    let found = try unsafe withUnsafeBytes(of: &key) { k throws(LMDBError) in
      try unsafe get(events, k)
    }
    guard let bytes = unsafe found else { return nil }
    do {
      return try unsafe EventRecord.decodeWithLinks(position: position, bytes: bytes)
    } catch {
      throw RecordFailure(position: position, reason: error.reason)
    }
  }

  /// A stream's head: its version and the position of its last event.
  func streamHead(_ streams: UInt32, prefix: [UInt8]) throws(LMDBError) -> StreamHead? {
    guard let value = try get(streams, prefix), value.count == 16,
      let version = UInt64(bigEndianBytes: value), let last = UInt64(bigEndianBytes: value[8...])
    else { return nil }
    return StreamHead(version: version, last: last)
  }

  func putStreamHead(_ streams: UInt32, prefix: [UInt8], _ head: StreamHead) throws(LMDBError) {
    var value = (head.version.bigEndian, head.last.bigEndian)
    var failure: LMDBError?
    unsafe prefix.withUnsafeBytes { k in
      unsafe withUnsafeBytes(of: &value) { v in
        do throws(LMDBError) { try unsafe put(streams, k, v) } catch { failure = error }
      }
    }
    if let failure { throw failure }
  }

  // MARK: Generic databases

  /// Calls `body` with copies of each entry from `start` (inclusive; nil = the first, or with
  /// `reverse` the last), in key order or reversed, until it returns false.
  func scan(
    _ dbi: UInt32, from start: [UInt8]?, reverse: Bool,
    _ body: (_ key: [UInt8], _ value: [UInt8]) throws -> Bool
  ) throws {
    let cursor = try openCursor(dbi)
    defer { cursor.close() }
    var entry = try unsafe scanStart(cursor, from: start, reverse: reverse)
    while let e = unsafe entry {
      guard try unsafe body(Array(e.key), Array(e.value)) else { return }
      unsafe entry = try unsafe cursor.get(reverse ? .previous : .next)
    }
  }

  /// Where a scan from `start` begins: the first entry at or after it, or walking in reverse,
  /// the entry at it or else the one before.
  private func scanStart(_ cursor: RawCursor, from start: [UInt8]?, reverse: Bool)
    throws(LMDBError) -> RawCursor.Entry?
  {
    guard let start else { return try unsafe cursor.get(reverse ? .last : .first) }
    let entry = try unsafe cursor.get(.atOrAfter, key: start)
    guard reverse else { return unsafe entry }
    guard let e = unsafe entry else { return try unsafe cursor.get(.last) }
    return unsafe e.key.elementsEqual(start) ? unsafe e : try unsafe cursor.get(.previous)
  }

  /// ``scan(_:from:reverse:_:)`` handing `body` each key and value where they lie in the map,
  /// without copying them.
  func scanInPlace(
    _ dbi: UInt32, from start: [UInt8]?, reverse: Bool,
    _ body: (_ key: Span<UInt8>, _ value: Span<UInt8>) throws -> Bool
  ) throws {
    let cursor = try openCursor(dbi)
    defer { cursor.close() }
    var entry = try unsafe scanStart(cursor, from: start, reverse: reverse)
    while let e = unsafe entry {
      let more = try unsafe body(
        Span(_unsafeElements: e.key.assumingMemoryBound(to: UInt8.self)),
        Span(_unsafeElements: e.value.assumingMemoryBound(to: UInt8.self)))
      guard more else { return }
      unsafe entry = try unsafe cursor.get(reverse ? .previous : .next)
    }
  }
}

extension RawTransaction {
  /// The number of entries from `start` (inclusive; nil = the first) up to `end` (exclusive;
  /// nil = through the last), walked with a cursor without copying anything.
  func countEntries(_ dbi: UInt32, from start: [UInt8]?, before end: [UInt8]?) throws(LMDBError)
    -> Int
  {
    let cursor = try openCursor(dbi)
    defer { cursor.close() }
    var entry: RawCursor.Entry?
    if let start {
      unsafe entry = try unsafe cursor.get(.atOrAfter, key: start)
    } else {
      unsafe entry = try unsafe cursor.get(.first)
    }
    var n = 0
    guard let end else {
      while unsafe entry != nil {
        n += 1
        unsafe entry = try unsafe cursor.get(.next)
      }
      return n
    }
    var failure: LMDBError?
    unsafe end.withUnsafeBytes { endBytes in
      var b = unsafe MDB_val(
        mv_size: endBytes.count, mv_data: UnsafeMutableRawPointer(mutating: endBytes.baseAddress))
      while let e = unsafe entry {
        var a = unsafe MDB_val(
          mv_size: e.key.count, mv_data: UnsafeMutableRawPointer(mutating: e.key.baseAddress))
        // The database's own key order (lmdb.h, mdb_cmp).
        if unsafe mdb_cmp(pointer, dbi, &a, &b) >= 0 { break }
        n += 1
        do throws(LMDBError) {
          unsafe entry = try unsafe cursor.get(.next)
        } catch {
          failure = error
          return
        }
      }
    }
    if let failure { throw failure }
    return n
  }
}

/// Key encodings shared by the log's databases.
enum Keys {
  @inline(__always)
  static func position(_ key: UnsafeRawBufferPointer) -> UInt64 {
    unsafe UInt64(bigEndian: key.loadUnaligned(as: UInt64.self))
  }
}
