package import JSON

#if canImport(Glibc)
  import Glibc
#elseif canImport(Musl)
  import Musl
#else
  import Foundation
#endif

/// Erlang's external term format, the bytes CouchDB hashes into a revision id.
///
/// CouchDB names a new revision `N-md5hex(term_to_binary(Term, [{minor_version, 1}]))` where
/// `Term` is `[Deleted, OldStart, OldRev, Body, Atts]` (`couch_db:new_revid/1`; see
/// ``RevisionDigest``). This file writes those bytes from a parsed document, the way Erlang/OTP
/// encodes the terms jiffy (CouchDB's JSON library) decodes it into.
///
/// ## A worked example
/// `PUT /db/doc` with the body `{"a":[1,2],"_id":"doc","b":1.5}` and no `_rev`:
///
/// ```
/// Term:  [false, 0, 0, {[{<<"a">>, [1,2]}, {<<"b">>, 1.5}]}, []]
///
/// 83                          version 131
/// 6C 00000005                 LIST_EXT, 5 elements
///   64 0005 66616C7365        ATOM_EXT "false"          Deleted
///   61 00                     SMALL_INTEGER_EXT 0        OldStart
///   61 00                     SMALL_INTEGER_EXT 0        OldRev (a new document has none)
///   68 01                     SMALL_TUPLE_EXT, arity 1   Body: {Members}
///     6C 00000002             LIST_EXT, 2 members       (`_id` is not part of the body)
///       68 02                 {Key, Value}
///         6D 00000001 61      BINARY_EXT "a"
///         6B 0002 01 02       STRING_EXT: a list of integers 0...255 is written as bytes
///       68 02
///         6D 00000001 62      BINARY_EXT "b"
///         46 3FF8000000000000 NEW_FLOAT_EXT 1.5 (IEEE 754, big-endian)
///       6A                    NIL_EXT, the list's tail
///   6A                        NIL_EXT: no attachments
/// 6A                          NIL_EXT, the list's tail
/// ```
///
/// MD5 of those 58 bytes is `a32c3c6815c57dd7e868655acc8d0d4c`, so CouchDB answers
/// `1-a32c3c6815c57dd7e868655acc8d0d4c` (``RevisionDigest/revision(parent:deleted:body:attachments:)``
/// computes it; `RevisionIDTests` pins this example, checked against Erlang/OTP's own
/// `term_to_binary`).
///
/// ## From JSON to terms, as jiffy decodes
/// - an object is `{[{Key, Value}, ...]}`: members in the order written, duplicates kept;
/// - a string or key is a binary of its UTF-8 bytes (escapes decoded);
/// - a number without fraction or exponent is an integer of any size (`-0` is `0`); any other
///   number is a double (`1.0`, `1e2`, `-0.0` with its sign), read as jiffy 1.1 reads it
///   (``jiffyDouble(_:)``: `5e-324` is `0.0`);
/// - of a key written twice in one object only the last member is kept, at its place;
/// - `true`, `false` and `null` are atoms; an array is a list.
///
/// ## The encodings used
/// Atoms are `ATOM_EXT` (minor version 1 writes no UTF-8 atom tags); integers `0...255` are
/// `SMALL_INTEGER_EXT`, other 32-bit integers `INTEGER_EXT`, larger ones `SMALL_BIG_EXT` (or
/// `LARGE_BIG_EXT` past 255 bytes) with their magnitude's bytes least significant first; a
/// non-empty list whose elements are all integers `0...255` (at most 65,535 of them) is
/// `STRING_EXT`; the empty list is `NIL_EXT`.
package enum ErlangTermFormat {
  static let version: UInt8 = 131
  static let newFloat: UInt8 = 70
  static let smallInteger: UInt8 = 97
  static let integer: UInt8 = 98
  static let atom: UInt8 = 100
  static let smallTuple: UInt8 = 104
  static let `nil`: UInt8 = 106
  static let string: UInt8 = 107
  static let list: UInt8 = 108
  static let binary: UInt8 = 109
  static let smallBig: UInt8 = 110
  static let largeBig: UInt8 = 111

  /// Appends the atom `name` (Latin-1 text of at most 255 bytes, as all atoms here are).
  package static func appendAtom(_ name: StaticString, to out: inout ByteSink) {
    out.append(atom)
    appendUInt16(UInt16(name.utf8CodeUnitCount), to: &out)
    unsafe out.append(name.utf8Start, count: name.utf8CodeUnitCount)
  }

  package static func appendBool(_ value: Bool, to out: inout ByteSink) {
    if value { appendAtom("true", to: &out) } else { appendAtom("false", to: &out) }
  }

  /// Appends an integer as the smallest of Erlang's integer encodings that holds it.
  package static func appendInteger(_ value: Int64, to out: inout ByteSink) {
    if value >= 0 && value <= 255 {
      out.append(smallInteger)
      out.append(UInt8(value))
    } else if value >= Int64(Int32.min) && value <= Int64(Int32.max) {
      out.append(integer)
      appendUInt32(UInt32(bitPattern: Int32(value)), to: &out)
    } else {
      var magnitude = value.magnitude
      var bytes: [UInt8] = []
      while magnitude > 0 {
        bytes.append(UInt8(truncatingIfNeeded: magnitude))
        magnitude >>= 8
      }
      appendBig(negative: value < 0, littleEndian: bytes, to: &out)
    }
  }

  static func appendBig(negative: Bool, littleEndian bytes: [UInt8], to out: inout ByteSink) {
    if bytes.count <= 255 {
      out.append(smallBig)
      out.append(UInt8(bytes.count))
    } else {
      out.append(largeBig)
      appendUInt32(UInt32(bytes.count), to: &out)
    }
    out.append(negative ? 1 : 0)
    unsafe bytes.withUnsafeBufferPointer { unsafe out.append($0) }
  }

  /// Appends a binary: its length, then its bytes.
  package static func appendBinary(_ bytes: some Collection<UInt8>, to out: inout ByteSink) {
    out.append(binary)
    appendUInt32(UInt32(bytes.count), to: &out)
    for b in bytes { out.append(b) }
  }

  /// Appends a string as a binary of its UTF-8 bytes.
  package static func appendBinary(utf8 s: String, to out: inout ByteSink) {
    out.append(binary)
    appendUInt32(UInt32(s.utf8.count), to: &out)
    out.append(utf8: s)
  }

  /// Appends a JSON value as the term jiffy decodes it into.
  package static func appendJSON(_ value: JSONValue, to out: inout ByteSink) {
    switch value {
    case .null: appendAtom("null", to: &out)
    case .bool(let b): appendBool(b, to: &out)
    case .number(let n): appendNumber(n, to: &out)
    case .string(let s): appendBinary(utf8: s, to: &out)
    case .array(let elements): appendArray(elements, to: &out)
    case .object(let o): appendObject(o.members, to: &out)
    }
  }

  /// Appends `{[{Key, Value}, ...]}` for `members`, in their order, less those `skip` names;
  /// of a key written more than once only the last member is kept, where it stands (jiffy's
  /// `dedupe_keys`, which CouchDB uses: `{"a":1,"b":2,"a":3}` is `{[{<<"b">>,2},{<<"a">>,3}]}`).
  package static func appendObject(
    _ members: [JSONObject.Member], skipping skip: (String) -> Bool = { _ in false },
    to out: inout ByteSink
  ) {
    out.append(smallTuple)
    out.append(1)
    let n = members.count
    // Which members are written: not skipped, and not followed by another of the same key.
    // A bit mask for the usual object; a set past 64 members.
    var small: UInt64 = 0
    var large: Set<Int> = []
    var written = 0
    if n <= 64 {
      for i in 0..<n where !skip(members[i].key) && !isShadowed(i, members) {
        small |= 1 << UInt64(i)
        written += 1
      }
    } else {
      var seen: Set<String> = []
      for i in stride(from: n - 1, through: 0, by: -1) {
        let key = members[i].key
        if seen.insert(key).inserted && !skip(key) { large.insert(i) }
      }
      written = large.count
    }
    guard written > 0 else {
      out.append(`nil`)
      return
    }
    out.append(list)
    appendUInt32(UInt32(written), to: &out)
    for i in 0..<n {
      guard n <= 64 ? small & (1 << UInt64(i)) != 0 : large.contains(i) else { continue }
      out.append(smallTuple)
      out.append(2)
      appendBinary(utf8: members[i].key, to: &out)
      appendJSON(members[i].value, to: &out)
    }
    out.append(`nil`)
  }

  /// Whether member `i`'s key is written again further on.
  @inline(__always)
  static func isShadowed(_ i: Int, _ members: [JSONObject.Member]) -> Bool {
    let key = members[i].key
    var j = i + 1
    while j < members.count {
      if members[j].key == key { return true }
      j += 1
    }
    return false
  }

  static func appendArray(_ elements: [JSONValue], to out: inout ByteSink) {
    guard !elements.isEmpty else {
      out.append(`nil`)
      return
    }
    if elements.count <= 0xFFFF, let bytes = byteString(elements) {
      out.append(string)
      appendUInt16(UInt16(bytes.count), to: &out)
      unsafe bytes.withUnsafeBufferPointer { unsafe out.append($0) }
      return
    }
    out.append(list)
    appendUInt32(UInt32(elements.count), to: &out)
    for e in elements { appendJSON(e, to: &out) }
    out.append(`nil`)
  }

  /// The elements as bytes when every one is an integer `0...255`: Erlang writes such a list
  /// as a string.
  static func byteString(_ elements: [JSONValue]) -> [UInt8]? {
    var bytes: [UInt8] = []
    for e in elements {
      guard case .number(let n) = e, n.isIntegerLiteral, let v = smallValue(n.text) else {
        return nil
      }
      bytes.append(v)
    }
    return bytes
  }

  /// The value of an integer literal when it is `0...255` (`-0` included).
  static func smallValue(_ text: String) -> UInt8? {
    var negative = false
    var value = 0
    var digits = 0
    for b in text.utf8 {
      if b == UInt8(ascii: "-") {
        negative = true
        continue
      }
      value = value * 10 + Int(b &- UInt8(ascii: "0"))
      digits += 1
      if value > 255 || digits > 3 { return nil }
    }
    if negative && value != 0 { return nil }
    return UInt8(value)
  }

  static func appendNumber(_ n: JSONNumber, to out: inout ByteSink) {
    if n.isIntegerLiteral {
      appendIntegerLiteral(n.text, to: &out)
    } else {
      out.append(newFloat)
      out.append(bigEndian: jiffyDouble(n.text).bitPattern)
    }
  }

  /// The double jiffy 1.1 (CouchDB 3.4's) makes of a number literal with a fraction or an
  /// exponent. It tries `strtod` on literals under 32 bytes and keeps the result unless
  /// `strtod` reports a range error (a result too small to be normal, or too large); otherwise
  /// a literal with a fraction goes through Erlang's `list_to_float` (the same correctly rounded
  /// value) and one with an exponent but no fraction becomes `I * math:pow(10, E)` in floating
  /// point. So `5e-324` is `0.0` (`5 * 1.0e-324` underflows), while `5.0e-324` is the smallest
  /// subnormal.
  static func jiffyDouble(_ text: String) -> Double {
    let value = Double(text) ?? 0
    let utf8 = text.utf8
    if utf8.contains(UInt8(ascii: ".")) { return value }
    let inRange = value.isNormal || (value == 0 && !hasNonZeroMantissa(utf8))
    if utf8.count < 32 && inRange { return value }
    // `I * math:pow(10, E)`: the integer before the exponent, as a double, times a power of ten.
    guard let e = utf8.firstIndex(where: { $0 == UInt8(ascii: "e") || $0 == UInt8(ascii: "E") })
    else { return value }
    let mantissa = Substring(text[..<e])
    let exponent = Substring(text[text.utf8.index(after: e)...])
    guard let i = Double(mantissa), let x = Double(exponent) else { return value }
    // An integer mantissa of `-0` is the integer 0 in Erlang: the product's sign is the power's.
    let factor = i == 0 ? 0 : i
    return factor * erlangPow10(x)
  }

  /// `math:pow(10, E)`: C's `pow`.
  static func erlangPow10(_ e: Double) -> Double {
    #if canImport(Glibc)
      return Glibc.pow(10, e)
    #elseif canImport(Musl)
      return Musl.pow(10, e)
    #else
      return Foundation.pow(10, e)
    #endif
  }

  /// Whether a number literal's digits before its exponent include a non-zero one.
  static func hasNonZeroMantissa(_ utf8: String.UTF8View) -> Bool {
    for b in utf8 {
      if b == UInt8(ascii: "e") || b == UInt8(ascii: "E") { return false }
      if b >= UInt8(ascii: "1") && b <= UInt8(ascii: "9") { return true }
    }
    return false
  }

  /// Appends an integer literal (no fraction or exponent) as the integer it is, of any size.
  static func appendIntegerLiteral(_ text: String, to out: inout ByteSink) {
    if let v = Int64(text) {
      appendInteger(v, to: &out)
      return
    }
    // Beyond 64 bits: the decimal digits into base-256 digits, least significant first.
    var negative = false
    var limbs: [UInt32] = []  // little-endian base 2^32
    for b in text.utf8 {
      if b == UInt8(ascii: "-") {
        negative = true
        continue
      }
      var carry = UInt64(b &- UInt8(ascii: "0"))
      for i in limbs.indices {
        let x = UInt64(limbs[i]) * 10 + carry
        limbs[i] = UInt32(truncatingIfNeeded: x)
        carry = x >> 32
      }
      if carry > 0 { limbs.append(UInt32(carry)) }
    }
    var bytes: [UInt8] = []
    for limb in limbs {
      for k in 0..<4 { bytes.append(UInt8(truncatingIfNeeded: limb >> (8 * UInt32(k)))) }
    }
    while bytes.last == 0 { bytes.removeLast() }
    if bytes.isEmpty {
      appendInteger(0, to: &out)
    } else {
      appendBig(negative: negative, littleEndian: bytes, to: &out)
    }
  }

  static func appendUInt16(_ v: UInt16, to out: inout ByteSink) {
    out.append(UInt8(v >> 8))
    out.append(UInt8(truncatingIfNeeded: v))
  }

  static func appendUInt32(_ v: UInt32, to out: inout ByteSink) {
    out.append(UInt8(v >> 24))
    out.append(UInt8(truncatingIfNeeded: v >> 16))
    out.append(UInt8(truncatingIfNeeded: v >> 8))
    out.append(UInt8(truncatingIfNeeded: v))
  }
}
