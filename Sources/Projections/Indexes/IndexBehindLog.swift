public import JSON
public import Log
import Synchronization

#if canImport(FoundationEssentials)
  import FoundationEssentials
#else
  import Foundation
#endif

/// An index a ``DocumentStore`` keeps behind its log, in an LMDB environment of its own, as
/// CouchDB keeps its search and view indexes: writes do not wait for it; an ``IndexFollower``
/// hands it every document changed since its checkpoint, as the document's winning revision
/// now stands, and a reader catches it up before reading (``IndexFollower/catchUp(stop:)``).
///
/// Give it to the store (`DocumentStore(directory:indexes:)`, or a data directory's
/// `indexes`); the store opens `<database>/<name>/`, follows the log, rebuilds and verifies it
/// by ``name`` like any projection (``DocumentStore/rebuild(_:)``,
/// ``DocumentStore/verify(_:maxDifferences:)``), and lists its checkpoint. The Query module's
/// full-text search is one; the tests define another.
///
/// ```swift
/// /// Counts the documents of each `type`.
/// final class TypeCounts: IndexBehindLog {
///   let name = "types"
///   let databaseNames = ["byDoc", "counts"]
///   func update(_ docID: String, winner: JSONValue?, storage: ProjectionStorage,
///               txn: WriteTransaction) throws {
///     // Remove the document's old row and count, add the new ones.
///   }
/// }
/// let store = try DocumentStore(directory: dir, indexes: [TypeCounts()])
/// let follower = store.index(named: "types")!
/// try follower.catchUp()
/// ```
public protocol IndexBehindLog: AnyObject, Sendable {
  /// The index's name: its directory under the database's, the prefix of its databases, and
  /// the name ``DocumentStore/rebuild(_:)`` and ``DocumentStore/verify(_:maxDifferences:)``
  /// take.
  var name: String { get }
  /// The LMDB databases it keeps (each stored as `<name>.<database>`; `state` is taken).
  var databaseNames: [String] { get }
  /// The map size of its environment (16 MiB unless it says otherwise; the log's map grows
  /// as it fills).
  var mapSize: Int { get }
  /// Sets the rows of document `docID` to what its winning revision `winner` gives (nil: the
  /// document is deleted), replacing the rows it had, in `txn` of the index's environment.
  func update(
    _ docID: String, winner: JSONValue?, storage: ProjectionStorage, txn: WriteTransaction)
    throws
  /// Sets the rows of each document of `batch` as ``update(_:winner:storage:txn:)`` does, in
  /// the order given (a document appears once). By default one document at a time; an index
  /// that works better on many at once (a view handing its query server a batch) says so.
  func update(batch: [IndexedDocument], storage: ProjectionStorage, txn: WriteTransaction)
    throws
  /// The differences between the `live` rows and rows `rebuilt` from the same documents (empty
  /// when they agree), at most `maxDifferences`. By default, every database compared row by row.
  func compare(
    live: ProjectionStorage, rebuilt: ProjectionStorage, txn: ReadTransaction, maxDifferences: Int
  ) throws -> [String]
  /// Nil (the default): the index catches up after every commit. Otherwise it waits until the
  /// log has been quiet this long, or ``quietGap`` commits have gone by, so that a burst of
  /// writes does not share the CPU with it (a reader still catches it up first).
  var quietPeriod: Duration? { get }
  /// With a ``quietPeriod``: the commits after which it catches up anyway.
  var quietGap: Int { get }
  /// The design document `_active_tasks` names for a long build of the index (`_<name>` by
  /// default; a view's is its design document).
  var taskDesignDocument: String { get }
  /// LMDB names of databases an earlier, never released layout kept in the log's own
  /// environment for this index (say, when it was written in the append transaction): a
  /// store that has one is refused at open, as ``RetiredLayouts`` says. None by default.
  var retiredDatabaseNames: [String] { get }
  /// Whether a document with this id can have rows at all (true by default). The follower
  /// neither reads nor hands over a document the index says no to: an index of wiki pages
  /// costs a note nothing. The answer must depend on the id alone and never change.
  func mayIndex(_ docID: String) -> Bool
  /// The version of the index's rows (1 by default). When an index's environment was written
  /// with another version, it is removed and built again from the documents as the store
  /// opens: a new layout needs no conversion (the index is derived data).
  var layoutVersion: Int { get }
  /// Called in a write transaction of the index's environment before its file is compacted
  /// (an erasure, or `_compact`): an index that leaves rows of removed documents to be
  /// cleaned up later cleans them up here, so that nothing erased stays in the file. Nothing
  /// by default.
  func compacting(storage: ProjectionStorage, txn: WriteTransaction) throws
}

extension IndexBehindLog {
  public var mapSize: Int { 16 << 20 }

  public func update(batch: [IndexedDocument], storage: ProjectionStorage, txn: WriteTransaction)
    throws
  {
    for document in batch {
      try update(document.docID, winner: document.winner, storage: storage, txn: txn)
    }
  }
  public var retiredDatabaseNames: [String] { [] }
  public func mayIndex(_ docID: String) -> Bool { true }
  public var taskDesignDocument: String { "_" + name }
  public var quietPeriod: Duration? { nil }
  public var quietGap: Int { 10_000 }
  public var layoutVersion: Int { 1 }
  public func compacting(storage: ProjectionStorage, txn: WriteTransaction) throws {}

  public func compare(
    live: ProjectionStorage, rebuilt: ProjectionStorage, txn: ReadTransaction, maxDifferences: Int
  ) throws -> [String] {
    try compareRows(
      of: databaseNames, live: live, rebuilt: rebuilt, txn: txn, maxDifferences: maxDifferences)
  }

