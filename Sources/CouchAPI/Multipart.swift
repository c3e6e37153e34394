/// MIME multipart bodies as CouchDB reads and writes them for documents with attachments
/// (`couch_httpd_multipart`): `multipart/related` with the document's JSON first and each
/// `"follows": true` attachment's bytes after it, in order; `multipart/mixed` for `open_revs`.
enum Multipart {
  /// One part: its headers (names lowercased) and its body.
  struct Part {
    var headers: [String: String]
    var body: [UInt8]
  }

  /// The `boundary` parameter of a `multipart/...` content type, unquoted.
  static func boundary(of contentType: String) -> String? {
    for parameter in contentType.split(separator: ";").dropFirst() {
      let trimmed = parameter.drop { $0 == " " || $0 == "\t" }
      guard trimmed.lowercased().hasPrefix("boundary=") else { continue }
      var value = trimmed.dropFirst("boundary=".count)
      if value.hasPrefix("\""), value.hasSuffix("\""), value.count >= 2 {
        value = value.dropFirst().dropLast()
      }
      return value.isEmpty ? nil : String(value)
    }
    return nil
  }

  /// The parts of `body` delimited by `boundary`; nil when it is not such a body.
  static func parse(_ body: [UInt8], boundary: String) -> [Part]? {
    let dash = Array("--".utf8) + Array(boundary.utf8)
    let delimiter = Array("\r\n".utf8) + dash
    // The first delimiter may open the body without a CRLF before it.
    var position: Int
    if body.starts(with: dash) {
      position = dash.count
    } else if let found = find(delimiter, in: body, from: 0) {
      position = found + delimiter.count
    } else {
      return nil
    }
    var parts: [Part] = []
    while true {
      // After a delimiter: `--` ends the body; otherwise the rest of the line, then a part.
      if body[position...].starts(with: Array("--".utf8)) { return parts }
      guard let lineEnd = find(Array("\r\n".utf8), in: body, from: position) else { return nil }
      let start = lineEnd + 2
      guard let end = find(delimiter, in: body, from: start) else { return nil }
      guard let part = parsePart(body[start..<end]) else { return nil }
      parts.append(part)
      position = end + delimiter.count
    }
  }

  private static func parsePart(_ bytes: ArraySlice<UInt8>) -> Part? {
    var headers: [String: String] = [:]
    var position = bytes.startIndex
    while true {
      guard let lineEnd = find(Array("\r\n".utf8), in: bytes, from: position) else { return nil }
      if lineEnd == position {
        return Part(headers: headers, body: Array(bytes[(lineEnd + 2)...]))
      }
      let line = String(decoding: bytes[position..<lineEnd], as: UTF8.self)
      if let colon = line.firstIndex(of: ":") {
        headers[line[..<colon].lowercased()] = String(
          line[line.index(after: colon)...].drop { $0 == " " || $0 == "\t" })
      }
      position = lineEnd + 2
    }
  }

  /// The first index of `needle` in `haystack` at or after `from`.
  static func find<C: Collection<UInt8>>(_ needle: [UInt8], in haystack: C, from: Int) -> Int?
  where C.Index == Int {
    guard !needle.isEmpty else { return from }
    let first = needle[0]
    var i = from
    let end = haystack.endIndex - needle.count
    while i <= end {
      if haystack[i] == first {
        var j = 1
        while j < needle.count && haystack[i + j] == needle[j] { j += 1 }
        if j == needle.count { return i }
      }
      i += 1
    }
    return nil
  }

  /// A random boundary, as CouchDB's (`couch_uuids:random/0`: 32 hex digits).
  static func newBoundary() -> String {
    let digits = Array("0123456789abcdef")
    return String((0..<32).map { _ in digits[Int.random(in: 0..<16)] })
  }
}
