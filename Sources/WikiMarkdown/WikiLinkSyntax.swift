/// One `[[target]]` or `[[target|label]]` in a run of text.
struct WikiLinkMatch: Equatable {
  /// The byte offsets of the link, from its `[[` to its `]]`.
  var range: Range<Int>
  /// The target, trimmed of Unicode whitespace (never empty).
  var target: String
  /// The label, trimmed of Unicode whitespace; nil when there is none or it is empty.
  var label: String?
}

/// A page title compared by its UTF-8 bytes, as the backlinks index compares link targets
/// (`String ==` equates canonically equivalent text, which names different pages).
struct TitleKey: Hashable {
  var title: String

  static func == (a: TitleKey, b: TitleKey) -> Bool {
    a.title.utf8.count == b.title.utf8.count && a.title.utf8.elementsEqual(b.title.utf8)
  }

  // Equal bytes are equal strings, so hashing the string is consistent with `==`.
  func hash(into hasher: inout Hasher) { hasher.combine(title) }
}

/// The `[[Page Name]]` syntax, by the rules of the wiki's backlinks index (`WikiLinks` in the
/// Wiki module), so that the renderer links exactly what the index counts as a link.
///
/// A link is `[[` target `]]` or `[[` target `|` label `]]` on one line. The target is the text
/// before the first `|`, with leading and trailing Unicode whitespace removed; empty targets
/// are ignored. A run of opening brackets opens at its last two (`[[[A]]]` links to `A`), and an
/// opening that meets another `[[` before its `]]` is abandoned for the later one. Targets are
/// compared as UTF-8 bytes.
enum WikiLinkSyntax {
  private static let open = UInt8(ascii: "[")
  private static let close = UInt8(ascii: "]")
  private static let bar = UInt8(ascii: "|")
  private static let newline = UInt8(ascii: "\n")

  /// The links of `bytes`, in order. (The same scan as `WikiLinks.targets(inUTF8:)`.)
  static func matches(in bytes: [UInt8]) -> [WikiLinkMatch] {
    var found: [WikiLinkMatch] = []
    var i = 0
    let count = bytes.count
    scanning: while i + 1 < count {
      guard bytes[i] == open, bytes[i + 1] == open else {
        i += 1
        continue
      }
      // `[[[`: the link opens at the last two brackets of the run.
      while i + 2 < count, bytes[i + 2] == open { i += 1 }
      var j = i + 2
      while j + 1 < count {
        let b = bytes[j]
        if b == newline {
          i = j + 1
          continue scanning
        }
        if b == open, bytes[j + 1] == open {
          i = j
          continue scanning
        }
        if b == close, bytes[j + 1] == close {
          if let match = match(bytes, from: i, to: j + 2) { found.append(match) }
          i = j + 2
          continue scanning
        }
        j += 1
      }
      break
    }
    return found
  }

  /// The distinct targets of `bytes`.
  static func targets(in bytes: [UInt8]) -> Set<TitleKey> {
    Set(matches(in: bytes).lazy.map { TitleKey(title: $0.target) })
  }

  /// The link `bytes[start..<end]` (`[[`…`]]`), nil when its target is empty.
  private static func match(_ bytes: [UInt8], from start: Int, to end: Int) -> WikiLinkMatch? {
    let inside = bytes[(start + 2)..<(end - 2)]
    let bar = inside.firstIndex(of: bar)
    guard let target = trimmed(inside[..<(bar ?? inside.endIndex)]) else { return nil }
    let label = bar.flatMap { trimmed(inside[($0 + 1)...]) }
    return WikiLinkMatch(range: start..<end, target: target, label: label)
  }

  /// `bytes` without leading and trailing Unicode whitespace, nil when nothing is left.
  private static func trimmed(_ bytes: ArraySlice<UInt8>) -> String? {
    let text = String(decoding: bytes, as: UTF8.self)
    // No space or control character at either end: nothing to trim. (Every Unicode whitespace
    // character outside ASCII starts with a byte of 0xC2 or more.)
    if let first = bytes.first, let last = bytes.last, first > 0x20, first < 0x7F, last > 0x20,
      last < 0x7F
    {
      return text
    }
    let scalars = text.unicodeScalars
    guard let first = scalars.firstIndex(where: { !$0.properties.isWhitespace }),
      let last = scalars.lastIndex(where: { !$0.properties.isWhitespace })
    else { return nil }
    return String(scalars[first...last])
  }
}

/// HTML escaping for text and attribute values.
enum HTMLEscaping {
  /// `text` with `&`, `<`, `>`, `"` and `'` replaced by character references.
  static func escape(_ text: String) -> String {
    guard text.utf8.contains(where: needsEscaping) else { return text }
    var out = ""
    out.reserveCapacity(text.utf8.count + 16)
    for scalar in text.unicodeScalars {
      switch scalar {
      case "&": out += "&amp;"
      case "<": out += "&lt;"
      case ">": out += "&gt;"
      case "\"": out += "&quot;"
      case "'": out += "&#39;"
      default: out.unicodeScalars.append(scalar)
      }
    }
    return out
  }

  /// Whether a browser would run or open `url` as a script or local file: `javascript:`,
  /// `vbscript:`, `file:` and `data:` URLs other than PNG, GIF, JPEG and WebP images, the URLs
  /// cmark's safe mode drops. Like browsers, it ignores leading spaces and control characters
  /// and tabs and line breaks anywhere, and compares ASCII letters case-insensitively.
  static func isDangerousURL(_ url: String) -> Bool {
    // Most hrefs start with `/`, `.`, `#`, `?` or `h`: nothing to look at.
    guard let first = url.utf8.first(where: { $0 > 0x20 }),
      [UInt8(ascii: "j"), UInt8(ascii: "v"), UInt8(ascii: "f"), UInt8(ascii: "d")].contains(
        first | 0x20)
    else { return false }
    var scheme: [UInt8] = []
    for byte in url.utf8 {
      if byte == 0x09 || byte == 0x0A || byte == 0x0D { continue }
      if scheme.isEmpty, byte <= 0x20 { continue }
      scheme.append(byte >= 0x41 && byte <= 0x5A ? byte | 0x20 : byte)
      if scheme.count == 15 { break }
    }
    for safe in ["data:image/png", "data:image/gif", "data:image/jpeg", "data:image/webp"]
    where scheme.starts(with: safe.utf8) {
      return false
    }
    return ["javascript:", "vbscript:", "file:", "data:"].contains { scheme.starts(with: $0.utf8) }
  }

  private static func needsEscaping(_ byte: UInt8) -> Bool {
    switch byte {
    case UInt8(ascii: "&"), UInt8(ascii: "<"), UInt8(ascii: ">"), UInt8(ascii: "\""),
      UInt8(ascii: "'"):
      true
    default: false
    }
  }
}
