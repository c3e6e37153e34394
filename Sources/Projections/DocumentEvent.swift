import Formats
import JSON
public import Log
public import RevTree

/// What one accepted write to a database records in the log.
///
/// Every accepted write is exactly one event. Its log `type` is ``Kind/eventType``, its stream the
/// document id, its actor who wrote it; the payload is this value, encoded by ``encoded()``:
///
/// ```
/// u8 format (1) · u8 kind · u8 flags (bit 0: deleted, bit 1: attachments)
/// string doc id · string rev ("" when none)
/// varint path start · varint path length · string id × length   (the merged `_revisions`)
/// string origin ("" for a local edit; the peer for a replicated write)
/// varint revs_limit (for a `db.revs_limit` event, else 0)
/// when flag bit 1: varint count · attachment × count, each:
///     string name · bytes content_type (its JSON) · varint length · varint stored length
///     · u8 encoding (0 identity, 1 gzip) · 16 bytes MD5 of the stored bytes · varint revpos
/// the body: a JSON object without the `_`-fields, as bytes (the rest)
/// ```
/// (strings are LEB128 length + UTF-8). Events written before attachments existed have flag
/// bit 1 clear and decode unchanged. The attachments' bytes are in the ``BlobStore``. The body of every revision stays readable forever: a
/// document's tree points each revision to the position of the event that carried its body.
public struct DocumentEvent: Sendable, Hashable {
  public enum Kind: UInt8, Sendable {
    /// A local edit (`new_edits=true`): a new revision whose parent was a leaf.
    case edit = 1
    /// A replicated write (`new_edits=false`): a revision with its history, merged as CouchDB does.
    case replicated = 2
    /// A `_local` document written; never replicated, not in the changes feed.
    case localPut = 3
    case localDelete = 4
    /// The database's revs_limit changed.
    case revsLimit = 5
    /// Leaf revisions purged (`_purge`): the body lists them (`{"revs", "reason"}`); the events
    /// that carried their bodies are erased in the same transaction.
    case purge = 6
    /// Revisions redacted (`_redact`): they stay in the tree; the events that carried their
    /// bodies are erased in the same transaction.
    case redact = 7
    /// The database's purged_infos_limit changed (in ``revsLimit``'s field).
    case purgedInfosLimit = 8

    public var eventType: String {
      switch self {
      case .edit: "doc.edit"
      case .replicated: "doc.replicated"
      case .localPut: "local.put"
      case .localDelete: "local.delete"
      case .revsLimit: "db.revs_limit"
      case .purge: "doc.purge"
      case .redact: "doc.redact"
      case .purgedInfosLimit: "db.purged_infos_limit"
      }
    }

    public init?(eventType: String) {
      switch eventType {
      case "doc.edit": self = .edit
      case "doc.replicated": self = .replicated
      case "local.put": self = .localPut
      case "local.delete": self = .localDelete
      case "db.revs_limit": self = .revsLimit
      case "doc.purge": self = .purge
      case "doc.redact": self = .redact
      case "db.purged_infos_limit": self = .purgedInfosLimit
      default: return nil
      }
    }
  }

  public var kind: Kind
  public var docID: String
  /// The new revision (for `_local` documents, CouchDB's `0-N`).
  public var rev: String
  /// For document writes: the new revision and its ancestors, newest first.
  public var path: RevisionPath?
  public var deleted: Bool
  public var origin: String
  public var revsLimit: Int
  /// The JSON object of the body, without `_id`, `_rev` and the other special fields.
  public var body: [UInt8]
  /// The revision's attachments in the document's `_attachments` order; nil when it has none.
  public var attachments: [StoredAttachment]?

  public init(
    kind: Kind, docID: String, rev: String, path: RevisionPath? = nil, deleted: Bool = false,
    origin: String = "", revsLimit: Int = 0, body: [UInt8] = Array("{}".utf8),
    attachments: [StoredAttachment]? = nil
  ) {
    self.attachments = attachments
    self.kind = kind
    self.docID = docID
    self.rev = rev
    self.path = path
    self.deleted = deleted
    self.origin = origin
    self.revsLimit = revsLimit
    self.body = body
  }

