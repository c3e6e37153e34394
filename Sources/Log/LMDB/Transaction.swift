import CLMDB

/// A raw LMDB transaction handle with the byte-level operations the log needs.
///
/// Values returned as `UnsafeRawBufferPointer` point into the memory map and are valid only until
/// the transaction ends: lmdb.h, mdb_get: "The memory pointed to by the returned values is owned
/// by the database. ... Values returned from the database are valid only until a subsequent
/// update operation, or the end of the transaction." Everything that leaves this folder is copied,
/// or lent as a `Span`, which cannot outlive the closure it is lent to.
@safe struct RawTransaction {
  let pointer: OpaquePointer

  // MARK: Point operations

  func get(_ dbi: UInt32, _ key: UnsafeRawBufferPointer) throws(LMDBError)
    -> UnsafeRawBufferPointer?
  {
    var k = unsafe MDB_val(
      mv_size: key.count, mv_data: UnsafeMutableRawPointer(mutating: key.baseAddress))
    var v = unsafe MDB_val()
    let rc = unsafe mdb_get(pointer, dbi, &k, &v)
    // A key LMDB cannot hold (empty, or past its maximum size) is not there.
    if rc == MDB_NOTFOUND || rc == MDB_BAD_VALSIZE { return nil }
    try check(rc, "mdb_get")
    return unsafe UnsafeRawBufferPointer(start: v.mv_data, count: v.mv_size)
  }

  /// The value under `key` where it lies in the map: valid until the next write or the end of
  /// the transaction.
  @inline(__always)
  func lookup(_ dbi: UInt32, _ key: some KeyBytes) throws(LMDBError) -> UnsafeRawBufferPointer? {
    var v = unsafe MDB_val()
    let rc = unsafe key.withKeyBytes { k in
      var kv = unsafe MDB_val(k)
      return unsafe mdb_get(pointer, dbi, &kv, &v)
    }
    if rc == MDB_NOTFOUND || rc == MDB_BAD_VALSIZE { return nil }
    try check(rc, "mdb_get")
    return unsafe UnsafeRawBufferPointer(start: v.mv_data, count: v.mv_size)
  }

  /// The value under `key`, copied out of the map.
  func get(_ dbi: UInt32, _ key: some KeyBytes) throws(LMDBError) -> [UInt8]? {
    guard let bytes = try unsafe lookup(dbi, key) else { return nil }
    return unsafe Array(bytes)
  }

  /// Calls `body` with the value under `key` where it lies in the map, without copying it; nil
  /// (and `body` is not called) when there is no such key. The span cannot outlive `body`.
  /// (One function per key type, so that only `body`'s result is generic.)
  func withValue<R>(_ dbi: UInt32, _ key: [UInt8], _ body: (Span<UInt8>) throws -> R) throws
    -> R?
  {
    guard let bytes = try unsafe lookup(dbi, key) else { return nil }
    return try body(unsafe Span(_unsafeElements: bytes.assumingMemoryBound(to: UInt8.self)))
  }

  func withValue<R>(_ dbi: UInt32, _ key: String, _ body: (Span<UInt8>) throws -> R) throws
    -> R?
  {
    guard let bytes = try unsafe lookup(dbi, key) else { return nil }
    return try body(unsafe Span(_unsafeElements: bytes.assumingMemoryBound(to: UInt8.self)))
  }

  /// Puts a value; with `MDB_APPEND` the key must sort after every key in the database.
  func put(
    _ dbi: UInt32, _ key: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer, flags: UInt32 = 0
  )
    throws(LMDBError)
  {
    var k = unsafe MDB_val(
      mv_size: key.count, mv_data: UnsafeMutableRawPointer(mutating: key.baseAddress))
    var v = unsafe MDB_val(
      mv_size: value.count, mv_data: UnsafeMutableRawPointer(mutating: value.baseAddress))
    try check(unsafe mdb_put(pointer, dbi, &k, &v, flags), "mdb_put")
  }

