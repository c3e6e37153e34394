import Dispatch
import Formats
import Foundation
import JSON
public import Log
import RevTree
import Synchronization

#if canImport(Glibc)
  import Glibc
#endif

/// Keeps one ``IndexBehindLog`` of a store behind its log, in an LMDB environment of its own
/// (`<database>/<name>/`), the way CouchDB keeps its search and view indexes: a write does not
/// wait for the index, and a reader first brings it up to the log's end (``catchUp(stop:)``),
/// so that it always sees every write acknowledged before it began.
///
/// The index follows the changes feed (`docs.bySeq`) from its checkpoint (the log position it
/// is up to, `<name>.state`), as CouchDB's indexers do: each document changed since then is
/// handed to the index as its winning revision now stands (nil when that is deleted), in write
/// transactions of ``batchRows`` documents, each with the checkpoint it reaches. A background
/// thread of lower priority does this after every commit of the log, so that a reader seldom
/// has anything left to do; on two cores it takes what the writer leaves. While it is more than
/// ``reportedGap`` changes behind, its progress is in its data directory's ``DirectoryState/indexTasks`` (`_active_tasks`).
///
/// The index is derived data: when its environment cannot be opened (damaged, say) or is
/// ahead of the log (a database restored from an older backup), it is removed and built again
/// from the documents. ``rebuild()`` builds it again in one transaction; ``verify(maxDifferences:)``
/// builds a copy from the same snapshot and compares the two
/// (``IndexBehindLog/compare(live:rebuilt:txn:maxDifferences:)``).
///
/// ```swift
/// if let follower = store.index(named: "search") {
///   try follower.catchUp()
///   let rows = try follower.read { txn in try txn.count(of: follower.storage["terms"]) }
/// }
/// ```
public final class IndexFollower: Sendable {
  /// The index this follower keeps.
  public let index: any IndexBehindLog
  /// The database's name, for ``IndexTasks``.
  let database: String
  /// The store's log, only read.
  let log: EventLog
  /// The store's documents projection (`byId`, `bySeq`).
  let documents: ProjectionStorage
  /// The index's own environment (no events: only its databases).
  let environment: EventLog
  /// The index's databases in its environment (read them in ``read(_:)``).
  public let storage: ProjectionStorage
  let stateDatabase: Database

  /// Documents indexed per write transaction of the index.
  static let batchRows = 8_000
  static let checkpointKey = Array("seq".utf8)
  /// Documents handed to the index at once (``IndexBehindLog/update(batch:storage:txn:)``).
  static let handedAtOnce = 500

  private struct Follow {
    var stopped = false
    /// A thread is catching up.
    var running = false
    /// The log moved while it was.
    var again = false
    /// A quiet index (``IndexBehindLog/quietPeriod``): commits since the last catch-up, the
    /// time of the last one, and whether a check is scheduled.
    var commitsSince = 0
    var lastCommit = ContinuousClock.now
    var checkScheduled = false
  }
  private let follow = Mutex(Follow())
  /// Serialises catching up (the background thread, searches, rebuilds, verifies).
  private let working = Mutex(())
  /// Entered while a background thread runs.
  private let threads = DispatchGroup()

  /// Where its long catch-ups are shown (its data directory's, ``DirectoryState/indexTasks``).
  let tasks: IndexTasks

  /// Changes behind the log from which a catch-up shows in ``IndexTasks``.
  static let reportedGap: UInt64 = 1_000

