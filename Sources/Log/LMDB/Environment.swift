import CLMDB
import Synchronization

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// An open LMDB environment: one directory holding `data.mdb` and `lock.mdb`.
///
/// This is the only owner of an `MDB_env` pointer. It is opened with `MDB_NOTLS`, because Swift
/// concurrency multiplexes tasks over OS threads and lmdb.h says: "A thread may use parallel
/// read-only transactions. ... MDB_NOTLS: tie reader locktable slots to MDB_txn objects instead of
/// to threads".
///
/// ## LMDB limitations
/// - "mdb_env_set_mapsize ... may be called at later times if no transactions are active in this
///   process." ``mapLock`` enforces that: every transaction holds it shared, a resize holds it
///   exclusively.
/// - "Do not have open an LMDB database twice in the same process at the same time. Not even
///   from a plain open() call - close()ing it breaks flock() advisory locking." ``OpenPaths``
///   refuses a second open.
@safe final class Environment: @unchecked Sendable {
  let pointer: OpaquePointer
  let path: String
  let readOnly: Bool
  /// Held shared by every transaction, exclusively by a map resize.
  let mapLock = ReadWriteLock()
  private let readerPool = Mutex<[PooledReader]>([])

  struct Configuration {
    var mapSize: Int
    var maxReaders: UInt32
    var maxDatabases: UInt32
    var readOnly: Bool
    var noSync: Bool
  }

  init(path: String, configuration: Configuration) throws(LMDBError) {
    var env: OpaquePointer?
    try check(unsafe mdb_env_create(&env), "mdb_env_create")
    guard let env = unsafe env else { throw LMDBError(code: ENOMEM, operation: "mdb_env_create") }
    do {
      unsafe try check(mdb_env_set_mapsize(env, configuration.mapSize), "mdb_env_set_mapsize")
      unsafe try check(
        mdb_env_set_maxreaders(env, configuration.maxReaders), "mdb_env_set_maxreaders")
      unsafe try check(mdb_env_set_maxdbs(env, configuration.maxDatabases), "mdb_env_set_maxdbs")
      // A command-line tool's one-line error instead of LMDB's assertion text (FatalSignal).
      unsafe _ = mdb_env_set_assert(env, lmdbAssertionFailed)
      var flags = UInt32(MDB_NOTLS)
      if configuration.readOnly { flags |= UInt32(MDB_RDONLY) }
      if configuration.noSync { flags |= UInt32(MDB_NOSYNC) }
      unsafe try check(mdb_env_open(env, path, flags, 0o644), "mdb_env_open")
    } catch {
      unsafe mdb_env_close(env)
      throw error
    }
    unsafe self.pointer = env
    self.path = path
    self.readOnly = configuration.readOnly
    // Clear reader slots left by processes that died (a SIGKILLed writer, say).
    var dead: Int32 = 0
    unsafe _ = mdb_reader_check(env, &dead)
  }

  /// Closes the environment. Callers guarantee that no transaction is active.
  func close() {
    drainReaderPool()
    unsafe mdb_env_close(pointer)
  }

  // MARK: Map size

  var info: MDB_envinfo {
    var info = unsafe MDB_envinfo()
    unsafe _ = mdb_env_info(pointer, &info)
    return unsafe info
  }

  var mapSize: Int { unsafe info.me_mapsize }

  /// The id of the last transaction committed by any process on this environment.
  var lastTransactionID: Int { unsafe info.me_last_txnid }

  /// Sets a new map size. The caller holds ``mapLock`` exclusively (no transaction is active).
  /// A size of 0 adopts the size another process has set.
  func setMapSize(_ size: Int) throws(LMDBError) {
    unsafe try check(mdb_env_set_mapsize(pointer, size), "mdb_env_set_mapsize")
  }

  /// Flushes the data buffers to disk (`mdb_env_sync` with `force`).
  func sync() throws(LMDBError) {
    unsafe try check(mdb_env_sync(pointer, 1), "mdb_env_sync")
  }

  /// Writes a compacted copy of the environment into the existing, empty directory `path`
  /// (`mdb_env_copy2` with `MDB_CP_COMPACT`: free pages are left out and the pages renumbered,
  /// every record kept). It runs in a read transaction of its own; the caller holds
  /// ``mapLock`` shared, as for any transaction.
  func copyCompacted(to path: String) throws(LMDBError) {
    unsafe try check(mdb_env_copy2(pointer, path, UInt32(MDB_CP_COMPACT)), "mdb_env_copy2")
  }

  /// Turns `MDB_NOSYNC` on or off; lmdb.h allows this "at any time".
  func setNoSync(_ on: Bool) throws(LMDBError) {
    unsafe try check(
      mdb_env_set_flags(pointer, UInt32(MDB_NOSYNC), on ? 1 : 0), "mdb_env_set_flags")
  }

