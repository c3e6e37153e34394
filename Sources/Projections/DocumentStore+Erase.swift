public import JSON
public import Log
import RevTree

#if canImport(FoundationEssentials)
  import FoundationEssentials
#else
  import Foundation
#endif

/// What a purge or redaction event says (its body): the revisions, and the reason its caller
/// gave.
struct ErasureRecord {
  var revs: [RevID]
  var reason: String

  init(revs: [RevID], reason: String) {
    self.revs = revs
    self.reason = reason
  }

  init(decoding body: [UInt8]) throws {
    let json = try JSONValue(parsing: body)
    revs = try (json["revs"]?.arrayValue ?? []).compactMap { $0.stringValue }.map { try RevID($0) }
    reason = json["reason"]?.stringValue ?? ""
  }

  var encoded: [UInt8] {
    JSONValue.object(
      JSONObject([
        "revs": .array(revs.map { .string($0.description) }), "reason": .string(reason),
      ])
    ).serialized()
  }
}

/// What a purge or redaction erased, or with `dryRun` would erase.
public struct Erasure: Sendable {
  /// The revisions erased, by document id (CouchDB's `purged`), in the request's order.
  public var revisions: [(id: String, revs: [String])]
  /// The events whose payloads were (or would be) erased.
  public var events: [LogPosition]
  /// The attachment blobs no revision names any more, removed (or to be removed).
  public var blobs: Int

  /// `{"docid": ["rev", ...], ...}`.
  public var json: JSONValue {
    .object(
      JSONObject(revisions.map { .init(key: $0.id, value: .array($0.revs.map { .string($0) })) }))
  }
}

/// Forgetting on purpose: CouchDB's `_purge`, and wikilog's `_redact`.
///
/// Both are one write transaction through the writer queue: an event that says who erased
/// which revisions, when, from where and why (a `doc.purge` or `doc.redact` event in the
/// document's stream), and the erasure (``WriteTransaction/erase(_:payload:by:)``) of every
/// event of the document that carried one of those revisions' bodies: each keeps its revision
/// id and history but loses its body and attachments. The Merkle tree keeps the erased events'
/// leaf hashes, so every proof and signed head taken before still verifies. The projections
/// follow in the same transaction (a purged document leaves the Mango indexes, the wiki's and
/// the access rules' rows).
///
/// Bytes an erasure removed from the log can stay in LMDB's free pages and in the indexes kept
/// behind the log until a compaction: ``DataDirectory/erase(_:in:actor:origin:reason:dryRun:)``
/// does both and also removes the attachment blobs no revision names any more. That is what the
/// server and the command line call.
extension DocumentStore {
  /// What to erase: `.purge` removes leaf revisions from their trees (CouchDB's `_purge`);
  /// `.redact` keeps any revision in its tree and erases its body.
  public enum ErasureKind: Sendable, Hashable {
    case purge, redact
  }

  /// Erases the revisions `request` names (unknown documents and revisions are passed over,
  /// as CouchDB's `_purge` does), or with `dryRun` only says what would be erased.
  ///
  /// - Throws: `bad_request` for a malformed revision; for a redaction, `conflict` when a
  ///   revision named is a document's current one (write a new revision first, or purge it).
  ///   Nothing is written then.
  public func erase(
    _ kind: ErasureKind, _ request: [(id: String, revs: [String])], actor: String,
    origin: String = "", reason: String = "", dryRun: Bool = false
  ) async throws -> Erasure {
    var parsed: [(id: String, revs: [RevID])] = []
    for (id, revs) in request {
      var list: [RevID] = []
      for text in revs {
        do { list.append(try RevID(text)) } catch {
          throw StoreError.badRequest("Invalid rev format: \(text)")
        }
      }
      parsed.append((id, list))
    }
    if dryRun { return try read { txn in try erasurePlan(kind, parsed, txn: txn).erasure } }
    let request = parsed
    // Who asks, checked in the write transaction against the security object it sees.
    let user = WriteAccess.user
    return try await writeDocumentsQueued { txn in
      if let user, !user.isAdmin, !(try self.securityObject(txn: txn)).isAdmin(user) {
        throw StoreError.forbidden("You are not a db or server admin.")
      }
      // Planned in the write transaction: what it erases is what the log holds now.
      let plan = try self.erasurePlan(kind, request, txn: txn)
      for item in plan.items {
        let e = DocumentEvent(
          kind: kind == .purge ? .purge : .redact, docID: item.id, rev: "", origin: origin,
          body: ErasureRecord(revs: item.revs, reason: reason).encoded)
        let event = try self.append(e, actor: actor, txn: txn)
        for position in item.events {
          try txn.erase(
            LogPosition(position), payload: try Self.stripped(at: position, txn: txn),
            by: event.position)
        }
      }
      return plan.erasure
    }
  }