  /// Opens (creating, or building again when it is damaged or ahead of the log) `index` for
  /// the store whose log is `log` and documents `documents`.
  init(
    index: any IndexBehindLog, log: EventLog, documents: ProjectionStorage, database: String,
    tasks: IndexTasks
  ) throws {
    self.tasks = tasks
    self.index = index
    self.log = log
    self.documents = documents
    self.database = database
    let directory = log.path + "/" + index.name
    let options = Self.environmentOptions(index, durability: log.options.durability)
    var opened: EventLog
    do {
      opened = try EventLog(directory: directory, options: options)
    } catch .corruptDatabase, .damaged, .notALog, .versionMismatch, .corruptRecord, .storage {
      // Derived data: a file that cannot be read is built again.
      try? FileManager.default.removeItem(atPath: directory)
      opened = try EventLog(directory: directory, options: options)
    }
    do {
      // Rows of another layout (``IndexBehindLog/layoutVersion``) are built again, from nothing.
      var (layout, recorded) = try Self.layout(of: opened, index)
      if layout != index.layoutVersion {
        opened.close()
        try? FileManager.default.removeItem(atPath: directory)
        opened = try EventLog(directory: directory, options: options)
        recorded = false
      }
      if !recorded {
        let state = try opened.database(named: index.name + ".state")
        let version = UInt64(index.layoutVersion).bigEndianBytes
        try opened.write { try $0.put(version, forKey: Self.layoutKey, in: state) }
      }
    } catch {
      opened.close()
      throw StoreError.from(error)
    }
    do {
      storage = try ProjectionStorage.open(for: index, in: opened)
      let state = try opened.database(named: index.name + ".state")
      stateDatabase = state
      let ahead =
        try opened.read { txn in
          try Self.checkpoint(txn, state)
        } > log.committedPosition.rawValue
      environment = opened
      if ahead { try rebuild() }
    } catch {
      opened.close()
      throw StoreError.from(error)
    }
  }

  // MARK: Following the log

  /// Follows the log: after every commit of this process, a thread of its own (started when
  /// there is work, gone when it is done) catches the index up, and once now for what was
  /// written before the store opened. (Commits by other processes are caught up by the next
  /// read, or the next commit here.)
  func start() {
    log.onCommit { [weak self] in self?.commit() }
    poke()
  }

  /// After a commit: an eager index catches up now; a quiet one
  /// (``IndexBehindLog/quietPeriod``) once the log has been quiet that long, or at once when
  /// ``IndexBehindLog/quietGap`` commits have gone by without it.
  private func commit() {
    guard let quiet = index.quietPeriod else { return poke() }
    let now = ContinuousClock.now
    let (pokeNow, schedule) = follow.withLock { f -> (Bool, Bool) in
      f.commitsSince += 1
      f.lastCommit = now
      if f.commitsSince >= index.quietGap {
        f.commitsSince = 0
        return (true, false)
      }
      if f.checkScheduled || f.stopped { return (false, false) }
      f.checkScheduled = true
      return (false, true)
    }
    if pokeNow { poke() }
    if schedule { scheduleQuietCheck(after: quiet) }
  }

  private func scheduleQuietCheck(after quiet: Duration) {
    let nanoseconds =
      quiet.components.seconds * 1_000_000_000
      + quiet.components.attoseconds / 1_000_000_000
    DispatchQueue.global().asyncAfter(
      deadline: .now() + .nanoseconds(Int(nanoseconds))
    ) { [weak self] in
      guard let self else { return }
      let wait = self.follow.withLock { f -> Duration? in
        if f.stopped {
          f.checkScheduled = false
          return nil
        }
        let since = ContinuousClock.now - f.lastCommit
        if since < quiet { return quiet - since }
        f.checkScheduled = false
        f.commitsSince = 0
        return .zero
      }
      guard let wait else { return }
      if wait == .zero { self.poke() } else { self.scheduleQuietCheck(after: wait) }
    }
  }