  var maxKeySize: Int { unsafe Int(mdb_env_get_maxkeysize(pointer)) }

  // MARK: Transactions

  /// Begins a read-only transaction, reusing a reset one when the pool has it: "mdb_txn_renew ...
  /// may be used to reuse handles", which keeps the reader slot and skips the reader-table lock.
  func beginRead() throws(LMDBError) -> RawTransaction {
    if let txn = unsafe readerPool.withLock({ $0.popLast() })?.pointer {
      let rc = unsafe mdb_txn_renew(txn)
      if rc == MDB_SUCCESS { return unsafe RawTransaction(pointer: txn) }
      unsafe mdb_txn_abort(txn)
      try check(rc, "mdb_txn_renew")
    }
    var txn: OpaquePointer?
    try check(unsafe mdb_txn_begin(pointer, nil, UInt32(MDB_RDONLY), &txn), "mdb_txn_begin")
    return unsafe RawTransaction(pointer: txn.unsafelyUnwrapped)
  }

  /// Ends a read-only transaction and keeps its handle for reuse.
  func endRead(_ raw: RawTransaction) {
    let txn = unsafe raw.pointer
    unsafe mdb_txn_reset(txn)
    let kept = readerPool.withLock { pool -> Bool in
      guard pool.count < 64 else { return false }
      unsafe pool.append(PooledReader(pointer: txn))
      return true
    }
    if !kept { unsafe mdb_txn_abort(txn) }
  }

  /// Drops pooled read handles (before a map resize, which must see no transactions).
  func drainReaderPool() {
    let pool = readerPool.withLock { pool in
      defer { pool.removeAll() }
      return pool
    }
    for txn in pool { unsafe mdb_txn_abort(txn.pointer) }
  }

  /// Begins a write transaction, or with `parent` a nested one (lmdb.h: "Transactions may be
  /// nested to any level. A parent transaction and its cursors may not issue any other operations
  /// than mdb_txn_commit and mdb_txn_abort while it has active child transactions.")
  func beginWrite(parent: RawTransaction? = nil) throws(LMDBError) -> RawTransaction {
    var txn: OpaquePointer?
    try check(unsafe mdb_txn_begin(pointer, parent?.pointer, 0, &txn), "mdb_txn_begin")
    return unsafe RawTransaction(pointer: txn.unsafelyUnwrapped)
  }

  /// Opens an existing named database in a read-only environment. lmdb.h: a handle opened in a
  /// read-only transaction is shared "after mdb_txn_commit()", so this uses a fresh one and commits it.
  func openDatabaseReadOnly(named name: String) throws(LMDBError) -> UInt32 {
    var txn: OpaquePointer?
    try check(unsafe mdb_txn_begin(pointer, nil, UInt32(MDB_RDONLY), &txn), "mdb_txn_begin")
    var dbi: MDB_dbi = 0
    let rc = unsafe mdb_dbi_open(txn, name, 0, &dbi)
    guard rc == MDB_SUCCESS else {
      unsafe mdb_txn_abort(txn)
      throw LMDBError(code: rc, operation: "mdb_dbi_open")
    }
    try check(unsafe mdb_txn_commit(txn), "mdb_txn_commit")
    return dbi
  }

  /// Deletes a named database and closes its handle (`mdb_drop` with `del` 1); false when the
  /// environment has no database of that name.
  func dropDatabase(named name: String, txn: RawTransaction) throws(LMDBError) -> Bool {
    var dbi: MDB_dbi = 0
    let rc = unsafe mdb_dbi_open(txn.pointer, name, 0, &dbi)
    if rc == MDB_NOTFOUND { return false }
    try check(rc, "mdb_dbi_open")
    try check(unsafe mdb_drop(txn.pointer, dbi, 1), "mdb_drop")
    return true
  }

  /// Opens (and with `create`, creates) a named database.
  func openDatabase(named name: String, create: Bool, txn: RawTransaction) throws(LMDBError)
    -> UInt32
  {
    var dbi: MDB_dbi = 0
    try check(
      unsafe mdb_dbi_open(txn.pointer, name, create ? UInt32(MDB_CREATE) : 0, &dbi), "mdb_dbi_open")
    return dbi
  }
}

/// A reset read-only transaction kept for `mdb_txn_renew`. Only one thread holds it at a time.
@safe struct PooledReader: @unchecked Sendable {
  let pointer: OpaquePointer
}

/// Paths of environments open in this process.
///
/// lmdb.h: "Do not have open an LMDB database twice in the same process at the same time."
enum OpenPaths {
  private static let paths = Mutex<Set<String>>([])

  /// Claims `path`; false if this process already has it open.
  static func claim(_ path: String) -> Bool {
    paths.withLock { $0.insert(path).inserted }
  }

  static func release(_ path: String) {
    _ = paths.withLock { $0.remove(path) }
  }
}
