public import JSON

/// CouchDB's collation of JSON values, as an order-preserving byte encoding.
///
/// CouchDB sorts view and Mango keys by type first, then by value
/// (`couch_ejson_compare`): `null` < `false` < `true` < numbers < strings < arrays < objects.
/// ``encode(_:)`` writes a value so that comparing two encodings byte by byte gives that
/// order; ``compare(_:_:)`` is exactly that comparison, so what the selector's `$gt` decides in
/// memory and what an index scan finds in LMDB always agree.
///
/// Worked example: `[null, 2, "b", "A", "a"]` sorts as `null, 2, "a", "A", "b"`:
///
/// ```
/// null   01
/// 2      04 C0 00 00 00 00 00 00 00          (a double, sign bit flipped)
/// "a"    05 61 00 41 00                       (case-folded "a", then case level "A")
/// "A"    05 61 00 61 00                       (case-folded "a", then case level "a")
/// "b"    05 62 00 42 00
/// ```
///
/// - **Numbers** compare by value as doubles (`1` equals `1.0`; integers beyond 2^53 lose
///   precision, as in CouchDB's JavaScript heritage).
/// - **Strings**: CouchDB uses ICU's root collation (UCA). This is an approximation of it,
///   in two levels: first the strings case-folded (Unicode lowercase mapping) by code point,
///   then, for strings equal when folded, lowercase before uppercase letter by letter (ICU's
///   tertiary level: `"a" < "A" < "b" < "B"`, `"ab" < "aB" < "Ab"`). Unlike UCA, punctuation
///   and digits sort by code point and accents are not a secondary level (`"é"` sorts after
///   `"z"`). Two strings are equal only when identical.
/// - **Arrays** element by element, a shorter prefix first; **objects** member by member (key,
///   then value), in their order in the document, a shorter prefix first.
public enum Collation {
  /// The tags that start each type's encoding, in collation order.
  static let nullTag: UInt8 = 0x01
  static let falseTag: UInt8 = 0x02
  static let trueTag: UInt8 = 0x03
  static let numberTag: UInt8 = 0x04
  static let stringTag: UInt8 = 0x05
  static let arrayTag: UInt8 = 0x06
  static let objectTag: UInt8 = 0x07
  /// Ends a string level, an array or an object (below every tag).
  static let end: UInt8 = 0x00

  /// The order-preserving encoding of `value`; self-delimiting, so encodings can be
  /// concatenated (an index key of several fields) and still compare field by field.
  public static func encode(_ value: JSONValue) -> [UInt8] {
    var out: [UInt8] = []
    out.reserveCapacity(16)
    encode(value, into: &out)
    return out
  }

  /// Appends the encoding of `value` to `out`.
  public static func encode(_ value: JSONValue, into out: inout [UInt8]) {
    switch value {
    case .null: out.append(nullTag)
    case .bool(let b): out.append(b ? trueTag : falseTag)
    case .number(let n): encodeNumber(n.doubleValue, into: &out)
    case .string(let s): encodeString(s, into: &out)
    case .array(let items):
      out.append(arrayTag)
      for item in items { encode(item, into: &out) }
      out.append(end)
    case .object(let object):
      out.append(objectTag)
      for member in object.members {
        encodeString(member.key, into: &out)
        encode(member.value, into: &out)
      }
      out.append(end)
    }
  }

  static func encodeNumber(_ d: Double, into out: inout [UInt8]) {
    out.append(numberTag)
    var bits = (d == 0 ? 0.0 : d).bitPattern
    bits = bits & (1 << 63) != 0 ? ~bits : bits | (1 << 63)
    for shift in stride(from: 56, through: 0, by: -8) {
      out.append(UInt8(truncatingIfNeeded: bits >> UInt64(shift)))
    }
  }

  /// The string tag and the string's two levels (see the type's discussion), each with its
  /// bytes 0x00 and 0x01 escaped (`01 01`, `01 02`) and ended by 0x00.
  static func encodeString(_ s: String, into out: inout [UInt8]) {
    out.append(stringTag)
    let (folded, caseLevel) = levels(s)
    appendEscaped(folded, into: &out)
    appendEscaped(caseLevel, into: &out)
  }

  /// The bytes a string's encoding starts with for every string beginning with `prefix`
  /// (its tag and its case-folded first level, unterminated): the bounds of `$beginsWith`.
  public static func foldedPrefix(_ prefix: String) -> [UInt8] {
    var out: [UInt8] = [stringTag]
    let folded = levels(prefix).folded
    for b in folded {
      if b <= 1 {
        out.append(1)
        out.append(b + 1)
      } else {
        out.append(b)
      }
    }
    return out
  }

  static func appendEscaped(_ bytes: some Sequence<UInt8>, into out: inout [UInt8]) {
    for b in bytes {
      if b <= 1 {
        out.append(1)
        out.append(b + 1)
      } else {
        out.append(b)
      }
    }
    out.append(end)
  }

  /// The case-folded string and the case level: the string with the case of each letter
  /// swapped, so that comparing it byte by byte puts lowercase first.
  static func levels(_ s: String) -> (folded: [UInt8], caseLevel: [UInt8]) {
    let utf8 = s.utf8
    if utf8.allSatisfy({ $0 < 0x80 }) {
      var folded: [UInt8] = []
      var swapped: [UInt8] = []
      folded.reserveCapacity(utf8.count)
      swapped.reserveCapacity(utf8.count)
      for b in utf8 {
        switch b {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"):
          folded.append(b + 32)
          swapped.append(b + 32)
        case UInt8(ascii: "a")...UInt8(ascii: "z"):
          folded.append(b)
          swapped.append(b - 32)
        default:
          folded.append(b)
          swapped.append(b)
        }
      }
      return (folded, swapped)
    }
    var swapped = ""
    for c in s {
      if c.isLowercase {
        swapped += c.uppercased()
      } else if c.isUppercase {
        swapped += c.lowercased()
      } else {
        swapped.append(c)
      }
    }
    return (Array(s.lowercased().utf8), Array(swapped.utf8))
  }

  /// CouchDB's comparison of two values: negative, zero or positive.
  public static func compare(_ a: JSONValue, _ b: JSONValue) -> Int {
    // Fast paths for the common same-type cases; the encoding decides the rest.
    switch (a, b) {
    case (.number(let x), .number(let y)):
      let (dx, dy) = (x.doubleValue, y.doubleValue)
      return dx < dy ? -1 : (dx > dy ? 1 : 0)
    case (.null, .null): return 0
    case (.bool(let x), .bool(let y)): return x == y ? 0 : (x ? 1 : -1)
    default:
      let (ea, eb) = (encode(a), encode(b))
      return ea == eb ? 0 : (ea.lexicographicallyPrecedes(eb) ? -1 : 1)
    }
  }

  /// Byte order of `a` and `b` (CouchDB's raw collation, used for `_id`) when both are
  /// strings; ``compare(_:_:)`` otherwise.
  static func compareRaw(_ a: JSONValue, _ b: JSONValue) -> Int {
    if case .string(let x) = a, case .string(let y) = b {
      return x.utf8.elementsEqual(y.utf8)
        ? 0 : (x.utf8.lexicographicallyPrecedes(y.utf8) ? -1 : 1)
    }
    return compare(a, b)
  }
}
