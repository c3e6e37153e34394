public import Log
import RevTree

/// A view of the log kept in LMDB databases of its own: applied event by event, in the append
/// transaction (inline) or catching up from its checkpoint, and rebuildable from the log at any
/// time.
///
/// A projection names its databases; ``ProjectionStorage`` hands it the handles, which are the
/// live ones or, while ``ProjectionRunner/verify(_:)`` runs, scratch copies. Its checkpoint (the
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
}

/// A projection of document events that can take an event its caller already decoded, so that
/// several projections applied to one event decode it once.
protocol DocumentEventProjection: Projection {
  /// Applies `event`, whose document payload is `decoded` (nil when it is not a document
  /// event); `facts` is what the documents projection made of it (see ``needsDocumentTrees``).
  func apply(
    _ decoded: DocumentEvent?, facts: AppendFacts?, of event: RecordedEvent,
    to storage: ProjectionStorage, in txn: WriteTransaction) throws

  /// Whether the projection works from the documents projection's result: every document
  /// edit then reaches it with ``AppendFacts`` (the document's tree after the event). The store
  /// applies such a projection right after the documents projection — in the append
  /// transaction, in ``DocumentStore/rebuildAll()`` — and, when it replays it alone (rebuild,
  /// verify, catching up), replays the documents projection alongside into scratch databases.
  var needsDocumentTrees: Bool { get }
}

extension DocumentEventProjection {
  var needsDocumentTrees: Bool { false }
}

extension Projection {
  /// Applies `event`, handing the decoded document payload to projections that take it.
  /// `decoded` is filled on first use (`.some(nil)` for events that are not document events).
  func apply(
    _ event: RecordedEvent, decoded: inout DocumentEvent??, facts: AppendFacts? = nil,
    to storage: ProjectionStorage, in txn: WriteTransaction
  ) throws {
    guard let p = self as? any DocumentEventProjection else {
      return try apply(event, to: storage, in: txn)
    }
    if decoded == nil {
      decoded = .some(
        DocumentEvent.Kind(eventType: event.type) != nil ? try DocumentEvent(decoding: event) : nil)
    }
    try p.apply(decoded!, facts: facts, of: event, to: storage, in: txn)
  }
}

/// What the documents projection made of a document edit, handed to the projections after it
/// so that they need not work it out again from the event's bytes.
struct AppendFacts {
  /// The event's body, parsed (the value its bytes parse to); nil when not parsed yet.
  var body: JSONValue?
  /// The document's revision tree after the event, as the documents projection merged it
  /// (bodies pointing to log positions).
  var tree: RevisionTree
  /// Whether the winning revision (its id, status or body) differs from the one before the
  /// event. A revision that loses a conflict leaves it as it was.
  var winnerChanged: Bool
  /// What the event's revision makes of the wiki projection's row if it wins, worked out
  /// ahead of the writer (``WikiProjection/Prepared``); nil when not.
  var wiki: WikiProjection.Prepared? = nil
}

/// The databases of one projection, by logical name.
public struct ProjectionStorage: Sendable {
  /// (logical name, handle) in `databaseNames` order. A projection has a handful of databases
  /// with short names, so a linear search comparing small (inline) strings beats hashing them:
  /// the hot path looks a handle up for every read and write.
  let entries: [(name: String, database: Database)]

  public subscript(name: String) -> Database {
    for entry in entries where entry.name == name { return entry.database }
    preconditionFailure("projection database '\(name)' was not declared")
  }

  /// The handles, ordered by their LMDB names.
  public var all: [Database] { entries.map(\.database).sorted { $0.name < $1.name } }

  /// Opens (creating) `projection`'s databases, with `suffix` for scratch copies.
  static func open(for projection: any Projection, in log: EventLog, suffix: String = "") throws
    -> ProjectionStorage
  {
    var entries: [(name: String, database: Database)] = []
    for name in projection.databaseNames where !entries.contains(where: { $0.name == name }) {
      entries.append((name, try log.database(named: "\(projection.name).\(name)\(suffix)")))
    }
    return ProjectionStorage(entries: entries)
  }
}
