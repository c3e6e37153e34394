import Formats
public import JSON
public import RevTree

/// A document as a client sends it, split into its special fields and its body.
///
/// CouchDB's rules (`couch_doc:transfer_fields`): `_id`, `_rev`, `_deleted` and `_revisions` are
/// taken out; `_conflicts`, `_deleted_conflicts`, `_revs_info` and `_local_seq` are ignored;
/// `_access` and the replicator's `_replication_*` fields stay in the body; any other top-level
/// field starting with `_` is refused (`doc_validation`). `_attachments` is read as
/// `couch_att:from_json/2` reads it (``AttachmentInput/parse(_:)``).
public struct DocumentInput: Sendable, Hashable {
  public var id: String?
  public var rev: String?
  public var deleted: Bool
  public var revisions: RevisionPath?
  /// The body without special fields.
  public var body: JSONObject
  /// The whole document as received (for the revision digest, which skips `_` fields itself).
  public var full: JSONValue
  /// `_attachments`, in its order; nil when the document has none (an empty object included).
  public var attachments: [AttachmentInput]?
  /// A `_local` document's `_revisions` as given (start and ids): `{"start":0,"ids":["1"]}` is
  /// no path (``LocalDocumentInput``). Any other document's is read into ``revisions``.
  var givenRevisions: GivenRevisions?

  struct GivenRevisions: Sendable, Hashable {
    var start: Int
    var ids: [String]
  }

  /// The largest accepted document, like CouchDB's default `max_document_size` (8 MB).
  public static let maxBytes = 8 << 20

  /// Top-level `_` fields CouchDB keeps in the body (`couch_doc:transfer_fields`): the access
  /// field reserved for per-document access and the replicator's state fields.
  static let keptSpecialFields: Set<String> = [
    "_access", "_replication_state", "_replication_state_time", "_replication_state_reason",
    "_replication_id", "_replication_stats",
  ]

  public init(_ value: JSONValue) throws(StoreError) {
    try self.init(value, local: false)
  }

  /// Splits `value`; for a `_local` document (`local`) `_revisions` is only read, not made a
  /// path (``givenRevisions``).
  init(_ value: JSONValue, local: Bool) throws(StoreError) {
    guard let object = value.objectValue else {
      throw StoreError.badRequest("Document must be a JSON object")
    }
    full = value
    deleted = false
    // `_revisions`' ids read as revision hashes (or why one is none), made a path after every
    // member is checked.
    var path: (start: Int, hashes: Result<[RevHash], RevTreeError>)? = nil
    var body = JSONObject()
    body.members.reserveCapacity(object.members.count)
    for member in object.members {
      let key = member.key
      guard key.utf8.first == UInt8(ascii: "_"), !Self.keptSpecialFields.contains(key) else {
        body.members.append(member)
        continue
      }
      switch key {
      case "_id":
        guard let s = member.value.stringValue else {
          throw StoreError.illegalDocID("Document id must be a string")
        }
        id = s
      case "_rev":
        guard let s = member.value.stringValue else {
          throw StoreError.badRequest("Invalid rev format")
        }
        rev = s
      case "_deleted":
        guard let b = member.value.boolValue else {
          throw StoreError.badRequest("_deleted must be true or false")
        }
        deleted = b
      case "_revisions":
        if local {
          givenRevisions = try Self.revisions(member.value)
        } else {
          path = try Self.revisionHashes(member.value)
        }
      case "_conflicts", "_deleted_conflicts", "_revs_info", "_local_seq":
        continue
      case "_attachments":
        let list = try AttachmentInput.parse(member.value)
        attachments = list.isEmpty ? nil : list
      default:
        throw StoreError.invalidDocument("Bad special document member: \(key)")
      }
    }
    self.body = body
    if let path {
      do {
        revisions = try RevisionPath(start: path.start, ids: path.hashes.get())
      } catch {
        throw StoreError.badRequest("invalid _revisions: \(error)")
      }
      // As in CouchDB, `_revisions` names the revision edited (or replicated) when it is
      // there, whatever `_rev` says.
      rev = revisions?.leaf.text
    }
  }

