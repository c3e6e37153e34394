public import JSON
public import RevTree

/// A document as a client sends it, split into its special fields and its body.
///
/// CouchDB's rules (`couch_doc:transfer_fields`): `_id`, `_rev`, `_deleted` and `_revisions` are
/// taken out; `_conflicts`, `_deleted_conflicts`, `_revs_info` and `_local_seq` are ignored; any
/// other top-level field starting with `_` is refused (`doc_validation`). Attachments are not
/// supported by wikilog yet and are refused with a clear error rather than dropped.
public struct DocumentInput: Sendable, Hashable {
  public var id: String?
  public var rev: String?
  public var deleted: Bool
  public var revisions: RevisionPath?
  /// The body without special fields.
  public var body: JSONObject
  /// The whole document as received (for the revision digest, which skips `_` fields itself).
  public var full: JSONValue

  /// The largest accepted document, like CouchDB's default `max_document_size` (8 MB).
  public static let maxBytes = 8 << 20

  public init(_ value: JSONValue) throws(StoreError) {
    guard let object = value.objectValue else {
      throw StoreError.badRequest("Document must be a JSON object")
    }
    full = value
    deleted = false
    var body = JSONObject()
    for member in object.members {
      let key = member.key
      guard key.hasPrefix("_") else {
        body.members.append(member)
        continue
      }
      switch key {
      case "_id":
        guard let s = member.value.stringValue else {
          throw StoreError.badRequest("Document id must be a string")
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
        guard let o = member.value.objectValue, let start = o["start"]?.numberValue?.int64Value,
          let ids = o["ids"]?.arrayValue
        else { throw StoreError.badRequest("_revisions must be {\"start\": N, \"ids\": [...]}") }
        var strings: [String] = []
        for id in ids {
          guard let s = id.stringValue else {
            throw StoreError.badRequest("_revisions.ids must be strings")
          }
          strings.append(s)
        }
        do {
          revisions = try RevisionPath(start: Int(start), ids: strings)
        } catch {
          throw StoreError.badRequest("invalid _revisions: \(error)")
        }
      case "_conflicts", "_deleted_conflicts", "_revs_info", "_local_seq":
        continue
      case "_attachments":
        throw StoreError.invalidDocument("attachments are not supported by wikilog")
      default:
        throw StoreError.invalidDocument("Bad special document member: \(key)")
      }
    }
    self.body = body
  }

  /// Parses and splits a document from JSON bytes, enforcing ``maxBytes``.
  public init(json bytes: [UInt8]) throws(StoreError) {
    guard bytes.count <= Self.maxBytes else {
      throw StoreError.tooLarge("Document is \(bytes.count) bytes; the limit is \(Self.maxBytes)")
    }
    let value: JSONValue
    do {
      value = try JSONValue(parsing: bytes)
    } catch {
      throw StoreError.badRequest("invalid UTF-8 JSON: \(error)")
    }
    try self.init(value)
  }

  /// The body as stored in the event.
  var bodyBytes: [UInt8] { JSONValue.object(body).serialized() }
}