  func put(_ dbi: UInt32, _ key: some KeyBytes, _ value: [UInt8], flags: UInt32 = 0)
    throws(LMDBError)
  {
    let rc = unsafe key.withKeyBytes { k in
      unsafe value.withUnsafeBytes { v in
        var kv = unsafe MDB_val(k)
        var vv = unsafe MDB_val(v)
        return unsafe mdb_put(pointer, dbi, &kv, &vv, flags)
      }
    }
    try check(rc, "mdb_put")
  }

  /// Puts with `MDB_APPEND`; false (nothing written) when `key` does not sort after the last
  /// key of the database, which LMDB answers with `MDB_KEYEXIST`.
  func putIfLast(_ dbi: UInt32, _ key: [UInt8], _ value: [UInt8]) throws(LMDBError) -> Bool {
    let rc = unsafe key.withKeyBytes { k in
      unsafe value.withUnsafeBytes { v in
        var kv = unsafe MDB_val(k)
        var vv = unsafe MDB_val(v)
        return unsafe mdb_put(pointer, dbi, &kv, &vv, UInt32(MDB_APPEND))
      }
    }
    if rc == MDB_KEYEXIST { return false }
    try check(rc, "mdb_put")
    return true
  }

  /// Deletes a key; false if it was not there.
  @discardableResult
  func delete(_ dbi: UInt32, _ key: some KeyBytes) throws(LMDBError) -> Bool {
    let rc = unsafe key.withKeyBytes { k in
      var kv = unsafe MDB_val(k)
      return unsafe mdb_del(pointer, dbi, &kv, nil)
    }
    if rc == MDB_NOTFOUND { return false }
    try check(rc, "mdb_del")
    return true
  }

  /// Number of entries in a database.
  func count(_ dbi: UInt32) throws(LMDBError) -> Int {
    var stat = MDB_stat()
    try check(unsafe mdb_stat(pointer, dbi, &stat), "mdb_stat")
    return stat.ms_entries
  }

  /// Bytes of the pages a database uses (branch, leaf and overflow pages).
  func pageBytes(_ dbi: UInt32) throws(LMDBError) -> Int {
    var stat = MDB_stat()
    try check(unsafe mdb_stat(pointer, dbi, &stat), "mdb_stat")
    return Int(stat.ms_psize)
      * (stat.ms_branch_pages + stat.ms_leaf_pages + stat.ms_overflow_pages)
  }

  /// Deletes every entry of a database, keeping the database.
  func clear(_ dbi: UInt32) throws(LMDBError) {
    unsafe try check(mdb_drop(pointer, dbi, 0), "mdb_drop")
  }

  func openCursor(_ dbi: UInt32) throws(LMDBError) -> RawCursor {
    var cursor: OpaquePointer?
    try check(unsafe mdb_cursor_open(pointer, dbi, &cursor), "mdb_cursor_open")
    return unsafe RawCursor(pointer: unsafe cursor.unsafelyUnwrapped)
  }

  func commit() throws(LMDBError) {
    unsafe try check(mdb_txn_commit(pointer), "mdb_txn_commit")
  }

  func abort() {
    unsafe mdb_txn_abort(pointer)
  }
}

/// A raw LMDB cursor. Closed with ``close()`` before its transaction ends.
@safe struct RawCursor {
  let pointer: OpaquePointer

  enum Position {
    case first, last, next, previous, current
    /// The first key greater than or equal to the given one.
    case atOrAfter
    /// Exactly the given key.
    case exactly
  }

  typealias Entry = (key: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer)

