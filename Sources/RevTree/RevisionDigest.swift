public import JSON

/// Revision ids exactly as CouchDB 3 computes them.
///
/// A local edit's new revision is `N-md5hex(T)` where `N` is the parent's generation plus one
/// (1 for a new document) and `T` is Erlang's external term format (``ErlangTermFormat``, with
/// a worked example) of `[Deleted, OldStart, OldRev, Body, Atts]` (`couch_db:new_revid/1`):
///
/// - `Deleted`: the atom `true` for a deletion, else `false`;
/// - `OldStart`: the parent's generation, `0` for a new document;
/// - `OldRev`: the parent's signature as CouchDB keeps it (32 hex digits as 16 raw bytes, any
///   other signature as its bytes), the integer `0` for a new document;
/// - `Body`: the document's members in the order written, duplicates kept, less the fields
///   CouchDB takes out (`_id`, `_rev`, `_attachments`, `_deleted`, `_revisions`, `_revs_info`,
///   `_conflicts`, `_deleted_conflicts`, `_local_seq`; `_access` and the `_replication_*` fields
///   stay, as in `couch_doc:transfer_fields/3`);
/// - `Atts`: `{Name, ContentType, MD5}` for each attachment, in reverse order.
///
/// The same edit made on CouchDB and on wikilog therefore gets the same id, and replicating it
/// either way is a no-op rather than a conflict.
///
/// ```swift
/// let body = try JSONValue(parsing: #"{"_id":"doc","a":[1,2],"b":1.5}"#)
/// RevisionDigest.revision(parent: nil, deleted: false, body: body).description
/// // "1-a32c3c6815c57dd7e868655acc8d0d4c", the id CouchDB answers for `PUT /db/doc`
/// ```
///
/// Revisions written before wikilog computed CouchDB's ids keep the ids they were given: ids are
/// data, stored in each revision's event, and never recomputed.
public enum RevisionDigest {
  /// An attachment as the revision id sees it: its name, its `content_type` (as the JSON value
  /// given, `"application/octet-stream"` when absent) and the MD5 of its bytes as stored.
  public struct Attachment: Sendable, Hashable {
    public var name: String
    public var contentType: JSONValue
    public var md5: [UInt8]

    public init(name: String, contentType: JSONValue, md5: [UInt8]) {
      self.name = name
      self.contentType = contentType
      self.md5 = md5
    }
  }

  /// The top-level fields CouchDB takes out of a document's body (`couch_doc:transfer_fields`).
  public static func isSpecialField(_ key: String) -> Bool {
    guard key.utf8.first == UInt8(ascii: "_") else { return false }
    switch key {
    case "_id", "_rev", "_attachments", "_deleted", "_revisions", "_revs_info", "_conflicts",
      "_deleted_conflicts", "_local_seq":
      return true
    default:
      return false
    }
  }

  /// The bytes hashed for an edit: the external term format of CouchDB's revision term.
  public static func input(
    parent: RevID?, deleted: Bool, body: JSONValue, attachments: [Attachment] = []
  ) -> [UInt8] {
    withByteSink { sink in
      appendInput(parent: parent, deleted: deleted, body: body, attachments: attachments, to: &sink)
      return sink.array()
    }
  }

  static func appendInput(
    parent: RevID?, deleted: Bool, body: JSONValue, attachments: [Attachment],
    to out: inout ByteSink
  ) {
    typealias T = ErlangTermFormat
    out.append(T.version)
    out.append(T.list)
    T.appendUInt32(5, to: &out)
    T.appendBool(deleted, to: &out)
    if let parent {
      T.appendInteger(Int64(parent.generation), to: &out)
      switch parent.hash.storage {
      case .digest(let hi, let lo):
        out.append(T.binary)
        T.appendUInt32(16, to: &out)
        out.append(bigEndian: hi)
        out.append(bigEndian: lo)
      case .text(let bytes):
        T.appendBinary(bytes, to: &out)
      }
    } else {
      T.appendInteger(0, to: &out)
      T.appendInteger(0, to: &out)
    }
    if case .object(let o) = body {
      T.appendObject(o.members, skipping: isSpecialField, to: &out)
    } else {
      T.appendJSON(body, to: &out)
    }
    if attachments.isEmpty {
      out.append(T.nil)
    } else {
      out.append(T.list)
      T.appendUInt32(UInt32(attachments.count), to: &out)
      for a in attachments.reversed() {
        out.append(T.smallTuple)
        out.append(3)
        T.appendBinary(utf8: a.name, to: &out)
        T.appendJSON(a.contentType, to: &out)
        T.appendBinary(a.md5, to: &out)
      }
      out.append(T.nil)
    }
    out.append(T.nil)  // the tail of the five-element list
  }

  /// The signature of an edit: MD5 of ``input(parent:deleted:body:attachments:)``.
  public static func hash(
    parent: RevID?, deleted: Bool, body: JSONValue, attachments: [Attachment] = []
  ) -> RevHash {
    withByteSink { sink in
      appendInput(parent: parent, deleted: deleted, body: body, attachments: attachments, to: &sink)
      var md5 = MD5()
      unsafe md5.update(buffer: sink.bytes)
      return md5.finalize()
    }
  }

  /// The revision id of an edit: generation `parent + 1` (1 without parent) and
  /// ``hash(parent:deleted:body:attachments:)``.
  ///
  /// `parent.generation` must be below ``RevID/maxGeneration``.
  public static func revision(
    parent: RevID?, deleted: Bool, body: JSONValue, attachments: [Attachment] = []
  ) -> RevID {
    RevID(
      unchecked: (parent?.generation ?? 0) + 1,
      hash: hash(parent: parent, deleted: deleted, body: body, attachments: attachments))
  }
}