  static let format: UInt8 = 1

  /// The log stream of a document's events: its id (`_local/...` for local documents).
  static func stream(for kind: Kind, docID: String) -> String {
    switch kind {
    case .localPut, .localDelete: "_local/" + docID
    case .revsLimit, .purgedInfosLimit: "_db"
    default: docID
    }
  }

  public func encoded() -> [UInt8] {
    var w = ByteWriter(capacity: 64 + body.count)
    w.byte(Self.format)
    w.byte(kind.rawValue)
    w.byte((deleted ? 1 : 0) | (attachments != nil ? 2 : 0))
    w.string(docID)
    w.string(rev)
    if let path {
      w.varint(path.start)
      w.varint(path.ids.count)
      for id in path.ids {
        // As `w.string(id.description)`, without making the string.
        w.varint(id.textCount)
        id.appendText(to: &w.bytes)
      }
    } else {
      w.varint(0)
      w.varint(0)
    }
    w.string(origin)
    w.varint(revsLimit)
    if let attachments {
      w.varint(attachments.count)
      for a in attachments { a.encode(into: &w) }
    }
    w.raw(body)
    return w.bytes
  }

  /// Decodes an event's payload; nil for events that are not document events.
  public init(decoding event: RecordedEvent) throws(StoreError) {
    guard Kind(eventType: event.type) != nil else {
      throw StoreError.internalError("event \(event.position) is not a document event")
    }
    try self.init(decoding: event.payload, position: event.position)
  }

  /// The body of a document event's payload, and whether it lists attachments: what
  /// ``init(decoding:position:)`` reads, without the strings and the revision path (which a
  /// reader that has the document's tree does not need).
  static func body(decoding payload: [UInt8], position: LogPosition) throws(StoreError) -> (
    body: [UInt8], hasAttachments: Bool
  ) {
    var r = ByteReader(payload)
    do {
      guard try r.byte() == Self.format, Kind(rawValue: try r.byte()) != nil else {
        throw StoreError.internalError("event \(position) has an unknown document format")
      }
      let flags = try r.byte()
      _ = try r.data()  // the document id
      _ = try r.data()  // the revision
      _ = try r.int()  // the path's start
      let count = try r.int()
      guard count <= payload.count else { throw ByteReader.Truncated() }
      for _ in 0..<count { _ = try r.data() }
      _ = try r.data()  // the origin
      _ = try r.int()  // revs_limit
      guard flags & 2 == 0 else { return ([], true) }
      return (Array(r.rest()), false)
    } catch let error as StoreError {
      throw error
    } catch {
      throw StoreError.internalError("event \(position) is a malformed document event")
    }
  }

  init(decoding payload: [UInt8], position: LogPosition) throws(StoreError) {
    var r = ByteReader(payload)
    do {
      guard try r.byte() == Self.format, let kind = Kind(rawValue: try r.byte()) else {
        throw StoreError.internalError("event \(position) has an unknown document format")
      }
      self.kind = kind
      let flags = try r.byte()
      deleted = flags & 1 != 0
      docID = try r.string()
      rev = try r.string()
      let start = try r.int()
      let count = try r.int()
      if count > 0 {
        guard count <= payload.count else { throw ByteReader.Truncated() }
        var ids: [RevHash] = []
        ids.reserveCapacity(count)
        for _ in 0..<count { ids.append(try RevHash(utf8: try r.data())) }
        path = try RevisionPath(start: start, ids: ids)
      } else {
        path = nil
      }
      origin = try r.string()
      revsLimit = try r.int()
      if flags & 2 != 0 {
        let count = try r.int()
        guard count <= payload.count else { throw ByteReader.Truncated() }
        var list: [StoredAttachment] = []
        list.reserveCapacity(count)
        for _ in 0..<count { list.append(try StoredAttachment(decoding: &r)) }
        attachments = list
      } else {
        attachments = nil
      }
      body = Array(r.rest())
    } catch let error as StoreError {
      throw error
    } catch {
      throw StoreError.internalError("event \(position) is a malformed document event")
    }
  }
}
