public import JSON
public import Log
public import RevTree

/// A view of the log kept in LMDB databases of its own: applied event by event, in the append
/// transaction (inline) or catching up from its checkpoint, and rebuildable from the log at any
/// time.
///
/// A projection names its databases; ``ProjectionStorage`` hands it the handles, which are the
/// live ones or, while ``ProjectionRunner/verify(_:maxDifferences:)`` runs, scratch copies. Its checkpoint (the
/// last position applied) is written in the same transaction as its rows, so a crash can never
/// leave the two apart.
///
/// ```swift
/// final class TitleIndex: Projection {
///   let name = "titles"
///   let databaseNames = ["byTitle"]
///   func apply(_ event: RecordedEvent, to storage: ProjectionStorage, in txn: WriteTransaction) throws {
///     guard event.type == "doc.edit" else { return }
///     try txn.put(event.position.bigEndianBytes, forKey: Array(event.stream.utf8), in: storage["byTitle"])
///   }
/// }
/// ```
public protocol Projection: AnyObject, Sendable {
  /// Unique among the projections of a store; names its databases and checkpoint.
  var name: String { get }
  /// The logical names of the databases the projection owns.
  var databaseNames: [String] { get }
  /// Applies one event. Must depend only on the event and the projection's own databases, so
  /// that replaying the log rebuilds exactly the same state.
  func apply(_ event: RecordedEvent, to storage: ProjectionStorage, in txn: WriteTransaction) throws
  /// The version of the layout of the projection's rows (1 unless it says otherwise). A store
  /// whose projection was built with an older layout rebuilds it when it opens (Mango's
  /// index keys moved to ICU's collation in layout 2).
  var layoutVersion: Int { get }
}

extension Projection {
  public var layoutVersion: Int { 1 }
}

/// A projection of document changes, on the store's fast path.
///
/// For every document edit and replicated revision, the store hands such a projection the
/// change as the documents projection made it (``DocumentChange``: the id, the revision the
/// event adds, the merged tree, whether the winner changed, the body parsed), in the append
/// transaction, in ``DocumentStore/rebuildAll()`` and in as-of views; every other event reaches
/// ``Projection/apply(_:to:in:)`` as usual. When the store replays such a projection alone
/// (``DocumentStore/rebuild(_:)``, ``DocumentStore/verify(_:maxDifferences:)``, or catching
/// up one that is behind), it replays the documents projection alongside into scratch
/// databases, so that each change comes with the tree of its moment.
///
/// What a projection needs of a revision that depends on the revision alone — parsing fields,
/// building a row, extracting links — it can work out in ``prepare(_:rev:body:)``, which the
/// store calls off the writer thread (on a `_bulk_docs` helper thread, the caller's thread of
/// a single write, or ``DocumentStore/rebuildAll()``'s decoder thread); the result comes back
/// as `share` in ``apply(_:share:to:in:)`` for the change that adds that revision.
///
/// ```swift
/// /// Document ids by their `type` field, for the winning revision of each live document.
/// final class TypeIndex: DocumentChangeProjection {
///   let name = "types"
///   let databaseNames = ["byType"]
///   func prepare(_ docID: String, rev: RevID, body: JSONValue?) -> String? {
///     body?["type"]?.stringValue
///   }
///   func apply(_ change: DocumentChange, share: String?, to storage: ProjectionStorage,
///              in txn: WriteTransaction) throws {
///     guard change.winnerChanged else { return }
///     // ... key type · 0x00 · id for the winner's type, removing the old one ...
///   }
///   func apply(_ event: RecordedEvent, to storage: ProjectionStorage, in txn: WriteTransaction) {}
/// }
/// ```
public protocol DocumentChangeProjection: Projection {
  /// What ``prepare(_:rev:body:)`` works out ahead of the writer.
  associatedtype Share: Sendable = Void

