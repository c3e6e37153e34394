import Foundation
public import Log
import Synchronization

/// A data directory holding several named databases, as a CouchDB node does.
///
/// Each database is one ``DocumentStore`` (one LMDB environment and its event log) in a
/// subdirectory named after the database; `/` in a name is stored as `%2F`, which no valid name
/// can otherwise contain. Stores are opened once per process and shared: the server and the
/// command line both go through here.
///
/// ```swift
/// let data = DataDirectory(path: "/var/lib/wikilog")
/// let wiki = try data.open("wiki", create: true)
/// print(data.databaseNames())        // ["wiki"]
/// ```
public final class DataDirectory: Sendable {
  /// The directory that holds the databases.
  public let path: String
  /// Options for every log opened here.
  public let options: EventLog.Options
  let makeProjections: @Sendable () -> [any Projection]
  let makeIndexes: @Sendable (String) -> [any IndexBehindLog]
  let makeCommon: @Sendable (String) -> [any Projection]
  /// The rules every database checks documents against.
  public let validation: DocumentValidation
  /// The document filters of the changes feed, history and audit, by name.
  public let filters: DocumentFilters
  /// The system databases (names beginning with `_`) this directory knows, by name; any other
  /// name must follow CouchDB's rule (``validate(name:)``).
  public let systemDatabases: [String: SystemDatabase]
  /// Per-document access rules of its databases beyond their security objects (none by
  /// default; the Wiki module's wiki membership). System databases have none.
  public let access: (any DocumentAccess)?
  /// What belongs to this directory rather than the process (``DirectoryState``), shared by
  /// every store it opens.
  public let state: DirectoryState
  let open = Mutex<[String: DocumentStore]>([:])
  /// Databases of an ordinary name that are given a system database's rules while designated
  /// (``designate(_:as:)``), by name.
  let designated = Mutex<[String: SystemDatabase]>([:])
  let updateValidation = Mutex<(any UpdateValidator)?>(nil)
  /// The ``UpdateValidator`` given by ``useUpdateValidator(_:)``, if any.
  public var updateValidator: (any UpdateValidator)? { updateValidation.withLock { $0 } }
  /// The databases being compacted.
  let compacting = Mutex<Set<String>>([])