  /// Moves the cursor; `nil` when there is no such entry (`MDB_NOTFOUND`).
  @inline(__always)
  func get(_ position: Position, key: UnsafeRawBufferPointer? = nil) throws(LMDBError) -> Entry? {
    var k = unsafe MDB_val()
    var v = unsafe MDB_val()
    if let key = unsafe key {
      unsafe k = MDB_val(
        mv_size: key.count, mv_data: UnsafeMutableRawPointer(mutating: key.baseAddress))
    }
    let op: MDB_cursor_op
    switch position {
    case .first: op = MDB_FIRST
    case .last: op = MDB_LAST
    case .next: op = MDB_NEXT
    case .previous: op = MDB_PREV
    case .current: op = MDB_GET_CURRENT
    case .atOrAfter: op = MDB_SET_RANGE
    case .exactly: op = MDB_SET_KEY
    }
    let rc = unsafe mdb_cursor_get(pointer, &k, &v, op)
    if rc == MDB_NOTFOUND { return nil }
    if rc == MDB_BAD_VALSIZE, let key = unsafe key {
      // A key LMDB cannot hold: none is stored at it, and the entries at or after it start
      // where those at or after its longest storable prefix do (past the prefix itself).
      guard position == .atOrAfter else { return nil }
      if key.count == 0 { return try unsafe get(.first) }
      let max = unsafe Int(mdb_env_get_maxkeysize(mdb_txn_env(mdb_cursor_txn(pointer))))
      guard key.count > max, max > 0 else {
        throw LMDBError(code: rc, operation: "mdb_cursor_get")
      }
      let prefix = unsafe UnsafeRawBufferPointer(rebasing: key[..<max])
      guard let entry = try unsafe get(.atOrAfter, key: prefix) else { return nil }
      return unsafe entry.key.elementsEqual(prefix) ? try unsafe get(.next) : entry
    }
    try check(rc, "mdb_cursor_get")
    return unsafe (
      UnsafeRawBufferPointer(start: k.mv_data, count: k.mv_size),
      UnsafeRawBufferPointer(start: v.mv_data, count: v.mv_size)
    )
  }

  /// Positions at `key` or the entry after it, given as bytes.
  func get(_ position: Position, key: [UInt8]) throws(LMDBError) -> Entry? {
    var result: Entry?
    var failure: LMDBError?
    unsafe key.withUnsafeBytes { k in
      do throws(LMDBError) { unsafe result = try unsafe get(position, key: k) } catch {
        failure = error
      }
    }
    if let failure { throw failure }
    return unsafe result
  }

  /// The value under `key` where it lies in the map (valid until the next write or the end of
  /// the transaction), the cursor left on it; nil when there is none. Near the cursor's page it
  /// skips the search from the root, as ``put(_:_:)`` does.
  func find(_ key: some KeyBytes) throws(LMDBError) -> UnsafeRawBufferPointer? {
    var v = unsafe MDB_val()
    let rc = unsafe key.withKeyBytes { k in
      var kv = unsafe MDB_val(k)
      return unsafe mdb_cursor_get(pointer, &kv, &v, MDB_SET)
    }
    if rc == MDB_NOTFOUND || rc == MDB_BAD_VALSIZE { return nil }
    try check(rc, "mdb_cursor_get")
    return unsafe UnsafeRawBufferPointer(start: v.mv_data, count: v.mv_size)
  }

  /// The value under `key`, copied out of the map (``find(_:)``).
  func value(_ key: some KeyBytes) throws(LMDBError) -> [UInt8]? {
    guard let bytes = try unsafe find(key) else { return nil }
    return unsafe Array(bytes)
  }

  /// Calls `body` with the value under `key` where it lies (``find(_:)``), as
  /// ``RawTransaction/withValue(_:_:_:)-(_,[UInt8],_)`` does.
  func withValue<R>(_ key: [UInt8], _ body: (Span<UInt8>) throws -> R) throws -> R? {
    guard let bytes = try unsafe find(key) else { return nil }
    return try body(unsafe Span(_unsafeElements: bytes.assumingMemoryBound(to: UInt8.self)))
  }

  func withValue<R>(_ key: String, _ body: (Span<UInt8>) throws -> R) throws -> R? {
    guard let bytes = try unsafe find(key) else { return nil }
    return try body(unsafe Span(_unsafeElements: bytes.assumingMemoryBound(to: UInt8.self)))
  }

