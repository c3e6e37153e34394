import Formats
import JSON
public import Log
import RevTree

/// Replicated revisions that arrived before their access group allowed their writer, kept
/// apart until it does: a wiki's pages replicated ahead of the wiki document (a changes feed
/// gives a wiki's pages before the wiki when the wiki was edited after them).
///
/// Worked example. alice pushes `w1:A`, `w1:B` and then `w1` (owner alice) to a server where
/// `w1` does not exist yet:
///
/// ```
/// #10 doc.held      w1:A 1-a   actor alice   (the rules refused it: w1 does not let alice in)
/// #11 doc.held      w1:B 1-b   actor alice
/// #12 doc.replicated w1  3-w   actor alice   (the wiki; the rules let it in)
/// #13 doc.replicated w1:A 1-a  actor alice   (admitted in #12's transaction, checked against
/// #14 doc.replicated w1:B 1-b  actor alice    its snapshot, written as alice)
/// #15 doc.admitted  [#10, #11] actor alice
/// ```
///
/// A held revision is no document: nobody reads it, it is in no feed or count, `_revs_diff`
/// says it is missing. The rules (``DocumentAccess/heldGroup(of:)``) say which refused
/// revisions may be held and in which group; a write of the document that governs a group
/// (``DocumentAccess/releasedGroup(by:)``) by the same writer admits that writer's held
/// revisions of the group that the rules let in as of that write's transaction. Nobody else's
/// write admits them: another user's wiki that happens to let the writer in does not collect
/// what the writer pushed (the writer's own later push or write does, as it would write it).
/// Revisions with attachments are not held (their data would need keeping outside the log).
///
/// ## Databases
///
/// | database | key | value |
/// | --- | --- | --- |
/// | `held.byGroup` | string group · string writer · position (8 bytes) | string doc id · string rev |
/// | `held.byRev` | string doc id · string rev · string writer | position (8 bytes) |
///
/// Both are rebuilt by replaying `doc.held` and `doc.admitted` events.
public final class HeldRevisionsProjection: Projection {
  public static let projectionName = "held"
  public static let heldType = "doc.held"
  public static let admittedType = "doc.admitted"

  public let name = HeldRevisionsProjection.projectionName
  public let databaseNames = ["byGroup", "byRev"]

  public init() {}

  public func apply(_ event: RecordedEvent, to storage: ProjectionStorage, in txn: WriteTransaction)
    throws
  {
    switch event.type {
    case Self.heldType:
      let held = try HeldRevision(decoding: event)
      try txn.put(
        Self.revValue(held.event.docID, held.event.rev),
        forKey: Self.groupKey(held.group, event.actor) + event.position.rawValue.bigEndianBytes,
        in: storage["byGroup"])
      try txn.put(
        event.position.rawValue.bigEndianBytes,
        forKey: Self.revKey(held.event.docID, held.event.rev, event.actor), in: storage["byRev"])
    case Self.admittedType:
      for entry in try Self.decodeAdmitted(event.payload) {
        try txn.delete(
          Self.groupKey(entry.group, event.actor) + entry.position.bigEndianBytes,
          in: storage["byGroup"])
        try txn.delete(
          Self.revKey(entry.docID, entry.rev, event.actor), in: storage["byRev"])
      }
    default:
      return
    }
  }

  static func groupKey(_ group: String, _ writer: String) -> [UInt8] {
    var w = ByteWriter()
    w.string(group)
    w.string(writer)
    return w.bytes
  }

  static func revKey(_ docID: String, _ rev: String, _ writer: String) -> [UInt8] {
    var w = ByteWriter()
    w.string(docID)
    w.string(rev)
    w.string(writer)
    return w.bytes
  }

  static func revValue(_ docID: String, _ rev: String) -> [UInt8] {
    var w = ByteWriter()
    w.string(docID)
    w.string(rev)
    return w.bytes
  }

  struct Admitted {
    var position: UInt64
    var group: String
    var docID: String
    var rev: String
  }

  static func encodeAdmitted(_ entries: [Admitted]) -> [UInt8] {
    var w = ByteWriter()
    w.byte(1)
    w.varint(entries.count)
    for e in entries {
      w.varint(e.position)
      w.string(e.group)
      w.string(e.docID)
      w.string(e.rev)
    }
    return w.bytes
  }

  static func decodeAdmitted(_ bytes: [UInt8]) throws -> [Admitted] {
    var r = ByteReader(bytes)
    do {
      guard try r.byte() == 1 else { throw ByteReader.Truncated() }
      let count = try r.int()
      guard count <= bytes.count else { throw ByteReader.Truncated() }
      var out: [Admitted] = []
      for _ in 0..<count {
        out.append(
          Admitted(
            position: try r.varint(), group: try r.string(), docID: try r.string(),
            rev: try r.string()))
      }
      return out
    } catch {
      throw StoreError.internalError("a malformed doc.admitted event")
    }
  }
}

/// A `doc.held` event's payload: `u8 format (1) · string group · varint count · string role ×
/// count · the replicated revision's ``DocumentEvent`` payload (the rest)`; the event's actor
/// is the writer.
struct HeldRevision {
  var group: String
  var roles: [String]
  var event: DocumentEvent

  init(group: String, roles: [String], event: DocumentEvent) {
    self.group = group
    self.roles = roles
    self.event = event
  }

  func encoded(payload: [UInt8]) -> [UInt8] {
    var w = ByteWriter(capacity: 32 + payload.count)
    w.byte(1)
    w.string(group)
    w.varint(roles.count)
    for role in roles { w.string(role) }
    w.raw(payload)
    return w.bytes
  }