  /// One document's part of an erasure: the revisions, and the events that carry their bodies.
  struct ErasureItem {
    var id: String
    var revs: [RevID]
    var events: [UInt64]
  }

  /// What erasing `request` means for the log as `txn` sees it.
  func erasurePlan(
    _ kind: ErasureKind, _ request: [(id: String, revs: [RevID])], txn: ReadTransaction
  )
    throws -> (items: [ErasureItem], erasure: Erasure)
  {
    var items: [ErasureItem] = []
    var erasure = Erasure(revisions: [], events: [], blobs: 0)
    var merged: [String: Int] = [:]
    for (id, revs) in request {
      guard let record = try documents.record(id, storage: documentStorage, txn: txn) else {
        // A purge records what was asked even when there is nothing to purge, as CouchDB's
        // purge infos do (not for what cannot be a document: a `_local` id has no tree).
        if kind == .purge && !id.isEmpty && !id.hasPrefix("_local/") {
          Self.add(id, revs, [], [], to: &items, &erasure, &merged)
        }
        continue
      }
      var gone: Set<RevID>
      var named: [RevID]
      var whole = false
      switch kind {
      case .purge:
        var tree = record.tree
        named = tree.removeLeaves(Set(revs))
        guard !named.isEmpty else {
          Self.add(id, revs, [], [], to: &items, &erasure, &merged)
          continue
        }
        let kept = Set(tree.allRevisions.map(\.rev))
        gone = Set(record.tree.allRevisions.map(\.rev)).subtracting(kept)
        whole = tree.isEmpty
      case .redact:
        named = []
        for rev in revs where !named.contains(rev) {
          guard let revision = record.tree.revision(rev), revision.status != .missing else {
            continue
          }
          if rev == record.tree.winner?.rev {
            throw StoreError(
              "conflict",
              "\(rev) is the current revision of \(id): write a new revision first, or purge it",
              code: .conflict)
          }
          named.append(rev)
        }
        gone = Set(named)
      }
      // Every event of the document that carried one of those revisions (a revision
      // replicated twice has two), not erased already; all of them when none is left.
      var events: [UInt64] = []
      var carried = Set<RevID>()
      try txn.forEachEvent(inStream: id, fromVersion: 1) { event in
        guard event.erasedBy == nil,
          event.type == DocumentEvent.Kind.edit.eventType
            || event.type == DocumentEvent.Kind.replicated.eventType,
          let e = try? DocumentEvent(decoding: event), let leaf = e.path?.leaf
        else { return true }
        if whole || gone.contains(leaf) {
          events.append(event.position.rawValue)
          carried.insert(leaf)
        }
        return true
      }
      if kind == .redact {
        // A revision whose events are erased already is not redacted again.
        named = named.filter { carried.contains($0) }
        guard !named.isEmpty else { continue }
      }
      Self.add(id, kind == .purge ? revs : named, named, events, to: &items, &erasure, &merged)
    }
    return (items, erasure)
  }

