/// The `[[Page Name]]` links of a page's Markdown.
///
/// A link is `[[` target `]]` or `[[` target `|` label `]]` on one line. The target is the text
/// before the first `|`, with leading and trailing Unicode whitespace removed; empty targets
/// are ignored. A run of opening brackets opens at its last two (`[[[A]]]` links to `A`), and an
/// opening that meets another `[[` before its `]]` is abandoned for the later one.
///
/// Targets are compared as UTF-8 bytes, never with `String ==` (which equates canonically
/// equivalent text), so the answer is the same on every platform and Unicode version.
///
/// ```swift
/// WikiLinks.targets(in: "See [[Home]], [[ Set up |setup]] and [[Home]].")
/// // ["Home", "Set up"]
/// ```
enum WikiLinks {
  /// The distinct link targets of `markdown`, sorted by their UTF-8 bytes.
  static func targets(in markdown: String) -> [String] {
    let bytes = Array(markdown.utf8)
    let open = UInt8(ascii: "[")
    let close = UInt8(ascii: "]")
    let newline = UInt8(ascii: "\n")
    var found: [[UInt8]] = []
    var i = 0
    scanning: while i + 1 < bytes.count {
      guard bytes[i] == open, bytes[i + 1] == open else {
        i += 1
        continue
      }
      // `[[[`: the link opens at the last two brackets of the run.
      while i + 2 < bytes.count, bytes[i + 2] == open { i += 1 }
      var j = i + 2
      while j + 1 < bytes.count {
        if bytes[j] == newline {
          i = j + 1
          continue scanning
        }
        if bytes[j] == open, bytes[j + 1] == open {
          i = j
          continue scanning
        }
        if bytes[j] == close, bytes[j + 1] == close {
          if let target = target(bytes[(i + 2)..<j]) { found.append(target) }
          i = j + 2
          continue scanning
        }
        j += 1
      }
      break
    }
    return sortedUniqueByBytes(found.map { String(decoding: $0, as: UTF8.self) })
  }

  /// The trimmed target of a link's inside (`target|label`), nil when empty.
  private static func target(_ inside: ArraySlice<UInt8>) -> [UInt8]? {
    let name =
      inside.split(separator: UInt8(ascii: "|"), maxSplits: 1, omittingEmptySubsequences: false)
      .first ?? []
    let scalars = String(decoding: name, as: UTF8.self).unicodeScalars
    guard let first = scalars.firstIndex(where: { !$0.properties.isWhitespace }),
      let last = scalars.lastIndex(where: { !$0.properties.isWhitespace })
    else { return nil }
    return Array(String(scalars[first...last]).utf8)
  }
}
