import Foundation
public import JSON
public import Log
import RevTree
import Synchronization

#if canImport(FoundationEssentials)
  import FoundationEssentials
#else
  import Foundation
#endif

/// A CouchDB-compatible document database on an event log.
///
/// Every accepted write is one event in the log; the documents (revision trees, winners, the
/// changes feed) are the ``DocumentProjection`` of those events, updated in the same LMDB
/// transaction as the append, so a reader never sees one without the other. Other projections
/// (wikis, pages, history) can be added inline and are kept in step the same way.
///
/// ```swift
/// let store = try DocumentStore(directory: "/var/lib/wikilog/db")
/// let created = try store.put(#"{"_id":"w1:Home","type":"page","markdown":"# Home"}"#, actor: "alice")
/// let doc = try store.get("w1:Home")                          // {"_id":..., "_rev": "1-...", ...}
/// try store.put(#"{"_id":"w1:Home","_rev":"\#(created.rev!)","markdown":"# Home v2"}"#, actor: "bob")
/// ```
public final class DocumentStore: Sendable {
  public let log: EventLog
  /// The store's projections, the documents first, and what runs them: catching up,
  /// rebuilding, verifying, applying each event.
  public let projections: ProjectionRunner
  let ownsLog: Bool
  var documents: DocumentProjection { projections.documents }
  var documentStorage: ProjectionStorage { projections.documentStorage }
  /// Inline projections besides the documents, applied to every event in its transaction.
  var others: [InlineProjection] { projections.others }

  /// The inline projection of type `P` the store was opened with, and its storage (its own
  /// LMDB databases, read in the store's transactions), or nil: how a module reads the
  /// projection it registered (the wiki's `WikiProjection`, the drafts').
  public func projection<P: Projection>(_ type: P.Type) -> (
    projection: P, storage: ProjectionStorage
  )? {
    for inline in others {
      if let projection = inline.projection as? P { return (projection, inline.storage) }
    }
    return nil
  }
  /// The rules documents are checked against (CouchDB's own always apply).
  public let validation: DocumentValidation
  /// The indexes kept behind the log, each in its own environment (``IndexBehindLog``): those
  /// the store was opened with, then those opened since (``openIndex(_:)``).
  public var indexes: [IndexFollower] { fixedIndexes + addedIndexes.withLock { $0 } }
  let fixedIndexes: [IndexFollower]
  /// Indexes opened after the store (``openIndex(_:)``: CouchDB views, one per design document).
  let addedIndexes = Mutex<[IndexFollower]>([])
  /// The database's name, for ``IndexTasks``.
  let indexDatabaseName: String
  /// The projections' names in the order the store was given them, documents first.
  let projectionOrder: [String]
  /// The held revisions' projection's storage (``HeldRevisionsProjection``), when the store
  /// has it: looked up once, as every write of a wiki document asks for it.
  let heldStorage: ProjectionStorage?
  /// The per-document access rules (``accessRules``).
  let rules = Mutex<(any DocumentAccess)?>(nil)
  /// The ``UpdateValidator`` (``useUpdateValidator(_:)``).
  let updateValidation = Mutex<(any UpdateValidator)?>(nil)
  /// Whether the database is partitioned, once read (``isPartitioned``): set when it is made,
  /// never changed after.
  let partitionedFlag = Mutex<Bool?>(nil)
  /// ``sequenceTag``, once made.
  let sequenceTagCache = Mutex<String?>(nil)

  /// Opens (creating) the database in `directory`.
  ///
  /// - Parameters:
  ///   - projections: inline projections besides the documents (the Wiki module's
  ///     `WikiProjection` and `DraftProjection`, your own).
  ///   - indexes: indexes kept behind the log (the Query module's full-text search, your own).
  ///   - validation: CouchDB's rules only by default; see ``DocumentValidation``.
  ///   - name: the database's name, as its index tasks are shown in `_active_tasks`
  ///     (``DataDirectory`` passes it); by default the directory's last component.
  public convenience init(
    directory: String, options: EventLog.Options = EventLog.Options(),
    projections: [any Projection] = [], indexes: [any IndexBehindLog] = [],
    validation: DocumentValidation = .couchDB, name: String? = nil,
    state: DirectoryState = DirectoryState()
  ) throws {
    let log: EventLog
    do {
      log = try EventLog(directory: directory, options: options)
    } catch {
      throw StoreError.storage(error)
    }
    do {
      try self.init(
        log: log, projections: projections, indexes: indexes, ownsLog: true,
        validation: validation, scratch: nil, blobs: nil, name: name, state: state)
    } catch {
      log.close()
      throw error
    }
  }

