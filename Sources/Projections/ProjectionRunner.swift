import Formats
import JSON
public import Log
import RevTree

/// Runs a document store's projections: the documents projection first, then the inline ones
/// (``InlineProjection``), every one of them in the same transaction as the events it applies.
///
/// - On the write path the store appends an event and hands it here
///   (``apply(_:appended:record:merged:parsedBody:shares:txn:)``, ``apply(other:txn:)``): the
///   documents projection merges the tree, and each ``DocumentChangeProjection`` gets the
///   ``DocumentChange`` with its share worked out ahead; ``checkpointed(_:_:)`` then records
///   every checkpoint once.
/// - At open, ``catchUp()`` brings each projection to the end of the log from its checkpoint (a
///   change projection that is behind is rebuilt, since the trees of the events it missed are not
///   the current ones); a store an earlier layout wrote is refused (``RetiredLayouts``).
/// - ``rebuild(_:)`` clears one projection and replays the log into it, ``rebuildAll()`` every
///   projection in one pass with a decoder thread a batch ahead, ``verify(_:maxDifferences:)``
///   replays into scratch databases and compares them with the live ones.
///
/// A ``DocumentStore`` owns one (``DocumentStore/projections``).
public final class ProjectionRunner: Sendable {
  public let log: EventLog
  let documents = DocumentProjection()
  let documentStorage: ProjectionStorage
  /// Inline projections besides the documents, applied to every event in its transaction.
  let others: [InlineProjection]
  let checkpointDatabase: Database
  /// Whether a ``DocumentChangeProjection`` among `others` works out a share of each revision
  /// ahead of the writer.
  let prepares: Bool
  /// Each inline projection's ``DocumentChangeProjection/prepare(_:rev:body:)``, by slot.
  let preparers: [PrepareShare?]
  /// The documents first, then the others; with each projection's checkpoint key.
  let allProjections: [(projection: any Projection, storage: ProjectionStorage)]
  let checkpointKeys: [[UInt8]]

