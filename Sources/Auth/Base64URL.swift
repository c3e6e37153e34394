import Foundation

/// Base64 with the URL alphabet and no padding (`b64url` as CouchDB uses it for cookies and
/// JWTs). Decoding accepts padding too.
enum Base64URL {
  static let alphabet = Array(
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

  /// Each byte's 6-bit value, or 0xFF for a byte outside the alphabet.
  static let values: [UInt8] = {
    var table = [UInt8](repeating: 0xFF, count: 256)
    for (i, c) in alphabet.enumerated() { table[Int(c)] = UInt8(i) }
    return table
  }()

  static func encode(_ bytes: [UInt8]) -> String {
    var out: [UInt8] = []
    out.reserveCapacity((bytes.count * 4 + 2) / 3)
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
    }
    return String(decoding: out, as: UTF8.self)
  }

  /// The bytes of base64url text (padding optional); nil for a character outside the alphabet
  /// (`+` and `/` included) or a length no encoding gives.
  static func decode(_ text: some StringProtocol) -> [UInt8]? {
    var input = Array(text.utf8)
    while input.last == UInt8(ascii: "=") { input.removeLast() }
    guard input.count % 4 != 1 else { return nil }
    var out: [UInt8] = []
    out.reserveCapacity(input.count * 3 / 4)
    var buffer: UInt32 = 0
    var bits = 0
    for c in input {
      let v = values[Int(c)]
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

  /// Standard base64 (with padding), as HTTP Basic uses it.
  static func decodeStandard(_ text: some StringProtocol) -> [UInt8]? {
    Data(base64Encoded: String(text)).map { Array($0) }
  }
}
