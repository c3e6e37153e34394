import Formats
public import JSON
import RevTree

/// One attachment of a revision as the store keeps it: its metadata, recorded in the revision's
/// event (``DocumentEvent/attachments``), and its bytes as stored, in the database's
/// ``BlobStore`` under the MD5 of those bytes.
///
/// The fields are CouchDB's (`couch_att`): `length` is the identity length (CouchDB's
/// `disk_len`, shown as `length`), `storedLength` the length of the bytes stored (`att_len`,
/// shown as `encoded_length` when gzip), `md5` the MD5 of the stored bytes (shown as
/// `digest`, `md5-<base64>`), `revpos` the generation of the revision that last gave it new data.
public struct StoredAttachment: Sendable, Hashable {
  public var name: String
  /// The `content_type` as given (a JSON value: CouchDB keeps whatever JSON was sent).
  public var contentType: JSONValue
  /// The length of the data (decoded).
  public var length: Int
  /// The length of the bytes stored (gzip when ``encoding`` is `"gzip"`).
  public var storedLength: Int
  /// `"gzip"`, or nil for identity.
  public var encoding: String?
  /// The MD5 of the stored bytes (16 bytes): the blob's name and the digest.
  public var md5: [UInt8]
  public var revpos: Int

  public init(
    name: String, contentType: JSONValue, length: Int, storedLength: Int, encoding: String?,
    md5: [UInt8], revpos: Int
  ) {
    self.name = name
    self.contentType = contentType
    self.length = length
    self.storedLength = storedLength
    self.encoding = encoding
    self.md5 = md5
    self.revpos = revpos
  }

  /// `md5-<base64 of the MD5>`, as CouchDB's stubs and `ETag`s show it.
  public var digest: String { "md5-" + Base64.encode(md5) }

  /// The content type as a string (CouchDB's `Content-Type` header), when it is one.
  public var contentTypeString: String? { contentType.stringValue }

  /// What the revision digest takes of it (`couch_db:new_revid`: name, type, md5).
  var digestInput: RevisionDigest.Attachment {
    RevisionDigest.Attachment(name: name, contentType: contentType, md5: md5)
  }

  /// The attachment as CouchDB's `couch_att:to_json/4` writes it: `content_type`, `revpos`,
  /// `digest`, then `length` and `stub` (or `data`, the decoded bytes in base64, when `data`
  /// is given), then `encoding` and `encoded_length` when `showEncoding` and gzip-stored.
  public func json(data: [UInt8]? = nil, follows: Bool = false, showEncoding: Bool = false)
    -> JSONValue
  {
    var members: [JSONObject.Member] = [
      .init(key: "content_type", value: contentType),
      .init(key: "revpos", value: .number(JSONNumber(Int64(revpos)))),
      .init(key: "digest", value: .string(digest)),
    ]
    if let data {
      members.append(.init(key: "data", value: .string(Base64.encode(data))))
    } else {
      members.append(.init(key: "length", value: .number(JSONNumber(Int64(length)))))
      members.append(.init(key: follows ? "follows" : "stub", value: .bool(true)))
    }
    if showEncoding, let encoding {
      members.append(.init(key: "encoding", value: .string(encoding)))
      members.append(.init(key: "encoded_length", value: .number(JSONNumber(Int64(storedLength)))))
    }
    return .object(JSONObject(members))
  }

  func encode(into w: inout ByteWriter) {
    w.string(name)
    w.data(contentType.serialized())
    w.varint(length)
    w.varint(storedLength)
    w.byte(encoding == "gzip" ? 1 : 0)
    w.raw(md5)
    w.varint(revpos)
  }

  init(decoding r: inout ByteReader) throws {
    name = try r.string()
    contentType = try JSONValue(parsing: Array(try r.data()))
    length = try r.int()
    storedLength = try r.int()
    encoding = try r.byte() == 1 ? "gzip" : nil
    var md5: [UInt8] = []
    md5.reserveCapacity(16)
    for _ in 0..<16 { md5.append(try r.byte()) }
    self.md5 = md5
    revpos = try r.int()
  }
}

/// One entry of a document's `_attachments` as a client sends it (`couch_att:from_json/2`).
public enum AttachmentInput: Sendable, Hashable {
  /// `"stub": true`: the attachment of that name the previous revision has (with `revpos`,
  /// which must then agree).
  case stub(name: String, revpos: Int?)
  /// Inline `data` (base64), decoded, with the `revpos` given (0 when absent; a local edit
  /// sets it to the new generation, as `couch_db:set_new_att_revpos/1`).
  case data(name: String, contentType: JSONValue, bytes: [UInt8], revpos: Int)
  /// `"follows": true`: the data follows in a `multipart/related` body (``Follows``).
  case follows(Follows)
  /// Bytes already encoded as `encoding` (gzip), stored as they are (a `follows` attachment
  /// sent encoded, as CouchDB's replicator sends compressed ones).
  case encoded(name: String, contentType: JSONValue, bytes: [UInt8], length: Int, revpos: Int)
  /// Bytes already in the blob store (a streamed `PUT /db/doc/att`, ``BlobUpload``).
  case stored(StoredAttachment)
  /// An attachment of another revision (`COPY`): its blob and its `revpos` kept, as
  /// `couch_db:set_new_att_revpos/1` keeps the `revpos` of data already on disk.
  case copied(StoredAttachment)

