public import JSON
public import Log
public import RevTree

/// A revision as a store holds it — its document id, its history, whether it is a deletion and
/// its body's bytes as stored — read by ``DocumentStore/storedRevisions(_:_:options:txn:)`` to
/// be written into another store of this process by
/// ``DocumentStore/replicateAsync(_:actor:origin:)``.
///
/// It is what a replication between two local stores hands over instead of a JSON document:
/// nothing is rendered (`_revisions` as hex strings, the body spliced into a document) only for
/// the other store to take it apart again (the strings parsed back into hashes, the body
/// written out again). A peer over HTTP sends ``json()`` or ``jsonBytes()``, the document
/// CouchDB's `open_revs` with `revs=true` gives.
///
/// Only revisions without attachments are read this way; one with attachments comes as its
/// JSON document, its data inline, as ``DocumentStore/openRevs(_:_:options:)`` renders it.
public struct StoredRevision: Sendable {
  public let id: String
  /// The revision's history, newest first, cut to the source's `revs_limit` (`_revisions`).
  public let path: RevisionPath
  public let deleted: Bool
  /// The body without the special fields, as the source store wrote it: a JSON object.
  public let body: [UInt8]

  public init(id: String, path: RevisionPath, deleted: Bool, body: [UInt8]) {
    self.id = id
    self.path = path
    self.deleted = deleted
    self.body = body
  }

  public var rev: RevID { path.leaf }

  /// The document as `GET /{db}/{id}?rev=…&revs=true` renders it: `_id`, `_rev`, the body,
  /// `_deleted` when it is one, `_revisions`. Throws when the body is not JSON, which a body
  /// a store wrote always is.
  public func jsonBytes() throws -> [UInt8] {
    var special: [JSONObject.Member] = []
    if deleted { special.append(.init(key: "_deleted", value: .bool(true))) }
    special.append(.init(key: "_revisions", value: path.revisionsJSON))
    return try DocumentStore.documentBytes(
      identity: [
        .init(key: "_id", value: .string(id)), .init(key: "_rev", value: .string(rev.description)),
      ], body: body, special: special)
  }

  /// ``jsonBytes()`` parsed.
  public func json() throws -> JSONValue { try JSONValue(parsing: jsonBytes()) }
}

/// A revision ``DocumentStore/storedRevisions(_:_:options:txn:)`` looked for.
public enum StoredRevisionRead: Sendable {
  /// Found, without attachments.
  case stored(StoredRevision)
  /// Found, with attachments: its document as `open_revs` renders it (``GetOptions`` as given).
  case document(JSONValue)
  /// Not in the store, or its body erased.
  case missing(String)
}

extension DocumentStore {
  /// ``openRevs(_:_:options:)`` in the caller's read transaction for a replication into
  /// another store of this process: each revision found as a ``StoredRevision`` (its
  /// history cut to `revs_limit`, its body's bytes as stored), or, when it has attachments,
  /// as its document rendered with `options` (which should ask for `revs`).
  public func storedRevisions(
    _ id: String, _ which: OpenRevs, options: GetOptions, txn: ReadTransaction
  ) throws -> [StoredRevisionRead] {
    let revisions = try openRevisions(id, which, options: options, txn: txn)
    var limit: Int? = nil
    return try revisions.map { revision in
      switch revision {
      case .missing(let rev): return .missing(rev)
      case .found(let record, let target):
        // The body and whether there are attachments, read from the event's payload alone.
        var body = Array("{}".utf8)
        if let position = target.body {
          guard let event = try txn.event(at: LogPosition(position)) else {
            throw StoreError.internalError("the body at \(position) is missing from the log")
          }
          // A redacted revision (its event erased) is missing, as `open_revs` answers it.
          guard event.erasedBy == nil else { return .missing(target.rev.description) }
          let read = try DocumentEvent.body(decoding: event.payload, position: event.position)
          if read.hasAttachments {
            return .document(try documentJSON(record, target, options: options, txn: txn))
          }
          body = read.body
        }
        if limit == nil { limit = try documents.revsLimit(storage: documentStorage, txn: txn) }
        guard let path = record.tree.revisions(of: target.rev, limit: limit ?? .max) else {
          return .missing(target.rev.description)
        }
        return .stored(
          StoredRevision(
            id: record.docID, path: path, deleted: target.status == .deleted,
            body: body))
      }
    }
  }

  /// ``bulkDocsAsync(_:newEdits:actor:origin:)`` with `newEdits: false` for revisions another
  /// store of this process read (``storedRevisions(_:_:options:txn:)``): each is validated,
  /// checked against the caller's ``WriteAccess`` and merged as a replicated document is, its
  /// body parsed once for the checks and the projections, and stored as the bytes it came
  /// with.
  public func replicateAsync(_ revisions: [StoredRevision], actor: String, origin: String = "")
    async throws -> [DocumentWriteResult]
  {
    let prepared = prepareBulk(count: revisions.count, newEdits: false, origin: origin) { i in
      let revision = revisions[i]
      let body: JSONObject
      do {
        guard let object = try JSONValue(parsing: revision.body).objectValue else {
          throw StoreError.badRequest("Document must be a JSON object")
        }
        body = object
      } catch {
        return .failure(BulkFailure(id: revision.id, error: StoreError.from(error)))
      }
      return .success((DocumentInput(stored: revision, body: body), revision.body))
    }
    return try await writeBulkQueued(prepared, actor: actor)
  }
}

extension RevisionPath {
  /// `_revisions` as CouchDB writes it: `{"start": N, "ids": [newest, ...]}`.
  var revisionsJSON: JSONValue {
    .object(
      JSONObject([
        .init(key: "start", value: .number(JSONNumber(Int64(start)))),
        .init(key: "ids", value: .array(ids.map { .string($0.description) })),
      ]))
  }
}

extension DocumentInput {
  /// A stored revision's document, its body parsed.
  init(stored revision: StoredRevision, body: JSONObject) {
    self.id = revision.id
    self.rev = revision.rev.description
    self.deleted = revision.deleted
    self.revisions = revision.path
    self.body = body
    self.full = .object(body)
    self.attachments = nil
    self.givenRevisions = nil
  }
}