  /// Opens (creating) the databases of the documents projection and of `projections`. In a
  /// read-only log, a projection whose databases were never created is left out.
  init(log: EventLog, projections: [any Projection]) throws {
    self.log = log
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
      checkpointDatabase = try log.database(named: "projections")
    } catch {
      throw StoreError.from(error)
    }
    allProjections = [(documents, documentStorage)] + others.map { ($0.projection, $0.storage) }
    prepares = others.contains { $0.prepare != nil }
    preparers = others.map(\.prepare)
    checkpointKeys = allProjections.map { Array($0.projection.name.utf8) }
  }

  /// Runs `body` and, if it appended events, records every projection's checkpoint.
  func checkpointed<T>(_ txn: WriteTransaction, _ body: (WriteTransaction) throws -> T) throws
    -> T
  {
    let first = txn.nextPosition
    let value = try body(txn)
    let next = txn.nextPosition
    if next > first { try setCheckpoints(next.rawValue - 1, txn: txn) }
    return value
  }

  /// Each projection's checkpoint: the last log position applied to it, documents first.
  public func checkpoints() throws -> [(name: String, position: LogPosition)] {
    do {
      return try log.read { txn in
        try allProjections.map { projection, _ in
          let name = projection.name
          return (name, LogPosition(try checkpoint(of: name, txn: txn)))
        }
      }
    } catch {
      throw StoreError.from(error)
    }
  }

  /// Sets every projection's checkpoint to `position`.
  func setCheckpoints(_ position: UInt64, txn: WriteTransaction) throws {
    let checkpoint = position.bigEndianBytes
    for key in checkpointKeys { try txn.put(checkpoint, forKey: key, in: checkpointDatabase) }
  }

  // MARK: Applying events

  /// Applies a document event the store has just appended (`event`, decoded as `e`) to every
  /// projection. `record` and `merged` are the document's record before the event and its tree
  /// after, when the write path has them; `parsedBody` is the event's body as the write path
  /// parsed it; `shares` the change projections' shares of its revision.
  func apply(
    _ e: DocumentEvent, appended event: RecordedEvent, record: DocumentRecord?,
    merged: RevisionTree?, parsedBody: JSONValue?, shares: Shares, txn: WriteTransaction
  ) throws {
    try apply(
      e, of: event, documentsIn: documentStorage, record: record, merged: merged,
      parsedBody: parsedBody, shares: shares, then: others, txn: txn)
  }

  /// Applies an event that is not a document event (a draft event, say) to every projection.
  func apply(other event: RecordedEvent, txn: WriteTransaction) throws {
    try apply(
      nil, of: event, documentsIn: documentStorage, parsedBody: nil, shares: .none, then: others,
      txn: txn)
  }

  /// Applies one event, decoded as `decoded` (nil when it is not a document event), to the
  /// documents projection (its databases `docs`: the live ones, or scratch copies) and then to
  /// `projections`: a document edit reaches the change projections as one ``DocumentChange``,
  /// made once, with the body parsed (`parsedBody`) and their shares (`shares`) when at hand.
  private func apply(
    _ decoded: DocumentEvent?, of event: RecordedEvent, documentsIn docs: ProjectionStorage,
    record: DocumentRecord? = nil, merged: RevisionTree? = nil, parsedBody: JSONValue?,
    shares: Shares, then projections: [InlineProjection], txn: WriteTransaction
  ) throws {
    var change: DocumentChange? = nil
    let isEdit = decoded.map { $0.kind == .edit || $0.kind == .replicated } ?? false
    var isChange = isEdit
    if isEdit, let e = decoded {
      let facts = try documents.applyDocument(
        e, at: event.position.rawValue, storage: docs, txn: txn, record: record, merged: merged,
        isFirst: event.streamVersion == 1)
      if let facts, projections.contains(where: { $0.applyChange != nil }) {
        change = DocumentChange(
          event: event, docID: e.docID, rev: e.path?.leaf, deleted: e.deleted,
          replicated: e.kind == .replicated, tree: facts.tree, winnerChanged: facts.winnerChanged,
          bodyBytes: e.body, parsedBody: parsedBody)
      }
    } else if let e = decoded, e.kind == .purge || e.kind == .redact {
      // A purge or redaction reaches the change projections as a change that adds no
      // revision: the tree after it (a purged document's is empty), and whether its winner
      // changed.
      isChange = true
      if let facts = try documents.applyErasure(
        e, at: event.position.rawValue, storage: docs, txn: txn)
      {
        change = DocumentChange(
          event: event, docID: e.docID, rev: nil, deleted: false, replicated: false,
          tree: facts.tree, winnerChanged: facts.winnerChanged, bodyBytes: Array("{}".utf8),
          parsedBody: .object(JSONObject()))
      }
    } else {
      try documents.apply(decoded, of: event, to: docs, in: txn)
    }
    for inline in projections {
      try inline.apply(event, isEdit: isChange, change: change, shares: shares, txn: txn)
    }
  }

  // MARK: Catching up, rebuilding, verifying

  /// Refuses a store written by an earlier, never released layout (``RetiredLayouts``: a
  /// database only that layout had, a projection's or, in the log's environment, an index's
  /// that was kept inline, ``IndexBehindLog/retiredDatabaseNames``; or the `doc_count` row of
  /// `docs.meta`, a count now derived): nothing is migrated in place.
  func refuseRetiredLayouts(indexes: [any IndexBehindLog] = []) throws {
    var found: String?
    do {
      for index in indexes where found == nil {
        found = try index.retiredDatabaseNames.first { try log.hasDatabase(named: $0) }
      }
      for inline in others where found == nil {
        guard let retired = inline.projection as? any RetiredLayouts else { continue }
        found = try retired.retiredDatabaseNames.first { try log.hasDatabase(named: $0) }
        if found != nil { break }
      }
      if found == nil,
        try log.read({ try $0.get(DocumentProjection.docCountKey, in: documentStorage["meta"]) })
          != nil
      {
        found = "docs.meta doc_count"
      }
    } catch {
      throw StoreError.from(error)
    }
    if let found {
      throw StoreError(
        "unsupported_layout",
        "this database was written by an earlier layout of wikilog (it has \(found)): export it "
          + "with the wikilog that wrote it (wikilog export) and import it with this one "
          + "(wikilog import)", code: .internalError)
    }
  }

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
    try txn.get(name, in: checkpointDatabase).flatMap { UInt64(bigEndianArray: $0) } ?? 0
  }

  /// Applies every event after the projection's checkpoint, in transactions of `batch` events.
  func replay(
    _ projection: any Projection, storage: ProjectionStorage, checkpointed: Bool,
    batch: Int = 10_000
  ) throws {
    let key = Array(projection.name.utf8)
    while true {
      let done = try write { txn -> Bool in
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
          try txn.put(last.bigEndianBytes, forKey: key, in: checkpointDatabase)
        }
        return count < batch
      }
      if done { return }
    }
  }

  /// A write transaction of the log, its failures as ``StoreError``s.
  func write<T>(_ body: (WriteTransaction) throws -> T) throws -> T {
    do {
      return try log.write(body)
    } catch {
      throw StoreError.from(error)
    }
  }

  /// The databases of the projection named `name`, for reading it; nil when there is no such
  /// projection.
  public func storage(of name: String) -> ProjectionStorage? {
    allProjections.first { $0.projection.name == name }?.storage
  }

  /// The names of the projections, documents first.
  public var names: [String] { allProjections.map(\.projection.name) }

  /// Rebuilds each projection whose rows were built with a layout older than its
  /// ``Projection/layoutVersion`` (as recorded under `layout:<name>` beside the checkpoints;
  /// none recorded is layout 1), and records the layouts of all.
  func upgradeLayouts() throws {
    func key(_ p: any Projection) -> [UInt8] { Array("layout:\(p.name)".utf8) }
    let stale = try log.read { txn in
      try others.map(\.projection).filter { p in
        let stored = try txn.get(key(p), in: checkpointDatabase).flatMap {
          UInt64(bigEndianArray: $0)
        }
        return Int(stored ?? 1) < p.layoutVersion
      }
    }
    guard !stale.isEmpty else { return }
    for projection in stale {
      try rebuild(projection.name)
      try log.write { txn in
        try txn.put(
          UInt64(projection.layoutVersion).bigEndianBytes, forKey: key(projection),
          in: checkpointDatabase)
      }
    }
  }

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
      parseBodies: !others.isEmpty, prepare: prepares ? preparers : [])
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
    try write { txn in
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
        try txn.put(
          last.bigEndianBytes, forKey: Array(projection.name.utf8), in: checkpointDatabase)
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

  /// Applies one event, decoded ahead (``ReplayDecoder``), to the documents projection (its
  /// databases `documentsIn`: the live ones, or scratch copies) and then to `projections`.
  func apply(
    _ prepared: ReplayDecoder.Prepared, documentsIn docs: ProjectionStorage,
    then projections: [InlineProjection], txn: WriteTransaction
  ) throws {
    try apply(
      try prepared.decoded.get(), of: prepared.event, documentsIn: docs,
      parsedBody: prepared.body, shares: prepared.shares, then: projections, txn: txn)
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
    return try write { txn in
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
      try txn.flushBuffers()
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

  public static func show(_ key: [UInt8]) -> String {
    if let s = String(validating: key, as: UTF8.self),
      s.allSatisfy({ !$0.isASCII || $0.isLetter || $0.isNumber || $0.isPunctuation || $0 == " " })
    {
      return "'\(s)'"
    }
    return key.map { String($0, radix: 16) }.joined()
  }
}
