import Foundation
import Projections

/// Base64 with the URL alphabet and no padding (`b64url` as CouchDB uses it for cookies and
/// JWTs). Decoding accepts padding too.
enum Base64URL {
  static func encode(_ bytes: [UInt8]) -> String { Base64.encodeURL(bytes) }

  static func decode(_ text: some StringProtocol) -> [UInt8]? { Base64.decodeURL(text) }

  /// Standard base64 (with padding), as HTTP Basic uses it.
  static func decodeStandard(_ text: some StringProtocol) -> [UInt8]? {
    Data(base64Encoded: String(text)).map { Array($0) }
  }
}