  init(decoding event: RecordedEvent) throws {
    var r = ByteReader(event.payload)
    do {
      guard try r.byte() == 1 else { throw ByteReader.Truncated() }
      group = try r.string()
      let count = try r.int()
      guard count <= event.payload.count else { throw ByteReader.Truncated() }
      roles = []
      for _ in 0..<count { roles.append(try r.string()) }
      self.event = try DocumentEvent(decoding: Array(r.rest()), position: event.position)
    } catch let error as StoreError {
      throw error
    } catch {
      throw StoreError.internalError("event \(event.position) is a malformed doc.held event")
    }
  }
}

extension DocumentStore {
  /// Whether a replicated revision refused by the rules may be held: the rules name its group
  /// and the store keeps held revisions (``HeldRevisionsProjection``).
  public func holdsRevisions(of docID: String) -> Bool {
    heldStorage != nil && accessRules?.heldGroup(of: docID) != nil
  }

  /// The refusal of a held revision: the rules' reason, and what becomes of it.
  static func heldRefusal(_ refusal: StoreError) -> StoreError {
    StoreError.forbidden(
      refusal.reason
        + " The revision is held: it is written once you write the wiki and it lets you in.")
  }

  /// Holds replicated revision `p` (its event `e`) that the rules refused with `refusal`:
  /// appends a `doc.held` event unless the writer holds that revision already. Nil when it may
  /// not be held (the caller then throws the refusal); else the refusal to answer.
  func hold(
    _ p: PreparedWrite, _ e: DocumentEvent, refusal: StoreError, user: UserContext,
    actor: String, txn: WriteTransaction
  ) throws -> StoreError? {
    guard let held = heldStorage, let group = accessRules?.heldGroup(of: p.id),
      case .success = p.schema, p.pending == nil, e.attachments == nil
    else { return nil }
    let answer = Self.heldRefusal(refusal)
    if try txn.get(
      HeldRevisionsProjection.revKey(p.id, e.rev, actor), in: held["byRev"]) != nil
    {
      return answer
    }
    let revision = HeldRevision(group: group, roles: user.roles, event: e)
    try appendEvent(
      NewEvent(
        type: HeldRevisionsProjection.heldType, stream: "_held/" + p.id, actor: actor,
        payload: revision.encoded(payload: p.payload ?? e.encoded())), txn: txn)
    return answer
  }

  /// Whether `writer` still holds revision `rev` of `docID` (not admitted), as of `txn`.
  func isHeld(_ docID: String, rev: String, writer: String, txn: ReadTransaction) throws -> Bool {
    guard let held = heldStorage else { return false }
    return try txn.get(
      HeldRevisionsProjection.revKey(docID, rev, writer), in: held["byRev"]) != nil
  }

  /// Admits `writer`'s held revisions of `group` that the rules let in as of `txn` (called
  /// after `writer` wrote the document that governs the group): each is merged and written as
  /// a replicated revision by `writer`, then one `doc.admitted` event lists them. Those still
  /// refused stay held.
  func admitHeld(group: String, writer: String, txn: WriteTransaction) throws {
    // Nothing held in the store (the usual case): no lookup on the write path.
    guard let held = heldStorage, try txn.count(of: held["byRev"]) > 0 else { return }
    let prefix = HeldRevisionsProjection.groupKey(group, writer)
    var positions: [UInt64] = []
    try txn.scan(held["byGroup"], from: prefix) { key, _ in
      guard key.starts(with: prefix), key.count == prefix.count + 8,
        let position = UInt64(bigEndianArray: Array(key[prefix.count...]))
      else { return false }
      positions.append(position)
      return true
    }
    guard !positions.isEmpty else { return }
    var admitted: [HeldRevisionsProjection.Admitted] = []
    for position in positions {
      // Everything that can refuse a held revision comes before its append: a revision that
      // cannot be admitted stays held, and the write that governs the group is not failed by
      // it after its own event was appended (only the storage's errors fail it).
      let e: DocumentEvent
      let body: JSONObject?
      let record: DocumentRecord
      var tree: RevisionTree
      let outcome: MergeOutcome
      do {
        guard let recorded = try txn.event(at: LogPosition(position)) else { continue }
        let revision = try HeldRevision(decoding: recorded)
        e = revision.event
        body = e.deleted ? nil : (try? JSONValue(parsing: e.body))?.objectValue
        try checkAccess(
          AccessWrite(docID: e.docID, body: body, replicated: true),
          user: UserContext(name: writer, roles: revision.roles), txn: txn, context: nil)
        record =
          try documents.record(e.docID, storage: documentStorage, txn: txn)
          ?? DocumentRecord(docID: e.docID)
        tree = record.tree
        outcome = try DocumentProjection.merge(
          e, into: &tree, body: txn.nextPosition.rawValue,
          revsLimit: try revsLimit(txn: txn, context: nil))
      } catch let error as LogError {
        throw error
      } catch {
        continue  // still refused (or not admissible): it stays held
      }
      if outcome.updated {
        try append(
          e, actor: writer, txn: txn, record: record, merged: tree,
          parsedBody: body.map { .object($0) })
      }
      admitted.append(.init(position: position, group: group, docID: e.docID, rev: e.rev))
    }
    guard !admitted.isEmpty else { return }
    try appendEvent(
      NewEvent(
        type: HeldRevisionsProjection.admittedType, stream: "_held", actor: writer,
        payload: HeldRevisionsProjection.encodeAdmitted(admitted)), txn: txn)
  }
}