  /// Uses an open log; the projections catch up with it before this returns.
  public convenience init(
    log: EventLog, projections: [any Projection] = [], indexes: [any IndexBehindLog] = [],
    ownsLog: Bool = false, validation: DocumentValidation = .couchDB,
    state: DirectoryState = DirectoryState()
  ) throws {
    try self.init(
      log: log, projections: projections, indexes: indexes, ownsLog: ownsLog,
      validation: validation, scratch: nil, blobs: nil, state: state)
  }

  /// What the store shares with the other stores of its data directory, not with the process
  /// (``DirectoryState``: index tasks, query servers).
  public let state: DirectoryState

  /// The attachments' bytes (``BlobStore``), beside the log (an as-of view reads the live
  /// store's).
  public let blobs: BlobStore

  /// A scratch directory (of an as-of view) removed once the store is gone.
  let scratch: ScratchDirectory?

  init(
    log: EventLog, projections: [any Projection], indexes: [any IndexBehindLog] = [],
    ownsLog: Bool, validation: DocumentValidation, scratch: ScratchDirectory?, blobs: BlobStore?,
    name: String? = nil, state: DirectoryState
  ) throws {
    self.state = state
    self.blobs = blobs ?? BlobStore(databaseDirectory: log.path)
    self.log = log
    self.ownsLog = ownsLog
    self.validation = validation
    self.scratch = scratch
    self.projections = try ProjectionRunner(log: log, projections: projections)
    projectionOrder = ["docs"] + projections.map(\.name) + indexes.map(\.name)
    heldStorage = self.projections.storage(of: HeldRevisionsProjection.projectionName)
    try self.projections.refuseRetiredLayouts(indexes: indexes)
    if !log.options.readOnly {
      try self.projections.catchUp()
      try self.projections.upgradeLayouts()
    }
    let database = name ?? String(log.path.split(separator: "/").last ?? "")
    var followers: [IndexFollower] = []
    for index in indexes {
      if !log.options.readOnly {
        let follower = try IndexFollower(
          index: index, log: log, documents: self.projections.documentStorage,
          database: database, tasks: state.indexTasks)
        follower.start()
        followers.append(follower)
      } else if let follower = try? IndexFollower(
        index: index, log: log, documents: self.projections.documentStorage, database: database,
        tasks: state.indexTasks)
      {
        // Read-only (an auditor's copy, a server's database read beside it): the index is
        // brought up to date by its readers, where its directory may be written; where it
        // may not, the store opens without it.
        followers.append(follower)
      }
    }
    self.fixedIndexes = followers
    self.indexDatabaseName = database
    // Read now, outside any write: the first reader may be a validator inside a write
    // transaction, where a read of its own would fail (and a failure must not be cached).
    _ = isPartitioned
  }

  /// Opens `index` behind the log beside the store's own (the Query module's views: one per
  /// design document, opened when first queried), or returns the one of that name already
  /// open. It follows the log like the others until ``closeIndex(named:)`` or the store closes.
  public func openIndex(_ index: any IndexBehindLog) throws -> IndexFollower {
    try addedIndexes.withLock { added in
      if let open = added.first(where: { $0.index.name == index.name }) { return open }
      if let fixed = fixedIndexes.first(where: { $0.index.name == index.name }) { return fixed }
      let follower = try IndexFollower(
        index: index, log: log, documents: projections.documentStorage,
        database: indexDatabaseName, tasks: state.indexTasks)
      if !log.options.readOnly { follower.start() }
      added.append(follower)
      return follower
    }
  }

