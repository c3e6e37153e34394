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
/// "a"    05 29 01 05 01 05 00                 (ICU's sort key: primary, secondary, tertiary)
/// "A"    05 29 01 05 01 DC 00
/// "b"    05 2B 01 05 01 05 00
/// ```
///
/// - **Numbers** compare by value as doubles (`1` equals `1.0`; integers beyond 2^53 lose
///   precision, as in CouchDB's JavaScript heritage).
/// - **Strings** by ICU's root collation (UCA) with its default attributes, the collator
///   CouchDB's `couch_ejson_compare` opens (`ucol_open("")`): a string is encoded as its ICU
///   sort key, which ends with its only zero byte. Punctuation before digits before letters,
///   `"a" < "A" < "á" < "b"`, `"ab" < "aB" < "Ab"`. Strings ICU finds equal (a precomposed
///   letter and its decomposed form) compare equal, as in CouchDB.
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
    case .number(let n): encodeNumber(n.doubleValue, tag: numberTag, into: &out)
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

  static func encodeNumber(_ d: Double, tag: UInt8, into out: inout [UInt8]) {
    out.append(tag)
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
    ICUCollation.appendSortKey(of: s, to: &out)
  }

  /// The bytes a string's encoding starts with for every string beginning with `prefix`
  /// (its tag and the primary level of its ICU sort key, unterminated): the bounds of
  /// `$beginsWith`. The range also holds strings that differ from the prefix only in case or
  /// accents; the selector decides those.
  public static func foldedPrefix(_ prefix: String) -> [UInt8] {
    var key: [UInt8] = []
    ICUCollation.appendSortKey(of: prefix, to: &key)
    // ICU separates the levels of a sort key with 0x01 and ends it with 0x00; weights are
    // above both.
    let primary = key.prefix { $0 > 1 }
    return [stringTag] + primary
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

  /// The tags of the raw collation's encoding (``encodeRaw(_:into:)``), in Erlang's term order.
  static let rawNumberTag: UInt8 = 0x01
  static let rawFalseTag: UInt8 = 0x02
  static let rawNullTag: UInt8 = 0x03
  static let rawTrueTag: UInt8 = 0x04
  static let rawObjectTag: UInt8 = 0x05
  static let rawArrayTag: UInt8 = 0x06
  static let rawStringTag: UInt8 = 0x07

  /// The byte an array's encoding starts with, under the raw collation or ICU's (the prefix
  /// of every array key, for a `group_level` range).
  public static func arrayTag(raw: Bool) -> UInt8 { raw ? rawArrayTag : arrayTag }

  /// Appends the order-preserving encoding of `value` under CouchDB's *raw* collation (a
  /// view's `"options": {"collation": "raw"}`): Erlang's order of the terms CouchDB keeps JSON
  /// as — numbers < `false` < `null` < `true` (atoms, alphabetically) < objects < arrays <
  /// strings; strings by their UTF-8 bytes, objects member by member in their order, arrays
  /// item by item, a shorter prefix first. Self-delimiting, as ``encode(_:into:)`` is.
  public static func encodeRaw(_ value: JSONValue, into out: inout [UInt8]) {
    switch value {
    case .number(let n): encodeNumber(n.doubleValue, tag: rawNumberTag, into: &out)
    case .bool(false): out.append(rawFalseTag)
    case .null: out.append(rawNullTag)
    case .bool(true): out.append(rawTrueTag)
    case .object(let object):
      out.append(rawObjectTag)
      for member in object.members {
        encodeRawString(member.key, into: &out)
        encodeRaw(member.value, into: &out)
      }
      out.append(end)
    case .array(let items):
      out.append(rawArrayTag)
      for item in items { encodeRaw(item, into: &out) }
      out.append(end)
    case .string(let s): encodeRawString(s, into: &out)
    }
  }

  /// A string's raw encoding: its tag, its UTF-8 bytes with 0x00 and 0x01 escaped (`01 01`,
  /// `01 02`), and 0x00.
  static func encodeRawString(_ s: String, into out: inout [UInt8]) {
    out.append(rawStringTag)
    for byte in s.utf8 {
      if byte <= 1 {
        out.append(1)
        out.append(byte + 1)
      } else {
        out.append(byte)
      }
    }
    out.append(end)
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
