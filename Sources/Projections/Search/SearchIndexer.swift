import Dispatch
import Foundation
import JSON
public import Log
import RevTree
import Synchronization

#if canImport(Glibc)
  import Glibc
#endif

/// Keeps a store's full-text index (``TextSearchProjection``) behind its log, in an LMDB
/// environment of its own (`<database>/search/`), the way CouchDB keeps its search and view
/// indexes: a write does not wait for the index, and a search first brings it up to the log's
/// end (``catchUp(stop:)``), so that it always sees every write acknowledged before it began.
///
/// The index follows the changes feed (`docs.bySeq`) from its checkpoint (the log position it
/// is up to, `search.state`), as CouchDB's indexers do: each document changed since then is
/// indexed as its winning revision now stands (or removed, when that is deleted or not
/// searched), in write transactions of ``batchRows`` documents, each with the checkpoint it
/// reaches. A background thread of lower priority does this after every commit of the log, so
/// that a search seldom has anything left to do; on two cores it takes what the writer leaves.
///
/// The index is derived data: when its environment cannot be opened (damaged, say) or is
/// ahead of the log (a database restored from an older backup), it is removed and built again
/// from the documents. ``rebuild()`` builds it again in one transaction; ``verify(maxDifferences:)``
/// builds a copy from the same snapshot and compares the two document by document.
final class SearchIndexer: Sendable {
  let projection: TextSearchProjection
  /// The store's log, only read.
  let log: EventLog
  /// The store's documents projection (`byId`, `bySeq`).
  let documents: ProjectionStorage
  /// The index's own environment (no events: only its databases).
  let index: EventLog
  let storage: ProjectionStorage
  let stateDatabase: Database

  /// Documents indexed per write transaction of the index.
  static let batchRows = 8_000
  static let checkpointKey = Array("seq".utf8)

  private struct Follow {
    var stopped = false
    /// A thread is catching up.
    var running = false
    /// The log moved while it was.
    var again = false
  }
  private let follow = Mutex(Follow())
  /// Serialises catching up (the background thread, searches, rebuilds, verifies).
  private let working = Mutex(())
  /// Entered while a background thread runs.
  private let threads = DispatchGroup()

