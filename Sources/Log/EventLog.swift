import Dispatch
import Synchronization

#if canImport(FoundationEssentials)
  import FoundationEssentials
#else
  import Foundation
#endif
#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// An append-only event log stored in LMDB.
///
/// Every event gets a dense global position (1, 2, 3, ... with no gaps, ever), a timestamp, a
/// type, a stream, an actor and payload bytes. Appends are atomic and, by default, durable when
/// they return. Readers see consistent snapshots and never block the writer.
///
/// ```swift
/// let log = try EventLog(directory: "/var/lib/wikilog/main")
/// let recorded = try log.append([
///   NewEvent(type: "page.created", stream: "wiki1:Home", actor: "alice", payload: Array("# Home".utf8))
/// ])
/// for try await item in log.subscribe(after: .start) {
///   if case .event(let e) = item { print(e.position, e.type) }
/// }
/// ```
///
/// One process may have a given directory open once; other processes may open it too (a
/// `wikilog tail` next to a server), and subscriptions see their appends.
///
/// ## Durability
/// - ``Durability/synced`` (default): every commit is flushed to disk before the call returns.
/// - ``Durability/groupCommit``: concurrent `async` appends share one synced transaction; each
///   caller resumes once its events are on disk.
/// - ``Durability/unsynced``: commits are not flushed (bulk loads); call ``sync()`` to make
///   everything committed so far durable. A process crash loses nothing; an OS crash or power
///   loss may lose what came after the last ``sync()``.
public final class EventLog: Sendable {
  /// How to open a log.
  public struct Options: Sendable {
    /// The initial size of the memory map; it doubles whenever a write needs more, up to
    /// ``maxMapSize``. Rounded up to the page size.
    public var mapSize: Int = 64 << 20
    /// The largest the map may grow to; past it appends fail with ``LogError/mapFull(mapSize:limit:)``.
    public var maxMapSize: Int = 1 << 40
    public var durability: Durability = .synced
    /// Open for reading only (auditors): appends fail with ``LogError/readOnly(path:)``, and the
    /// directory must already hold a log.
    public var readOnly = false
    /// Concurrent read transactions across all processes using the directory.
    public var maxReaders: UInt32 = 510
    /// Named databases, the log's own four included.
    public var maxDatabases: UInt32 = 128
    /// How often a waiting subscription checks for events appended by another process where
    /// the kernel cannot report writes to the data file (on Linux it does, through inotify,
    /// and nothing polls).
    public var pollInterval: Duration = .milliseconds(50)
    /// The most `async` writes one group commit combines.
    public var maxGroupSize = 4096
    /// In group commit, how long the writer waits for the callers of the previous group to
    /// submit again before it commits what it has.
    public var groupCommitWindow: Duration = .microseconds(100)
    /// Keep the Merkle tree over the events in each append transaction (``treeHead()``). Off
    /// only to measure what the tree costs, or for a bulk load: appends then leave the tree
    /// behind, and the next writable open with it on hashes the missing events in.
    public var merkleTree = true

    public init() {}

    public init(durability: Durability, readOnly: Bool = false) {
      self.durability = durability
      self.readOnly = readOnly
    }
  }

  /// When a commit reaches the disk.
  public enum Durability: Sendable, Hashable {
    case synced, groupCommit, unsynced
  }

  /// The on-disk format this build reads and writes.
  public static let formatVersion: UInt32 = 1

  /// The directory holding `data.mdb` and `lock.mdb`.
  public let path: String
  public let options: Options
  let env: Environment
  let dbs: LogDatabases
  let maxKeySize: Int
  /// Whether opening walked every page of the file (false: it was found unchanged since a walk,
  /// ``PagesChecked``).
  let walkedPagesAtOpen: Bool
  /// Serialises this process's write transactions.
  let writeMutex = PThreadMutex()
  let writer = WriterState()
  let state: Mutex<SharedState>
  let notifier: Notifier
  let groupWriter = GroupWriter()
  /// The shared lock every process holding the log open keeps (see ``compact()``).
  let openLock: OpenLock?

  struct SharedState {
    var closed = false
    var durability: Durability
    var durablePosition: LogPosition = .start
    var databases: [String: Database] = [:]
    var statistics = Statistics()
    var commitObservers: [@Sendable () -> Void] = []
  }

  /// Counters since this log was opened in this process.
  public struct Statistics: Sendable, Hashable {
    /// Write transactions committed.
    public var commits = 0
    /// Events appended.
    public var appendedEvents = 0
    /// Batches the writer queue took for `async` writes, and the writes in them: their ratio is
    /// the mean group size of group commit.
    public var groups = 0
    public var groupedWrites = 0

    public init() {}
  }

  /// What this process has written through this log so far.
  public var statistics: Statistics { state.withLock { $0.statistics } }

