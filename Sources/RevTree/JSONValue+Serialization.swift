// Writing JSON: as authored (original key order, number text kept) or canonical.

extension JSONValue {
  /// The value as compact JSON, objects in their original key order, numbers as written.
  ///
  /// ```swift
  /// let v = try JSONValue(parsing: #"{ "z": 1.0, "a": "x" }"#)
  /// String(decoding: v.serialized(), as: UTF8.self)   // {"z":1.0,"a":"x"}
  /// ```
  public func serialized() -> [UInt8] {
    var out: [UInt8] = []
    out.reserveCapacity(256)
    JSONWriter.write(self, canonical: false, into: &out)
    return out
  }

  /// The value as compact JSON, appended to `out`.
  public func serialize(into out: inout [UInt8]) {
    JSONWriter.write(self, canonical: false, into: &out)
  }

  /// The canonical form revision digests are computed over.
  ///
  /// - Object keys sorted by their UTF-8 bytes; a duplicated key appears once, with its last
  ///   value.
  /// - No whitespace.
  /// - Strings: only `"` `\` and control characters below 0x20 are escaped; `\b \f \n \r \t` in
  ///   their short forms, the others as `\u00XX` (lowercase hex). Everything else, including
  ///   non-ASCII, is written as raw UTF-8.
  /// - Numbers: see ``JSONNumber/canonicalText``. `1`, `1.0` and `1e0` are all `1`; `-0` is
  ///   `0`; `0.1` is `0.1`; `1e300` is `1e+300`.
  ///
  /// ```swift
  /// let v = try JSONValue(parsing: #"{"b":1.0,"a":"\u00e9"}"#)
  /// String(decoding: v.canonicalSerialized(), as: UTF8.self)   // {"a":"é","b":1}
  /// ```
  public func canonicalSerialized() -> [UInt8] {
    var out: [UInt8] = []
    out.reserveCapacity(256)
    JSONWriter.write(self, canonical: true, into: &out)
    return out
  }
}

enum JSONWriter {
  static func write(_ v: JSONValue, canonical: Bool, into out: inout [UInt8]) {
    switch v {
    case .null: out.append(contentsOf: [0x6E, 0x75, 0x6C, 0x6C])
    case .bool(let b):
      if b {
        out.append(contentsOf: [0x74, 0x72, 0x75, 0x65])
      } else {
        out.append(contentsOf: [0x66, 0x61, 0x6C, 0x73, 0x65])
      }
    case .number(let n):
      if canonical {
        out.append(contentsOf: n.canonicalText.utf8)
      } else {
        out.append(contentsOf: n.text.utf8)
      }
    case .string(let s): writeString(s, into: &out)
    case .array(let a):
      out.append(UInt8(ascii: "["))
      for (k, e) in a.enumerated() {
        if k > 0 { out.append(UInt8(ascii: ",")) }
        write(e, canonical: canonical, into: &out)
      }
      out.append(UInt8(ascii: "]"))
    case .object(let o):
      out.append(UInt8(ascii: "{"))
      if canonical {
        let order = canonicalOrder(o)
        for (k, idx) in order.enumerated() {
          if k > 0 { out.append(UInt8(ascii: ",")) }
          writeString(o.members[idx].key, into: &out)
          out.append(UInt8(ascii: ":"))
          write(o.members[idx].value, canonical: true, into: &out)
        }
      } else {
        for (k, m) in o.members.enumerated() {
          if k > 0 { out.append(UInt8(ascii: ",")) }
          writeString(m.key, into: &out)
          out.append(UInt8(ascii: ":"))
          write(m.value, canonical: false, into: &out)
        }
      }
      out.append(UInt8(ascii: "}"))
    }
  }

  /// Member indices sorted by key bytes, keeping only the last occurrence of a key.
  static func canonicalOrder(_ o: JSONObject) -> [Int] {
    var idx = Array(o.members.indices)
    let keys = o.members.map { Array($0.key.utf8) }
    idx.sort { a, b in
      if keys[a] == keys[b] { return a < b }
      return keys[a].lexicographicallyPrecedes(keys[b])
    }
    var out: [Int] = []
    out.reserveCapacity(idx.count)
    for (k, i) in idx.enumerated() {
      if k + 1 < idx.count && keys[idx[k + 1]] == keys[i] { continue }
      out.append(i)
    }
    return out
  }

  static func writeString(_ s: String, into out: inout [UInt8]) {
    out.append(UInt8(ascii: "\""))
    var s = s
    s.withUTF8 { buf in
      var runStart = 0
      for (k, c) in buf.enumerated() where c < 0x20 || c == 0x22 || c == 0x5C {
        if runStart < k { out.append(contentsOf: UnsafeBufferPointer(rebasing: buf[runStart..<k])) }
        runStart = k + 1
        switch c {
        case 0x22: out.append(contentsOf: [0x5C, 0x22])
        case 0x5C: out.append(contentsOf: [0x5C, 0x5C])
        case 0x08: out.append(contentsOf: [0x5C, UInt8(ascii: "b")])
        case 0x0C: out.append(contentsOf: [0x5C, UInt8(ascii: "f")])
        case 0x0A: out.append(contentsOf: [0x5C, UInt8(ascii: "n")])
        case 0x0D: out.append(contentsOf: [0x5C, UInt8(ascii: "r")])
        case 0x09: out.append(contentsOf: [0x5C, UInt8(ascii: "t")])
        default:
          let hex: [UInt8] = Array("0123456789abcdef".utf8)
          out.append(contentsOf: [
            0x5C, UInt8(ascii: "u"), 0x30, 0x30, hex[Int(c >> 4)], hex[Int(c & 0xF)],
          ])
        }
      }
      if runStart < buf.count {
        out.append(contentsOf: UnsafeBufferPointer(rebasing: buf[runStart...]))
      }
    }
    out.append(UInt8(ascii: "\""))
  }
}