  /// Opens (creating, or building again when it is damaged or ahead of the log) the index of
  /// the store whose log is `log` and documents `documents`.
  init(
    projection: TextSearchProjection, log: EventLog, documents: ProjectionStorage
  ) throws {
    self.projection = projection
    self.log = log
    self.documents = documents
    let directory = log.path + "/search"
    var options = EventLog.Options(durability: log.options.durability)
    options.merkleTree = false
    options.mapSize = 16 << 20
    var opened: EventLog
    do {
      opened = try EventLog(directory: directory, options: options)
    } catch .corruptDatabase, .damaged, .notALog, .versionMismatch, .corruptRecord, .storage {
      // Derived data: a file that cannot be read is built again.
      try? FileManager.default.removeItem(atPath: directory)
      opened = try EventLog(directory: directory, options: options)
    }
    do {
      storage = try ProjectionStorage.open(for: projection, in: opened)
      let state = try opened.database(named: "search.state")
      stateDatabase = state
      let ahead =
        try opened.read { txn in
          try Self.checkpoint(txn, state)
        } > log.committedPosition.rawValue
      index = opened
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
  /// search, or the next commit here.)
  func start() {
    log.onCommit { [weak self] in self?.poke() }
    poke()
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
        // A failure (a full disk, say) is not lost: the next search catches up itself and
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
  func close() {
    follow.withLock { $0.stopped = true }
    threads.wait()
    working.withLock { _ in index.close() }
  }

  /// The log position the index is up to.
  func checkpoint() throws -> UInt64 {
    try index.read { try Self.checkpoint($0, stateDatabase) }
  }

  static func checkpoint(_ txn: ReadTransaction, _ db: Database) throws -> UInt64 {
    try txn.get(checkpointKey, in: db).flatMap { UInt64(bigEndianArray: $0) } ?? 0
  }

  /// Brings the index up to the log's end (as committed when it is called or later), in
  /// transactions of ``batchRows`` documents; `stop` is asked between them.
  func catchUp(stop: () -> Bool = { false }) throws {
    do {
      // Caught up already (a search's usual case): no write transaction of the index.
      if try checkpoint() >= log.committedPosition.rawValue { return }
      try working.withLock { _ in
        while try !advance(limit: Self.batchRows) {
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
    try index.write { txn in
      try log.read { snapshot in
        let from = try Self.checkpoint(txn, stateDatabase)
        let (through, done) = try indexChanges(
          after: from, limit: limit, snapshot: snapshot, into: storage, txn: txn)
        if through != from {
          try txn.put(through.bigEndianBytes, forKey: Self.checkpointKey, in: stateDatabase)
        }
        return done
      }
    }
  }

  /// Indexes, in `txn` into `target`, each document of `snapshot`'s changes feed after
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
    try snapshot.scan(documents["bySeq"], from: (from + 1).bigEndianBytes) { key, docKey in
      guard let seq = UInt64(bigEndianArray: key) else { return true }
      guard let bytes = try snapshot.get(docKey, in: documents["byId"]) else { return true }
      let record = try DocumentRecord(decoding: bytes)
      var indexed: TextSearchProjection.Indexed? = nil
      if let winner = record.tree.winner, !winner.isDeleted, let at = winner.body,
        let body = try? JSONValue(parsing: DocumentChange.body(at: at, in: snapshot))
      {
        indexed = projection.index(record.docID, body)
      }
      try projection.set(Array(record.docID.utf8), indexed, storage: target, txn: txn)
      through = seq
      count += 1
      return count < limit
    }
    if count < limit { return (end, true) }
    return (through, through >= end)
  }

  /// Reads the index (after ``catchUp(stop:)``, for a search that sees every write before it).
  func read<T>(_ body: (ReadTransaction) throws -> T) throws -> T {
    do {
      return try index.read(body)
    } catch let error as LogError {
      throw StoreError.from(error)
    }
  }

  /// A write transaction of the index, outside catching up (tests that damage it).
  func write(_ body: (WriteTransaction) throws -> Void) throws {
    do {
      try working.withLock { _ in try index.write(body) }
    } catch {
      throw StoreError.from(error)
    }
  }

  // MARK: Rebuilding and verifying

  /// Empties the index and builds it again from the documents, in one transaction: searches
  /// see the old index until the new one is complete.
  func rebuild() throws {
    do {
      try working.withLock { _ in
        try index.write { txn in
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
  /// the live one up to the same snapshot, and compares the two: each document's group and
  /// forward record (terms, positions, length), each (group, term)'s postings and each group's
  /// lengths and totals, documents matched by id (their numbers may differ: they depend on the
  /// order the indexer met them). Returns the differences (empty when they agree).
  func verify(maxDifferences: Int = 20) throws -> [String] {
    do {
      return try working.withLock { _ in
        let scratch = try ProjectionStorage.open(for: projection, in: index, suffix: ".verify")
        return try index.write { txn in
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
            var report = SearchComparison(max: maxDifferences)
            try report.compare(live: storage, rebuilt: scratch, txn: txn)
            for db in scratch.all { try txn.removeAll(in: db) }
            return report.differences
          }
        }
      }
    } catch {
      throw StoreError.from(error)
    }
  }
}

/// A live search index compared with one rebuilt from the same documents
/// (``SearchIndexer/verify(maxDifferences:)``), document by document: the rebuilt one's numbers
/// stand for the documents in both.
struct SearchComparison {
  let max: Int
  var differences: [String] = []

  init(max: Int) { self.max = max }

  var full: Bool { differences.count >= max }

  mutating func note(_ s: String) {
    if !full { differences.append("search." + s) }
  }

  /// group key and num in `ids` values, by document id.
  static func refs(_ storage: ProjectionStorage, _ txn: ReadTransaction) throws
    -> [[UInt8]: SearchDocRef]
  {
    var out: [[UInt8]: SearchDocRef] = [:]
    try txn.scan(storage["ids"]) { id, value in
      out[id] = try SearchDocRef(idValue: value)
      return true
    }
    return out
  }

  mutating func compare(live: ProjectionStorage, rebuilt: ProjectionStorage, txn: ReadTransaction)
    throws
  {
    let liveRefs = try Self.refs(live, txn)
    let rebuiltRefs = try Self.refs(rebuilt, txn)
    // Documents: the same ids, groups and forward records; live numbers mapped to rebuilt ones.
    var numbers: [[UInt8]: [UInt32: UInt32]] = [:]
    for (id, ref) in rebuiltRefs.sorted(by: { $0.key.lexicographicallyPrecedes($1.key) }) {
      let name = ProjectionRunner.show(id)
      guard let mine = liveRefs[id] else {
        note("ids: live lacks \(name)")
        continue
      }
      guard mine.group == ref.group else {
        note("ids: \(name) is in another group")
        continue
      }
      numbers[ref.group, default: [:]][mine.num] = ref.num
      if try txn.get(mine.forwardKey, in: live["forward"])
        != txn.get(ref.forwardKey, in: rebuilt["forward"])
      {
        note("forward: the record of \(name) differs from the rebuilt one")
      }
    }
    for id in liveRefs.keys where rebuiltRefs[id] == nil {
      note("ids: live has \(ProjectionRunner.show(id)), which the rebuild does not")
    }
    if try txn.count(of: live["forward"]) != txn.count(of: rebuilt["forward"]) {
      note("forward: live has a different number of records")
    }
    // Postings and lengths, as sets of (rebuilt number, value) per row group.
    try compareSlots("terms", live: live, rebuilt: rebuilt, numbers: numbers, txn: txn)
    try compareSlots("lengths", live: live, rebuilt: rebuilt, numbers: numbers, txn: txn)
    // Totals per group (documents, words, hashed name), not the next number.
    var liveStats: [[UInt8]: [UInt8]] = [:]
    try txn.scan(live["stats"]) { k, v in
      liveStats[k] = Array(v.prefix(16)) + Array(v.dropFirst(24))
      return true
    }
    try txn.scan(rebuilt["stats"]) { k, v in
      let mine = liveStats.removeValue(forKey: k)
      // A group with no documents left keeps its row (its counter) in one index only.
      let empty = Array(repeating: UInt8(0), count: 16)
      let theirs = Array(v.prefix(16)) + Array(v.dropFirst(24))
      if (mine ?? empty + Array(v.dropFirst(24))) != theirs {
        note("stats: the totals of \(ProjectionRunner.show(k)) differ from the rebuilt ones")
      }
      return !full
    }
    for (k, v) in liveStats where v.prefix(16) != Array(repeating: 0, count: 16)[...] {
      note("stats: live has totals for \(ProjectionRunner.show(k)), which the rebuild does not")
    }
  }

  /// Compares `terms` (key group · 0 · term · 0 · bucket) or `lengths` (group · 0 · bucket):
  /// the (document, value) pairs of each key without its bucket, live documents given their
  /// rebuilt numbers.
  private mutating func compareSlots(
    _ name: String, live: ProjectionStorage, rebuilt: ProjectionStorage,
    numbers: [[UInt8]: [UInt32: UInt32]], txn: ReadTransaction
  ) throws {
    func collect(_ db: Database, mapped: Bool) throws -> [[UInt8]: [UInt64]] {
      var out: [[UInt8]: [UInt64]] = [:]
      try txn.scan(db) { key, value in
        guard key.count > 4, let cut = key.firstIndex(of: 0) else {
          note("\(name): malformed key \(ProjectionRunner.show(key))")
          return !full
        }
        let group = Array(key[..<cut])
        let base =
          key.suffix(4).reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
          * UInt32(TextSearchProjection.bucketSize)
        for (slot, n) in try SlotList.decode(value) {
          var num = base + UInt32(slot)
          if mapped {
            guard let m = numbers[group]?[num] else {
              note("\(name): \(ProjectionRunner.show(key)) names a document the rebuild lacks")
              continue
            }
            num = m
          }
          out[Array(key.dropLast(4)), default: []].append(UInt64(num) << 32 | UInt64(n))
        }
        return !full
      }
      return out
    }
    var a = try collect(live[name], mapped: true)
    let b = try collect(rebuilt[name], mapped: false)
    for (key, pairs) in b.sorted(by: { $0.key.lexicographicallyPrecedes($1.key) }) {
      if a.removeValue(forKey: key)?.sorted() != pairs.sorted() {
        note("\(name): the rows of \(ProjectionRunner.show(key)) differ from the rebuilt ones")
      }
      if full { return }
    }
    for key in a.keys {
      note("\(name): live has rows for \(ProjectionRunner.show(key)), which the rebuild does not")
    }
  }
}