  struct LogDatabases {
    var events: UInt32 = 0
    var streams: UInt32 = 0
    var streamIndex: UInt32 = 0
    var idempotency: UInt32 = 0
    var meta: UInt32 = 0
    /// The Merkle tree's stored subtrees (``EventLog/merkleStoredLevel``); a read-only open of
    /// a log made before the tree has none.
    var merkle: UInt32 = 0
    /// The leaf hashes of erased events (``WriteTransaction/erase(_:payload:by:)``), by
    /// big-endian position; `UInt32.max` in a read-only open of a log that never erased one.
    var erased: UInt32 = UInt32.max
  }

  static let reservedPrefix = "log."
  static let formatKey = Array("format".utf8)

  // MARK: Opening and closing

  /// Opens the log in `directory`, creating the directory and an empty log if needed (unless
  /// ``Options/readOnly``).
  ///
  /// - Throws: ``LogError/alreadyOpen(path:)`` if this process has it open,
  ///   ``LogError/versionMismatch(found:supported:)`` for a log in another format,
  ///   ``LogError/notALog(path:reason:)`` for a read-only open of a directory with no log.
  public init(directory: String, options: Options = Options()) throws(LogError) {
    if !options.readOnly {
      do {
        try FileManager.default.createDirectory(
          atPath: directory, withIntermediateDirectories: true)
      } catch {
        throw FileSystem.problem(creating: directory).map {
          LogError.unusableDirectory(path: directory, reason: $0)
        } ?? LogError.permissionDenied(path: directory)
      }
    } else if !FileManager.default.fileExists(atPath: directory + "/data.mdb") {
      throw LogError.notALog(path: directory, reason: "no data.mdb in it")
    }
    let canonical = Self.canonicalPath(directory)
    guard OpenPaths.claim(canonical) else { throw LogError.alreadyOpen(path: canonical) }
    self.path = canonical
    self.options = options
    // Waits while another process compacts the log, then keeps others from compacting it.
    openLock = OpenLock(directory: canonical, create: !options.readOnly)
    // Before LMDB maps the file: a page number past its end would be a SIGBUS there.
    do throws(LogError) {
      try Self.checkDataFile(canonical + "/data.mdb")
    } catch {
      openLock?.release()
      OpenPaths.release(canonical)
      throw error
    }
    let page = Int(sysconf(Int32(_SC_PAGESIZE)))
    let mapSize = max(page, (options.mapSize + page - 1) / page * page)
    do {
      env = try Environment(
        path: canonical,
        configuration: .init(
          mapSize: mapSize, maxReaders: options.maxReaders, maxDatabases: options.maxDatabases,
          readOnly: options.readOnly, noSync: options.durability == .unsynced))
    } catch {
      openLock?.release()
      OpenPaths.release(canonical)
      throw Self.openError(error, path: canonical)
    }
    // Before LMDB reads a page: every page of the snapshot, pinned by a read transaction.
    do throws(LogError) {
      let (problems, walked) = try Self.checkSnapshot(env: env, maxProblems: 1)
      if let first = problems.first {
        throw LogError.damaged(path: canonical + "/data.mdb", reason: first)
      }
      walkedPagesAtOpen = walked
      // Found sound: a writer says it writes the file from now on (``PagesChecked``).
      if !options.readOnly, let stamp = FileStamp(canonical + "/data.mdb") {
        PagesChecked.recordWriter(stamp, for: canonical + "/data.mdb")
      }
    } catch {
      env.close()
      openLock?.release()
      OpenPaths.release(canonical)
      throw error
    }
    maxKeySize = env.maxKeySize
    state = Mutex(SharedState(durability: options.durability))
    notifier = Notifier(pollInterval: options.pollInterval)
    do {
      dbs = try Self.openInternalDatabases(env: env, readOnly: options.readOnly, path: canonical)
    } catch {
      env.close()
      openLock?.release()
      OpenPaths.release(canonical)
      throw error
    }
    let last = (try? committedPosition) ?? .start
    state.withLock { $0.durablePosition = last }
    if !options.readOnly && options.merkleTree {
      // Builds the Merkle tree of a log made before it (or extends it over events an older
      // build appended): the write transaction's preparation does it (``loadTree``).
      do throws(LogError) {
        let behind = try readLog { txn throws(LogError) in
          let stored = try perform { try txn.raw.get(dbs.meta, Self.merkleHeadKey) }
          let size = stored.flatMap { UInt64(bigEndianBytes: $0) } ?? 0
          return size < last.rawValue
        }
        if behind { try writeLog { _ throws(LogError) in } }
      } catch {
        close()
        throw error
      }
    }
    notifier.attach(self)
  }

  deinit {
    close()
  }

  /// Closes the log. Pending `async` writes finish first; later calls throw ``LogError/closed``
  /// and open subscriptions end.
  public func close() {
    groupWriter.flush()
    writeMutex.withLock {
      env.mapLock.withExclusive {
        let wasOpen = state.withLock { s -> Bool in
          defer { s.closed = true }
          return !s.closed
        }
        guard wasOpen else { return }
        writer.leafHasher?.stop()
        writer.leafHasher = nil
        env.close()
        keepPagesRecord()
        openLock?.release()
        OpenPaths.release(path)
      }
    }
    notifier.close()
  }

