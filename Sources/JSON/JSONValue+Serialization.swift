// Writing JSON: as authored (original key order, number text kept) or canonical.

extension JSONValue {
  /// The value as compact JSON, objects in their original key order, numbers as written.
  ///
  /// ```swift
  /// let v = try JSONValue(parsing: #"{ "z": 1.0, "a": "x" }"#)
  /// String(decoding: v.serialized(), as: UTF8.self)   // {"z":1.0,"a":"x"}
  /// ```
  public func serialized() -> [UInt8] {
    withByteSink { sink in
      JSONWriter.write(self, canonical: false, into: &sink)
      return sink.array()
    }
  }

  /// The value as compact JSON, appended to `out`.
  public func serialize(into out: inout [UInt8]) {
    withByteSink { sink in
      JSONWriter.write(self, canonical: false, into: &sink)
      unsafe out.append(contentsOf: sink.bytes)
    }
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
    withByteSink { sink in
      JSONWriter.write(self, canonical: true, into: &sink)
      return sink.array()
    }
  }
}

package enum JSONWriter {
  package static func write(_ v: JSONValue, canonical: Bool, into out: inout ByteSink) {
    switch v {
    case .null: appendWord(0x6C6C_756E, 4, &out)
    case .bool(let b):
      if b {
        appendWord(0x6575_7274, 4, &out)
      } else {
        appendWord(0x65_736C_6166, 5, &out)
      }
    case .number(let n):
      if canonical {
        writeCanonicalNumber(n, into: &out)
      } else {
        out.append(utf8: n.text)
      }
    case .string(let s): writeString(s, into: &out)
    case .array(let a):
      out.append(UInt8(ascii: "["))
      var first = true
      for e in a {
        if !first { out.append(UInt8(ascii: ",")) }
        first = false
        write(e, canonical: canonical, into: &out)
      }
      out.append(UInt8(ascii: "]"))
    case .object(let o):
      if canonical {
        writeCanonicalObject(o.members, skippingMetadata: false, into: &out)
      } else {
        out.append(UInt8(ascii: "{"))
        var first = true
        for m in o.members {
          if !first { out.append(UInt8(ascii: ",")) }
          first = false
          writeString(m.key, into: &out)
          out.append(UInt8(ascii: ":"))
          write(m.value, canonical: false, into: &out)
        }
        out.append(UInt8(ascii: "}"))
      }
    }
  }

  /// Appends the low `count` bytes of `word`, least significant first.
  @inline(__always)
  static func appendWord(_ word: UInt64, _ count: Int, _ out: inout ByteSink) {
    out.append(word: word, count: count)
  }

  /// ``JSONNumber/canonicalText``, without building a string when the literal is already
  /// canonical (an integer literal of at most 18 digits other than `-0`).
  static func writeCanonicalNumber(_ n: JSONNumber, into out: inout ByteSink) {
    let utf8 = n.text.utf8
    if utf8.count <= 18 {
      var plain = true
      for b in utf8 where b == UInt8(ascii: ".") || b == UInt8(ascii: "e") || b == UInt8(ascii: "E")
      {
        plain = false
        break
      }
      if plain
        && !(utf8.count == 2 && utf8.first == UInt8(ascii: "-") && utf8.last == UInt8(ascii: "0"))
      {
        out.append(utf8: n.text)
        return
      }
    }
    out.append(utf8: n.canonicalText)
  }

  /// One member's place in the canonical order: the first 16 key bytes as two big-endian words
  /// (zero padded), the key's length in bytes and the member's index.
  struct SortKey {
    var prefix: UInt64
    var prefix2: UInt64
    var length: Int
    var index: Int

    init(_ key: String, index: Int) {
      self.index = index
      if let k = unsafe key.utf8.withContiguousStorageIfAvailable({
        unsafe (SortKey.word($0, 0), SortKey.word($0, 8), $0.count)
      }) {
        (prefix, prefix2, length) = k
      } else {
        let bytes = Array(key.utf8)
        (prefix, prefix2, length) = unsafe bytes.withUnsafeBufferPointer {
          unsafe (SortKey.word($0, 0), SortKey.word($0, 8), $0.count)
        }
      }
    }

    /// Bytes `from..<from + 8` of `b` as a big-endian word, zero past the end.
    @inline(__always)
    static func word(_ b: UnsafeBufferPointer<UInt8>, _ from: Int) -> UInt64 {
      let n = b.count - from
      if n >= 8 {
        return unsafe UInt64(
          bigEndian: UnsafeRawPointer(b.baseAddress! + from).loadUnaligned(as: UInt64.self))
      }
      var w: UInt64 = 0
      var k = 0
      while k < n {
        unsafe w |= UInt64(b[from + k]) << UInt64(56 - 8 * k)
        k += 1
      }
      return w
    }

    /// Whether the key starts with `_` as `String.hasPrefix("_")` decides (a `_` followed by a
    /// combining mark is not a prefix `_` there).
    func isMetadata(_ key: String) -> Bool {
      guard prefix >> 56 == UInt64(UInt8(ascii: "_")) else { return false }
      if length == 1 || (prefix >> 48) & 0xFF < 0x80 { return true }
      return key.hasPrefix("_")
    }
  }

  /// Three-way comparison of the UTF-8 bytes of `a` and `b`.
  static func compareKeys(_ a: String, _ b: String) -> Int {
    var i = a.utf8.makeIterator()
    var j = b.utf8.makeIterator()
    while true {
      switch (i.next(), j.next()) {
      case (nil, nil): return 0
      case (nil, _): return -1
      case (_, nil): return 1
      case (let x?, let y?): if x != y { return x < y ? -1 : 1 }
      }
    }
  }

  /// Canonical order: keys by their UTF-8 bytes, equal keys by index.
  @inline(__always)
  static func precedes(_ x: SortKey, _ y: SortKey, _ members: [JSONObject.Member]) -> Bool {
    if x.prefix != y.prefix { return x.prefix < y.prefix }
    if x.prefix2 != y.prefix2 { return x.prefix2 < y.prefix2 }
    if x.length <= 16 && y.length <= 16 {
      if x.length != y.length { return x.length < y.length }
    } else {
      let c = compareKeys(members[x.index].key, members[y.index].key)
      if c != 0 { return c < 0 }
    }
    return x.index < y.index
  }

  @inline(__always)
  static func sameKey(_ x: SortKey, _ y: SortKey, _ members: [JSONObject.Member]) -> Bool {
    x.prefix == y.prefix && x.prefix2 == y.prefix2 && x.length == y.length
      && (x.length <= 16 || compareKeys(members[x.index].key, members[y.index].key) == 0)
  }

  /// An object in canonical form: members sorted by key bytes, a duplicated key once with its
  /// last value; top-level metadata (`_` keys) left out when `skippingMetadata`.
  package static func writeCanonicalObject(
    _ members: [JSONObject.Member], skippingMetadata: Bool, into out: inout ByteSink
  ) {
    out.append(UInt8(ascii: "{"))
    let n = members.count
    if n > 0 && n <= 32 {
      unsafe withUnsafeTemporaryAllocation(of: SortKey.self, capacity: n) {
        unsafe writeSortedMembers(members, skippingMetadata: skippingMetadata, keys: $0, into: &out)
      }
    } else if n > 32 {
      // Large objects sort on the heap (a big stack allocation costs a stack-bounds query).
      let keys = UnsafeMutableBufferPointer<SortKey>.allocate(capacity: n)
      defer { unsafe keys.deallocate() }
      unsafe writeSortedMembers(members, skippingMetadata: skippingMetadata, keys: keys, into: &out)
    }
    out.append(UInt8(ascii: "}"))
  }

  /// The members in canonical order, using `keys` (uninitialized, one per member) to sort.
  static func writeSortedMembers(
    _ members: [JSONObject.Member], skippingMetadata: Bool,
    keys: UnsafeMutableBufferPointer<SortKey>, into out: inout ByteSink
  ) {
    var m = 0
    for (i, member) in members.enumerated() {
      let k = SortKey(member.key, index: i)
      if skippingMetadata && k.isMetadata(member.key) { continue }
      unsafe keys.initializeElement(at: m, to: k)
      m += 1
    }
    var sorted = unsafe UnsafeMutableBufferPointer(rebasing: keys[0..<m])
    defer { unsafe sorted.deinitialize() }
    if m <= 16 {
      // Insertion sort: objects are small.
      var i = 1
      while i < m {
        let x = unsafe sorted[i]
        var j = i
        while unsafe j > 0 && precedes(x, sorted[j - 1], members) {
          unsafe sorted[j] = unsafe sorted[j - 1]
          j -= 1
        }
        unsafe sorted[j] = x
        i += 1
      }
    } else {
      unsafe sorted.sort { precedes($0, $1, members) }
    }
    var first = true
    for i in 0..<m {
      if unsafe i + 1 < m && sameKey(sorted[i], sorted[i + 1], members) { continue }
      if !first { out.append(UInt8(ascii: ",")) }
      first = false
      let member = unsafe members[sorted[i].index]
      writeString(member.key, into: &out)
      out.append(UInt8(ascii: ":"))
      write(member.value, canonical: true, into: &out)
    }
  }

  static func writeString(_ s: String, into out: inout ByteSink) {
    var s = s
    s.withUTF8 { unsafe writeEscaped($0, into: &out) }
  }

  /// Whether any of the 8 bytes of `w` is below 0x20, `"` or `\`.
  @inline(__always)
  static func needsEscape(_ w: UInt64) -> Bool {
    let ones: UInt64 = 0x0101_0101_0101_0101
    let highs: UInt64 = 0x8080_8080_8080_8080
    let quote = w ^ (ones &* 0x22)
    let backslash = w ^ (ones &* 0x5C)
    let control = (w &- ones &* 0x20) & ~w
    let q = (quote &- ones) & ~quote
    let b = (backslash &- ones) & ~backslash
    return (control | q | b) & highs != 0
  }

  /// `"` + `bytes` with `"`, `\` and control characters escaped + `"`.
  static func writeEscaped(_ bytes: UnsafeBufferPointer<UInt8>, into out: inout ByteSink) {
    out.append(UInt8(ascii: "\""))
    let n = bytes.count
    guard let p = bytes.baseAddress else {
      out.append(UInt8(ascii: "\""))
      return
    }
    var runStart = 0
    var k = 0
    while true {
      // Find the next byte to escape, 8 bytes at a time while possible.
      while k < n {
        let end: Int
        if k + 8 <= n {
          if unsafe !needsEscape(UnsafeRawPointer(p + k).loadUnaligned(as: UInt64.self)) {
            k += 8
            continue
          }
          end = k + 8
        } else {
          end = n
        }
        while k < end {
          let c = unsafe p[k]
          if c < 0x20 || c == 0x22 || c == 0x5C { break }
          k += 1
        }
        if k < end { break }
      }
      if k == n { break }
      if runStart < k { unsafe out.append(p + runStart, count: k - runStart) }
      let c = unsafe p[k]
      k += 1
      runStart = k
      switch c {
      case 0x22: appendWord(0x225C, 2, &out)
      case 0x5C: appendWord(0x5C5C, 2, &out)
      case 0x08: appendWord(0x625C, 2, &out)
      case 0x0C: appendWord(0x665C, 2, &out)
      case 0x0A: appendWord(0x6E5C, 2, &out)
      case 0x0D: appendWord(0x725C, 2, &out)
      case 0x09: appendWord(0x745C, 2, &out)
      default:
        let hex: StaticString = "0123456789abcdef"
        let h = unsafe hex.utf8Start
        let word =
          unsafe 0x3030_755C | UInt64(h[Int(c >> 4)]) << 32 | UInt64(h[Int(c & 0xF)]) << 40
        appendWord(word, 6, &out)
      }
    }
    if runStart < n { unsafe out.append(p + runStart, count: n - runStart) }
    out.append(UInt8(ascii: "\""))
  }
}
