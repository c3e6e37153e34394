/// Base64 with the standard alphabet and padding, as Erlang's `base64` module: decoding skips
/// whitespace and requires the padding. The URL alphabet without padding (`b64url`, as CouchDB
/// writes cookies and JWTs) is ``encodeURL(_:)`` and ``decodeURL(_:)``.
///
/// ```swift
/// Base64.encode(Array("hi".utf8))   // "aGk="
/// Base64.decodeURL("aGk")           // [0x68, 0x69]
/// ```
public enum Base64 {
  static let alphabet = Array(
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)
  static let urlAlphabet = Array(
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)
  static let values = table(alphabet)
  static let urlValues = table(urlAlphabet)

  /// Each byte's 6-bit value in `alphabet`, or 0xFF for a byte outside it.
  static func table(_ alphabet: [UInt8]) -> [UInt8] {
    var table = [UInt8](repeating: 0xFF, count: 256)
    for (i, c) in alphabet.enumerated() { table[Int(c)] = UInt8(i) }
    return table
  }

  public static func encode(_ bytes: [UInt8]) -> String {
    encode(bytes, alphabet: alphabet, padded: true)
  }

  /// base64url without padding.
  public static func encodeURL(_ bytes: [UInt8]) -> String {
    encode(bytes, alphabet: urlAlphabet, padded: false)
  }

  static func encode(_ bytes: [UInt8], alphabet: [UInt8], padded: Bool) -> String {
    var out: [UInt8] = []
    out.reserveCapacity((bytes.count + 2) / 3 * 4)
    var i = 0
    while i + 3 <= bytes.count {
      let n = UInt32(bytes[i]) << 16 | UInt32(bytes[i + 1]) << 8 | UInt32(bytes[i + 2])
      out.append(alphabet[Int(n >> 18 & 63)])
      out.append(alphabet[Int(n >> 12 & 63)])
      out.append(alphabet[Int(n >> 6 & 63)])
      out.append(alphabet[Int(n & 63)])
      i += 3
    }
    let rest = bytes.count - i
    if rest > 0 {
      let n = UInt32(bytes[i]) << 16 | (rest == 2 ? UInt32(bytes[i + 1]) << 8 : 0)
      out.append(alphabet[Int(n >> 18 & 63)])
      out.append(alphabet[Int(n >> 12 & 63)])
      if rest == 2 { out.append(alphabet[Int(n >> 6 & 63)]) }
      if padded { out.append(contentsOf: Array(repeating: UInt8(ascii: "="), count: 3 - rest)) }
    }
    return String(decoding: out, as: UTF8.self)
  }

  /// The bytes of base64url text (padding optional); nil for a character outside the URL
  /// alphabet (`+` and `/` included) or a length no encoding gives.
  public static func decodeURL(_ text: some StringProtocol) -> [UInt8]? {
    var input = Array(text.utf8)
    while input.last == UInt8(ascii: "=") { input.removeLast() }
    guard input.count % 4 != 1 else { return nil }
    var out: [UInt8] = []
    out.reserveCapacity(input.count * 3 / 4)
    var buffer: UInt32 = 0
    var bits = 0
    for c in input {
      let v = urlValues[Int(c)]
      guard v != 0xFF else { return nil }
      buffer = buffer << 6 | UInt32(v)
      bits += 6
      if bits >= 8 {
        bits -= 8
        out.append(UInt8(truncatingIfNeeded: buffer >> UInt32(bits)))
      }
    }
    return out
  }

  /// The bytes of `text`, or nil when it is not base64.
  public static func decode(_ text: String) -> [UInt8]? {
    var out: [UInt8] = []
    out.reserveCapacity(text.utf8.count / 4 * 3)
    var quad: UInt32 = 0
    var count = 0
    var padding = 0
    for c in text.utf8 {
      if c == 0x20 || c == 0x09 || c == 0x0A || c == 0x0D { continue }
      if c == UInt8(ascii: "=") {
        padding += 1
        guard count >= 2, count + padding <= 4 else { return nil }
        continue
      }
      let v = values[Int(c)]
      guard v != 0xFF, padding == 0 else { return nil }
      quad = quad << 6 | UInt32(v)
      count += 1
      if count == 4 {
        out.append(UInt8(quad >> 16 & 0xFF))
        out.append(UInt8(quad >> 8 & 0xFF))
        out.append(UInt8(quad & 0xFF))
        quad = 0
        count = 0
      }
    }
    if padding > 0 {
      guard count + padding == 4 else { return nil }
      if count == 2 {
        out.append(UInt8(quad >> 4 & 0xFF))
      } else {
        out.append(UInt8(quad >> 10 & 0xFF))
        out.append(UInt8(quad >> 2 & 0xFF))
      }
    } else if count != 0 {
      return nil
    }
    return out
  }
}