  /// Compacts the environment of the index named `name` opened by ``openIndex(_:)`` (LMDB
  /// keeps freed pages until it reuses them): the index is closed, its file replaced by a
  /// compacted copy, and opened again by the next ``openIndex(_:)``. Returns the file's size
  /// before and after.
  @discardableResult
  public func compactIndex(named name: String) throws -> (before: Int, after: Int) {
    guard let follower = addedIndexes.withLock({ $0.first { $0.index.name == name } }) else {
      throw StoreError.notFound("no index named \(name) is open")
    }
    let directory = log.path + "/" + name
    func size() -> Int {
      ((try? FileManager.default.attributesOfItem(atPath: directory + "/data.mdb"))?[.size]
        as? NSNumber)?.intValue ?? 0
    }
    closeIndex(named: name)
    let before = size()
    try IndexFollower.compactEnvironment(
      directory: directory, index: follower.index, durability: log.options.durability)
    return (before, size())
  }

  /// Stops following the log with the index named `name` opened by ``openIndex(_:)``, and
  /// closes it (its files stay). Returns whether one was open.
  @discardableResult
  public func closeIndex(named name: String) -> Bool {
    let closed = addedIndexes.withLock { added -> IndexFollower? in
      guard let i = added.firstIndex(where: { $0.index.name == name }) else { return nil }
      return added.remove(at: i)
    }
    closed?.close()
    return closed != nil
  }

  /// The index kept behind the log named `name` (``IndexBehindLog``), nil when the store has
  /// none.
  public func index(named name: String) -> IndexFollower? {
    indexes.first { $0.index.name == name }
  }

  deinit {
    for follower in indexes { follower.close() }
    if ownsLog { log.close() }
  }

  public func close() {
    for follower in indexes { follower.close() }
    log.close()
  }

  // MARK: Writing

  /// Runs a write transaction that appends document events, and records every inline
  /// projection's checkpoint once at its end.
  public func writeDocuments<T>(_ body: (WriteTransaction) throws -> T) throws -> T {
    try projections.write { txn in try projections.checkpointed(txn, body) }
  }

  /// Appends one document event and applies the inline projections to it.
  ///
  /// `record` and `merged` are the document's record before the event and its tree after, when
  /// the write path has them; `parsedBody` is the event's body as the write path parsed it
  /// (handed on in the ``DocumentChange``); `context` learns that the document changed. `payload` is
  /// `e` encoded and `shares` the change projections' shares of its revision, when worked out
  /// ahead (``PreparedWrite``).
  @discardableResult
  func append(
    _ e: DocumentEvent, actor: String, txn: WriteTransaction, record: DocumentRecord? = nil,
    merged: RevisionTree? = nil, parsedBody: JSONValue? = nil, context: WriteContext? = nil,
    payload: [UInt8]? = nil, shares: Shares = .none
  ) throws -> RecordedEvent {
    context?.appended(e.docID)
    if e.kind == .revsLimit { context?.revsLimit = nil }
    let event = try txn.append(
      NewEvent(
        type: e.kind.eventType, stream: DocumentEvent.stream(for: e.kind, docID: e.docID),
        actor: actor,
        payload: payload ?? e.encoded()))
    try projections.apply(
      e, appended: event, record: record, merged: merged, parsedBody: parsedBody,
      shares: shares, txn: txn)
    if e.kind == .edit || e.kind == .replicated, let rules = accessRules,
      let group = rules.releasedGroup(by: e.docID)
    {
      // The writer's revisions held for this group until it let them in (pages replicated
      // ahead of their wiki), admitted against this transaction's snapshot.
      try admitHeld(group: group, writer: actor, txn: txn)
    }
    return event
  }

  /// Appends an event that is not a document write (a draft event, say) and applies the inline
  /// projections to it, in the write transaction of ``writeDocuments(_:)``: how a module
  /// records events of its own type (the wiki's drafts) beside the documents', in the same log,
  /// seen by its projection in the same transaction. A document event's type is refused (those
  /// go through the store's checked writes).
  @discardableResult
  public func appendEvent(_ event: NewEvent, txn: WriteTransaction) throws -> RecordedEvent {
    let recorded = try txn.append(event)
    guard DocumentEvent.Kind(eventType: recorded.type) == nil else {
      throw StoreError.internalError("document events are appended with append(_:actor:txn:)")
    }
    try projections.apply(other: recorded, txn: txn)
    return recorded
  }