  /// Works out, off the writer thread, this projection's share of revision `rev` of document
  /// `docID`, whose body is `body` (nil for a deletion or a body that does not parse). Must be
  /// a pure function of its arguments. Nil when there is nothing to work out ahead.
  func prepare(_ docID: String, rev: RevID, body: JSONValue?) -> Share?

  /// Applies one document change, in the transaction that appends its event (or replays it).
  /// `share` is what ``prepare(_:rev:body:)`` gave for the revision the event adds, when it
  /// was worked out ahead; nil otherwise. Must depend only on the change, the log and the
  /// projection's own databases, so that replay rebuilds the same state.
  func apply(
    _ change: DocumentChange, share: Share?, to storage: ProjectionStorage,
    in txn: WriteTransaction) throws

  /// How the store calls ``prepare(_:rev:body:)`` and ``apply(_:share:to:in:)`` with the share's
  /// type erased. Do not implement it: the default implementation, compiled for each
  /// conforming type, is what keeps the store's fast path free of run-time generic lookups.
  func _erasedEntries() -> ErasedChangeEntries
}

/// A change projection's ``DocumentChangeProjection/prepare(_:rev:body:)`` and
/// ``DocumentChangeProjection/apply(_:share:to:in:)`` with the share boxed, as the store runs
/// them (`DocumentChangeProjection._erasedEntries()`).
public struct ErasedChangeEntries: Sendable {
  @usableFromInline let prepare: PrepareShare
  @usableFromInline let apply:
    @Sendable (DocumentChange, BoxedShare?, ProjectionStorage, WriteTransaction) throws -> Void

  @inlinable init(
    prepare: @escaping PrepareShare,
    apply:
      @escaping @Sendable (DocumentChange, BoxedShare?, ProjectionStorage, WriteTransaction)
      throws -> Void
  ) {
    self.prepare = prepare
    self.apply = apply
  }
}

extension DocumentChangeProjection {
  @inlinable public func _erasedEntries() -> ErasedChangeEntries {
    ErasedChangeEntries(
      prepare: { [self] id, rev, body in prepare(id, rev: rev, body: body).map { ShareBox($0) } },
      apply: { [self] change, share, storage, txn in
        // The share came from this projection's own `prepare` (its slot), so it is its type.
        try apply(
          change, share: (share as? ShareBox<Share>)?.value, to: storage, in: txn)
      })
  }
}

extension DocumentChangeProjection where Share == Void {
  public func prepare(_ docID: String, rev: RevID, body: JSONValue?) -> Void? { nil }
}

/// One document edit or replicated revision, as the documents projection made it: what a
/// ``DocumentChangeProjection`` is given. A purge or redaction (``DocumentStore/erase(_:_:actor:origin:reason:dryRun:)``)
/// is a change too, one that adds no revision: ``rev`` is nil, the body is `{}`, and ``tree``
/// is the tree after it (empty for a document purged whole), with ``winnerChanged`` saying
/// whether the winner went.
///
/// A class, made once per change: every change projection of the store is handed the same
/// instance, so passing it on costs a reference, not a copy of its tree, event and body.
public final class DocumentChange: Sendable {
  /// The event that made the change (position, time, actor).
  public let event: RecordedEvent
  /// The document.
  public let docID: String
  /// The revision the event adds; nil for a purge or redaction, which adds none.
  public let rev: RevID?
  /// Whether that revision is a deletion.
  public let deleted: Bool
  /// Whether the revision was replicated (`new_edits=false`) rather than a local edit.
  public let replicated: Bool
  /// The document's revision tree after the event (each revision's body is the log position
  /// of the event that carries it).
  public let tree: RevisionTree
  /// Whether the winning revision (its id, status or body) differs from the one before the
  /// event. A revision that loses a conflict leaves it as it was.
  public let winnerChanged: Bool
  /// The body of the revision the event adds, as stored in the event.
  public let bodyBytes: [UInt8]
  /// That body parsed, when the write path or the replay parsed it already.
  public let parsedBody: JSONValue?