  /// The checks CouchDB makes of every document of a `_bulk_docs` request before it writes any
  /// (`couch_doc:from_json_obj_validate/2`, called for the whole list): a document that fails
  /// them fails the request with `400`, not a row of its own. They look at the special members
  /// only (`_id`, `_rev`, `_deleted`, `_revisions`, the names CouchDB knows), so they cost
  /// little beside the write; what they do not look at is checked per document as before.
  public static func checkShape(_ value: JSONValue) throws(StoreError) {
    guard let object = value.objectValue else {
      throw StoreError.badRequest("Document must be a JSON object")
    }
    for member in object.members where member.key.utf8.first == UInt8(ascii: "_") {
      switch member.key {
      case "_id":
        guard let id = member.value.stringValue else {
          throw StoreError.illegalDocID("Document id must be a string")
        }
        try DocumentKey.validate(id, allowLocal: true, checkLength: false)
      case "_rev":
        guard let rev = member.value.stringValue else {
          throw StoreError.badRequest("Invalid rev format")
        }
        guard Self.isCouchRevision(rev) else { throw StoreError.badRequest("Invalid rev format") }
      case "_deleted":
        guard member.value.boolValue != nil else {
          throw StoreError.invalidDocument("Bad special document member: _deleted")
        }
      case "_revisions":
        try checkRevisions(member.value)
      case "_attachments", "_conflicts", "_deleted_conflicts", "_revs_info", "_local_seq":
        continue
      default:
        throw StoreError.invalidDocument("Bad special document member: \(member.key)")
      }
    }
  }

  /// `_revisions` read as `couch_doc:transfer_fields/3` reads it, its ids kept as given (a
  /// `_local` document's).
  static func revisions(_ value: JSONValue) throws(StoreError) -> GivenRevisions {
    let (start, ids) = try checkRevisions(value)
    // Every id is a string (checked).
    return GivenRevisions(start: Int(clamping: start), ids: ids.compactMap(\.stringValue))
  }

  /// `_revisions` checked as ``revisions(_:)`` checks it, its ids read once, as revision
  /// hashes: the hashes, or why the first that is none is not (the error
  /// `RevisionPath(start:ids:)` gives for strings, thrown once every member is checked).
  static func revisionHashes(_ value: JSONValue) throws(StoreError) -> (
    start: Int, hashes: Result<[RevHash], RevTreeError>
  ) {
    let (start, ids) = try revisionsMembers(value)
    var hashes: [RevHash] = []
    hashes.reserveCapacity(ids.count)
    var invalid: RevTreeError? = nil
    for id in ids {
      guard let s = id.stringValue else { throw StoreError.invalidDocument("RevId isn't a string") }
      var isDigest: Bool? = nil
      if invalid == nil {
        do {
          let hash = try RevHash(s)
          hashes.append(hash)
          isDigest = hash.isDigest
        } catch {
          invalid = .invalidRevision(error)
        }
      }
      try checkRevisionID(s, isDigest: isDigest)
    }
    return (Int(clamping: start), invalid.map { .failure($0) } ?? .success(hashes))
  }

  /// `_revisions` checked as ``revisions(_:)`` reads it (``checkShape(_:)`` keeps nothing of
  /// it): its `start` and `ids`, every id a string and valid.
  @discardableResult
  static func checkRevisions(_ value: JSONValue) throws(StoreError) -> (
    start: Int64, ids: [JSONValue]
  ) {
    let members = try revisionsMembers(value)
    for id in members.ids {
      guard let s = id.stringValue else { throw StoreError.invalidDocument("RevId isn't a string") }
      try checkRevisionID(s, isDigest: nil)
    }
    return members
  }

  /// `_revisions`' `start` and `ids`, checked as `couch_doc:transfer_fields/3` checks them.
  private static func revisionsMembers(_ value: JSONValue) throws(StoreError) -> (
    start: Int64, ids: [JSONValue]
  ) {
    guard let o = value.objectValue else {
      throw StoreError.invalidDocument("Bad special document member: _revisions")
    }
    guard let start = o["start"]?.numberValue?.int64Value else {
      throw StoreError.invalidDocument("_revisions.start isn't an integer.")
    }
    guard let ids = o["ids"]?.arrayValue else {
      throw StoreError.invalidDocument("_revisions.ids isn't a array.")
    }
    return (start, ids)
  }

  /// `couch_doc:parse_revid/1` reads a 32-character id as a hexadecimal number. `isDigest`,
  /// when the id was parsed as a hash already, says whether it is one (a hash of 32 characters
  /// is a digest exactly when they are all hex).
  private static func checkRevisionID(_ s: String, isDigest: Bool?) throws(StoreError) {
    if s.utf8.count == 32, !(isDigest ?? allHex(s.utf8.span)) {
      throw StoreError.invalidDocument("RevId isn't a valid hexadecimal")
    }
  }