  /// The database's revs_limit, read once per write body: no body changes it.
  func revsLimit(txn: WriteTransaction, context: WriteContext?) throws -> Int {
    if let known = context?.revsLimit { return known }
    let limit = try documents.revsLimit(storage: documentStorage, txn: txn)
    context?.revsLimit = limit
    return limit
  }

  /// A local edit inside ``writeDocuments(_:)``'s transaction, for a module that writes a
  /// document and events of its own together (the wiki's publish of a draft: the page's new
  /// revision and the draft's `publish` event commit as one). Checked as every edit is: `_rev`
  /// against the tree, the validators, and the caller's ``WriteAccess`` against the access
  /// rules in this transaction. Returns the new revision.
  public func edit(
    _ input: DocumentInput, id: String, rev: String?, actor: String, within txn: WriteTransaction
  ) throws -> String {
    try edit(input, id: id, rev: rev, actor: actor, txn: txn, context: nil)
  }

  /// A local edit (`new_edits=true`) inside a transaction: checks `_rev` against the tree,
  /// computes the deterministic revision, appends the event and updates the projections.
  func edit(
    _ input: DocumentInput, id: String, rev: String?, actor: String, txn: WriteTransaction,
    context: WriteContext? = nil
  ) throws -> String {
    try edit(prepareEdit(input, id: id, rev: rev), actor: actor, txn: txn, context: context)
  }

  /// ``edit(_:id:rev:actor:txn:context:)`` with its request worked out already.
  func edit(
    _ p: PreparedWrite, actor: String, txn: WriteTransaction, context: WriteContext? = nil
  ) throws -> String {
    if let early = p.early { throw early }
    // Access first: a write the user may not make is refused the same whether or not the
    // document or the revision named exists (a conflict would tell).
    if let user = p.user {
      try checkAccess(
        AccessWrite(
          docID: p.id, body: p.input.deleted ? nil : p.input.body, replicated: false),
        user: user, txn: txn, context: context)
    }
    let record =
      try documents.record(p.id, storage: documentStorage, txn: txn)
      ?? DocumentRecord(docID: p.id)
    let parent = try record.tree.editParent(for: p.requested, deleted: p.input.deleted)
    guard (parent?.generation ?? 0) < RevID.maxGeneration else {
      throw StoreError.badRequest("revision generation overflow")
    }
    for requirement in try p.schema.get() {
      try require(requirement, txn: txn, context: context)
    }
    let body = try p.body.get()
    // The event worked out ahead holds when the tree agrees on the parent (a new document
    // that recreates a deleted one does not: its parent is the deleted leaf).
    let ready = p.event != nil && parent == p.guessedParent
    let e: DocumentEvent
    if ready {
      e = p.event!
    } else {
      // Stubs are the attachments of the revision edited (`couch_doc:merge_stubs/2`).
      var attachments: [StoredAttachment]? = nil
      if let pending = p.pending {
        let onParent = try parent.flatMap { try parentAttachments(record, $0, txn: txn) }
        attachments = try resolve(
          pending, id: p.id, parent: onParent, revpos: (p.requested?.generation ?? 0) + 1)
      }
      e =
        Self.editEvent(
          p.input, id: p.id, parent: parent, body: body, attachments: attachments,
          origin: p.origin
        ).event
    }
    var tree = record.tree
    let outcome = try DocumentProjection.merge(
      e, into: &tree, body: txn.nextPosition.rawValue,
      revsLimit: try revsLimit(txn: txn, context: context))
    guard outcome.updated else { throw StoreError.conflict }
    try checkPartitionSize(
      p.id, newBytes: p.input.deleted ? 0 : body.count, record: record, txn: txn,
      context: context)
    try append(
      e, actor: actor, txn: txn, record: record, merged: tree, parsedBody: .object(p.input.body),
      context: context, payload: ready ? p.payload : nil, shares: ready ? p.shares : .none)
    return e.rev
  }

  /// A replicated write (`new_edits=false`) inside a transaction: merges the revision and its
  /// history; appends nothing when the store already has it.
  func replicate(
    _ input: DocumentInput, id: String, actor: String, origin: String, txn: WriteTransaction,
    context: WriteContext? = nil
  ) throws {
    _ = try replicate(
      prepareReplicated(input, id: id, origin: origin), actor: actor, txn: txn, context: context)
  }

