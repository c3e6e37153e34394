import Foundation

/// Base64 with the URL alphabet and no padding (`b64url` as CouchDB uses it for cookies and
/// JWTs). Decoding accepts padding too.
enum Base64URL {
  static func encode(_ bytes: [UInt8]) -> String {
    Data(bytes).base64EncodedString()
      .replacingOccurrences(of: "+", with: "-")
      .replacingOccurrences(of: "/", with: "_")
      .replacingOccurrences(of: "=", with: "")
  }

  static func decode(_ text: some StringProtocol) -> [UInt8]? {
    var s = String(text)
    if s.contains("+") || s.contains("/") { return nil }
    while s.hasSuffix("=") { s.removeLast() }
    s = s.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
    if s.count % 4 == 1 { return nil }
    s += String(repeating: "=", count: (4 - s.count % 4) % 4)
    return Data(base64Encoded: s).map { Array($0) }
  }

  /// Standard base64 (with padding), as HTTP Basic uses it.
  static func decodeStandard(_ text: some StringProtocol) -> [UInt8]? {
    Data(base64Encoded: String(text)).map { Array($0) }
  }
}