  /// Adds one document's part to a plan: `requested` goes into its event (a purge records
  /// the revisions asked for; applying it removes the leaves among them), `erased` into the
  /// answer.
  static func add(
    _ id: String, _ requested: [RevID], _ erased: [RevID], _ events: [UInt64],
    to items: inout [ErasureItem], _ erasure: inout Erasure, _ merged: inout [String: Int]
  ) {
    if let at = merged[id] {
      items[at].revs += requested
      items[at].events += events
      erasure.revisions[at].revs += erased.map(\.description)
    } else {
      merged[id] = items.count
      items.append(ErasureItem(id: id, revs: requested, events: events))
      erasure.revisions.append((id, erased.map(\.description)))
    }
    erasure.events += events.map { LogPosition($0) }
  }

  /// What stays of the document event at `position`: its revision, history, deletion and
  /// origin, and of its body only the `type` member (schema, not content: projections that
  /// keep documents by type then rebuild as they were built), no attachments.
  static func stripped(at position: UInt64, txn: ReadTransaction) throws -> [UInt8] {
    guard let event = try txn.event(at: LogPosition(position)) else {
      throw StoreError.internalError("event \(position) is missing")
    }
    let e = try DocumentEvent(decoding: event)
    var body = JSONObject()
    if let type = (try? JSONValue(parsing: e.body))?["type"], type.stringValue != nil {
      body["type"] = type
    }
    return DocumentEvent(
      kind: e.kind, docID: e.docID, rev: e.rev, path: e.path, deleted: e.deleted,
      origin: e.origin, body: JSONValue.object(body).serialized()
    ).encoded()
  }

  /// The attachment blobs the events at `positions` name (before they are erased).
  func blobs(of positions: [LogPosition]) throws -> Set<[UInt8]> {
    try read { txn in
      var found = Set<[UInt8]>()
      for p in positions {
        guard let event = try txn.event(at: p), let e = try? DocumentEvent(decoding: event) else {
          continue
        }
        for a in e.attachments ?? [] { found.insert(a.md5) }
      }
      return found
    }
  }

  /// The number of purges recorded (`purge_seq` in `GET /db`): one per document named in a
  /// purge request.
  public var purgeSeq: Int {
    get throws {
      try read {
        try documents.counter(DocumentProjection.purgeSeqKey, storage: documentStorage, txn: $0)
      }
    }
  }

  /// The database's `purged_infos_limit` (1000 unless set).
  public var purgedInfosLimit: Int {
    get throws { try read { try documents.purgedInfosLimit(storage: documentStorage, txn: $0) } }
  }

  /// Sets the database's `purged_infos_limit` (`PUT /db/_purged_infos_limit`).
  public func setPurgedInfosLimit(_ limit: Int, actor: String) async throws {
    guard limit >= 1 else {
      throw StoreError.badRequest("purged_infos_limit must be a positive integer")
    }
    _ = try await writeDocumentsQueued { txn in
      try self.append(
        DocumentEvent(
          kind: .purgedInfosLimit, docID: "_purged_infos_limit", rev: "", revsLimit: limit),
        actor: actor, txn: txn)
    }
  }

}

extension DocumentStore {
  /// The purges the log holds (`GET /db/_purged_infos`): each purged document and revisions,
  /// oldest first, the newest `purged_infos_limit` of them.
  public func purgedInfos() throws -> [(id: String, revs: [String])] {
    let limit = try purgedInfosLimit
    var found: [(id: String, revs: [String])] = []
    try read { txn in
      try txn.forEachEvent(
        from: .start, ofTypes: [DocumentEvent.Kind.purge.eventType]
      ) { event in
        let e = try DocumentEvent(decoding: event)
        let record = try ErasureRecord(decoding: e.body)
        found.append((e.docID, record.revs.map(\.description)))
        return true
      }
    }
    return Array(found.suffix(limit))
  }
}