  init(
    event: RecordedEvent, docID: String, rev: RevID?, deleted: Bool, replicated: Bool,
    tree: RevisionTree, winnerChanged: Bool, bodyBytes: [UInt8], parsedBody: JSONValue?
  ) {
    self.event = event
    self.docID = docID
    self.rev = rev
    self.deleted = deleted
    self.replicated = replicated
    self.tree = tree
    self.winnerChanged = winnerChanged
    self.bodyBytes = bodyBytes
    self.parsedBody = parsedBody
  }

  /// The body of the revision the event adds, parsed (nil when it does not parse).
  public var body: JSONValue? { parsedBody ?? (try? JSONValue(parsing: bodyBytes)) }

  /// The body of the winning revision, parsed: the event's own when it wins, else read from
  /// the log. Nil when the winner is deleted, missing or its body does not parse.
  public func winnerBody(in txn: ReadTransaction) throws -> JSONValue? {
    guard let w = tree.winner, !w.isDeleted, let at = w.body else { return nil }
    if at == event.position.rawValue { return body }
    return try? JSONValue(parsing: try Self.body(at: at, in: txn))
  }

  /// The body of the document revision whose event is at log `position`.
  public static func body(at position: UInt64, in txn: ReadTransaction) throws -> [UInt8] {
    guard let event = try txn.event(at: LogPosition(position)) else {
      throw StoreError.internalError("the body at \(position) is missing from the log")
    }
    return try DocumentEvent(decoding: event).body
  }
}

/// What the documents projection made of a document edit (``DocumentProjection/applyDocument``),
/// from which the runner makes the ``DocumentChange`` of the projections after it.
struct AppendFacts {
  /// The document's revision tree after the event, as the documents projection merged it
  /// (bodies pointing to log positions).
  var tree: RevisionTree
  /// Whether the winning revision (its id, status or body) differs from the one before the
  /// event.
  var winnerChanged: Bool
}

/// A change projection's share, boxed so that shares of any type travel together; opened again
/// by the projection it came from (``InlineProjection``).
@usableFromInline final class ShareBox<Value: Sendable>: Sendable {
  @usableFromInline let value: Value
  @inlinable init(_ value: Value) { self.value = value }
}

/// A share as the store carries it (a ``ShareBox``).
@usableFromInline typealias BoxedShare = any AnyObject & Sendable

/// Works out one change projection's share of a revision (its id, the revision, the body).
@usableFromInline typealias PrepareShare = @Sendable (String, RevID, JSONValue?) -> BoxedShare?

/// The shares of one revision that the store's change projections worked out ahead, by the
/// projection's place among the store's inline projections. One share (a wiki store's case)
/// needs no array.
enum Shares: Sendable {
  case none
  case one(slot: Int, share: BoxedShare)
  case many([BoxedShare?])

  /// The shares that `preparers` (one per inline projection, nil for those without one) work
  /// out for revision `rev` of document `id` with `body`.
  static func prepare(
    _ preparers: [PrepareShare?], _ id: String, _ rev: RevID, _ body: JSONValue?
  ) -> Shares {
    var only: (slot: Int, share: BoxedShare)? = nil
    var all: [BoxedShare?]? = nil
    for (slot, prepare) in preparers.enumerated() {
      guard let prepare, let share = prepare(id, rev, body) else { continue }
      if all != nil {
        all![slot] = share
      } else if let first = only {
        all = Array(repeating: nil, count: preparers.count)
        all![first.slot] = first.share
        all![slot] = share
      } else {
        only = (slot, share)
      }
    }
    if let all { return .many(all) }
    if let only { return .one(slot: only.slot, share: only.share) }
    return .none
  }

  subscript(slot: Int) -> BoxedShare? {
    switch self {
    case .none: nil
    case .one(let s, let share): s == slot ? share : nil
    case .many(let shares): slot < shares.count ? shares[slot] : nil
    }
  }
}

