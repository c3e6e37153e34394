public import Foundation
import JSON
import Log
import Projections

/// Where a typed change stream starts.
public enum ChangePosition: Sendable, Hashable {
  /// From the first event of the log: every change ever made, then live ones.
  case beginning
  /// From now: only changes committed after the stream starts.
  case now
  /// After the change whose ``TypedChange/sequence`` is given (a position kept to resume).
  case after(UInt64)
}

/// One change of a document of type `D`: what happened, the revision it made, the document at
/// that revision, and who made it when (the event's actor and time).
public struct TypedChange<D: StoredDocument>: Sendable {
  public enum Kind: Sendable, Hashable {
    /// The document's first revision.
    case created
    /// A later revision.
    case updated
    /// A deletion.
    case deleted
  }
  public let kind: Kind
  public let id: String
  /// The revision the change made.
  public let revision: String
  /// The document at ``revision``; nil for a deletion.
  public let document: D?
  /// Who made it (the actor of its event: a user, `replicator`, an app's name).
  public let actor: String
  /// When it was committed.
  public let time: Date
  /// Its position in the log: start a stream `.after(sequence)` to resume after it.
  public let sequence: UInt64
}

extension DocumentDatabase {
  /// The position of the last change committed (of any type): `changes(of:from: .after(lastSequence))`
  /// starts exactly here, whenever the stream is iterated.
  public var lastSequence: UInt64 {
    ((try? store.read { try $0.lastPosition }) ?? .start).rawValue
  }

  /// The changes of documents of type `D`, from `position` and then live as they commit, by
  /// this process or any other that writes the same database. Every revision is a change (two
  /// quick edits are two changes, a replicated conflicting revision one more). Ends when its
  /// task is cancelled or the database closes.
  ///
  /// ```swift
  /// for try await change in db.changes(of: Note.self) {
  ///   switch change.kind {
  ///   case .created, .updated: show(change.document!)
  ///   case .deleted: remove(change.id)
  ///   }
  /// }
  /// ```
  public func changes<D: StoredDocument>(of type: D.Type, from position: ChangePosition = .now)
    -> TypedChanges<D>
  {
    TypedChanges(database: self, position: position)
  }
}

/// See ``DocumentDatabase/changes(of:from:)``.
public struct TypedChanges<D: StoredDocument>: AsyncSequence, Sendable {
  public typealias Element = TypedChange<D>
  let database: DocumentDatabase
  let position: ChangePosition

  public func makeAsyncIterator() -> Iterator {
    let start: LogPosition
    switch position {
    case .beginning: start = .start
    case .after(let seq): start = LogPosition(seq)
    case .now: start = LogPosition(database.lastSequence)
    }
    return Iterator(
      database: database, events: database.store.log.subscribe(after: start).makeAsyncIterator())
  }

  public struct Iterator: AsyncIteratorProtocol {
    let database: DocumentDatabase
    var events: LogSubscription.Iterator

    public mutating func next() async throws -> TypedChange<D>? {
      var options = ChangesOptions()
      options.history = true
      options.includeDocs = true
      while let item = try await events.next() {
        guard case .event(let event) = item,
          let row = try database.store.changeRow(for: event, options: options, eventInfo: true),
          let doc = row.doc?.objectValue, let rev = row.changes.first
        else { continue }
        let type = doc[D.typeField]?.stringValue
        if row.deleted {
          guard (type ?? typeBefore(row.id, rev: rev)) == D.documentType else { continue }
        } else if type != D.documentType {
          continue
        }
        let kind: TypedChange<D>.Kind =
          row.deleted ? .deleted : rev.hasPrefix("1-") ? .created : .updated
        return TypedChange(
          kind: kind, id: row.id, revision: rev,
          document: row.deleted ? nil : try database.value(D.self, doc),
          actor: row.actor ?? "",
          time: Date(timeIntervalSince1970: Double(row.timestampMicroseconds ?? 0) / 1_000_000),
          sequence: event.position.rawValue)
      }
      return nil
    }

    /// The type of the revision a deletion without a type field (another client's) replaced.
    func typeBefore(_ id: String, rev: String) -> String? {
      let store = database.store
      guard let revisions = try? store.get(id, options: GetOptions(rev: rev, revs: true)),
        let start = revisions["_revisions"]?["start"]?.numberValue?.int64Value,
        let parent = revisions["_revisions"]?["ids"]?[1]?.stringValue,
        let body = try? store.get(id, options: GetOptions(rev: "\(start - 1)-\(parent)"))
      else { return nil }
      return body[D.typeField]?.stringValue
    }
  }
}
