import JSON
import RevTree
import TestSupport

/// A seeded generator of JSON texts that exercise every path of the parser and both writers:
/// whitespace, escapes (short, `\u00XX`, BMP, surrogate pairs), raw multi-byte UTF-8, NFC and
/// NFD spellings of one key, duplicate and `_` keys, number spellings that canonicalize
/// differently, empty and nested containers. ``JSONGoldenTests`` folds what the library makes
/// of each text into one fingerprint.
struct JSONCorpus {
  var rng: SplitMix64

  init(seed: UInt64) {
    rng = SplitMix64(seed: seed)
  }

  mutating func pick(_ n: Int) -> Int { Int(rng.next() % UInt64(n)) }

  static let numbers = [
    "0", "-0", "1", "-1", "1.0", "1.50", "-0.0", "0.1", "1e2", "1E2", "1e+2", "1e-2", "1.5e-7",
    "1e300", "-1e300", "1e-400", "4.9e-324", "2.2250738585072014e-308", "1.7976931348623157e308",
    "123456789012345678", "1234567890123456789", "9223372036854775807", "9223372036854775808",
    "-9223372036854775808", "-9223372036854775809", "12345678901234567890", "1e18", "1e19",
    "100000000000000000001", "0.30000000000000004", "3.14159", "-2.5E-3", "7e0", "1.0e1",
  ]

  static let whitespace = ["", "", "", " ", "\n", "\t", "\r\n", "  "]

  static let keys = [
    "a", "b", "ab", "aa", "", "_id", "_rev", "_x", "__", "Z", "z", "é", "e\u{301}", "😀", "中",
    "title", "type", "a\"b", "a\\b", "\u{7f}", "_", "A",
  ]

  mutating func ws() -> String { JSONCorpus.whitespace[pick(JSONCorpus.whitespace.count)] }

  mutating func number() -> String {
    switch pick(3) {
    case 0:
      let digits = 1 + pick(24)
      var s = pick(2) == 0 ? "-" : ""
      s += String(1 + pick(9))
      for _ in 1..<digits { s += String(pick(10)) }
      return s
    default:
      return JSONCorpus.numbers[pick(JSONCorpus.numbers.count)]
    }
  }

  /// The body of a JSON string literal (without quotes).
  mutating func stringBody(maxLength: Int) -> String {
    var s = ""
    for _ in 0..<pick(maxLength + 1) {
      switch pick(22) {
      case 0: s += "\\\""
      case 1: s += "\\\\"
      case 2: s += "\\/"
      case 3: s += ["\\b", "\\f", "\\n", "\\r", "\\t"][pick(5)]
      case 4:
        let c = pick(0x20)
        s +=
          "\\u00" + String(c >> 4, radix: 16) + String(c & 0xF, radix: 16, uppercase: pick(2) == 0)
      case 5:
        // A BMP scalar outside the surrogates, escaped.
        var c = 0x20 + pick(0xFFDF)
        if c >= 0xD800 && c <= 0xDFFF { c = 0x41 }
        let hex = String(c, radix: 16, uppercase: pick(2) == 0)
        s += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
      case 6: s += ["\\ud83d\\ude00", "\\uD834\\uDD1E", "\\udbff\\udfff"][pick(3)]
      case 7: s += ["é", "😀", "中", "e\u{301}", "\u{7f}", "\u{80}", "\u{10FFFF}", "ß"][pick(8)]
      case 8: s += " "
      case 9: s += ["[[", "]]", "{", "}", ":", ","][pick(6)]
      default:
        let letters = Array("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
        s.append(letters[pick(letters.count)])
      }
    }
    return s
  }

  mutating func key() -> String {
    if pick(4) == 0 { return stringBody(maxLength: 6) }
    let k = JSONCorpus.keys[pick(JSONCorpus.keys.count)]
    return k.replacingBackslashAndQuote()
  }

  mutating func value(depth: Int) -> String {
    let kinds = depth >= 4 ? 5 : 8
    switch pick(kinds) {
    case 0: return ["null", "true", "false"][pick(3)]
    case 1, 2: return number()
    case 3, 4: return "\"" + stringBody(maxLength: 40) + "\""
    case 5:
      let n = pick(5)
      if n == 0 { return "[" + ws() + "]" }
      return "[" + (0..<n).map { _ in ws() + value(depth: depth + 1) + ws() }.joined(separator: ",")
        + "]"
    default:
      let n = pick(7)
      if n == 0 { return "{" + ws() + "}" }
      let members = (0..<n).map { _ in
        ws() + "\"" + key() + "\"" + ws() + ":" + ws() + value(depth: depth + 1) + ws()
      }
      return "{" + members.joined(separator: ",") + "}"
    }
  }

  /// A document: an object most of the time, any value sometimes, surrounded by whitespace.
  mutating func document() -> [UInt8] {
    let v = pick(8) == 0 ? value(depth: 0) : value(depth: 3 - pick(3)).asObjectIfNot(&self)
    return Array((ws() + v + ws()).utf8)
  }

  /// `bytes` damaged: truncated, a byte replaced, or a byte inserted.
  mutating func damage(_ bytes: [UInt8]) -> [UInt8] {
    var b = bytes
    let alphabet =
      Array(#"{}[],:"\ 0123456789.-+eEtrufalsnu"#.utf8) + [0xC3, 0xA9, 0xFF, 0x00, 0xED]
    let at = pick(b.count + 1)
    switch pick(3) {
    case 0: b.removeSubrange(at...)
    case 1 where at < b.count: b[at] = alphabet[pick(alphabet.count)]
    default: b.insert(alphabet[pick(alphabet.count)], at: at)
    }
    return b
  }
}

extension String {
  /// Escapes `"` and `\` so that a key from the pool can go between quotes.
  fileprivate func replacingBackslashAndQuote() -> String {
    var out = ""
    for c in self {
      if c == "\"" || c == "\\" { out.append("\\") }
      out.append(c)
    }
    return out
  }

  /// Wraps a non-object value in an object with a few members around it.
  fileprivate func asObjectIfNot(_ g: inout JSONCorpus) -> String {
    if hasPrefix("{") { return self }
    return "{\"_id\":\"doc\"," + g.ws() + "\"" + g.key() + "\":" + self + "}"
  }
}

/// FNV-1a, 64 bits: a fingerprint that does not depend on the library under test.
struct FNV1a {
  var state: UInt64 = 0xcbf2_9ce4_8422_2325

  mutating func add(_ bytes: some Sequence<UInt8>) {
    for b in bytes {
      state ^= UInt64(b)
      state &*= 0x100_0000_01b3
    }
    // A separator so that ("ab", "c") and ("a", "bc") differ.
    state ^= 0xFF
    state &*= 0x100_0000_01b3
  }

  mutating func add(_ s: String) { add(s.utf8) }
}