  /// Whether every byte is a hexadecimal digit (the bytes read where they lie).
  private static func allHex(_ bytes: Span<UInt8>) -> Bool {
    for i in bytes.indices where Hex.value(bytes[i]) == nil { return false }
    return true
  }

  /// Parses a document's JSON bytes: `too_large` past ``maxBytes``, `bad_request` for text
  /// that is not JSON.
  public static func parse(_ bytes: [UInt8]) throws(StoreError) -> JSONValue {
    guard bytes.count <= Self.maxBytes else {
      throw StoreError.tooLarge("Document is \(bytes.count) bytes; the limit is \(Self.maxBytes)")
    }
    do {
      return try JSONValue(parsing: bytes)
    } catch {
      throw StoreError.badRequest("invalid UTF-8 JSON: \(error)")
    }
  }

  /// Parses and splits a document from JSON bytes, enforcing ``maxBytes``.
  public init(json bytes: [UInt8]) throws(StoreError) {
    try self.init(Self.parse(bytes))
  }

  /// The body as stored in the event.
  var bodyBytes: [UInt8] { JSONValue.object(body).serialized() }
}

extension DocumentInput {
  /// Whether `couch_doc:parse_rev` reads `text`: a decimal integer (an optional `+`, then
  /// digits, of any size), a `-`, and anything after it. A revision of that shape that no
  /// tree can hold (`0-abc`, `1-`) names no revision here, where CouchDB would answer it
  /// missing or in conflict; any other text is `Invalid rev format`.
  public static func isCouchRevision(_ text: String) -> Bool {
    guard let dash = text.utf8.firstIndex(of: UInt8(ascii: "-")) else { return false }
    var digits = text.utf8[..<dash]
    if digits.first == UInt8(ascii: "+") { digits = digits.dropFirst() }
    return !digits.isEmpty
      && digits.allSatisfy { $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }
  }
}

/// A `_local` document as a client sends it, read by CouchDB 3's rules for local documents.
///
/// The special fields are read as for any document (`couch_doc:transfer_fields`), then CouchDB
/// 3 gives the write the revision `0-(N+1)` where `0-N` is the revision the request names (from
/// `_revisions` when it is there, else `_rev` or `?rev=`), and `0-1` when it names none. It does
/// not compare `N` with the stored revision: the last write wins, so a replicator updating its
/// checkpoint with `"_rev":"0-1"` and `"_revisions":{"start":0,"ids":["1"]}` gets `0-2`
/// (`couch_db_updater:update_local_doc_revs/1`). A revision that is not `0-<integer>` is
/// `Invalid rev format`. `"_deleted":true` deletes the document (`0-0`). `_attachments` are read
/// and dropped, as CouchDB drops them (a local document is its body alone).
public struct LocalDocumentInput: Sendable, Hashable {
  /// The revision number written: one more than the one named.
  public var newRevision: Int
  public var deleted: Bool
  /// The body without special fields, as stored.
  public var body: [UInt8]

  /// Parses `json`; `rev` is the request's `?rev=`, which must agree with a `_rev` in the body.
  public init(json bytes: [UInt8], rev queryRev: String? = nil) throws(StoreError) {
    // The special fields are read as for any document; attachments are then dropped.
    let input = try DocumentInput(DocumentInput.parse(bytes), local: true)
    var revs = input.givenRevisions.map { ($0.start, $0.ids) }
    if revs == nil, let rev = input.rev { revs = try Self.parseRev(rev) }
    if let queryRev {
      let q = try Self.parseRev(queryRev)
      if let revs, let first = revs.1.first, revs.0 != q.start || first != q.ids[0] {
        throw StoreError.badRequest(
          "Document rev from request body and query string have different values")
      }
      if revs?.1.first == nil { revs = q }
    }
    deleted = input.deleted
    body = input.bodyBytes
    if deleted {
      newRevision = 0
    } else if let (start, ids) = revs, start != 0 || !ids.isEmpty {
      guard start == 0, let n = Int(ids[0]), n < Int.max else {
        throw StoreError.badRequest("Invalid rev format")
      }
      newRevision = n + 1
    } else {
      newRevision = 1
    }
  }

  /// `N-id` as CouchDB's `couch_doc:parse_rev/1` splits it.
  static func parseRev(_ s: String) throws(StoreError) -> (start: Int, ids: [String]) {
    guard let dash = s.firstIndex(of: "-"), let start = Int(s[..<dash]), start >= 0 else {
      throw StoreError.badRequest("Invalid rev format")
    }
    return (start, [String(s[s.index(after: dash)...])])
  }
}