  /// What a compaction did: the size of `data.mdb` before and after.
  public struct Compaction: Sendable, Hashable {
    public var bytesBefore: Int
    public var bytesAfter: Int
  }

  /// Writes a consistent, compacted copy of the log into `destination`, a directory that must
  /// not exist yet (it is created): `mdb_env_copy2` with `MDB_CP_COMPACT` in a read transaction
  /// of its own, so the log goes on taking writes meanwhile and the copy holds exactly the
  /// events committed when it began. The copy is synced. Works on a read-only log too (a
  /// backup beside a running server). Returns the copy's size in bytes.
  public func backup(to destination: String) throws(LogError) -> Int {
    let fm = FileManager.default
    guard !fm.fileExists(atPath: destination) else {
      throw .permissionDenied(path: destination + " (it exists already)")
    }
    do {
      try fm.createDirectory(atPath: destination, withIntermediateDirectories: true)
    } catch {
      throw .permissionDenied(path: destination)
    }
    guard !isClosed else { throw .closed }
    let copied = env.mapLock.withShared {
      Result { () throws(LMDBError) in try env.copyCompacted(to: destination) }
    }
    if case .failure(let error) = copied {
      try? fm.removeItem(atPath: destination)
      throw LogError.from(error, path: path, maxReaders: 0, mapSize: 0, limit: 0)
    }
    try FileOperations.fsync(destination + "/data.mdb")
    try? FileOperations.fsync(destination)
    let value = (try? fm.attributesOfItem(atPath: destination + "/data.mdb"))?[.size]
    return (value as? Int) ?? (value as? UInt64).map { Int($0) } ?? 0
  }

  /// Replaces the log's file with a compacted copy and closes the log; open it again to go on.
  ///
  /// LMDB never shrinks its file: pages freed by old transactions are reused, not returned.
  /// The copy (`mdb_env_copy2` with `MDB_CP_COMPACT`) holds only the pages in use, renumbered;
  /// every event, stream and projection record is kept, byte for byte. In order:
  /// 1. the other processes are checked for: compaction needs the log alone (``LogError/inUse(path:)``
  ///    otherwise), and a process opening it meanwhile waits (``OpenLock``);
  /// 2. pending `async` writes are flushed and this process's writers held back, so nothing is
  ///    committed to the old file after the copy is taken; readers go on;
  /// 3. the copy is written to `compact.tmp/` in the log's directory and synced;
  /// 4. it is renamed over `data.mdb` and the old `lock.mdb` removed (a compacted file starts its
  ///    transaction ids again, so the old reader table must not be used with it), the directory
  ///    synced, and the log closed. Writes that were held back fail with ``LogError/closed``:
  ///    they were never acknowledged.
  ///
  /// A crash before the rename leaves the old file in place (and a `compact.tmp/` that the next
  /// compaction removes); after it, the new one. Either holds every acknowledged write.
  @discardableResult
  public func compact() throws(LogError) -> Compaction {
    guard !options.readOnly else { throw .readOnly(path: path) }
    guard let openLock, openLock.tryExclusive() else { throw .inUse(path: path) }
    let fm = FileManager.default
    let temporary = path + "/compact.tmp"
    func size(_ file: String) -> Int {
      let value = (try? fm.attributesOfItem(atPath: file))?[.size]
      return (value as? Int) ?? (value as? UInt64).map { Int($0) } ?? 0
    }
    groupWriter.flush()
    let result = writeMutex.withLock {
      Result { () throws(LogError) -> Compaction in
        guard !isClosed else { throw .closed }
        do {
          try? fm.removeItem(atPath: temporary)
          try fm.createDirectory(atPath: temporary, withIntermediateDirectories: false)
        } catch {
          throw .permissionDenied(path: temporary)
        }
        let copied = env.mapLock.withShared {
          Result { () throws(LMDBError) in try env.copyCompacted(to: temporary) }
        }
        if case .failure(let error) = copied {
          try? fm.removeItem(atPath: temporary)
          throw LogError.from(error, path: path, maxReaders: 0, mapSize: 0, limit: 0)
        }
        do throws(LogError) {
          try FileOperations.fsync(temporary + "/data.mdb")
        } catch {
          try? fm.removeItem(atPath: temporary)
          throw error
        }
        let compaction = Compaction(
          bytesBefore: size(path + "/data.mdb"), bytesAfter: size(temporary + "/data.mdb"))
        // The swap: the old file stays mapped until the environment closes below.
        do throws(LogError) {
          try FileOperations.rename(temporary + "/data.mdb", to: path + "/data.mdb")
        } catch {
          try? fm.removeItem(atPath: temporary)
          throw error
        }
        try? fm.removeItem(atPath: path + "/lock.mdb")
        try? fm.removeItem(atPath: temporary)
        try? FileOperations.fsync(path)
        env.mapLock.withExclusive {
          env.close()
          openLock.release()
          OpenPaths.release(path)
          // Last: whoever sees the log closed may open the directory again at once.
          state.withLock { $0.closed = true }
        }
        return compaction
      }
    }
    if case .failure = result, !isClosed { openLock.share() }
    if isClosed { notifier.close() }
    return try result.get()
  }

