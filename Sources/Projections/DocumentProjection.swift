import Formats
import JSON
public import Log
import RevTree

/// The document store's projection: revision trees, the by-sequence index that is the changes
/// feed, `_local` documents and the database's settings and counts.
///
/// | database | key | value |
/// | --- | --- | --- |
/// | `docs.byId` | document id (UTF-8) | ``DocumentRecord`` |
/// | `docs.bySeq` | update seq, big-endian | document id: one row per document, at its last change |
/// | `docs.local` | `_local` id | rev (`0-N`) and body |
/// | `docs.meta` | `revs_limit`, `doc_del_count` | big-endian numbers |
///
/// `doc_count` is not stored: it is the number of `bySeq` rows (one per document) minus
/// `doc_del_count`. (Stores written before that kept a `doc_count` row; opening one removes it.)
public final class DocumentProjection: Projection {
  public let name = "docs"
  public let databaseNames = ["byId", "bySeq", "local", "meta"]

  public init() {}

  static let revsLimitKey = Array("revs_limit".utf8)
  /// The key of the live-document count that an earlier layout kept (a store that has it is
  /// refused: ``RetiredLayouts``).
  static let docCountKey = Array("doc_count".utf8)
  static let deletedCountKey = Array("doc_del_count".utf8)
  public static let defaultRevsLimit = 1000

  public func apply(_ event: RecordedEvent, to storage: ProjectionStorage, in txn: WriteTransaction)
    throws
  {
    guard DocumentEvent.Kind(eventType: event.type) != nil else { return }
    try apply(try DocumentEvent(decoding: event), of: event, to: storage, in: txn)
  }

  /// Applies `event`, already decoded as `decoded` (nil for an event that is not a document
  /// event).
  func apply(
    _ decoded: DocumentEvent?, of event: RecordedEvent, to storage: ProjectionStorage,
    in txn: WriteTransaction
  ) throws {
    guard let e = decoded else { return }
    switch e.kind {
    case .edit, .replicated:
      try applyDocument(
        e, at: event.position.rawValue, storage: storage, txn: txn,
        isFirst: event.streamVersion == 1)
    case .localPut:
      var w = ByteWriter()
      w.string(e.rev)
      w.raw(e.body)
      try txn.put(w.bytes, forKey: DocumentKey.key(e.docID), in: storage["local"])
    case .localDelete:
      try txn.delete(DocumentKey.key(e.docID), in: storage["local"])
    case .revsLimit:
      try txn.put(
        UInt64(e.revsLimit).bigEndianBytes, forKey: Self.revsLimitKey, in: storage["meta"])
    case .purgedInfosLimit:
      try txn.put(
        UInt64(e.revsLimit).bigEndianBytes, forKey: Self.purgedInfosLimitKey,
        in: storage["meta"])
    case .purge, .redact:
      try applyErasure(e, at: event.position.rawValue, storage: storage, txn: txn)
    }
  }

  static let purgedInfosLimitKey = Array("purged_infos_limit".utf8)
  static let purgeSeqKey = Array("purge_seq".utf8)
  /// CouchDB's default `purged_infos_limit`.
  public static let defaultPurgedInfosLimit = 1000

  func purgedInfosLimit(storage: ProjectionStorage, txn: ReadTransaction) throws -> Int {
    guard let bytes = try txn.get(Self.purgedInfosLimitKey, in: storage["meta"]),
      let n = UInt64(bigEndianArray: bytes)
    else { return Self.defaultPurgedInfosLimit }
    return Int(n)
  }

  /// Applies a purge (the leaves it names leave the tree, with every revision only they
  /// descend from; a document left without revisions is gone from `byId` and `bySeq`) or a
  /// redaction (the tree is unchanged: the revisions keep their ids, their events are erased).
  /// Returns what the projections after this one need; nil when nothing changed.
  @discardableResult
  func applyErasure(
    _ e: DocumentEvent, at position: UInt64, storage: ProjectionStorage, txn: WriteTransaction
  ) throws -> AppendFacts? {
    if e.kind == .purge {
      let seq = try counter(Self.purgeSeqKey, storage: storage, txn: txn)
      try txn.put(UInt64(seq + 1).bigEndianBytes, forKey: Self.purgeSeqKey, in: storage["meta"])
    }
    guard var record = try self.record(e.docID, storage: storage, txn: txn) else { return nil }
    guard e.kind == .purge else {
      return AppendFacts(tree: record.tree, winnerChanged: false)
    }
    let erasure = try ErasureRecord(decoding: e.body)
    let wasLive = record.isLive
    let oldWinner = record.tree.winner
    guard !record.tree.removeLeaves(Set(erasure.revs)).isEmpty else { return nil }
    try txn.delete(record.updateSeq.bigEndianBytes, in: storage["bySeq"])
    let key = DocumentKey.key(e.docID)
    var deletedChange = 0
    if record.tree.isEmpty {
      try txn.delete(key, in: storage["byId"])
      if !wasLive { deletedChange = -1 }
    } else {
      record.updateSeq = position
      try txn.put(record.encoded(), forKey: key, in: storage["byId"])
      try txn.putLast(key, forKey: position.bigEndianBytes, in: storage["bySeq"])
      if wasLive != record.isLive { deletedChange = record.isLive ? -1 : 1 }
    }
    if deletedChange != 0 {
      let deleted = try counter(Self.deletedCountKey, storage: storage, txn: txn)
      try txn.put(
        UInt64(max(0, deleted + deletedChange)).bigEndianBytes, forKey: Self.deletedCountKey,
        in: storage["meta"])
    }
    return AppendFacts(tree: record.tree, winnerChanged: record.tree.winner != oldWinner)
  }

