public import JSON

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
    withByteSink { sink in
      appendInput(parent: parent, deleted: deleted, body: body, to: &sink)
      return sink.array()
    }
  }

  static func appendInput(parent: RevID?, deleted: Bool, body: JSONValue, to out: inout ByteSink) {
    if let parent {
      appendDecimal(parent.generation, to: &out)
      out.append(UInt8(ascii: "-"))
      parent.hash.appendText(to: &out)
    }
    out.append(0x0A)
    out.append(deleted ? UInt8(ascii: "1") : UInt8(ascii: "0"))
    out.append(0x0A)
    if case .object(let o) = body {
      JSONWriter.writeCanonicalObject(o.members, skippingMetadata: true, into: &out)
    } else {
      JSONWriter.write(body, canonical: true, into: &out)
    }
  }

  /// Appends an integer in decimal, as `String(value)` writes it.
  static func appendDecimal(_ value: Int, to out: inout ByteSink) {
    if value < 0 { out.append(UInt8(ascii: "-")) }
    var digits: (UInt64, UInt64, UInt64) = (0, 0, 0)
    var v = value.magnitude
    let start = unsafe withUnsafeMutableBytes(of: &digits) { raw in
      var k = raw.count
      repeat {
        k -= 1
        unsafe raw[k] = UInt8(ascii: "0") &+ UInt8(v % 10)
        v /= 10
      } while v > 0
      return k
    }
    unsafe withUnsafeBytes(of: digits) {
      unsafe out.append(raw: UnsafeRawBufferPointer(rebasing: $0[start...]))
    }
  }

  /// The signature of an edit: MD5 of ``input(parent:deleted:body:)``.
  public static func hash(parent: RevID?, deleted: Bool, body: JSONValue) -> RevHash {
    withByteSink { sink in
      appendInput(parent: parent, deleted: deleted, body: body, to: &sink)
      var md5 = MD5()
      unsafe md5.update(buffer: sink.bytes)
      return md5.finalize()
    }
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

extension RevHash {
  /// Appends the textual form's UTF-8 bytes (32 lowercase hex characters for a digest).
  func appendText(to out: inout ByteSink) {
    switch storage {
    case .digest(let hi, let lo):
      var text: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)
      unsafe withUnsafeMutableBytes(of: &text) { raw in
        let digits: StaticString = "0123456789abcdef"
        let d = unsafe digits.utf8Start
        for i in 0..<16 {
          unsafe raw[i] = unsafe d[Int(truncatingIfNeeded: (hi >> UInt64(60 - 4 * i)) & 0xF)]
          unsafe raw[16 + i] = unsafe d[Int(truncatingIfNeeded: (lo >> UInt64(60 - 4 * i)) & 0xF)]
        }
      }
      unsafe withUnsafeBytes(of: text) { unsafe out.append(raw: $0) }
    case .text(let t):
      unsafe t.withUnsafeBufferPointer { unsafe out.append($0) }
    }
  }
}