/// An inline projection as the store runs it: its databases and, for a
/// ``DocumentChangeProjection``, its two fast-path entries with the share's type erased (done
/// once, when the store opens).
struct InlineProjection: Sendable {
  let projection: any Projection
  let storage: ProjectionStorage
  /// Its place among the store's inline projections (``Shares``' index); nil for a projection
  /// replayed on its own.
  let slot: Int?
  let prepare: PrepareShare?
  let applyChange:
    (
      @Sendable (DocumentChange, BoxedShare?, ProjectionStorage, WriteTransaction)
        throws -> Void
    )?

  init(_ projection: any Projection, storage: ProjectionStorage, slot: Int?) {
    self.projection = projection
    self.storage = storage
    self.slot = slot
    if let p = projection as? any DocumentChangeProjection {
      let entries = p._erasedEntries()
      (prepare, applyChange) = (entries.prepare, entries.apply)
    } else {
      (prepare, applyChange) = (nil, nil)
    }
  }

  /// Applies one event. A document edit (`isEdit`) reaches a change projection as `change`
  /// with its share (nothing when `change` is nil: the documents projection found nothing
  /// changed); everything else goes through ``Projection/apply(_:to:in:)``.
  func apply(
    _ event: RecordedEvent, isEdit: Bool, change: DocumentChange?, shares: Shares,
    txn: WriteTransaction
  ) throws {
    if let applyChange, isEdit {
      guard let change else { return }
      try applyChange(change, slot.flatMap { shares[$0] }, storage, txn)
    } else {
      try projection.apply(event, to: storage, in: txn)
    }
  }
}

/// The databases of one projection, by logical name.
public struct ProjectionStorage: Sendable {
  /// (logical name, handle) in `databaseNames` order. A projection has a handful of databases
  /// with short names, so a linear search comparing small (inline) strings beats hashing them:
  /// the hot path looks a handle up for every read and write.
  let entries: [(name: String, database: Database)]

  public subscript(name: String) -> Database {
    // The lengths first: for small strings they are in the string's own bits, and most names
    // differ in length, so few comparisons reach the out-of-line `==`.
    let count = name.utf8.count
    for entry in entries where entry.name.utf8.count == count && entry.name == name {
      return entry.database
    }
    preconditionFailure("projection database '\(name)' was not declared")
  }

  /// The handles, ordered by their LMDB names.
  public var all: [Database] { entries.map(\.database).sorted { $0.name < $1.name } }

  /// Opens (creating) `projection`'s databases, with `suffix` for scratch copies.
  static func open(for projection: any Projection, in log: EventLog, suffix: String = "") throws
    -> ProjectionStorage
  {
    try open(projection.name, projection.databaseNames, in: log, suffix: suffix)
  }

  /// The databases `<name>.<database><suffix>` of `log`, each once.
  static func open(_ name: String, _ databases: [String], in log: EventLog, suffix: String)
    throws -> ProjectionStorage
  {
    var entries: [(name: String, database: Database)] = []
    for database in databases where !entries.contains(where: { $0.name == database }) {
      entries.append((database, try log.database(named: "\(name).\(database)\(suffix)")))
    }
    return ProjectionStorage(entries: entries)
  }
}

/// A projection whose earlier, never released layouts kept databases this one does not have.
/// A ``DocumentStore`` that finds one of them refuses to open, with a one-line error naming
/// `wikilog export` and `wikilog import` (which carry a database across layouts): no layout
/// is migrated in place.
public protocol RetiredLayouts: Projection {
  /// LMDB names of databases only an earlier layout had.
  var retiredDatabaseNames: [String] { get }
}

/// A projection whose own events (not document events) an audit lists: the drafts, say.
public protocol AuditedProjection: Projection {
  /// The document and revision an event of this projection concerns, for
  /// ``DocumentStore/audit(_:)``; nil for an event that is not the projection's.
  func auditSubject(of event: RecordedEvent) throws -> (docID: String, rev: String)?
}
