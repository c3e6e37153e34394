import JSON
import Log
import RevTree

extension ChangeRow {
  /// Appends the row as compact JSON to `out`: the bytes `json.serialize(into:)` writes,
  /// without building the ``json`` value first (the changes feed writes one row per document,
  /// so this is its hot path).
  ///
  /// ```swift
  /// var out: [UInt8] = []
  /// for row in try store.changes().results {
  ///   row.serializeJSON(into: &out)
  ///   out.append(0x0A)                      // NDJSON
  /// }
  /// ```
  public func serializeJSON(into out: inout [UInt8]) {
    out.append(contentsOf: #"{"seq":"#.utf8)
    Self.appendDecimal(seq.rawValue, to: &out)
    out.append(contentsOf: #","id":"#.utf8)
    JSONValue.string(id).serialize(into: &out)
    out.append(contentsOf: #","changes":["#.utf8)
    for (i, rev) in changes.enumerated() {
      if i > 0 { out.append(UInt8(ascii: ",")) }
      out.append(contentsOf: #"{"rev":"#.utf8)
      JSONValue.string(rev).serialize(into: &out)
      out.append(UInt8(ascii: "}"))
    }
    out.append(UInt8(ascii: "]"))
    if deleted { out.append(contentsOf: #","deleted":true"#.utf8) }
    if let doc {
      out.append(contentsOf: #","doc":"#.utf8)
      doc.serialize(into: &out)
    }
    if let actor {
      out.append(contentsOf: #","actor":"#.utf8)
      JSONValue.string(actor).serialize(into: &out)
    }
    if let origin, !origin.isEmpty {
      out.append(contentsOf: #","origin":"#.utf8)
      JSONValue.string(origin).serialize(into: &out)
    }
    out.append(UInt8(ascii: "}"))
  }

  static func appendDecimal(_ value: UInt64, to out: inout [UInt8]) {
    guard value > 0 else {
      out.append(UInt8(ascii: "0"))
      return
    }
    var digits: (UInt64, UInt64, UInt64) = (0, 0, 0)  // 24 bytes: room for 20 digits
    var count = 0
    var v = value
    unsafe withUnsafeMutableBytes(of: &digits) { buffer in
      while v > 0 {
        unsafe buffer[23 - count] = UInt8(ascii: "0") + UInt8(v % 10)
        v /= 10
        count += 1
      }
      unsafe out.append(contentsOf: buffer[(24 - count)...])
    }
  }
}

extension RevID {
  /// `N-hash`, as ``description`` writes it, without going through string interpolation.
  var text: String {
    var s = String(generation)
    s.append("-")
    s.append(hash.description)
    return s
  }
}
