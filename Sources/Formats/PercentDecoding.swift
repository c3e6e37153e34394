/// Percent-decoding of URL paths and query strings, strictly: a `%` not followed by two hex
/// digits, or bytes that are not UTF-8 once decoded, are an error (the HTTP API's
/// `400 bad_request`); encoding of path segments for the replicator's requests.
public enum PercentDecoding {
  /// Text that is not well percent-encoded: why, in a sentence.
  public struct Malformed: Error, Sendable, Equatable {
    public let reason: String
  }

  /// Decodes `%XX` escapes; with `plusIsSpace` (query strings, as CouchDB's parser does) `+`
  /// becomes a space.
  public static func decode(_ text: Substring, plusIsSpace: Bool = false) throws(Malformed)
    -> String
  {
    let utf8 = text.utf8
    guard utf8.contains(UInt8(ascii: "%")) || (plusIsSpace && utf8.contains(UInt8(ascii: "+")))
    else { return String(text) }
    var bytes: [UInt8] = []
    bytes.reserveCapacity(utf8.count)
    var i = utf8.startIndex
    while i != utf8.endIndex {
      let byte = utf8[i]
      if byte == UInt8(ascii: "%") {
        let h = utf8.index(after: i)
        guard h != utf8.endIndex, let high = Hex.value(utf8[h]) else {
          throw Malformed(reason: "invalid percent-encoding in '\(text)'")
        }
        let l = utf8.index(after: h)
        guard l != utf8.endIndex, let low = Hex.value(utf8[l]) else {
          throw Malformed(reason: "invalid percent-encoding in '\(text)'")
        }
        bytes.append(high << 4 | low)
        i = utf8.index(after: l)
        continue
      }
      bytes.append(plusIsSpace && byte == UInt8(ascii: "+") ? UInt8(ascii: " ") : byte)
      i = utf8.index(after: i)
    }
    guard let decoded = String(validating: bytes, as: UTF8.self) else {
      throw Malformed(reason: "percent-encoded text is not UTF-8 in '\(text)'")
    }
    return decoded
  }

  /// Encodes everything but unreserved characters (RFC 3986), for building request paths.
  public static func encode(_ text: String) -> String {
    var out = ""
    for byte in text.utf8 {
      switch byte {
      case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
        UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."),
        UInt8(ascii: "_"), UInt8(ascii: "~"):
        out.unicodeScalars.append(Unicode.Scalar(byte))
      default:
        let hex = Array("0123456789ABCDEF".unicodeScalars)
        out.unicodeScalars.append("%")
        out.unicodeScalars.append(hex[Int(byte >> 4)])
        out.unicodeScalars.append(hex[Int(byte & 15)])
      }
    }
    return out
  }
}