  /// ``replicate(_:id:actor:origin:txn:context:)`` with its request worked out already.
  ///
  /// - Returns: nil when the revision is written (or the store had it); the refusal to answer
  ///   when the rules refused it and it is held instead (``HeldRevisionsProjection``): the
  ///   `doc.held` event is then part of the transaction, which must commit.
  @discardableResult
  func replicate(
    _ p: PreparedWrite, actor: String, txn: WriteTransaction, context: WriteContext? = nil
  ) throws -> StoreError? {
    if let early = p.early { throw early }
    guard let e = p.event else {
      throw StoreError.internalError("a replicated write without its event")
    }
    let record =
      try documents.record(p.id, storage: documentStorage, txn: txn)
      ?? DocumentRecord(docID: p.id)
    var tree = record.tree
    let outcome = try DocumentProjection.merge(
      e, into: &tree, body: txn.nextPosition.rawValue,
      revsLimit: try revsLimit(txn: txn, context: context))
    guard outcome.updated else { return nil }
    if let user = p.user {
      do {
        try checkAccess(
          AccessWrite(docID: p.id, body: e.deleted ? nil : p.input.body, replicated: true),
          user: user, txn: txn, context: context)
      } catch let refusal as StoreError where refusal.error == "forbidden" {
        guard let held = try hold(p, e, refusal: refusal, user: user, actor: actor, txn: txn)
        else { throw refusal }
        return held
      }
    }
    // A new revision the validation refused (one the store had is passed over above).
    if case .failure(let error) = p.schema { throw error }
    guard let pending = p.pending, e.attachments == nil else {
      // The event and its payload as prepared (most writes): no copy of the event is made.
      try append(
        e, actor: actor, txn: txn, record: record, merged: tree,
        parsedBody: .object(p.input.body), context: context, payload: p.payload,
        shares: p.shares)
      return nil
    }
    // Stubs: the attachments of the nearest ancestor on the path that the store has a body
    // of (`couch_db:make_first_doc_on_disk/4`).
    var ancestor: [StoredAttachment]? = nil
    if let path = e.path {
      for (i, hash) in path.ids.enumerated().dropFirst() {
        let rev = try RevID(generation: path.start - i, hash: hash)
        if let found = tree.revision(rev), let position = found.body {
          ancestor = try attachments(at: position, txn: txn)
          break
        }
      }
    }
    var event = e
    event.attachments = try resolve(pending, id: p.id, parent: ancestor, revpos: nil)
    try append(
      event, actor: actor, txn: txn, record: record, merged: tree,
      parsedBody: .object(p.input.body), context: context, payload: nil, shares: p.shares)
    return nil
  }

  /// Creates or updates a document (`PUT /db/id`, `POST /db`).
  ///
  /// - Parameters:
  ///   - json: the document; `_id` names it unless `id` is given, `_rev` the leaf it edits
  ///     unless `rev` is given (they must agree when both are).
  ///   - actor: who writes, recorded in the event.
  /// - Returns: the id and the new revision.
  /// - Throws: ``StoreError`` `conflict` (409) when `_rev` is not a current leaf, `bad_request`
  ///   (400) for malformed input; nothing is written then.
  @discardableResult
  public func put(_ json: [UInt8], id: String? = nil, rev: String? = nil, actor: String) throws
    -> DocumentWriteResult
  {
    let (input, docID, rev) = try Self.putInput(json, id: id, rev: rev)
    // Worked out before the writer lock is taken: concurrent writers prepare in parallel.
    let prepared = prepareEdit(input, id: docID, rev: rev, readParent: true)
    return try writeDocuments { txn in
      DocumentWriteResult(id: docID, rev: try edit(prepared, actor: actor, txn: txn))
    }
  }

  /// ``put(_:id:rev:actor:)`` for a JSON string.
  @discardableResult
  public func put(_ json: String, id: String? = nil, rev: String? = nil, actor: String) throws
    -> DocumentWriteResult
  {
    try put(Array(json.utf8), id: id, rev: rev, actor: actor)
  }

