/// Deterministic revision ids for local edits.
///
/// The new revision of an edit is `(parentGeneration + 1)-md5hex(input)` where `input` is the
/// UTF-8 bytes of
///
/// ```
/// <parent revision id, or nothing for a new document> LF
/// <"1" if the edit is a deletion, "0" otherwise> LF
/// <canonical JSON of the body without its top-level "_" fields>
/// ```
///
/// The canonical JSON is ``JSONValue/canonicalSerialized()``. Top-level fields whose name starts
/// with `_` (`_id`, `_rev`, `_revisions`, `_deleted`, `_attachments`, ...) are metadata and are
/// left out; nested `_` fields are content and stay. The same edit made on two peers therefore
/// yields the same revision id, whatever key order or number spelling each used.
///
/// ```swift
/// let body = try JSONValue(parsing: #"{"_id":"Home","title":"Home","n":1.0}"#)
/// let rev = RevisionDigest.revision(parent: nil, deleted: false, body: body)
/// // input: "\n0\n{\"n\":1,\"title\":\"Home\"}"   → rev "1-<32 hex>"
/// ```
public enum RevisionDigest {
  /// The bytes hashed for an edit (see the type's documentation).
  public static func input(parent: RevID?, deleted: Bool, body: JSONValue) -> [UInt8] {
    var out: [UInt8] = []
    out.reserveCapacity(512)
    if let parent {
      out.append(contentsOf: String(parent.generation).utf8)
      out.append(UInt8(ascii: "-"))
      parent.hash.appendText(to: &out)
    }
    out.append(0x0A)
    out.append(deleted ? UInt8(ascii: "1") : UInt8(ascii: "0"))
    out.append(0x0A)
    if case .object(let o) = body {
      let content = JSONObject(o.members.filter { !$0.key.hasPrefix("_") })
      JSONWriter.write(.object(content), canonical: true, into: &out)
    } else {
      JSONWriter.write(body, canonical: true, into: &out)
    }
    return out
  }

  /// The signature of an edit: MD5 of ``input(parent:deleted:body:)``.
  public static func hash(parent: RevID?, deleted: Bool, body: JSONValue) -> RevHash {
    MD5.hash(input(parent: parent, deleted: deleted, body: body))
  }

  /// The revision id of an edit: generation `parent + 1` (1 without parent) and ``hash(parent:deleted:body:)``.
  ///
  /// `parent.generation` must be below ``RevID/maxGeneration``.
  public static func revision(parent: RevID?, deleted: Bool, body: JSONValue) -> RevID {
    RevID(
      unchecked: (parent?.generation ?? 0) + 1,
      hash: hash(parent: parent, deleted: deleted, body: body))
  }
}