  /// Stores `value` under `key`, replacing what was there, and leaves the cursor on it
  /// (`mdb_cursor_put` with no flags, which is what `mdb_put` does with a cursor of its own). A
  /// cursor that already lies on a leaf page finds a key that falls on that page without
  /// searching from the root (`mdb_cursor_set`: "See if we're already on the right page").
  func put(_ key: some KeyBytes, _ value: [UInt8]) throws(LMDBError) {
    let rc = unsafe key.withKeyBytes { k in
      unsafe value.withUnsafeBytes { v in
        var kv = unsafe MDB_val(k)
        var vv = unsafe MDB_val(v)
        return unsafe mdb_cursor_put(pointer, &kv, &vv, 0)
      }
    }
    try check(rc, "mdb_cursor_put")
  }

  /// Deletes every entry whose key starts with `prefix`, walking them in order from the first
  /// (after `mdb_cursor_del` the cursor stands on the entry that followed, which `MDB_NEXT`
  /// then returns); returns how many.
  func deleteAll(withPrefix prefix: [UInt8]) throws(LMDBError) -> Int {
    var removed = 0
    var entry = try unsafe get(.atOrAfter, key: prefix)
    while let current = unsafe entry, unsafe current.key.starts(with: prefix) {
      try deleteCurrent()
      removed += 1
      entry = try unsafe get(.next)
    }
    return removed
  }

  /// Deletes the entry under the cursor.
  func deleteCurrent() throws(LMDBError) {
    unsafe try check(mdb_cursor_del(pointer, 0), "mdb_cursor_del")
  }

  func close() {
    unsafe mdb_cursor_close(pointer)
  }
}

extension RawTransaction {
  /// The transaction's id; a write transaction's is the last committed id plus one.
  var id: Int { unsafe mdb_txn_id(pointer) }
}

extension RawTransaction {
  /// Reserves `size` bytes for the value under `position` at the end of `dbi` (`MDB_APPEND |
  /// MDB_RESERVE`). lmdb.h, MDB_RESERVE: "return a pointer to the reserved space, which the
  /// caller can fill in later - before the next update operation or the transaction ends."
  func reserveAppend(_ dbi: UInt32, position: UInt64, size: Int) throws(LMDBError)
    -> UnsafeMutableRawBufferPointer
  {
    var key = position.bigEndian
    var v = unsafe MDB_val(mv_size: size, mv_data: nil)
    let rc = unsafe withUnsafeMutableBytes(of: &key) { k in
      var kv = unsafe MDB_val(mv_size: 8, mv_data: k.baseAddress)
      return unsafe mdb_put(pointer, dbi, &kv, &v, UInt32(MDB_APPEND | MDB_RESERVE))
    }
    try check(rc, "mdb_put")
    return unsafe UnsafeMutableRawBufferPointer(start: v.mv_data, count: size)
  }
}

/// Byte strings the wrappers take as keys where they lie, without copying them: byte arrays, and
/// strings as their UTF-8 (a native string's UTF-8 is contiguous).
protocol KeyBytes {
  func withKeyBytes<R>(_ body: (UnsafeRawBufferPointer) -> R) -> R
}

extension Array: KeyBytes where Element == UInt8 {
  @inline(__always)
  func withKeyBytes<R>(_ body: (UnsafeRawBufferPointer) -> R) -> R {
    unsafe withUnsafeBytes { unsafe body($0) }
  }
}

extension String: KeyBytes {
  @inline(__always)
  func withKeyBytes<R>(_ body: (UnsafeRawBufferPointer) -> R) -> R {
    if let r = unsafe utf8.withContiguousStorageIfAvailable({
      unsafe body(UnsafeRawBufferPointer($0))
    }) {
      return r
    }
    return unsafe Array(utf8).withUnsafeBytes { unsafe body($0) }
  }
}

extension MDB_val {
  /// A value pointing at `bytes` (which LMDB only reads).
  @inline(__always)
  init(_ bytes: UnsafeRawBufferPointer) {
    unsafe self.init(
      mv_size: bytes.count, mv_data: UnsafeMutableRawPointer(mutating: bytes.baseAddress))
  }
}