  /// - Parameters:
  ///   - projections: the inline projections each database gets besides its documents (none
  ///     by default: plain CouchDB databases).
  ///   - indexes: the indexes each database keeps behind its log (``IndexBehindLog``), given
  ///     its name (none by default).
  ///   - everyDatabase: inline projections every database gets, system databases too, given
  ///     its name (the Query module's Mango indexes: `_find` everywhere, as in CouchDB).
  ///   - validation: CouchDB's rules only by default; see ``DocumentValidation``.
  ///   - filters: the named document filters (``DocumentFilter``) its databases offer.
  ///   - systemDatabases: the databases beginning with `_` it opens (none by default), each
  ///     with its own projections and validation (``SystemDatabase``).
  ///   - access: per-document access rules (``DocumentAccess``); its projection, if it needs
  ///     one, must be among `projections`.
  ///
  /// The Wiki module's `DataDirectory.wiki(path:options:)` makes one of TouchWiki databases.
  public init(
    path: String, options: EventLog.Options = EventLog.Options(),
    projections: @escaping @Sendable () -> [any Projection] = { [] },
    indexes: @escaping @Sendable (_ database: String) -> [any IndexBehindLog] = { _ in [] },
    everyDatabase: @escaping @Sendable (_ database: String) -> [any Projection] = { _ in [] },
    validation: DocumentValidation = .couchDB, filters: DocumentFilters = DocumentFilters(),
    systemDatabases: [SystemDatabase] = [], access: (any DocumentAccess)? = nil,
    state: DirectoryState = DirectoryState()
  ) {
    self.state = state
    self.access = access
    self.path = path
    self.options = options
    self.makeProjections = projections
    self.makeIndexes = indexes
    self.makeCommon = everyDatabase
    self.validation = validation
    self.filters = filters
    self.systemDatabases = Dictionary(
      systemDatabases.map { ($0.name, $0) }, uniquingKeysWith: { _, last in last })
    if !options.readOnly {
      // What a delete interrupted by a crash left behind (``delete(_:)``).
      for entry in (try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []
      where entry.hasPrefix(".deleted-") || entry.hasPrefix(".restoring-") {
        try? FileManager.default.removeItem(atPath: "\(path)/\(entry)")
      }
    }
  }

  /// The ``UpdateValidator`` every store opened from now on checks its revisions with (the
  /// Query module's design functions: `validate_doc_update`).
  public func useUpdateValidator(_ validator: (any UpdateValidator)?) {
    updateValidation.withLock { $0 = validator }
    for (_, store) in openStores() { store.useUpdateValidator(validator) }
  }

  /// The system database `name` is: one of ``systemDatabases``, or a database designated one
  /// (``designate(_:as:)``); nil for an ordinary database.
  public func systemDatabase(named name: String) -> SystemDatabase? {
    systemDatabases[name] ?? designated.withLock { $0[name] }
  }

  /// Gives database `name` (an ordinary name, which need not exist yet) the rules of `system`
  /// (its validation, projections and documents) until ``designate(_:as:)`` is called again
  /// for that role: CouchDB's `chttpd_auth/authentication_db`, which makes any database the
  /// users database. The database designated before for the same role (the same `system`
  /// name) becomes ordinary again. Both are closed, so that their next open applies their new
  /// rules; a nil `name` ends the designation.
  public func designate(_ name: String?, as system: SystemDatabase) {
    var closing: [DocumentStore] = []
    open.withLock { stores in
      designated.withLock { names in
        for (old, role) in names where role.name == system.name && old != name {
          names[old] = nil
          if let store = stores.removeValue(forKey: old) { closing.append(store) }
        }
        if let name, systemDatabases[name] == nil, names[name] == nil {
          names[name] = system
          if let store = stores.removeValue(forKey: name) { closing.append(store) }
        }
      }
    }
    for store in closing { store.close() }
  }

  /// Checks a database name: one of this directory's system databases, or a name that follows
  /// CouchDB's rule (``validate(name:)``).
  public func check(name: String) throws {
    if systemDatabases[name] != nil { return }
    try Self.validate(name: name)
  }

  deinit { closeAll() }

  /// The databases present, sorted by name.
  public func databaseNames() -> [String] {
    let entries = (try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []
    return
      entries
      .filter { FileManager.default.fileExists(atPath: "\(path)/\($0)/data.mdb") }
      .map { $0.replacingOccurrences(of: "%2F", with: "/") }
      .filter { (try? check(name: $0)) != nil }
      .sorted()
  }

  /// The access rules of database `name`: ``access``, except for system databases.
  public func access(of name: String) -> (any DocumentAccess)? {
    systemDatabase(named: name) == nil ? access : nil
  }

  /// Whether a database of this name exists.
  public func exists(_ name: String) -> Bool {
    guard (try? check(name: name)) != nil else { return false }
    return FileManager.default.fileExists(atPath: directory(of: name) + "/data.mdb")
  }

  /// The directory holding database `name`.
  public func directory(of name: String) -> String {
    "\(path)/\(name.replacingOccurrences(of: "/", with: "%2F"))"
  }

  /// Database `name` if this process has it open already, else nil: no file is touched, so
  /// this never blocks on I/O.
  public func storeIfOpen(_ name: String) -> DocumentStore? {
    open.withLock { $0[name] }.flatMap { $0.log.isClosed ? nil : $0 }
  }

  /// The databases this process has open, by name.
  public func openStores() -> [(name: String, store: DocumentStore)] {
    open.withLock { stores in stores.map { ($0.key, $0.value) }.sorted { $0.name < $1.name } }
  }

  /// Opens database `name`, creating it when `create` is true; a missing database is
  /// `not_found`. Repeated opens return the same store.
  public func open(_ name: String, create: Bool = false) throws -> DocumentStore {
    try check(name: name)
    return try open.withLock { stores in try openLocked(name, create: create, &stores) }
  }

  /// ``open(_:create:)`` with the lock of the open stores held.
  func openLocked(_ name: String, create: Bool, _ stores: inout [String: DocumentStore]) throws
    -> DocumentStore
  {
    // A store closed by a compaction is opened again on the compacted file.
    if let store = stores[name] {
      if !store.log.isClosed { return store }
      // What it still holds open beside its log (the full-text index's environment).
      store.close()
    }
    let dir = directory(of: name)
    let isNew = !FileManager.default.fileExists(atPath: dir + "/data.mdb")
    if isNew {
      guard create, !options.readOnly else {
        throw StoreError.notFound("Database does not exist.")
      }
      do {
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
      } catch {
        throw StoreError.internalError(
          "cannot create \(dir): "
            + (FileSystem.problem(creating: dir) ?? error.localizedDescription))
      }
    }
    let system = systemDatabase(named: name)
    let store = try DocumentStore(
      directory: dir, options: options,
      projections: (system?.makeProjections() ?? makeProjections()) + makeCommon(name),
      indexes: system == nil ? makeIndexes(name) : [],
      validation: system?.validation ?? validation, name: name, state: state)
    // Its writes for a signed-in user (``WriteAccess``) are checked against these rules in the
    // write transaction.
    store.useAccessRules(access(of: name))
    store.useUpdateValidator(updateValidation.withLock { $0 })
    // A new database gets the key that signs its log's tree heads at once, whichever way it
    // was made (``create(_:)``, `open(create: true)`).
    if isNew {
      do { _ = try store.log.publicKey(create: true) } catch { throw StoreError.from(error) }
    }
    // The documents a system database is made with (`_users`' `_design/_auth`), written
    // again when missing, as CouchDB does.
    if let system, !options.readOnly {
      for (id, body) in system.documents where (try? store.get(id)) == nil {
        // The directory's own write, whoever's request opened the database.
        _ = try WriteAccess.$user.withValue(nil) {
          try store.put(body, id: id, actor: "wikilog")
        }
      }
    }
    stores[name] = store
    return store
  }

  /// Creates database `name`; `file_exists` (412) when it is already there.
  @discardableResult
  public func create(_ name: String) throws -> DocumentStore {
    try check(name: name)
    // Under the lock of the open stores, so that of concurrent creations exactly one succeeds.
    return try open.withLock { stores in
      if FileManager.default.fileExists(atPath: directory(of: name) + "/data.mdb") {
        throw StoreError(
          "file_exists", "The database could not be created, the file already exists.",
          code: .alreadyExists)
      }
      let store = try openLocked(name, create: true, &stores)
      // The key that signs the log's tree heads (``EventLog/signedTreeHead(at:)``).
      do { _ = try store.log.publicKey(create: true) } catch { throw StoreError.from(error) }
      return store
    }
  }

  /// Closes and removes database `name` with its whole log; `not_found` when it is absent.
  ///
  /// Atomic with respect to every other use of this directory: under the lock of the open
  /// stores the store is closed and its directory renamed out of the way (`.deleted-UUID`, a
  /// name no database can have), so a write acknowledged before the delete is deleted with it,
  /// and a write or open after it finds no database (`not_found`) and never creates it again.
  /// The renamed directory is then removed.
  public func delete(_ name: String) throws {
    try check(name: name)
    let tomb = "\(path)/.deleted-\(UUID().uuidString)"
    try open.withLock { stores in
      let dir = directory(of: name)
      guard FileManager.default.fileExists(atPath: dir + "/data.mdb") else {
        throw StoreError.notFound("Database does not exist.")
      }
      stores.removeValue(forKey: name)?.close()
      do {
        try FileManager.default.moveItem(atPath: dir, toPath: tomb)
      } catch {
        throw StoreError.internalError("cannot remove \(name): \(error.localizedDescription)")
      }
    }
    try? FileManager.default.removeItem(atPath: tomb)
  }

  /// Backs database `name` up into the data directory `destination` (created, or an existing
  /// directory without a database of that name): a consistent, compacted copy of its log
  /// (``EventLog/backup(to:)``, taken while the database goes on serving) and its attachments'
  /// blobs, so that `destination` is a data directory holding `name`, to check with `verify`
  /// and bring back with ``restore(_:from:)``. Returns the log copy's size in bytes.
  @discardableResult
  public func backup(_ name: String, to destination: String) throws -> Int {
    let store = try open(name)
    let target = DataDirectory(path: destination).directory(of: name)
    if FileManager.default.fileExists(atPath: target) {
      throw StoreError(
        "file_exists", "\(target) exists already; back up into a new directory",
        code: .alreadyExists)
    }
    let size: Int
    do { size = try store.log.backup(to: target) } catch { throw StoreError.from(error) }
    // Blobs are written (and synced) before the event that names them, so every blob the copy
    // names is there now; later ones are harmless extras.
    try Self.copyBlobs(from: directory(of: name) + "/attachments", to: target + "/attachments")
    try Self.copyLogFiles(from: directory(of: name), to: target)
    return size
  }

  /// Brings database `name` back from the data directory `source` (a ``backup(_:to:)``): its
  /// pages and records are checked first (``EventLog/checkPages(directory:maxProblems:)`` and
  /// ``EventLog/verify(maxProblems:)`` on the copy), then it is copied beside the databases and
  /// renamed into place in one step. `name` must not exist here (delete a damaged one first).
  public func restore(_ name: String, from source: String) throws {
    try check(name: name)
    let origin = DataDirectory(path: source).directory(of: name)
    guard FileManager.default.fileExists(atPath: origin + "/data.mdb") else {
      throw StoreError.notFound("\(source) holds no backup of '\(name)' (no \(origin)/data.mdb)")
    }
    if exists(name) {
      throw StoreError(
        "file_exists", "a database '\(name)' exists here; delete it first to restore the backup",
        code: .alreadyExists)
    }
    do {
      let problems = try EventLog.checkPages(directory: origin)
      if let first = problems.first {
        throw StoreError.internalError("the backup is damaged: \(first)")
      }
      var readOnly = EventLog.Options()
      readOnly.readOnly = true
      let log = try EventLog(directory: origin, options: readOnly)
      let report = try log.verify()
      log.close()
      if let problem = report.problems.first {
        throw StoreError.internalError("the backup does not verify: \(problem)")
      }
    } catch let error as StoreError {
      throw error
    } catch {
      throw StoreError.from(error)
    }
    let staging = "\(path)/.restoring-\(UUID().uuidString)"
    do {
      try FileManager.default.createDirectory(atPath: staging, withIntermediateDirectories: true)
      try FileManager.default.copyItem(atPath: origin + "/data.mdb", toPath: staging + "/data.mdb")
      try Self.copyBlobs(from: origin + "/attachments", to: staging + "/attachments")
      try Self.copyLogFiles(from: origin, to: staging)
    } catch let error as StoreError {
      try? FileManager.default.removeItem(atPath: staging)
      throw error
    } catch {
      try? FileManager.default.removeItem(atPath: staging)
      throw StoreError.internalError("cannot copy the backup: \(error.localizedDescription)")
    }
    try open.withLock { _ in
      guard !exists(name) else {
        try? FileManager.default.removeItem(atPath: staging)
        throw StoreError(
          "file_exists", "a database '\(name)' was created meanwhile; nothing restored",
          code: .alreadyExists)
      }
      do {
        try FileManager.default.moveItem(atPath: staging, toPath: directory(of: name))
      } catch {
        try? FileManager.default.removeItem(atPath: staging)
        throw StoreError.internalError("cannot restore \(name): \(error.localizedDescription)")
      }
    }
  }

  /// Copies the log's signing key (mode 0600) and the heads it carries from imports, when
  /// `source` has them: a backup brought back signs with the key its published heads name.
  static func copyLogFiles(from source: String, to destination: String) throws {
    let fm = FileManager.default
    for name in [EventLog.signingKeyFile, LogProofs.carriedHeadsFile]
    where fm.fileExists(atPath: source + "/" + name) {
      do {
        try fm.copyItem(atPath: source + "/" + name, toPath: destination + "/" + name)
        try fm.setAttributes(
          [.posixPermissions: name == EventLog.signingKeyFile ? 0o600 : 0o644],
          ofItemAtPath: destination + "/" + name)
      } catch {
        throw StoreError.internalError("cannot copy \(name): \(error.localizedDescription)")
      }
    }
  }

  /// Copies every blob file of `source` (when it exists) into `destination`.
  static func copyBlobs(from source: String, to destination: String) throws {
    let fm = FileManager.default
    guard let names = try? fm.contentsOfDirectory(atPath: source) else { return }
    do {
      try fm.createDirectory(atPath: destination, withIntermediateDirectories: true)
      for name in names where !name.hasPrefix(".") && !name.hasSuffix(".tmp") {
        try fm.copyItem(atPath: source + "/" + name, toPath: destination + "/" + name)
      }
    } catch {
      throw StoreError.internalError("cannot copy attachments: \(error.localizedDescription)")
    }
  }

  /// Compacts database `name` (`POST /db/_compact`): its LMDB file is replaced by a compacted
  /// copy holding every event and projection record (``EventLog/compact()``), and the database
  /// is opened again on it. Writes that arrive while the copy is written wait for it and then
  /// fail with `service_unavailable` (they were not acknowledged; a retry goes to the new file);
  /// reads go on. Open changes feeds end and their clients reconnect.
  ///
  /// - Throws: `not_found` for a missing database, `conflict` when another process has it open
  ///   or a compaction of it is already running.
  @discardableResult
  public func compact(_ name: String) throws -> Compaction {
    try startCompaction(name)()
  }

  /// What a compaction did: the log file's size before and after, and the attachment files
  /// it removed (``DocumentStore/sweepBlobs(olderThan:)``).
  public struct Compaction: Sendable, Hashable {
    public var bytesBefore: Int
    public var bytesAfter: Int
    public var blobs: BlobStore.Sweep
  }

  /// Marks database `name` as being compacted (``isCompacting(_:)``) and returns the work,
  /// which compacts it and clears the mark: for a caller that answers before the work is done,
  /// as `POST /db/_compact` does.
  ///
  /// - Throws: `not_found` for a missing database, `conflict` when a compaction of it is
  ///   already running.
  public func startCompaction(_ name: String) throws
    -> @Sendable () throws -> Compaction
  {
    _ = try open(name)
    guard compacting.withLock({ $0.insert(name).inserted }) else {
      throw StoreError("conflict", "a compaction of \(name) is already running", code: .conflict)
    }
    return { [self] in
      defer { _ = compacting.withLock { $0.remove(name) } }
      let store = try open(name)
      let result: EventLog.Compaction
      do {
        result = try store.log.compact()
      } catch {
        throw StoreError.from(error)
      }
      let reopened = try open(name)
      // Blobs no event names (a crash between a blob and its event), an hour old or more.
      let swept = try reopened.sweepBlobs()
      return Compaction(
        bytesBefore: result.bytesBefore, bytesAfter: result.bytesAfter, blobs: swept)
    }
  }

  /// Purges or redacts revisions of database `name` (``DocumentStore/erase(_:_:actor:origin:reason:dryRun:)``)
  /// so that their bytes are in no file of it when this returns: the log's events are erased in
  /// one transaction, the indexes kept behind the log forget the documents purged whole, the
  /// database is compacted (its log and those indexes: LMDB's free pages keep the bytes
  /// otherwise), and the attachment blobs that no revision names any more are removed.
  /// Backups taken before, and copies a peer replicated, are not touched.
  ///
  /// - Throws: what the erasure throws (nothing is written then); `conflict` when the
  ///   compaction cannot run (another process has the database open): the erasure is then
  ///   committed, and the bytes leave the files at the next compaction.
  public func erase(
    _ kind: DocumentStore.ErasureKind, _ request: [(id: String, revs: [String])], in name: String,
    actor: String, origin: String = "", reason: String = "", dryRun: Bool = false
  ) async throws -> Erasure {
    let store = try open(name)
    let planned = try await store.erase(
      kind, request, actor: actor, origin: origin, reason: reason, dryRun: true)
    let candidates = try store.blobs(of: planned.events)
    var erasure = planned
    if dryRun {
      let referenced = try store.referencedBlobs(skipping: Set(planned.events))
      erasure.blobs =
        candidates.filter { !referenced.keys.contains($0) && store.blobs.exists($0) }
        .count
      return erasure
    }
    erasure = try await store.erase(
      kind, request, actor: actor, origin: origin, reason: reason)
    guard !erasure.events.isEmpty else { return erasure }
    if kind == .purge {
      var gone: [String] = []
      for (id, _) in erasure.revisions where try store.record(id) == nil { gone.append(id) }
      for follower in store.indexes { try follower.forget(gone) }
    }
    do {
      // Off the caller's thread: a compaction copies the whole file.
      try await Self.offThread { _ = try self.compact(name) }
    } catch let error as StoreError where error.error == "conflict" || error.code == .conflict {
      throw StoreError(
        "conflict",
        "the revisions are erased, but \(name) could not be compacted now (\(error.reason)); "
          + "their bytes leave its files at its next compaction", code: .conflict)
    }
    // The indexes kept behind the log, each in a file of its own, are compacted too.
    try await Self.offThread { try self.compactIndexes(name) }
    let reopened = try open(name)
    let referenced = try reopened.referencedBlobs()
    for md5 in candidates where referenced[md5] == nil {
      if reopened.blobs.remove(md5) { erasure.blobs += 1 }
    }
    return erasure
  }

  /// `work` on a thread of its own, not the caller's (a compaction copies a whole file).
  static func offThread(_ work: @escaping @Sendable () throws -> Void) async throws {
    try await withCheckedThrowingContinuation { (done: CheckedContinuation<Void, any Error>) in
      DispatchQueue.global().async { done.resume(with: Result { try work() }) }
    }
  }

  /// Closes database `name` and replaces the file of each of its indexes kept behind the log
  /// with a compacted copy; the next ``open(_:create:)`` opens it again. Under the lock of the
  /// open stores, so that no request opens it meanwhile (those holding it find it closed, as
  /// after a compaction: a write goes again).
  func compactIndexes(_ name: String) throws {
    try open.withLock { stores in
      if let store = stores[name] {
        store.close()
        stores[name] = nil
      }
      let durability = options.durability
      for index in makeIndexes(name) {
        let directory = directory(of: name) + "/" + index.name
        guard FileManager.default.fileExists(atPath: directory + "/data.mdb") else { continue }
        try IndexFollower.compactEnvironment(
          directory: directory, index: index, durability: durability)
      }
    }
  }

  /// Whether database `name` is being compacted (`compact_running` in `GET /db`).
  public func isCompacting(_ name: String) -> Bool {
    compacting.withLock { $0.contains(name) }
  }

  /// Closes every open database.
  public func closeAll() {
    open.withLock { stores in
      for store in stores.values { store.close() }
      stores.removeAll()
    }
  }

  /// Checks a database name against CouchDB's rule: a lowercase letter, then lowercase letters,
  /// digits and `_ $ ( ) + - /`; at most 238 characters.
  public static func validate(name: String) throws {
    let allowed = Set("abcdefghijklmnopqrstuvwxyz0123456789_$()+-/")
    guard let first = name.first, first.isASCII, first.isLowercase, name.count <= 238,
      name.allSatisfy({ allowed.contains($0) })
    else {
      throw StoreError(
        "illegal_database_name",
        "Name: '\(name)'. Only lowercase characters (a-z), digits (0-9), and any of the characters _, $, (, ), +, -, and / are allowed. Must begin with a letter.",
        code: .badRequest)
    }
  }
}