  /// The differences between the rows of `databases` in `live` and in `rebuilt`, row by row
  /// (the default ``compare(live:rebuilt:txn:maxDifferences:)`` over every database).
  public func compareRows(
    of databases: [String], live: ProjectionStorage, rebuilt: ProjectionStorage,
    txn: ReadTransaction, maxDifferences: Int
  ) throws -> [String] {
    var differences: [String] = []
    for database in databases {
      var rows: [[UInt8]: [UInt8]] = [:]
      try txn.scan(rebuilt[database]) { key, value in
        rows[key] = value
        return true
      }
      try txn.scan(live[database]) { key, value in
        guard differences.count < maxDifferences else { return false }
        let expected = rows.removeValue(forKey: key)
        if expected == nil {
          differences.append("\(name).\(database): live has \(ProjectionRunner.show(key))")
        } else if expected != value {
          differences.append("\(name).\(database): \(ProjectionRunner.show(key)) differs")
        }
        return true
      }
      for key in rows.keys.sorted(by: { $0.lexicographicallyPrecedes($1) })
      where differences.count < maxDifferences {
        differences.append("\(name).\(database): live lacks \(ProjectionRunner.show(key))")
      }
    }
    return differences
  }
}

/// A document handed to an index behind the log (``IndexBehindLog/update(batch:storage:txn:)``):
/// its id, its winning revision, and that revision's body (nil when it is deleted). The body
/// has no `_`-fields; an index that wants CouchDB's document adds `_id` and `_rev`.
public struct IndexedDocument: Sendable {
  public let docID: String
  /// The winning revision (`1-abc…`), deleted or not.
  public let rev: String
  /// The winning revision's body, nil when it is deleted.
  public let winner: JSONValue?
  /// The other leaves that are not deleted (`_conflicts`, as a read with `conflicts=true`
  /// lists them); empty for a document without conflicts.
  public let conflicts: [String]

  public init(docID: String, rev: String, winner: JSONValue?, conflicts: [String] = []) {
    self.docID = docID
    self.rev = rev
    self.winner = winner
    self.conflicts = conflicts
  }
}

extension ProjectionStorage {
  /// The databases of `index` in its environment (`<name>.<database><suffix>`).
  static func open(for index: any IndexBehindLog, in log: EventLog, suffix: String = "") throws
    -> ProjectionStorage
  {
    try open(index.name, index.databaseNames, in: log, suffix: suffix)
  }
}

/// Index builds under way in the stores of one data directory (``DirectoryState/indexTasks``),
/// as `GET /_active_tasks` lists them (CouchDB's `indexer` tasks): Mango indexes being built,
/// indexes behind the log catching up a long way. Two servers in one process (two data
/// directories) see each their own.
///
/// ```swift
/// for task in store.state.indexTasks.running {
///   print("\(task.database) \(task.index): \(task.done)/\(task.total)")
/// }
/// ```
public final class IndexTasks: Sendable {
  public struct Task: Sendable, Hashable {
    public let id: Int
    public let database: String
    /// The design document the index is defined in (`_search` for an index behind the log
    /// defined by the data directory).
    public let designDocument: String
    public let index: String
    public let total: Int
    public var done: Int
    /// Seconds since 1970.
    public let started: Int64
  }

  private let tasks = Mutex<(next: Int, running: [Int: Task])>((0, [:]))

  public init() {}

  /// The builds running now, oldest first.
  public var running: [Task] {
    tasks.withLock { Array($0.running.values) }.sorted { $0.id < $1.id }
  }

  /// Registers a build of `total` changes; returns its id for ``progress(_:done:)`` and
  /// ``finish(_:)``.
  public func start(database: String, designDocument: String, index: String, total: Int) -> Int {
    tasks.withLock { state in
      state.next += 1
      state.running[state.next] = Task(
        id: state.next, database: database, designDocument: designDocument, index: index,
        total: total, done: 0, started: Int64(Date().timeIntervalSince1970))
      return state.next
    }
  }

  public func progress(_ id: Int, done: Int) {
    tasks.withLock { $0.running[id]?.done = done }
  }

  public func finish(_ id: Int) {
    _ = tasks.withLock { $0.running.removeValue(forKey: id) }
  }
}

/// What belongs to a data directory rather than to the process: its stores' index tasks
/// (``indexTasks``) and whatever a module above keeps per directory (``shared(_:)``: the Query
/// module's query servers), so that two data directories in one process (two servers, two
/// tests) never see each other's work. A ``DataDirectory`` gives its own to every store it
/// opens; a store opened on its own has one of its own.
public final class DirectoryState: Sendable {
  /// The index builds under way in the directory's stores.
  public let indexTasks = IndexTasks()
  private let values = Mutex<[ObjectIdentifier: any Sendable]>([:])
  private let partitionLimit = Mutex<Int?>(nil)

  /// The most bytes of winning bodies a partition of the directory's partitioned databases
  /// holds before a local edit that grows one of its documents is refused (CouchDB's
  /// `couchdb/max_partition_size`, which the HTTP server sets); nil or 0 or less for no limit,
  /// the default.
  public var maxPartitionBytes: Int? {
    get { partitionLimit.withLock { $0 } }
    set { partitionLimit.withLock { $0 = newValue } }
  }

  public init() {}

  /// The directory's one `T`, made by `make` the first time it is asked for.
  ///
  /// ```swift
  /// extension DirectoryState {
  ///   public var queryServers: QueryServerPool { shared { QueryServerPool() } }
  /// }
  /// ```
  public func shared<T: Sendable>(_ make: () -> T) -> T {
    values.withLock { values in
      if let value = values[ObjectIdentifier(T.self)] as? T { return value }
      let value = make()
      values[ObjectIdentifier(T.self)] = value
      return value
    }
  }
}