  public var isClosed: Bool { state.withLock { $0.closed } }

  private static func canonicalPath(_ directory: String) -> String {
    let url = URL(fileURLWithPath: directory).standardizedFileURL.resolvingSymlinksInPath()
    return url.path
  }

  /// The checks made at every open before LMDB maps the file, with plain file reads: both meta
  /// pages and the file's length against the last page in use. A check that fails is made
  /// again (up to three times) when another process committed meanwhile, since its writes may
  /// reuse pages of the snapshot read.
  static func checkDataFile(_ file: String) throws(LogError) {
    try retryingWhileWritten(file) { check throws(DataFileDamage) in
      try check.checkLength()
    }
  }

  /// The structural check made at every open once LMDB has mapped the file (which reads no page
  /// of it) and before LMDB reads a page: every page of the snapshot a read transaction pins
  /// (``checkPages(file:snapshot:maxProblems:)``). `env` is not yet in use by other threads.
  ///
  /// A file found sound and unchanged since (``PagesChecked``) is not walked again.
  static func checkSnapshot(env: Environment, maxProblems: Int) throws(LogError)
    -> (problems: [String], walked: Bool)
  {
    let file = env.path + "/data.mdb"
    var attempt = 0
    while true {
      attempt += 1
      // Taken before the snapshot is pinned: a commit after it changes the file's stamp.
      let stamp = FileStamp(file)
      if let stamp, PagesChecked.recorded(stamp, for: file) { return ([], false) }
      let raw: RawTransaction
      do throws(LMDBError) {
        raw = try env.beginRead()
      } catch {
        if error.code == LMDBError.mapResized, attempt < 3 {
          // Another process grew the file past this map: adopt its size.
          do throws(LMDBError) {
            env.drainReaderPool()
            try env.setMapSize(0)
          } catch {
            throw openError(error, path: env.path)
          }
          continue
        }
        throw openError(error, path: env.path)
      }
      defer { env.endRead(raw) }
      let (problems, pinned) = try checkPages(
        file: file, snapshot: UInt64(UInt(bitPattern: raw.id)), maxProblems: maxProblems)
      if !problems.isEmpty, !pinned, attempt < 3 { continue }
      if problems.isEmpty, pinned, let stamp, FileStamp(file) == stamp {
        PagesChecked.record(stamp, for: file)
      }
      return (problems, true)
    }
  }

  /// Walks every page of the snapshot `snapshot` of `file` with plain file reads
  /// (``DataFileCheck/checkAllPages(maxProblems:)``); the caller's read transaction of that
  /// snapshot keeps writers in other processes from reusing its pages meanwhile. When they
  /// committed twice before the meta pages were read, so that neither names the snapshot any
  /// more, the newest is walked instead and `pinned` is false: a problem found then may be a
  /// page reused meanwhile, and the caller looks again.
  ///
  /// - Throws: ``LogError/damaged(path:reason:)`` when the meta pages are wrong.
  static func checkPages(file: String, snapshot: UInt64, maxProblems: Int) throws(LogError)
    -> (problems: [String], pinned: Bool)
  {
    let opened: DataFileCheck?
    do throws(DataFileDamage) {
      opened = try DataFileCheck.open(path: file, snapshot: snapshot)
    } catch {
      throw LogError.damaged(path: file, reason: error.reason)
    }
    guard let check = opened else { return ([], true) }
    defer { check.close() }
    let pinned = check.meta.txnID == snapshot
    do throws(DataFileDamage) {
      try check.checkLength()
    } catch {
      guard !pinned else { throw LogError.damaged(path: file, reason: error.reason) }
      return ([error.reason], false)
    }
    return (check.checkAllPages(maxProblems: maxProblems), pinned)
  }

  /// Checks every page of the log's data file in `directory` that its newest snapshot uses, with
  /// plain file reads (never through LMDB's map, so a damaged page is a finding, not a crash):
  /// each page's number, kind, offsets and depth, and every overflow run. Returns the problems
  /// found, at most `maxProblems`; empty when the structure is sound (the records' checksums are
  /// checked by ``verify(maxProblems:)``).
  ///
  /// - Throws: ``LogError/damaged(path:reason:)`` when the meta pages or the length are wrong,
  ///   ``LogError/notALog(path:reason:)`` when there is no `data.mdb`.
  public static func checkPages(directory: String, maxProblems: Int = 100) throws(LogError)
    -> [String]
  {
    let file = directory + "/data.mdb"
    guard FileManager.default.fileExists(atPath: file) else {
      throw LogError.notALog(path: directory, reason: "no data.mdb in it")
    }
    var problems: [String] = []
    do {
      try retryingWhileWritten(file) { check throws(DataFileDamage) in
        problems = []
        try check.checkLength()
        problems = check.checkAllPages(maxProblems: maxProblems)
        if let first = problems.first { throw DataFileDamage(reason: first) }
      }
    } catch  where !problems.isEmpty {
      return problems
    }
    return problems
  }

