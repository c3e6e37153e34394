public import JSON
public import Log
import RevTree

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
  package let documents = DocumentProjection()
  package let documentStorage: ProjectionStorage
  /// Inline projections besides the documents, applied to every event in its transaction.
  package let others: [InlineProjection]
  let checkpoints: Database
  let ownsLog: Bool
  /// Whether a ``DocumentChangeProjection`` among `others` works out a share of each revision
  /// ahead of the writer.
  let prepares: Bool
  /// The rules documents are checked against (CouchDB's own always apply).
  public let validation: DocumentValidation

  /// Opens (creating) the database in `directory`.
  ///
  /// - Parameters:
  ///   - projections: inline projections besides the documents (the Wiki module's
  ///     `WikiProjection` and `DraftProjection`, your own).
  ///   - validation: CouchDB's rules only by default; see ``DocumentValidation``.
  public convenience init(
    directory: String, options: EventLog.Options = EventLog.Options(),
    projections: [any Projection] = [], validation: DocumentValidation = .couchDB
  ) throws {
    let log: EventLog
    do {
      log = try EventLog(directory: directory, options: options)
    } catch {
      throw StoreError.storage(error)
    }
    do {
      try self.init(log: log, projections: projections, ownsLog: true, validation: validation)
    } catch {
      log.close()
      throw error
    }
  }

  /// Uses an open log; the projections catch up with it before this returns.
  public convenience init(
    log: EventLog, projections: [any Projection] = [], ownsLog: Bool = false,
    validation: DocumentValidation = .couchDB
  ) throws {
    try self.init(
      log: log, projections: projections, ownsLog: ownsLog, validation: validation, scratch: nil)
  }

  /// A scratch directory (of an as-of view) removed once the store is gone.
  let scratch: ScratchDirectory?

  init(
    log: EventLog, projections: [any Projection], ownsLog: Bool, validation: DocumentValidation,
    scratch: ScratchDirectory?
  ) throws {
    self.log = log
    self.ownsLog = ownsLog
    self.validation = validation
    self.scratch = scratch
    do {
      documentStorage = try ProjectionStorage.open(for: documents, in: log)
      var opened: [(any Projection, ProjectionStorage)] = []
      for projection in projections {
        do {
          opened.append((projection, try ProjectionStorage.open(for: projection, in: log)))
        } catch LogError.invalidArgument where log.options.readOnly {
          // Read-only, and the projection was never built here (a database written by a
          // version or a program without it): the store opens without it, and what needs it
          // (drafts, wiki queries) says so.
        }
      }
      others = opened.enumerated().map { slot, entry in
        InlineProjection(entry.0, storage: entry.1, slot: slot)
      }
      checkpoints = try log.database(named: "projections")
    } catch {
      throw StoreError.from(error)
    }
    allProjections = [(documents, documentStorage)] + others.map { ($0.projection, $0.storage) }
    prepares = others.contains { $0.prepare != nil }
    checkpointKeys = allProjections.map { Array($0.projection.name.utf8) }
    if !log.options.readOnly {
      try catchUp()
      try removeLegacyRows()
    }
  }

  /// Removes what stores written by earlier versions kept and this one does not: the
  /// `doc_count` row in `docs.meta` (the count is now derived), so that `verify` finds the live
  /// projection equal to a rebuilt one, and what the inline projections retired
  /// (``ProjectionMigration``): their retired databases are removed, and a projection that
  /// still has a database it asks to be rebuilt from is rebuilt, then loses that database; a
  /// crash between the two leaves it for the next open to do again.
  func removeLegacyRows() throws {
    for inline in others {
      guard let migration = inline.projection as? any ProjectionMigration else { continue }
      do {
        for name in migration.retiredDatabaseNames { try log.removeDatabase(named: name) }
        let stale = try migration.rebuildingDatabaseNames.filter { try log.hasDatabase(named: $0) }
        if !stale.isEmpty {
          try rebuild(inline.projection.name)
          for name in stale { try log.removeDatabase(named: name) }
        }
      } catch {
        throw StoreError.from(error)
      }
    }
    let meta = documentStorage["meta"]
    let stale = try log.read { try $0.get(DocumentProjection.docCountKey, in: meta) } != nil
    guard stale else { return }
    _ = try writeDocumentsRaw { try $0.delete(DocumentProjection.docCountKey, in: meta) }
  }

  deinit {
    if ownsLog { log.close() }
  }

  public func close() { log.close() }

  /// The documents first, then the others; with each projection's checkpoint key.
  let allProjections: [(projection: any Projection, storage: ProjectionStorage)]
  let checkpointKeys: [[UInt8]]

  // MARK: Writing

  /// Runs a write transaction that appends document events, and records every inline
  /// projection's checkpoint once at its end.
  package func writeDocuments<T>(_ body: (WriteTransaction) throws -> T) throws -> T {
    try writeDocumentsRaw { txn in try checkpointed(txn, body) }
  }

  /// Runs `body` and, if it appended events, records every projection's checkpoint.
  func checkpointed<T>(_ txn: WriteTransaction, _ body: (WriteTransaction) throws -> T) throws
    -> T
  {
    let first = txn.nextPosition
    let value = try body(txn)
    let next = txn.nextPosition
    if next > first {
      let checkpoint = (next.rawValue - 1).bigEndianBytes
      for key in checkpointKeys { try txn.put(checkpoint, forKey: key, in: checkpoints) }
    }
    return value
  }

  /// Appends one document event and applies the inline projections to it.
  ///
  /// `record` and `merged` are the document's record before the event and its tree after, when
  /// the write path has them; `parsedBody` is the event's body as the write path parsed it
  /// (handed on in ``AppendFacts``); `context` learns that the document changed. `payload` is
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
    var facts: AppendFacts? = nil
    if e.kind == .edit || e.kind == .replicated {
      facts = try documents.applyDocument(
        e, at: event.position.rawValue, storage: documentStorage, txn: txn, record: record,
        merged: merged)
      facts?.body = parsedBody
      facts?.shares = shares
    } else {
      try documents.apply(e, facts: nil, of: event, to: documentStorage, in: txn)
    }
    for inline in others {
      try inline.apply(event, decoded: e, facts: facts, txn: txn)
    }
    return event
  }

  /// Appends an event that is not a document write (a draft event, say) and applies the inline
  /// projections to it.
  @discardableResult
  package func appendEvent(_ event: NewEvent, txn: WriteTransaction) throws -> RecordedEvent {
    let recorded = try txn.append(event)
    guard DocumentEvent.Kind(eventType: recorded.type) == nil else {
      throw StoreError(
        "internal_server_error", "document events are appended with append(_:actor:txn:)",
        code: .internalError)
    }
    try documents.apply(recorded, to: documentStorage, in: txn)
    for inline in others {
      try inline.apply(recorded, decoded: nil, facts: nil, txn: txn)
    }
    return recorded
  }

  /// The database's revs_limit, read once per write body: no body changes it.
  func revsLimit(txn: WriteTransaction, context: WriteContext?) throws -> Int {
    if let known = context?.revsLimit { return known }
    let limit = try documents.revsLimit(storage: documentStorage, txn: txn)
    context?.revsLimit = limit
    return limit
  }

  /// A local edit (`new_edits=true`) inside a transaction: checks `_rev` against the tree,
  /// computes the deterministic revision, appends the event and updates the projections.
  package func edit(
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
    let e = ready ? p.event! : Self.editEvent(p.input, id: p.id, parent: parent, body: body).event
    var tree = record.tree
    let outcome = try DocumentProjection.merge(
      e, into: &tree, body: txn.nextPosition.rawValue,
      revsLimit: try revsLimit(txn: txn, context: context))
    guard outcome.updated else { throw StoreError.conflict }
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
    try replicate(
      prepareReplicated(input, id: id, origin: origin), actor: actor, txn: txn, context: context)
  }

  /// ``replicate(_:id:actor:origin:txn:context:)`` with its request worked out already.
  func replicate(
    _ p: PreparedWrite, actor: String, txn: WriteTransaction, context: WriteContext? = nil
  ) throws {
    if let early = p.early { throw early }
    guard let e = p.event else {
      throw StoreError(
        "internal_server_error", "a replicated write without its event", code: .internalError)
    }
    let record =
      try documents.record(p.id, storage: documentStorage, txn: txn)
      ?? DocumentRecord(docID: p.id)
    var tree = record.tree
    let outcome = try DocumentProjection.merge(
      e, into: &tree, body: txn.nextPosition.rawValue,
      revsLimit: try revsLimit(txn: txn, context: context))
    guard outcome.updated else { return }
    try append(
      e, actor: actor, txn: txn, record: record, merged: tree, parsedBody: .object(p.input.body),
      context: context, payload: p.payload, shares: p.shares)
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
    let prepared = prepareEdit(input, id: docID, rev: rev)
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
    let prepared = prepareEdit(input, id: id, rev: rev)
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
  /// every write, so replication checkpoints are auditable. Returns its new `0-N` revision.
  @discardableResult
  public func putLocal(_ id: String, _ json: [UInt8], actor: String) throws -> DocumentWriteResult {
    let write = try localPut(id, json, actor: actor)
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
  /// checks `_rev` against the current revision before it appends anything.
  func localPut(_ id: String, _ json: [UInt8], actor: String) throws
    -> @Sendable (WriteTransaction) throws -> DocumentWriteResult
  {
    let input = try DocumentInput(json: json)
    try DocumentKey.validate("_local/" + id, allowLocal: true)
    let given = input.rev
    let body = input.bodyBytes
    return { [self] txn in
      let current = try localDocument(id, txn: txn)
      if let current, let given, given != current.rev { throw StoreError.conflict }
      if current == nil, let given, given != "0-0" { throw StoreError.conflict }
      let n = current.flatMap { Int($0.rev.dropFirst(2)) } ?? 0
      let rev = "0-\(n + 1)"
      try append(
        DocumentEvent(kind: .localPut, docID: id, rev: rev, body: body), actor: actor, txn: txn)
      return DocumentWriteResult(id: "_local/" + id, rev: rev)
    }
  }

  /// The transaction part of ``deleteLocal(_:rev:actor:)``.
  func localDelete(_ id: String, rev: String?, actor: String, txn: WriteTransaction) throws
    -> DocumentWriteResult
  {
    guard let current = try localDocument(id, txn: txn) else { throw StoreError.notFound() }
    if let rev, rev != current.rev { throw StoreError.conflict }
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
    let body = input.bodyBytes
    guard body.count <= DocumentInput.maxBytes else {
      throw StoreError.tooLarge(
        "Document body is \(body.count) bytes; the limit is \(DocumentInput.maxBytes)")
    }
    return body
  }

  static func newID() -> String {
    String(UUID().uuidString.lowercased().filter { $0 != "-" })
  }

  // MARK: Projections

  /// Brings every projection up to the log's end, from its checkpoint.
  ///
  /// A projection that needs the documents' trees and is behind (one added to an existing
  /// store) is rebuilt instead: the trees of the events it missed are not the current ones.
  func catchUp() throws {
    for (projection, storage) in allProjections {
      if projection is any DocumentChangeProjection {
        let behind = try log.read { txn in
          try checkpoint(of: projection.name, txn: txn) < txn.lastPosition.rawValue
        }
        if behind { try rebuild(projection.name) }
      } else {
        try replay(projection, storage: storage, checkpointed: true)
      }
    }
  }

  /// The last log position applied to the projection named `name` (0 for none).
  func checkpoint(of name: String, txn: ReadTransaction) throws -> UInt64 {
    try txn.get(name, in: checkpoints).flatMap { UInt64(bigEndianArray: $0) } ?? 0
  }

  /// Applies every event after the projection's checkpoint, in transactions of `batch` events.
  func replay(
    _ projection: any Projection, storage: ProjectionStorage, checkpointed: Bool,
    batch: Int = 10_000
  ) throws {
    let key = Array(projection.name.utf8)
    while true {
      let done = try writeDocumentsRaw { txn -> Bool in
        let start = checkpointed ? try checkpoint(of: projection.name, txn: txn) : 0
        var last = start
        var count = 0
        try txn.forEachEvent(from: LogPosition(start + 1)) { event in
          try projection.apply(event, to: storage, in: txn)
          last = event.position.rawValue
          count += 1
          return count < batch
        }
        if checkpointed && last != start {
          try txn.put(last.bigEndianBytes, forKey: key, in: checkpoints)
        }
        return count < batch
      }
      if done { return }
    }
  }

  func writeDocumentsRaw<T>(_ body: (WriteTransaction) throws -> T) throws -> T {
    do {
      return try log.write(body)
    } catch {
      throw StoreError.from(error)
    }
  }

  /// The databases of the projection named `name`, for reading it (``read(_:)``); nil when the
  /// store has no such projection.
  public func storage(of name: String) -> ProjectionStorage? {
    allProjections.first { $0.projection.name == name }?.storage
  }

  /// The names of the store's projections, documents first.
  public var projectionNames: [String] { allProjections.map(\.projection.name) }

  /// Rebuilds a projection from scratch by replaying the whole log into its databases.
  ///
  /// Runs in one transaction, so readers see the old state until the new one is complete and
  /// writers wait; for very large logs this is one large transaction.
  public func rebuild(_ name: String) throws {
    guard let (projection, storage) = allProjections.first(where: { $0.projection.name == name })
    else {
      throw StoreError.notFound("no projection named '\(name)'")
    }
    if let scratchDocs = try scratchDocuments(for: projection) {
      let alone = [InlineProjection(projection, storage: storage, slot: nil)]
      try replayFromStart([(projection, storage)], extraScratch: scratchDocs) { event, txn in
        try apply(
          ReplayDecoder.prepare(event, parseBody: false), documentsIn: scratchDocs,
          then: alone, txn: txn)
      }
    } else {
      try replayFromStart([(projection, storage)]) { event, txn in
        try projection.apply(event, to: storage, in: txn)
      }
    }
  }

  /// For a projection that takes each edit's tree from the documents projection
  /// (a ``DocumentChangeProjection``): scratch databases (`docs.*.replay`) for
  /// the documents projection to be replayed into alongside it, so that it gets the trees of
  /// each event's moment; the replay empties them before and after. Nil for other projections.
  func scratchDocuments(for projection: any Projection) throws -> ProjectionStorage? {
    guard projection is any DocumentChangeProjection else { return nil }
    return try ProjectionStorage.open(for: documents, in: log, suffix: ".replay")
  }

  /// Rebuilds every projection from scratch in one pass over the log: each event is decoded
  /// once, and the projections after the documents take the document's merged tree from it
  /// (as they do on the write path) instead of merging their own copy again.
  ///
  /// One transaction, like ``rebuild(_:)``: readers see the old state until the new one is
  /// complete.
  ///
  /// Decoding runs a batch ahead on a second thread (``ReplayDecoder``): while the writer
  /// applies one batch of events, the next one's payloads are decoded and their bodies parsed.
  public func rebuildAll() throws {
    let decoder = ReplayDecoder(
      parseBodies: !others.isEmpty, prepare: prepares ? others.map(\.prepare) : [])
    var batch: [RecordedEvent] = []
    batch.reserveCapacity(ReplayDecoder.batchSize)
    var inFlight: ReplayDecoder.Batch? = nil
    func applyFinished(_ done: ReplayDecoder.Batch, _ txn: WriteTransaction) throws {
      for prepared in done.wait() { try applyAll(prepared, txn: txn) }
    }
    try replayFromStart(allProjections) { event, txn in
      batch.append(event)
      guard batch.count == ReplayDecoder.batchSize else { return }
      let next = decoder.start(batch)
      batch.removeAll(keepingCapacity: true)
      if let inFlight { try applyFinished(inFlight, txn) }
      inFlight = next
    } finish: { txn in
      if let inFlight { try applyFinished(inFlight, txn) }
      inFlight = nil
      if !batch.isEmpty { try applyFinished(decoder.start(batch), txn) }
    }
  }

  /// Empties `targets`' databases, applies every event of the log with `apply` and sets their
  /// checkpoints to the last one, in one transaction. `extraScratch` (databases the replay
  /// works in) is emptied before and after.
  private func replayFromStart(
    _ targets: [(projection: any Projection, storage: ProjectionStorage)],
    extraScratch: ProjectionStorage? = nil,
    apply: (RecordedEvent, WriteTransaction) throws -> Void,
    finish: (WriteTransaction) throws -> Void = { _ in }
  ) throws {
    try writeDocumentsRaw { txn in
      for storage in targets.map(\.storage) + [extraScratch].compactMap({ $0 }) {
        for db in storage.all { try txn.removeAll(in: db) }
      }
      var last: UInt64 = 0
      try txn.forEachEvent(from: 1) { event in
        try apply(event, txn)
        last = event.position.rawValue
        return true
      }
      try finish(txn)
      for db in extraScratch?.all ?? [] { try txn.removeAll(in: db) }
      for (projection, _) in targets {
        try txn.put(last.bigEndianBytes, forKey: Array(projection.name.utf8), in: checkpoints)
      }
    }
  }

  /// Applies one event of the log to every projection, the documents first.
  func applyAll(_ event: RecordedEvent, txn: WriteTransaction) throws {
    try applyAll(ReplayDecoder.prepare(event, parseBody: false), txn: txn)
  }

  /// Applies one event, decoded ahead (``ReplayDecoder``), to every projection.
  func applyAll(_ prepared: ReplayDecoder.Prepared, txn: WriteTransaction) throws {
    try apply(prepared, documentsIn: documentStorage, then: others, txn: txn)
  }

  /// Applies one event to the documents projection (its databases `documentsIn`: the live ones,
  /// or scratch copies) and then to `projections`, handing them what it made of the event.
  func apply(
    _ prepared: ReplayDecoder.Prepared, documentsIn docs: ProjectionStorage,
    then projections: [InlineProjection], txn: WriteTransaction
  ) throws {
    let event = prepared.event
    let decoded = try prepared.decoded.get()
    var facts: AppendFacts? = nil
    if let e = decoded, e.kind == .edit || e.kind == .replicated {
      facts = try documents.applyDocument(
        e, at: event.position.rawValue, storage: docs, txn: txn,
        isFirst: event.streamVersion == 1)
      facts?.body = prepared.body
      facts?.shares = prepared.shares
    } else {
      try documents.apply(decoded, facts: nil, of: event, to: docs, in: txn)
    }
    for inline in projections {
      try inline.apply(event, decoded: decoded, facts: facts, txn: txn)
    }
  }

  /// Rebuilds a projection into scratch databases and compares them with the live ones, entry
  /// by entry, in one snapshot. Returns the differences found (empty when they agree); the
  /// scratch databases are emptied again.
  public func verify(_ name: String, maxDifferences: Int = 20) throws -> [String] {
    guard let (projection, storage) = allProjections.first(where: { $0.projection.name == name })
    else {
      throw StoreError.notFound("no projection named '\(name)'")
    }
    let scratch = try ProjectionStorage.open(for: projection, in: log, suffix: ".verify")
    let scratchDocs = try scratchDocuments(for: projection)
    let alone = [InlineProjection(projection, storage: scratch, slot: nil)]
    return try writeDocumentsRaw { txn in
      for db in scratch.all + (scratchDocs?.all ?? []) { try txn.removeAll(in: db) }
      try txn.forEachEvent(from: 1) { event in
        if let scratchDocs {
          try apply(
            ReplayDecoder.prepare(event, parseBody: false), documentsIn: scratchDocs,
            then: alone, txn: txn)
        } else {
          try projection.apply(event, to: scratch, in: txn)
        }
        return true
      }
      for db in scratchDocs?.all ?? [] { try txn.removeAll(in: db) }
      var differences: [String] = []
      for dbName in projection.databaseNames {
        var live: [([UInt8], [UInt8])] = []
        try txn.scan(storage[dbName]) { k, v in
          live.append((k, v))
          return true
        }
        var index = 0
        try txn.scan(scratch[dbName]) { k, v in
          defer { index += 1 }
          guard index < live.count else {
            differences.append("\(name).\(dbName): rebuilt has extra key \(Self.show(k))")
            return differences.count < maxDifferences
          }
          if live[index].0 != k {
            differences.append(
              "\(name).\(dbName): live key \(Self.show(live[index].0)) where rebuilt has \(Self.show(k))"
            )
          } else if live[index].1 != v {
            differences.append(
              "\(name).\(dbName): value of \(Self.show(k)) differs from the rebuilt one")
          }
          return differences.count < maxDifferences
        }
        if index < live.count && differences.count < maxDifferences {
          differences.append(
            "\(name).\(dbName): live has \(live.count - index) entries the rebuild does not")
        }
      }
      for db in scratch.all { try txn.removeAll(in: db) }
      return differences
    }
  }

  static func show(_ key: [UInt8]) -> String {
    if let s = String(validating: key, as: UTF8.self),
      s.allSatisfy({ !$0.isASCII || $0.isLetter || $0.isNumber || $0.isPunctuation || $0 == " " })
    {
      return "'\(s)'"
    }
    return key.map { String($0, radix: 16) }.joined()
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
