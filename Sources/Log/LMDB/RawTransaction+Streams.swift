import CLMDB

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// What appending one event to a stream found in `log.streams`.
enum StreamAdvance {
  /// The head moved: the event is version `version` of the stream, and `previous` is the
  /// position of the stream's event before it (0 for the first).
  case advanced(version: UInt64, previous: UInt64)
  /// The expectation does not hold; nothing was written.
  case wrongVersion(actual: UInt64)
  /// The stored head is not 16 bytes; nothing was written.
  case malformedHead
}

extension StreamKey {
  /// Calls `body` with the bytes of ``prefix(_:)`` for `stream`, built on the stack for names up
  /// to ``maxInlineBytes`` bytes (every name but hashed ones): no array, no allocation.
  @inline(__always)
  static func withPrefix<R>(
    _ stream: String, _ body: (UnsafeRawBufferPointer) throws(LMDBError) -> R
  ) throws(LMDBError) -> R {
    guard stream.utf8.count <= maxInlineBytes,
      unsafe stream.utf8.withContiguousStorageIfAvailable({ _ in }) != nil
    else {
      return try unsafe prefix(stream).withUnsafeBytes { key in
        Result { () throws(LMDBError) in try unsafe body(key) }
      }.get()
    }
    return try unsafe withUnsafeTemporaryAllocation(byteCount: maxInlineBytes + 2, alignment: 1) {
      buffer in
      let base = unsafe buffer.baseAddress.unsafelyUnwrapped
      let count = unsafe stream.utf8.withContiguousStorageIfAvailable { utf8 -> Int in
        var offset = 0
        unsafe EventRecord.putVarint(UInt64(utf8.count), base, &offset)
        unsafe EventRecord.putBytes(UnsafeRawBufferPointer(utf8), base, &offset)
        return offset
      }
      let key = unsafe UnsafeRawBufferPointer(start: base, count: count.unsafelyUnwrapped)
      return Result { () throws(LMDBError) in try unsafe body(key) }
    }.get()
  }
}

extension RawTransaction {
  /// ``advanceStream(cursor:key:expected:position:streams:streamIndex:)`` for the stream named
  /// `stream`.
  func advanceStream(
    cursor: RawCursor, stream: String, expected: ExpectedVersion, position: UInt64,
    streams: UInt32, streamIndex: UInt32
  ) throws(LMDBError) -> StreamAdvance {
    try unsafe StreamKey.withPrefix(stream) { key throws(LMDBError) in
      try unsafe advanceStream(
        cursor: cursor, key: key, expected: expected, position: position, streams: streams,
        streamIndex: streamIndex)
    }
  }

  /// Moves the head of the stream whose key is `key` to `position`, if `expected` holds for the
  /// stream's current version, with `cursor` (open on `log.streams`): one B-tree search whether
  /// the stream is new or not, where a get followed by a put makes two.
  ///
  /// When `expected` allows a new stream, a put with `MDB_NOOVERWRITE` either creates the head
  /// or, lmdb.h: "will return MDB_KEYEXIST if the key already appears in the database ... The
  /// data parameter will be set to point to the existing item." Otherwise `MDB_SET_KEY` reads it.
  /// Either way the cursor then rests on the entry (mdb.c: the put searches with
  /// `mdb_cursor_set`, which positions the cursor), and `MDB_CURRENT` replaces the value in place.
  /// That position after `MDB_KEYEXIST` is not in lmdb.h, so it is checked (`MDB_GET_CURRENT`
  /// must give back `key`) and a plain put is made when it does not hold.
  ///
  /// Every `checkpointInterval`-th version also gets its entry in `log.streamIndex`.
  func advanceStream(
    cursor: RawCursor, key: UnsafeRawBufferPointer, expected: ExpectedVersion, position: UInt64,
    streams: UInt32, streamIndex: UInt32
  ) throws(LMDBError) -> StreamAdvance {
    var k = unsafe MDB_val(
      mv_size: key.count, mv_data: UnsafeMutableRawPointer(mutating: key.baseAddress))
    var head: (UInt64, UInt64) = (UInt64(1).bigEndian, position.bigEndian)
    var existing = unsafe MDB_val()
    if expected.isSatisfied(by: 0) {
      let rc = unsafe withUnsafeMutableBytes(of: &head) { h in
        unsafe existing = MDB_val(mv_size: 16, mv_data: h.baseAddress)
        return unsafe mdb_cursor_put(cursor.pointer, &k, &existing, UInt32(MDB_NOOVERWRITE))
      }
      if rc == MDB_SUCCESS {
        try unsafe putCheckpoint(streamIndex, key: key, version: 1, position: position)
        return .advanced(version: 1, previous: 0)
      }
      guard rc == MDB_KEYEXIST else { throw LMDBError(code: rc, operation: "mdb_cursor_put") }
    } else {
      let rc = unsafe mdb_cursor_get(cursor.pointer, &k, &existing, MDB_SET_KEY)
      if rc == MDB_NOTFOUND { return .wrongVersion(actual: 0) }
      try check(rc, "mdb_cursor_get")
    }
    guard unsafe existing.mv_size == 16, let stored = unsafe existing.mv_data else {
      return .malformedHead
    }
    let version = unsafe UInt64(bigEndian: stored.loadUnaligned(as: UInt64.self))
    let last = unsafe UInt64(bigEndian: stored.loadUnaligned(fromByteOffset: 8, as: UInt64.self))
    guard expected.isSatisfied(by: version) else { return .wrongVersion(actual: version) }
    head = ((version + 1).bigEndian, position.bigEndian)
    var current = unsafe MDB_val()
    var currentValue = unsafe MDB_val()
    let positioned =
      unsafe mdb_cursor_get(cursor.pointer, &current, &currentValue, MDB_GET_CURRENT)
      == MDB_SUCCESS && current.mv_size == key.count
      && memcmp(current.mv_data, key.baseAddress.unsafelyUnwrapped, key.count) == 0
    let rc = unsafe withUnsafeMutableBytes(of: &head) { h in
      var v = unsafe MDB_val(mv_size: 16, mv_data: h.baseAddress)
      return positioned
        ? unsafe mdb_cursor_put(cursor.pointer, &k, &v, UInt32(MDB_CURRENT))
        : unsafe mdb_put(pointer, streams, &k, &v, 0)
    }
    try check(rc, "mdb_put")
    try unsafe putCheckpoint(streamIndex, key: key, version: version + 1, position: position)
    return .advanced(version: version + 1, previous: last)
  }

  /// Writes the `log.streamIndex` entry of a stream's version when it is a checkpoint.
  @inline(__always)
  private func putCheckpoint(
    _ streamIndex: UInt32, key: UnsafeRawBufferPointer, version: UInt64, position: UInt64
  ) throws(LMDBError) {
    guard version % StreamKey.checkpointInterval == 0 else { return }
    try put(
      streamIndex, StreamKey.key(prefix: unsafe Array(key), version: version),
      position.bigEndianBytes)
  }
}