  private static func retryingWhileWritten(
    _ file: String, _ body: (DataFileCheck) throws(DataFileDamage) -> Void
  ) throws(LogError) {
    var attempt = 0
    while true {
      attempt += 1
      let check: DataFileCheck
      do throws(DataFileDamage) {
        guard let opened = try DataFileCheck.open(path: file) else { return }
        check = opened
      } catch {
        throw LogError.damaged(path: file, reason: error.reason)
      }
      defer { check.close() }
      do throws(DataFileDamage) {
        try body(check)
        return
      } catch {
        let now = try? DataFileCheck.open(path: file)
        defer { now?.close() }
        if attempt < 3, let now, now.meta.txnID != check.meta.txnID { continue }
        throw LogError.damaged(path: file, reason: error.reason)
      }
    }
  }

  private static func openError(_ error: LMDBError, path: String) -> LogError {
    switch error.code {
    case LMDBError.versionMismatch, LMDBError.invalid:
      return .notALog(path: path, reason: "LMDB does not recognise the files: \(error)")
    case EROFS:
      return .readOnlyFileSystem(path: path)
    case EACCES, EPERM:
      return .permissionDenied(path: path)
    case ENOENT:
      return .notALog(path: path, reason: "missing files")
    default:
      return LogError.from(error, path: path, maxReaders: 0, mapSize: 0, limit: 0)
    }
  }

  private static func openInternalDatabases(env: Environment, readOnly: Bool, path: String)
    throws(LogError)
    -> LogDatabases
  {
    var dbs = LogDatabases()
    var found: UInt32?
    var hasEvents = false
    var result: Result<Void, LMDBError> = .success(())
    // A process that grew the file past this map between the snapshot check and here (a
    // server writing beside a command that opens): adopt its size, as every read does, and
    // begin again. `env` is not yet in use by other threads.
    for attempt in 1...3 {
      result = openInternalDatabasesOnce(env: env, readOnly: readOnly, &dbs, &found, &hasEvents)
      guard case .failure(let error) = result, error.code == LMDBError.mapResized, attempt < 3
      else { break }
      do throws(LMDBError) {
        env.drainReaderPool()
        try env.setMapSize(0)
      } catch {
        throw openError(error, path: path)
      }
    }
    if case .failure(let error) = result {
      if readOnly && error.code == LMDBError.notFound {
        throw LogError.notALog(path: path, reason: "it has no log databases")
      }
      throw LogError.from(error, path: path, maxReaders: 0, mapSize: 0, limit: 0)
    }
    guard let found else {
      throw hasEvents
        ? LogError.notALog(path: path, reason: "events without a recorded format version")
        : LogError.notALog(path: path, reason: "no recorded format version")
    }
    guard found == formatVersion else {
      throw LogError.versionMismatch(found: found, supported: formatVersion)
    }
    return dbs
  }

  private static func openInternalDatabasesOnce(
    env: Environment, readOnly: Bool, _ dbs: inout LogDatabases, _ found: inout UInt32?,
    _ hasEvents: inout Bool
  ) -> Result<Void, LMDBError> {
    env.mapLock.withShared {
      do throws(LMDBError) {
        let raw = readOnly ? try env.beginRead() : try env.beginWrite()
        let txn = raw
        do throws(LMDBError) {
          func open(_ name: String) throws(LMDBError) -> UInt32 {
            try env.openDatabase(named: reservedPrefix + name, create: !readOnly, txn: txn)
          }
          dbs.meta = try open("meta")
          dbs.events = try open("events")
          dbs.streams = try open("streams")
          dbs.streamIndex = try open("streamIndex")
          dbs.idempotency = try open("idempotency")
          do throws(LMDBError) {
            dbs.merkle = try open("merkle")
          } catch  where readOnly && error.code == LMDBError.notFound {
            dbs.merkle = UInt32.max
          }
          do throws(LMDBError) {
            dbs.erased = try open("erased")
          } catch  where readOnly && error.code == LMDBError.notFound {
            dbs.erased = UInt32.max
          }
          hasEvents = try raw.count(dbs.events) > 0
          if let stored = try raw.get(dbs.meta, formatKey), stored.count == 4 {
            found = stored.reduce(0) { $0 << 8 | UInt32($1) }
          } else if !readOnly && !hasEvents {
            let v = formatVersion
            try raw.put(
              dbs.meta, formatKey,
              [UInt8(v >> 24), UInt8(v >> 16 & 0xFF), UInt8(v >> 8 & 0xFF), UInt8(v & 0xFF)])
            found = v
          }
          try raw.commit()
        } catch {
          raw.abort()
          throw error
        }
        return .success(())
      } catch {
        return .failure(error)
      }
    }
  }