  /// Deletes a document: a new tombstone revision on the leaf `rev` (`DELETE /db/id?rev=`).
  @discardableResult
  public func delete(_ id: String, rev: String, actor: String) throws -> DocumentWriteResult {
    let input = try DocumentInput(.object(JSONObject([.init(key: "_deleted", value: .bool(true))])))
    let prepared = prepareEdit(input, id: id, rev: rev, readParent: true)
    return try writeDocuments { txn in
      DocumentWriteResult(id: id, rev: try edit(prepared, actor: actor, txn: txn))
    }
  }

  /// `_bulk_docs`: every document on its own, all accepted ones appended in one transaction.
  ///
  /// With `newEdits` (the default) each document is a local edit and gets a result with its new
  /// revision or its error. With `newEdits: false` (replication) revisions are merged with their
  /// `_revisions` history, and — as CouchDB answers — only failures are listed.
  public func bulkDocs(
    _ docs: [JSONValue], newEdits: Bool = true, actor: String, origin: String = ""
  ) throws -> [DocumentWriteResult] {
    let prepared = prepareBulk(docs, newEdits: newEdits, origin: origin)
    defer { prepared.release() }
    return try bulkWrite(prepared, actor: actor)
  }

  /// Writes a `_local` document: not replicated, not in the changes feed, but an event like
  /// every write, so replication checkpoints are auditable. Returns its new `0-N` revision,
  /// one more than the revision the request names (``LocalDocumentInput``: CouchDB 3's rules,
  /// the last write wins). `rev` is the request's `?rev=`.
  @discardableResult
  public func putLocal(_ id: String, _ json: [UInt8], rev: String? = nil, actor: String) throws
    -> DocumentWriteResult
  {
    let write = try localPut(id, json, rev: rev, actor: actor)
    return try writeDocuments { txn in try write(txn) }
  }

  /// Deletes a `_local` document.
  @discardableResult
  public func deleteLocal(_ id: String, rev: String?, actor: String) throws -> DocumentWriteResult {
    try writeDocuments { txn in try localDelete(id, rev: rev, actor: actor, txn: txn) }
  }

  /// Sets how many ancestors each leaf keeps (`PUT /db/_revs_limit`); applies from the next write.
  public func setRevsLimit(_ limit: Int, actor: String) throws {
    let write = try revsLimitWrite(limit, actor: actor)
    try writeDocuments { txn in try write(txn) }
  }

  /// A `_local` write, checked as far as it can be without the store; the transaction part
  /// appends it (a deletion only when there is something to delete).
  func localPut(_ id: String, _ json: [UInt8], rev: String? = nil, actor: String) throws
    -> @Sendable (WriteTransaction) throws -> DocumentWriteResult
  {
    let input = try LocalDocumentInput(json: json, rev: rev)
    try DocumentKey.validate("_local/" + id, allowLocal: true)
    // `_local` ids are their own keys (``localDocuments(prefix:)`` reads them back from there).
    guard id.utf8.count <= DocumentKey.inlineBytes else {
      throw StoreError.badRequest(
        "_local document id is \(id.utf8.count) bytes after _local/; the limit is \(DocumentKey.inlineBytes)"
      )
    }
    return { [self] txn in
      if input.deleted {
        if try localDocument(id, txn: txn) != nil {
          try append(
            DocumentEvent(kind: .localDelete, docID: id, rev: "0-0"), actor: actor, txn: txn)
        }
        return DocumentWriteResult(id: "_local/" + id, rev: "0-0")
      }
      let rev = "0-\(input.newRevision)"
      try append(
        DocumentEvent(kind: .localPut, docID: id, rev: rev, body: input.body), actor: actor,
        txn: txn)
      return DocumentWriteResult(id: "_local/" + id, rev: rev)
    }
  }

  /// The transaction part of ``deleteLocal(_:rev:actor:)``. As CouchDB 3 does, the revision
  /// named is not compared with the stored one; a missing document is `not_found`.
  func localDelete(_ id: String, rev: String?, actor: String, txn: WriteTransaction) throws
    -> DocumentWriteResult
  {
    guard try localDocument(id, txn: txn) != nil else { throw StoreError.notFound() }
    if let rev { _ = try LocalDocumentInput.parseRev(rev) }
    try append(DocumentEvent(kind: .localDelete, docID: id, rev: "0-0"), actor: actor, txn: txn)
    return DocumentWriteResult(id: "_local/" + id, rev: "0-0")
  }

