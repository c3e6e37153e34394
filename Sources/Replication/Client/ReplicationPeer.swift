public import JSON
public import Projections
import RevTree

/// One side of a replication, in the protocol's own steps: what a ``Replicator`` asks a source
/// or a target, typed. ``HTTPPeer`` speaks them to a CouchDB-compatible server over HTTP
/// (CouchDB's endpoints, through a ``CouchTransport``); ``StorePeer`` asks a `DocumentStore` in
/// this process directly, with no HTTP and no JSON text in between.
///
/// A peer reports a refusal as ``ReplicatorError/http(status:error:reason:)`` with CouchDB's
/// status and error name (404 `not_found` for a missing database or checkpoint, 401, 403, 409
/// `conflict` for a checkpoint written meanwhile), so that the replicator treats every peer the
/// same; network failures are thrown as they come and retried.
public protocol ReplicationPeer: Sendable {
  /// A stable identity of the database, such as its URL without credentials: part of the
  /// replication id, and what errors name.
  var identity: String { get }

  /// Checks that the database exists and may be used (`GET /{db}`).
  func open() async throws
  /// Creates the database (`PUT /{db}`); 412 when it exists.
  func create() async throws
  /// One batch of the changes feed, every leaf of each document (`style=all_docs`).
  func changes(_ request: PeerChangesRequest) async throws -> PeerChanges
  /// Which of these leaf revisions the database lacks (`_revs_diff`), with the revisions it has
  /// that may be their ancestors.
  func revsDiff(_ revisions: [(id: String, revs: [String])]) async throws -> [PeerMissing]
  /// The revisions asked for with their history (`_revisions`) and their attachments' data
  /// (those the `attsSince` revisions had come as stubs): `_bulk_get?revs=true&latest=true&
  /// attachments=true`, or per document `open_revs` where the peer has no `_bulk_get`.
  func revisions(_ wanted: [PeerWanted]) async throws -> [PeerRevision]
  /// Writes revisions as they are (`new_edits: false`); returns the ones refused.
  func write(_ docs: ArraySlice<PeerDocument>) async throws -> [PeerRefusal]
  /// Writes one revision as it is (`PUT /{db}/{id}?new_edits=false`), for a batch refused
  /// as a whole.
  func writeOne(_ doc: PeerDocument) async throws
  /// Makes what was written durable (`_ensure_full_commit`).
  func ensureFullCommit() async throws
  /// The local (unreplicated) document `_local/{id}`, nil when there is none.
  func localDocument(_ id: String) async throws -> JSONValue?
  /// Writes `_local/{id}` (its `_rev` in `body` when it replaces one); returns the new rev.
  func putLocalDocument(_ id: String, _ body: JSONObject) async throws -> String?
}

/// What ``ReplicationPeer/changes(_:)`` reads.
public struct PeerChangesRequest: Sendable {
  /// After this seq (the peer's own, as it gave it).
  public var since: JSONValue
  public var limit: Int
  /// Wait up to `timeout` for a change when there is none (`feed=longpoll`), the connection
  /// kept open with `heartbeat`.
  public var longpoll = false
  public var timeout: Duration = .seconds(60)
  public var heartbeat: Duration = .seconds(10)
  /// Only these documents (`filter=_doc_ids`), only those the selector passes
  /// (`filter=_selector`), or a design document's filter with its parameters.
  public var docIDs: [String]? = nil
  public var selector: JSONValue? = nil
  public var filter: String? = nil
  public var filterParameters: [String: String] = [:]

  public init(since: JSONValue, limit: Int) {
    self.since = since
    self.limit = limit
  }
}

/// A batch of the changes feed: each changed document's leaf revisions, the seq it ends at,
/// and how many changes are left (when the peer says).
public struct PeerChanges: Sendable {
  public var rows: [(id: String, revs: [String])]
  public var lastSeq: JSONValue
  public var pending: Int?

  public init(rows: [(id: String, revs: [String])], lastSeq: JSONValue, pending: Int?) {
    self.rows = rows
    self.lastSeq = lastSeq
    self.pending = pending
  }
}

/// The revisions of a document a target lacks, and those it has that may be their ancestors.
public struct PeerMissing: Sendable, Hashable {
  public var id: String
  public var missing: [String]
  public var possibleAncestors: [String]

  public init(id: String, missing: [String], possibleAncestors: [String]) {
    self.id = id
    self.missing = missing
    self.possibleAncestors = possibleAncestors
  }
}

/// Revisions of one document to fetch, and the revisions whose attachments the target has
/// (`atts_since`).
public struct PeerWanted: Sendable, Hashable {
  public var id: String
  public var revs: [String]
  public var attsSince: [String]

  public init(id: String, revs: [String], attsSince: [String]) {
    self.id = id
    self.revs = revs
    self.attsSince = attsSince
  }
}

/// A fetched revision: the document (with `_revisions` and its attachments) or why it could
/// not be had.
public enum PeerRevision: Sendable {
  case document(PeerDocument)
  case failed(PeerRefusal)

  /// An entry of an `open_revs` answer for document `id`: `{"ok": doc}` or
  /// `{"missing": rev}`.
  public init(openRevsEntry entry: JSONValue, id: String) {
    if let doc = entry["ok"] {
      self = .document(.json(doc))
    } else {
      self = .failed(
        PeerRefusal(
          id: id, rev: entry["missing"]?.stringValue,
          error: entry["missing"] == nil ? "" : "not_found", reason: "missing"))
    }
  }
}

/// A revision on its way from a source to a target: a JSON document with its `_revisions` (and
/// attachments inline), or — between two stores of this process (``StorePeer`` to
/// ``StorePeer``) — the revision as the source store holds it, which the target store takes
/// without a JSON document made and parsed in between. A peer over HTTP sends either as JSON.
public enum PeerDocument: Sendable {
  case json(JSONValue)
  case stored(StoredRevision)

  public var id: String {
    switch self {
    case .json(let doc): doc["_id"]?.stringValue ?? ""
    case .stored(let revision): revision.id
    }
  }

  public var rev: String? {
    switch self {
    case .json(let doc): doc["_rev"]?.stringValue
    case .stored(let revision): revision.rev.description
    }
  }

  /// The document as JSON.
  public func json() throws -> JSONValue {
    switch self {
    case .json(let doc): doc
    case .stored(let revision): try revision.json()
    }
  }

  /// ``json()`` serialized.
  public func serialized() throws -> [UInt8] {
    switch self {
    case .json(let doc): doc.serialized()
    case .stored(let revision): try revision.jsonBytes()
    }
  }
}

/// A revision a peer would not give or take, with CouchDB's error name and reason.
public struct PeerRefusal: Sendable, Hashable {
  public var id: String
  public var rev: String?
  public var error: String
  public var reason: String

  public init(id: String, rev: String?, error: String, reason: String) {
    self.id = id
    self.rev = rev
    self.error = error
    self.reason = reason
  }
}