  // MARK: Positions and durability

  /// The position of the last committed event, by any process (``LogPosition/start`` if empty).
  public var committedPosition: LogPosition {
    get throws(LogError) { try readLog { txn throws(LogError) in try txn.lastPosition } }
  }

  /// The position up to which events are known to be on disk. Equal to ``committedPosition`` in
  /// the synced modes; in ``Durability/unsynced`` mode it moves at each ``sync()``.
  public var durablePosition: LogPosition {
    state.withLock { $0.durablePosition }
  }

  public var durability: Durability { state.withLock { $0.durability } }

  /// Calls `observer` after every commit of this process that appended events, on the
  /// committing thread with the writer still held: it must be quick (wake a thread, say).
  /// Commits by other processes are not seen.
  public func onCommit(_ observer: @escaping @Sendable () -> Void) {
    state.withLock { $0.commitObservers.append(observer) }
  }

  /// Flushes everything committed so far to disk and advances ``durablePosition``.
  public func sync() throws(LogError) {
    let committed = try committedPosition
    do {
      try env.mapLock.withShared { () throws in
        guard !isClosed else { return }
        try env.sync()
        // Everything this process wrote is on disk now, unsynced commits included: the record
        // keeps naming this writer (it still runs), with the stamp as it stands.
        if !options.readOnly, let stamp = FileStamp(dataFile) {
          PagesChecked.recordWriter(stamp, for: dataFile)
        }
      }
    } catch {
      throw logError(error)
    }
    state.withLock { $0.durablePosition = max($0.durablePosition, committed) }
  }

  /// The data file (`data.mdb`).
  var dataFile: String { path + "/data.mdb" }

  /// As this writer closes, with everything it wrote durable: records the file's stamp as sound
  /// (``PagesChecked/recordWritten(_:for:)``) in place of the record naming it as the live
  /// writer, so that the next open need not walk. An unsynced writer leaves the record naming
  /// it (a process no longer running: the next open walks) unless it synced.
  func keepPagesRecord() {
    guard !options.readOnly, state.withLock({ $0.durability }) != .unsynced,
      let stamp = FileStamp(dataFile)
    else { return }
    PagesChecked.recordWritten(stamp, for: dataFile)
  }

  /// Changes the durability mode; leaving ``Durability/unsynced`` syncs first.
  public func setDurability(_ durability: Durability) throws(LogError) {
    guard !options.readOnly else { throw LogError.readOnly(path: path) }
    let old = self.durability
    if old == .unsynced && durability != .unsynced { try sync() }
    do {
      try writeMutex.withLock { () throws in try env.setNoSync(durability == .unsynced) }
    } catch {
      throw logError(error)
    }
    state.withLock { $0.durability = durability }
  }

  // MARK: Databases

  /// Deletes the caller-owned database `name` with its entries; false when there is none. For
  /// databases that a newer version of a projection no longer keeps: nothing may use a handle
  /// to it afterwards, and ``database(named:)`` would create it again, empty.
  ///
  /// - Throws: ``LogError/readOnly(path:)`` on a read-only log, or
  ///   ``LogError/invalidArgument(_:)`` for a name of the log's own.
  @discardableResult
  public func removeDatabase(named name: String) throws(LogError) -> Bool {
    guard !name.isEmpty, !name.hasPrefix(Self.reservedPrefix) else {
      throw LogError.invalidArgument(
        "database names must be non-empty and not start with '\(Self.reservedPrefix)'")
    }
    let removed = try writeLog { txn throws(LogError) in
      try txn.performWrite {
        // Its cursors go first: the handle is closed with the database.
        txn.closeCursors()
        return try env.dropDatabase(named: name, txn: txn.raw)
      }
    }
    if removed { state.withLock { $0.databases[name] = nil } }
    return removed
  }

  /// Whether the caller-owned database `name` exists; unlike ``database(named:)``, this does
  /// not create it.
  public func hasDatabase(named name: String) throws(LogError) -> Bool {
    try openDatabase(named: name, create: false) != nil
  }

  /// The caller-owned database `name`, created if needed. Names starting with `log.` are the log's.
  public func database(named name: String) throws(LogError) -> Database {
    guard let database = try openDatabase(named: name, create: true) else {
      throw LogError.invalidArgument("the log has no database named '\(name)'")
    }
    return database
  }