  // MARK: Documents

  func record(_ id: String, storage: ProjectionStorage, txn: ReadTransaction) throws
    -> DocumentRecord?
  {
    // (A short id's String key is used as its UTF-8 bytes, ``DocumentKey/key(_:)``, without a
    // copy.)
    guard id.utf8.count > DocumentKey.inlineBytes else {
      guard let bytes = try txn.get(id, in: storage["byId"]) else { return nil }
      return try DocumentRecord(decoding: bytes)
    }
    guard let bytes = try txn.get(DocumentKey.key(id), in: storage["byId"]) else { return nil }
    let record = try DocumentRecord(decoding: bytes)
    guard record.docID.utf8.elementsEqual(id.utf8) else {
      throw StoreError(
        "conflict",
        "Document id \(id.prefix(40))... has the same key as the stored \(record.docID.prefix(40))...; "
          + "change a byte in its first \(DocumentKey.inlineBytes) bytes", code: .conflict)
    }
    return record
  }

  func revsLimit(storage: ProjectionStorage, txn: ReadTransaction) throws -> Int {
    guard let bytes = try txn.get(Self.revsLimitKey, in: storage["meta"]),
      let n = UInt64(bigEndianArray: bytes)
    else {
      return Self.defaultRevsLimit
    }
    return Int(n)
  }

  func counter(_ key: [UInt8], storage: ProjectionStorage, txn: ReadTransaction) throws -> Int {
    guard let bytes = try txn.get(key, in: storage["meta"]), let n = UInt64(bigEndianArray: bytes)
    else { return 0 }
    return Int(n)
  }

  /// Merges a document event into its tree as CouchDB would. Both the write path (before it
  /// appends, to learn whether anything changes) and replay use this one function.
  static func merge(
    _ e: DocumentEvent, into tree: inout RevisionTree, body position: UInt64, revsLimit: Int
  ) throws
    -> MergeOutcome
  {
    guard let path = e.path else {
      throw StoreError.badRequest("document event without a revision path")
    }
    switch e.kind {
    case .edit:
      let revisions = path.revisions
      return try tree.applyEdit(
        newRevision: revisions[0], parent: revisions.count > 1 ? revisions[1] : nil,
        deleted: e.deleted,
        body: position, revsLimit: revsLimit)
    default:
      return try tree.merge(path, deleted: e.deleted, body: position, revsLimit: revsLimit)
    }
  }

  /// Applies a document event at `position`; `merged` is the tree already merged by the write
  /// path (so the hot path merges once), `loaded` the record it read. `isFirst` says the event
  /// is the document's first (stream version 1), so there is no record to look up. Returns
  /// what the projections after this one need (the tree after the event, whether its winner
  /// changed; no body), nil when the event changed nothing.
  @discardableResult
  func applyDocument(
    _ e: DocumentEvent, at position: UInt64, storage: ProjectionStorage, txn: WriteTransaction,
    record loaded: DocumentRecord? = nil, merged: RevisionTree? = nil, isFirst: Bool = false
  ) throws -> AppendFacts? {
    var record =
      try loaded ?? (isFirst ? nil : self.record(e.docID, storage: storage, txn: txn))
      ?? DocumentRecord(docID: e.docID)
    let wasPresent = !record.tree.isEmpty
    let wasLive = record.isLive
    let oldWinner = wasPresent ? record.tree.winner : nil
    if let merged {
      record.tree = merged
    } else {
      let outcome = try Self.merge(
        e, into: &record.tree, body: position, revsLimit: try revsLimit(storage: storage, txn: txn))
      guard outcome.updated else { return nil }
    }
    if record.updateSeq != 0 {
      try txn.delete(record.updateSeq.bigEndianBytes, in: storage["bySeq"])
    }
    record.updateSeq = position
    let key = DocumentKey.key(e.docID)
    try txn.put(record.encoded(), forKey: key, in: storage["byId"])
    // Positions only grow, so the row goes at the end of `bySeq`.
    try txn.putLast(key, forKey: position.bigEndianBytes, in: storage["bySeq"])
    // Only the deleted count is kept: the live count is the number of documents (one `bySeq`
    // row each) minus it, so creating or updating a live document writes no counter.
    let wasDeleted = wasPresent && !wasLive
    let isDeleted = !record.isLive
    if wasDeleted != isDeleted {
      let deleted = try counter(Self.deletedCountKey, storage: storage, txn: txn)
      try txn.put(
        UInt64(deleted + (isDeleted ? 1 : -1)).bigEndianBytes, forKey: Self.deletedCountKey,
        in: storage["meta"])
    }
    return AppendFacts(tree: record.tree, winnerChanged: record.tree.winner != oldWinner)
  }

  /// The number of live documents (`doc_count`).
  func docCount(storage: ProjectionStorage, txn: ReadTransaction) throws -> Int {
    try txn.count(of: storage["bySeq"]) - counter(Self.deletedCountKey, storage: storage, txn: txn)
  }

  /// The number of documents whose winner is deleted (`doc_del_count`).
  func deletedCount(storage: ProjectionStorage, txn: ReadTransaction) throws -> Int {
    try counter(Self.deletedCountKey, storage: storage, txn: txn)
  }
}