  /// A `revs_limit` change, checked; the transaction part appends it.
  func revsLimitWrite(_ limit: Int, actor: String) throws
    -> @Sendable (WriteTransaction) throws
    -> Void
  {
    guard limit >= 1 else { throw StoreError.badRequest("revs_limit must be a positive integer") }
    return { [self] txn in
      try append(
        DocumentEvent(kind: .revsLimit, docID: "_revs_limit", rev: "", revsLimit: limit),
        actor: actor, txn: txn)
    }
  }

  /// The body as stored, refused when it passes ``DocumentInput/maxBytes`` (documents that
  /// arrive parsed, as in ``bulkDocs(_:newEdits:actor:origin:)``, were never measured).
  static func checkedBody(_ input: DocumentInput) throws(StoreError) -> [UInt8] {
    try checkedBody(input.bodyBytes)
  }

  /// `body` when it is within ``DocumentInput/maxBytes``.
  static func checkedBody(_ body: [UInt8]) throws(StoreError) -> [UInt8] {
    guard body.count <= DocumentInput.maxBytes else {
      throw StoreError.tooLarge(
        "Document body is \(body.count) bytes; the limit is \(DocumentInput.maxBytes)")
    }
    return body
  }

  static func newID() -> String {
    String(UUID().uuidString.lowercased().filter { $0 != "-" })
  }

  // MARK: Projections (see ``ProjectionRunner``)

  /// The databases of the projection named `name`, for reading it (``read(_:)``); nil when the
  /// store has no such projection.
  public func storage(of name: String) -> ProjectionStorage? { projections.storage(of: name) }

  /// The names of the store's projections, documents first, then its indexes kept behind the
  /// log (``IndexBehindLog``).
  public var projectionNames: [String] {
    let present = Set(projections.names + indexes.map(\.index.name))
    return projectionOrder.filter { present.contains($0) }
      + addedIndexes.withLock { $0.map(\.index.name) }
  }

  /// ``ProjectionRunner/rebuild(_:)``; for an index behind the log,
  /// ``IndexFollower/rebuild()``.
  public func rebuild(_ name: String) throws {
    if let follower = index(named: name) {
      try follower.rebuild()
    } else {
      try projections.rebuild(name)
    }
  }

  /// ``ProjectionRunner/rebuildAll()``, and the indexes behind the log.
  public func rebuildAll() throws {
    try projections.rebuildAll()
    for follower in indexes { try follower.rebuild() }
  }

  /// ``ProjectionRunner/verify(_:maxDifferences:)``; for an index behind the log,
  /// ``IndexFollower/verify(maxDifferences:)``.
  public func verify(_ name: String, maxDifferences: Int = 20) throws -> [String] {
    if let follower = index(named: name) {
      return try follower.verify(maxDifferences: maxDifferences)
    }
    return try projections.verify(name, maxDifferences: maxDifferences)
  }
}

/// The outcome of one document write: its id and new revision, or why it failed.
public struct DocumentWriteResult: Sendable, Hashable {
  public let id: String
  public let rev: String?
  public let error: StoreError?

  public init(id: String, rev: String?, error: StoreError? = nil) {
    self.id = id
    self.rev = rev
    self.error = error
  }

  public var ok: Bool { error == nil }

  /// As CouchDB answers: `{"ok":true,"id":...,"rev":...}` or `{"id":...,"error":...,"reason":...}`.
  public var json: JSONValue {
    if let error {
      var members: [JSONObject.Member] = [.init(key: "id", value: .string(id))]
      if let rev { members.append(.init(key: "rev", value: .string(rev))) }
      members.append(.init(key: "error", value: .string(error.error)))
      members.append(.init(key: "reason", value: .string(error.reason)))
      return .object(JSONObject(members))
    }
    return .object(
      JSONObject([
        .init(key: "ok", value: .bool(true)), .init(key: "id", value: .string(id)),
        .init(key: "rev", value: .string(rev ?? "")),
      ]))
  }
}