  /// The caller-owned database `name`, opened once and kept; created when `create` and the log
  /// is writable, else nil when there is none.
  private func openDatabase(named name: String, create: Bool) throws(LogError) -> Database? {
    guard !name.isEmpty, !name.hasPrefix(Self.reservedPrefix) else {
      throw LogError.invalidArgument(
        "database names must be non-empty and not start with '\(Self.reservedPrefix)'")
    }
    if let known = state.withLock({ $0.databases[name] }) { return known }
    let handle: UInt32?
    if options.readOnly {
      // lmdb.h: a handle opened in a read-only transaction becomes shared when it ends.
      var opened: UInt32?? = nil
      for attempt in 1...3 where opened == nil {
        do {
          opened = .some(
            try env.mapLock.withShared {
              guard !isClosed else { throw LogError.closed }
              return try env.openDatabaseReadOnly(named: name)
            })
        } catch let error as LMDBError where error.code == LMDBError.notFound {
          opened = .some(nil)
        } catch let error as LMDBError where error.code == LMDBError.mapResized && attempt < 3 {
          // Another process grew the map (a server writing beside this reader).
          try adoptMapSize()
        } catch {
          throw logError(error)
        }
      }
      handle = opened ?? nil
    } else {
      handle = try writeLog { txn throws(LogError) in
        try txn.performWrite { () throws(LMDBError) -> UInt32? in
          do throws(LMDBError) {
            return try env.openDatabase(named: name, create: create, txn: txn.raw)
          } catch  where error.code == LMDBError.notFound {
            return nil
          }
        }
      }
    }
    guard let handle else { return nil }
    let database = Database(name: name, handle: handle)
    state.withLock { $0.databases[name] = database }
    return database
  }

  // MARK: Transactions

  /// Runs `body` in a read-only snapshot of the log and every database.
  ///
  /// The transaction is valid only inside `body`. Keep `body` short: a long-lived reader keeps
  /// old pages from being reused.
  public func read<T>(_ body: (ReadTransaction) throws -> T) throws -> T {
    while true {
      let outcome: ReadOutcome<T> = try env.mapLock.withShared {
        guard !isClosed else { throw LogError.closed }
        let raw: RawTransaction
        do throws(LMDBError) {
          raw = try env.beginRead()
        } catch  where error.code == LMDBError.mapResized {
          return .mapResized
        } catch {
          throw logError(error)
        }
        let txn = ReadTransaction(log: self, raw: raw)
        defer {
          txn.isLive = false
          env.endRead(raw)
        }
        return .done(try body(txn))
      }
      switch outcome {
      case .done(let value): return value
      // Another process grew the map: adopt its size (lmdb.h: "If the mapsize is increased by
      // another process ... mdb_txn_begin() will return MDB_MAP_RESIZED ... call
      // mdb_env_set_mapsize() with a size of zero to adopt the new size").
      case .mapResized: try adoptMapSize()
      }
    }
  }

  enum ReadOutcome<T> {
    case done(T)
    case mapResized
  }

  /// ``read(_:)`` for bodies that throw only ``LogError``.
  func readLog<T>(_ body: (ReadTransaction) throws(LogError) -> T) throws(LogError) -> T {
    do {
      return try read { txn in try body(txn) }
    } catch {
      throw logError(error)
    }
  }

  /// Runs `body` in a write transaction on the calling thread and commits it (durably, unless
  /// the log is ``Durability/unsynced``). If `body` throws, nothing it wrote is kept.
  ///
  /// `body` may run more than once when the map has to grow; see ``WriteTransaction``.
  public func write<T>(_ body: (WriteTransaction) throws -> T) throws -> T {
    try writeMutex.withLock {
      try commitWrite(body)
    }
  }

  /// ``write(_:)`` for bodies that throw only ``LogError``.
  func writeLog<T>(_ body: (WriteTransaction) throws(LogError) -> T) throws(LogError) -> T {
    do {
      return try write { txn in try body(txn) }
    } catch {
      throw logError(error)
    }
  }