  /// What a `"follows": true` entry says of the part that carries its data.
  public struct Follows: Sendable, Hashable {
    public var name: String
    public var contentType: JSONValue
    /// `length` (decoded).
    public var length: Int?
    /// `encoding` (`gzip`), nil for identity.
    public var encoding: String?
    /// `encoded_length`, or `length`: the size of the part.
    public var partLength: Int?
    /// The MD5 `digest` names, checked against the part when given.
    public var md5: [UInt8]?
    public var revpos: Int
  }

  public var name: String {
    switch self {
    case .stub(let name, _), .data(let name, _, _, _), .encoded(let name, _, _, _, _): name
    case .follows(let f): f.name
    case .stored(let a), .copied(let a): a.name
    }
  }

  /// CouchDB's default `content_type`.
  public static let defaultContentType = "application/octet-stream"

  /// Reads the `_attachments` object as CouchDB does: entries that are not objects are
  /// skipped, `stub` and `follows` count only when `true`, anything else must carry `data`
  /// in base64 (`bad_request` "Invalid attachment data for NAME"). Names starting with `_` are
  /// refused as `chttpd_db:validate_attachment_name/1` does, duplicate names as
  /// `couch_db:check_dup_atts/1`.
  static func parse(_ value: JSONValue) throws(StoreError) -> [AttachmentInput] {
    guard let object = value.objectValue else {
      throw StoreError.invalidDocument("Bad special document member: _attachments")
    }
    var out: [AttachmentInput] = []
    var names = Set<String>()
    for member in object.members {
      guard let props = member.value.objectValue else { continue }
      let name = member.key
      let type = props["content_type"] ?? .string(defaultContentType)
      let att: AttachmentInput
      if props["stub"] == .bool(true) {
        att = .stub(name: name, revpos: props["revpos"]?.numberValue?.int64Value.map { Int($0) })
      } else if props["follows"] == .bool(true) {
        let length = props["length"]?.numberValue?.int64Value.map { Int($0) }
        let encoding = props["encoding"]?.stringValue.flatMap { $0 == "identity" ? nil : $0 }
        var md5: [UInt8]? = nil
        if let digest = props["digest"]?.stringValue, digest.hasPrefix("md5-") {
          md5 = Base64.decode(String(digest.dropFirst(4)))
        }
        att = .follows(
          Follows(
            name: name, contentType: type, length: length, encoding: encoding,
            partLength: encoding == nil
              ? length : props["encoded_length"]?.numberValue?.int64Value.map { Int($0) } ?? length,
            md5: md5, revpos: revpos(props)))
      } else {
        guard let text = props["data"]?.stringValue, let bytes = Base64.decode(text) else {
          throw StoreError.badRequest("Invalid attachment data for \(name)")
        }
        att = .data(name: name, contentType: type, bytes: bytes, revpos: revpos(props))
      }
      out.append(att)
    }
    // chttpd validates the names after parsing, couch_db refuses duplicates when it writes.
    for att in out where att.name.hasPrefix("_") {
      throw StoreError.badRequest(
        "Attachment name '\(att.name)' starts with prohibited character '_'")
    }
    for att in out where !names.insert(att.name).inserted {
      throw StoreError.badRequest("Duplicate attachments")
    }
    return out
  }

  private static func revpos(_ props: JSONObject) -> Int {
    props["revpos"]?.numberValue?.int64Value.map { Int(clamping: $0) } ?? 0
  }
}

extension DocumentInput {
  /// The `follows` attachments given their data: the parts after the JSON of a
  /// `multipart/related` body, in the order of `_attachments` (`couch_doc:doc_from_multi_part_stream`).
  /// A part of another length than the entry says, or whose MD5 is not its `digest`, is refused
  /// as CouchDB refuses it.
  public mutating func attachFollowing(_ parts: [[UInt8]]) throws(StoreError) {
    guard let list = attachments else {
      if !parts.isEmpty { throw StoreError.badRequest("attachment parts without attachments") }
      return
    }
    var next = 0
    var out: [AttachmentInput] = []
    for att in list {
      guard case .follows(let f) = att else {
        out.append(att)
        continue
      }
      guard next < parts.count else {
        throw StoreError.badRequest("attachment shorter than expected")
      }
      let bytes = parts[next]
      next += 1
      if let expected = f.partLength, expected != bytes.count {
        throw StoreError.badRequest(
          bytes.count > expected
            ? "attachment longer than expected" : "attachment shorter than expected")
      }
      if let md5 = f.md5, !md5.isEmpty, md5 != AttachmentEncoding.md5(bytes) {
        throw StoreError("content_md5_mismatch", "Possible message corruption.", code: .badRequest)
      }
      if let encoding = f.encoding {
        guard encoding == "gzip" else {
          throw StoreError.badRequest("Unsupported attachment encoding: \(encoding)")
        }
        out.append(
          .encoded(
            name: f.name, contentType: f.contentType, bytes: bytes, length: f.length ?? bytes.count,
            revpos: f.revpos))
      } else {
        out.append(.data(name: f.name, contentType: f.contentType, bytes: bytes, revpos: f.revpos))
      }
    }
    guard next == parts.count else {
      throw StoreError.badRequest("more attachment parts than attachments that follow")
    }
    attachments = out
  }
}
