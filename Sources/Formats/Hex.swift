/// Hexadecimal digits, shared by the JSON parser's `\u` escapes, the revision ids of RevTree,
/// the log's tree heads, attachment blob names and the Auth module's keys.
///
/// ```swift
/// Hex.encode([0xde, 0xad])   // "dead"
/// Hex.decode("DEAD")         // [0xde, 0xad]
/// ```
public enum Hex {
  /// The value of one hexadecimal digit (either case), or nil.
  @inlinable
  public static func value(_ b: UInt8) -> UInt8? {
    switch b {
    case UInt8(ascii: "0")...UInt8(ascii: "9"): b &- UInt8(ascii: "0")
    case UInt8(ascii: "a")...UInt8(ascii: "f"): b &- UInt8(ascii: "a") &+ 10
    case UInt8(ascii: "A")...UInt8(ascii: "F"): b &- UInt8(ascii: "A") &+ 10
    default: nil
    }
  }

  /// `bytes` as lowercase hexadecimal (a digest, a key, a salt).
  public static func encode(_ bytes: [UInt8]) -> String {
    let digits: [UInt8] = Array("0123456789abcdef".utf8)
    var out: [UInt8] = []
    out.reserveCapacity(bytes.count * 2)
    for b in bytes {
      out.append(digits[Int(b >> 4)])
      out.append(digits[Int(b & 0x0f)])
    }
    return String(decoding: out, as: UTF8.self)
  }

  /// The bytes of hexadecimal `text` (either case), or nil when it is not an even number of
  /// hexadecimal digits.
  public static func decode(_ text: String) -> [UInt8]? {
    let chars = Array(text.utf8)
    guard chars.count % 2 == 0 else { return nil }
    var out: [UInt8] = []
    out.reserveCapacity(chars.count / 2)
    var i = 0
    while i < chars.count {
      guard let hi = value(chars[i]), let lo = value(chars[i + 1]) else { return nil }
      out.append(hi << 4 | lo)
      i += 2
    }
    return out
  }
}