  /// Starts the catching-up thread, or tells the running one to go on once more.
  private func poke() {
    let startThread = follow.withLock { f -> Bool in
      guard !f.stopped else { return false }
      if f.running {
        f.again = true
        return false
      }
      f.running = true
      // Entered under the lock, so that ``close()`` (which sets `stopped` under it) waits.
      threads.enter()
      return true
    }
    guard startThread else { return }
    Thread.detachNewThread { [self] in
      #if canImport(Glibc)
        // Below the writer: the index takes the CPU the writes leave. (On Linux, who 0 is
        // the calling thread alone; the thread ends with the catching up.)
        _ = setpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0, 10)
      #endif
      while true {
        // A failure (a full disk, say) is not lost: the next read catches up itself and
        // reports it.
        try? catchUp(stop: { self.follow.withLock { $0.stopped } })
        let more = follow.withLock { f -> Bool in
          if f.again && !f.stopped {
            f.again = false
            return true
          }
          f.running = false
          return false
        }
        if !more { break }
      }
      threads.leave()
    }
  }

  /// Stops following the log (a running thread finishes its batch) and closes the index.
  ///
  /// A quiet index (``IndexBehindLog/quietPeriod``) whose catch-up is still waiting for the
  /// writes to pause does it now, one batch at most, as an eager one would have after the last
  /// commit, so that a command that writes and closes (`wikilog put`) leaves the index as
  /// current as before. (Here, on the closing thread: a catching-up thread that is still
  /// running would stop after its own batch and miss the writes after it.)
  func close() {
    if follow.withLock({ $0.checkScheduled && !$0.stopped }) {
      try? catchUp(stop: { true })
    }
    follow.withLock { $0.stopped = true }
    threads.wait()
    working.withLock { _ in environment.close() }
  }

  /// Removes the rows of documents that left the changes feed (purged ones: with no row in
  /// `docs.bySeq` left, following the feed never reaches them).
  public func forget(_ docIDs: [String]) throws {
    guard !docIDs.isEmpty else { return }
    do {
      try working.withLock { _ in
        try environment.write { txn in
          for id in docIDs { try index.update(id, winner: nil, storage: storage, txn: txn) }
        }
      }
    } catch {
      throw StoreError.from(error)
    }
  }

  /// The layout version of the rows in the index environment `env`: the one it records, or 1
  /// for one that records none but has rows (written before versions were recorded), or the
  /// index's own for an empty one; and whether it was recorded.
  static func layout(of env: EventLog, _ index: any IndexBehindLog) throws -> (
    version: Int, recorded: Bool
  ) {
    let state = try env.database(named: index.name + ".state")
    return try env.read { txn in
      if let stored = try txn.get(layoutKey, in: state) {
        return (Int(truncatingIfNeeded: UInt64(bigEndianArray: stored) ?? 0), true)
      }
      return (try checkpoint(txn, state) > 0 ? 1 : index.layoutVersion, false)
    }
  }

  static let layoutKey = Array("layout".utf8)

  /// The options of an index's environment: its log's durability, no events and so no tree.
  static func environmentOptions(_ index: any IndexBehindLog, durability: EventLog.Durability)
    -> EventLog.Options
  {
    var options = EventLog.Options(durability: durability)
    options.merkleTree = false
    options.mapSize = index.mapSize
    return options
  }

  /// Replaces the file of the closed index environment at `directory` with a compacted copy
  /// (LMDB keeps freed pages, and the bytes on them, until it reuses them): what an erasure
  /// does for each index, so that nothing erased from the documents stays in an index's file.
  static func compactEnvironment(
    directory: String, index: any IndexBehindLog, durability: EventLog.Durability
  ) throws {
    do {
      let env = try EventLog(
        directory: directory, options: environmentOptions(index, durability: durability))
      defer { env.close() }
      let storage = try ProjectionStorage.open(for: index, in: env)
      try env.write { txn in try index.compacting(storage: storage, txn: txn) }
      try env.compact()
    } catch {
      throw StoreError.from(error)
    }
  }

  /// The log position the index is up to.
  public func checkpoint() throws -> UInt64 {
    try environment.read { try Self.checkpoint($0, stateDatabase) }
  }

  static func checkpoint(_ txn: ReadTransaction, _ db: Database) throws -> UInt64 {
    try txn.get(checkpointKey, in: db).flatMap { UInt64(bigEndianArray: $0) } ?? 0
  }

  /// Brings the index up to the log's end (as committed when it is called or later), in
  /// transactions of ``batchRows`` documents; `stop` is asked between them.
  public func catchUp(stop: () -> Bool = { false }) throws {
    do {
      // Caught up already (a reader's usual case): no write transaction of the index.
      if try checkpoint() >= log.committedPosition.rawValue { return }
      try working.withLock { _ in
        // Read again under the lock: another caller may have caught the index up meanwhile.
        let from = try checkpoint()
        let end = try log.committedPosition.rawValue
        if from >= end { return }
        // A long way behind (a first build, a rebuild's aftermath): shown in _active_tasks.
        let task =
          end - from >= Self.reportedGap
          ? tasks.start(
            database: database, designDocument: index.taskDesignDocument, index: index.name,
            total: Int(end - from))
          : nil
        defer { task.map { tasks.finish($0) } }
        while try !advance(limit: Self.batchRows) {
          if let task {
            let at = (try? checkpoint()) ?? from
            // The log may have grown past `end` meanwhile: the task counts to its total.
            tasks.progress(task, done: Int(min(at - min(at, from), end - from)))
          }
          if stop() { return }
        }
      }
    } catch {
      throw StoreError.from(error)
    }
  }

  /// One write transaction of the index: the documents changed after its checkpoint, up to
  /// `limit` of them. Returns whether it reached the log's end.
  private func advance(limit: Int) throws -> Bool {
    try environment.write { txn in
      try log.read { snapshot in
        let from = try Self.checkpoint(txn, stateDatabase)
        try forgetPurged(after: from, snapshot: snapshot, txn: txn)
        let (through, done) = try indexChanges(
          after: from, limit: limit, snapshot: snapshot, into: storage, txn: txn)
        if through != from {
          try txn.put(through.bigEndianBytes, forKey: Self.checkpointKey, in: stateDatabase)
        }
        return done
      }
    }
  }

  /// Removes the rows of the documents purged after position `from` that are gone from the
  /// store: a purged document leaves the changes feed, so following it never tells the index,
  /// and an index that was closed at the purge (not opened yet, or being compacted) was not
  /// told by ``forget(_:)``. Looked for only when the store's purge count moved since the index
  /// last looked (kept beside its checkpoint).
  private func forgetPurged(after from: UInt64, snapshot: ReadTransaction, txn: WriteTransaction)
    throws
  {
    let purges =
      try snapshot.get(DocumentProjection.purgeSeqKey, in: documents["meta"])
      .flatMap { UInt64(bigEndianArray: $0) } ?? 0
    let seen =
      try txn.get(Self.purgesKey, in: stateDatabase)
      .flatMap { UInt64(bigEndianArray: $0) } ?? 0
    guard purges != seen else { return }
    let end = try snapshot.lastPosition.rawValue
    if from < end {
      try snapshot.forEachEvent(
        from: LogPosition(from + 1), ofTypes: [DocumentEvent.Kind.purge.eventType]
      ) { event in
        let e = try DocumentEvent(decoding: event)
        if index.mayIndex(e.docID),
          try snapshot.get(DocumentKey.key(e.docID), in: documents["byId"]) == nil
        {
          try index.update(e.docID, winner: nil, storage: storage, txn: txn)
        }
        return true
      }
    }
    try txn.put(purges.bigEndianBytes, forKey: Self.purgesKey, in: stateDatabase)
  }

  /// The store's purge count the index last looked at (``forgetPurged(after:snapshot:txn:)``).
  static let purgesKey = Array("purges".utf8)

  /// Hands the index, in `txn` into `target`, each document of `snapshot`'s changes feed after
  /// position `from`, at most `limit` of them; returns the position reached and whether that
  /// is the snapshot's end.
  private func indexChanges(
    after from: UInt64, limit: Int, snapshot: ReadTransaction, into target: ProjectionStorage,
    txn: WriteTransaction
  ) throws -> (through: UInt64, done: Bool) {
    let end = try snapshot.lastPosition.rawValue
    guard from < end else { return (from, true) }
    var count = 0
    var through = from
    // Handed to the index a batch at a time (``IndexBehindLog/update(batch:storage:txn:)``).
    var batch: [IndexedDocument] = []
    try snapshot.scan(documents["bySeq"], from: (from + 1).bigEndianBytes) { key, docKey in
      guard let seq = UInt64(bigEndianArray: key) else { return true }
      // A document the index can never have rows of is passed over unread.
      let inline = DocumentKey.inlineID(docKey)
      if inline.map({ index.mayIndex($0) }) ?? true,
        let bytes = try snapshot.get(docKey, in: documents["byId"])
      {
        let record = try DocumentRecord(decoding: bytes)
        if inline != nil || index.mayIndex(record.docID) {
          var winner: JSONValue? = nil
          if let leaf = record.tree.winner, !leaf.isDeleted, let at = leaf.body {
            winner = try? JSONValue(parsing: DocumentChange.body(at: at, in: snapshot))
          }
          batch.append(
            IndexedDocument(
              docID: record.docID, rev: record.tree.winner.map { "\($0.rev)" } ?? "",
              winner: winner,
              conflicts: winner == nil
                ? []
                : record.tree.conflicts.filter { $0 != record.tree.winner?.rev }.map(\.description))
          )
          if batch.count >= Self.handedAtOnce {
            try index.update(batch: batch, storage: target, txn: txn)
            batch.removeAll(keepingCapacity: true)
          }
        }
      }
      through = seq
      count += 1
      return count < limit
    }
    if !batch.isEmpty { try index.update(batch: batch, storage: target, txn: txn) }
    if count < limit { return (end, true) }
    return (through, through >= end)
  }

  /// Reads the index (after ``catchUp(stop:)``, for a reader that sees every write before it).
  public func read<T>(_ body: (ReadTransaction) throws -> T) throws -> T {
    do {
      return try environment.read(body)
    } catch let error as LogError {
      throw StoreError.from(error)
    }
  }

  /// A write transaction of the index, outside catching up: for state the index keeps beside
  /// its rows (a view's cached reductions), or tests that damage it.
  public func write(_ body: (WriteTransaction) throws -> Void) throws {
    do {
      try working.withLock { _ in try environment.write(body) }
    } catch {
      throw StoreError.from(error)
    }
  }

  // MARK: Rebuilding and verifying

  /// Empties the index and builds it again from the documents, in one transaction: readers
  /// see the old index until the new one is complete.
  public func rebuild() throws {
    do {
      try working.withLock { _ in
        try environment.write { txn in
          for db in storage.all { try txn.removeAll(in: db) }
          try log.read { snapshot in
            let (through, _) = try indexChanges(
              after: 0, limit: .max, snapshot: snapshot, into: storage, txn: txn)
            try txn.put(through.bigEndianBytes, forKey: Self.checkpointKey, in: stateDatabase)
          }
        }
      }
    } catch {
      throw StoreError.from(error)
    }
  }

  /// Builds the index again into scratch databases from one snapshot of the documents, brings
  /// the live one up to the same snapshot, and compares the two
  /// (``IndexBehindLog/compare(live:rebuilt:txn:maxDifferences:)``). Returns the differences
  /// (empty when they agree).
  public func verify(maxDifferences: Int = 20) throws -> [String] {
    do {
      return try working.withLock { _ in
        let scratch = try ProjectionStorage.open(for: index, in: environment, suffix: ".verify")
        return try environment.write { txn in
          try log.read { snapshot in
            // The live index up to the snapshot, then the copy from nothing.
            let (through, _) = try indexChanges(
              after: try Self.checkpoint(txn, stateDatabase), limit: .max, snapshot: snapshot,
              into: storage, txn: txn)
            try txn.put(through.bigEndianBytes, forKey: Self.checkpointKey, in: stateDatabase)
            for db in scratch.all { try txn.removeAll(in: db) }
            _ = try indexChanges(
              after: 0, limit: .max, snapshot: snapshot, into: scratch, txn: txn)
            try txn.flushBuffers()
            let differences = try index.compare(
              live: storage, rebuilt: scratch, txn: txn, maxDifferences: maxDifferences)
            for db in scratch.all { try txn.removeAll(in: db) }
            return differences
          }
        }
      }
    } catch {
      throw StoreError.from(error)
    }
  }
}
