import JSON
public import Log
import RevTree

#if canImport(FoundationEssentials)
  public import FoundationEssentials
#else
  public import Foundation
#endif

/// One revision event of a document, as the log keeps it: who wrote it, when, from where, on
/// which parent, and its body.
public struct RevisionEvent: Sendable, Hashable {
  public let seq: LogPosition
  public let timestampMicroseconds: Int64
  public let actor: String
  /// "" for a local edit; the peer for a replicated write.
  public let origin: String
  public let rev: String
  /// The revision it was made on, when known (nil for a first revision or a replicated
  /// revision sent without history).
  public let parentRev: String?
  public let deleted: Bool
  /// The body as stored (JSON without `_id`, `_rev` and the other special fields); for a
  /// redacted revision, what stays of it (``redaction``).
  public let body: [UInt8]
  /// Who erased this revision's body, when and why (a redaction or purge); nil when it has
  /// its body.
  public var redaction: Redaction? = nil

  /// Who erased a revision's body: the event that did it.
  public struct Redaction: Sendable, Hashable {
    public let seq: LogPosition
    public let actor: String
    public let timestampMicroseconds: Int64
    public let reason: String
  }

  public var timestamp: Date {
    Date(timeIntervalSince1970: Double(timestampMicroseconds) / 1_000_000)
  }
}

/// What ``DocumentStore/audit(_:)`` looks for.
public struct AuditQuery: Sendable, Hashable {
  /// Only the documents this filter passes.
  public var filter: DocumentFilter?
  /// Only writes by this actor.
  public var actor: String?
  public var from: Date?
  public var until: Date?
  public var limit: Int?

  public init(
    filter: DocumentFilter? = nil, actor: String? = nil, from: Date? = nil,
    until: Date? = nil, limit: Int? = nil
  ) {
    self.filter = filter
    self.actor = actor
    self.from = from
    self.until = until
    self.limit = limit
  }
}

/// One write found by an audit: a document event, or an event of an ``AuditedProjection``
/// (the drafts' `draft.save`, `draft.autosave`, `draft.discard`, `draft.publish`, whose `docID`
/// is the page and whose `rev` the draft's base revision, or for a publish the revision it
/// wrote).
public struct AuditEntry: Sendable, Hashable {
  public let seq: LogPosition
  public let timestampMicroseconds: Int64
  public let actor: String
  public let type: String
  public let docID: String
  public let rev: String
  public let deleted: Bool
  public let origin: String
}

extension DocumentStore {
  /// Every revision ever written to `id`, oldest first: local edits and replicated revisions.
  /// Revisions stemmed out of the tree still appear: the log keeps them.
  public func revisionEvents(of id: String) throws -> [RevisionEvent] {
    let events: [RecordedEvent]
    do {
      events = try log.read(stream: id)
    } catch {
      throw StoreError.storage(error)
    }
    var revisions: [RevisionEvent] = []
    for event in events {
      guard
        event.type == DocumentEvent.Kind.edit.eventType
          || event.type == DocumentEvent.Kind.replicated.eventType
      else { continue }
      let e = try DocumentEvent(decoding: event)
      var revision = RevisionEvent(
        seq: event.position, timestampMicroseconds: event.timestampMicroseconds,
        actor: event.actor, origin: e.origin, rev: e.rev,
        parentRev: e.path.flatMap { $0.ids.count > 1 ? $0.revisions[1].description : nil },
        deleted: e.deleted, body: e.body)
      if let by = event.erasedBy, let eraser = try log.event(at: by) {
        let reason =
          (try? DocumentEvent(decoding: eraser)).flatMap { try? ErasureRecord(decoding: $0.body) }?
          .reason ?? ""
        revision.redaction = RevisionEvent.Redaction(
          seq: by, actor: eraser.actor, timestampMicroseconds: eraser.timestampMicroseconds,
          reason: reason)
      }
      revisions.append(revision)
    }
    return revisions
  }

  /// Writes matching `query`, in log order. The time range is found by binary search over the
  /// log's (non-decreasing) timestamps, so a narrow window reads only its own events.
  public func audit(_ query: AuditQuery) throws -> [AuditEntry] {
    do {
      var start = LogPosition(1)
      if let from = query.from {
        guard let first = try log.firstPosition(atOrAfter: from) else { return [] }
        start = first
      }
      let untilMicros = query.until.map {
        Int64(($0.timeIntervalSince1970 * 1_000_000).rounded(.down))
      }
      let limit = query.limit ?? .max
      let audited = others.compactMap { $0.projection as? any AuditedProjection }
      // The first audited projection that owns the event says what it concerns.
      func subject(of event: RecordedEvent) throws -> (docID: String, rev: String)? {
        for projection in audited {
          if let subject = try projection.auditSubject(of: event) { return subject }
        }
        return nil
      }
      var entries: [AuditEntry] = []
      guard limit > 0 else { return [] }
      try log.read { txn in
        try txn.forEachEvent(from: start) { event in
          if let untilMicros, event.timestampMicroseconds > untilMicros { return false }
          let docID: String
          let rev: String
          var deleted = false
          var origin = ""
          if let kind = DocumentEvent.Kind(eventType: event.type) {
            if let actor = query.actor, event.actor != actor { return true }
            let e = try DocumentEvent(decoding: event)
            docID = kind == .localPut || kind == .localDelete ? "_local/" + e.docID : e.docID
            // A purge or redaction lists the revisions it erased.
            rev =
              kind == .purge || kind == .redact
              ? ((try? ErasureRecord(decoding: e.body))?.revs.map(\.description) ?? [])
                .joined(separator: ",") : e.rev
            deleted = e.deleted
            origin = e.origin
          } else if let subject = try subject(of: event) {
            if let actor = query.actor, event.actor != actor { return true }
            docID = subject.docID
            rev = subject.rev
          } else {
            return true
          }
          if let filter = query.filter, !filter.includes(docID) { return true }
          entries.append(
            AuditEntry(
              seq: event.position, timestampMicroseconds: event.timestampMicroseconds,
              actor: event.actor,
              type: event.type, docID: docID, rev: rev, deleted: deleted, origin: origin))
          return entries.count < limit
        }
      }
      return entries
    } catch let error as StoreError {
      throw error
    } catch {
      throw StoreError.from(error)
    }
  }
}