  /// The write loop; the caller holds ``writeMutex``.
  func commitWrite<T>(_ body: (WriteTransaction) throws -> T) throws -> T {
    guard !options.readOnly else { throw LogError.readOnly(path: path) }
    while true {
      let outcome: WriteOutcome<T> = try env.mapLock.withShared {
        guard !isClosed else { throw LogError.closed }
        let raw: RawTransaction
        do throws(LMDBError) {
          raw = try env.beginWrite()
        } catch  where error.code == LMDBError.mapResized {
          return .mapResized
        } catch {
          throw logError(error)
        }
        let txn = WriteTransaction(log: self, raw: raw, writer: writer)
        do {
          try prepareWriter(raw)
        } catch {
          raw.abort()
          writer.cacheValid = false
          throw error
        }
        let value: T
        do {
          value = try body(txn)
          try txn.flushBuffers()
        } catch {
          txn.end()
          raw.abort()
          writer.cacheValid = false
          if txn.sawMapFull { return .mapFull }
          throw error
        }
        txn.end()
        if let poison = txn.poison {
          raw.abort()
          writer.cacheValid = false
          if txn.sawMapFull { return .mapFull }
          throw poison
        }
        if writer.merkleDirty {
          do throws(LMDBError) {
            try storeTreeHead(raw)
          } catch {
            raw.abort()
            writer.cacheValid = false
            if error.code == LMDBError.mapFull || error.code == LMDBError.txnFull {
              return .mapFull
            }
            throw logError(error)
          }
        }
        let id = raw.id
        do throws(LMDBError) {
          try raw.commit()
        } catch {
          writer.cacheValid = false
          if error.code == LMDBError.mapFull || error.code == LMDBError.txnFull { return .mapFull }
          throw logError(error)
        }
        writer.lastTransactionID = id
        writer.merkleDirty = false
        if writer.streamCache.count > WriterState.streamCacheLimit {
          writer.streamCache.removeAll()
        }
        let last = LogPosition(writer.nextPosition - 1)
        state.withLock {
          if $0.durability != .unsynced { $0.durablePosition = max($0.durablePosition, last) }
          $0.statistics.commits += 1
          $0.statistics.appendedEvents += txn.appendedCount
        }
        if txn.appendedCount > 0 {
          notifier.bump(transactionID: id)
          for observer in state.withLock({ $0.commitObservers }) { observer() }
        }
        return .committed(value)
      }
      switch outcome {
      case .committed(let value): return value
      case .mapFull: try growMap()
      case .mapResized: try adoptMapSize()
      }
    }
  }

  enum WriteOutcome<T> {
    case committed(T)
    case mapFull
    case mapResized
  }

  /// Loads the next position and last timestamp unless this process made the last commit.
  ///
  /// LMDB does not advance its transaction id for a commit that wrote nothing, so after such a
  /// commit here another process may have committed under the very id this one expects next:
  /// the log's last position must also still be the one cached.
  private func prepareWriter(_ raw: RawTransaction) throws(LogError) {
    do {
      if writer.cacheValid && writer.lastTransactionID == raw.id - 1,
        try raw.lastEventPosition(dbs.events) == writer.nextPosition - 1
      {
        return
      }
      let last = try raw.lastEvent(dbs.events)
      writer.nextPosition = (last?.position ?? 0) + 1
      writer.lastTimestamp = last?.timestamp ?? 0
      writer.streamCache.removeAll()
      if options.merkleTree { try loadTree(raw, lastPosition: last?.position ?? 0) }
      writer.cacheValid = true
    } catch {
      throw logError(error)
    }
  }

  /// Doubles the map, up to the limit. Holds the map lock exclusively: no transaction is active.
  private func growMap() throws(LogError) {
    let current = env.mapSize
    guard current < options.maxMapSize else {
      throw LogError.mapFull(mapSize: current, limit: options.maxMapSize)
    }
    let page = Int(sysconf(Int32(_SC_PAGESIZE)))
    let target = min(options.maxMapSize / page * page, current * 2)
    guard target > current else {
      throw LogError.mapFull(mapSize: current, limit: options.maxMapSize)
    }
    do {
      try env.mapLock.withExclusive { () throws in
        env.drainReaderPool()
        try env.setMapSize(target)
      }
    } catch {
      throw logError(error)
    }
  }

  private func adoptMapSize() throws(LogError) {
    do {
      try env.mapLock.withExclusive { () throws in
        env.drainReaderPool()
        try env.setMapSize(0)
      }
    } catch {
      throw logError(error)
    }
  }

  // MARK: Errors

  func logError(_ error: any Error) -> LogError {
    switch error {
    case let error as LogError: error
    case let error as LMDBError:
      LogError.from(
        error, path: path, maxReaders: options.maxReaders, mapSize: env.mapSize,
        limit: options.maxMapSize)
    case let failure as RecordFailure:
      .corruptRecord(position: LogPosition(failure.position), reason: failure.reason)
    default: .storage(code: -1, operation: "log", message: "\(error)")
    }
  }
}

extension LogError {
  static func from(_ error: LMDBError, path: String, maxReaders: UInt32, mapSize: Int, limit: Int)
    -> LogError
  {
    switch error.code {
    case LMDBError.mapFull: .mapFull(mapSize: mapSize, limit: limit)
    case LMDBError.txnFull: .transactionTooLarge
    case LMDBError.readersFull: .readersFull(maxReaders: maxReaders)
    case LMDBError.corrupted, LMDBError.pageNotFound, LMDBError.panic:
      .corruptDatabase(path: path, reason: "\(error)")
    case ENOSPC, EDQUOT: .diskFull(path: path)
    // A full disk can reach the commit as EIO (the page writes themselves failed): say so
    // when the file system has no room left.
    case EIO where (FileSystem.availableBytes(path) ?? .max) < 1 << 20: .diskFull(path: path)
    case EROFS: .readOnlyFileSystem(path: path)
    case EACCES, EPERM: .permissionDenied(path: path)
    default: .storage(code: error.code, operation: "\(error.operation)", message: "\(error)")
    }
  }
}
