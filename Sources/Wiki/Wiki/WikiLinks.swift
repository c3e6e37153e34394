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
    var markdown = markdown
    return markdown.withUTF8 { unsafe targets(inUTF8: $0) }
  }

  /// ``targets(in:)`` over the Markdown's UTF-8 bytes.
  static func targets(inUTF8 bytes: UnsafeBufferPointer<UInt8>) -> [String] {
    let open = UInt8(ascii: "[")
    let close = UInt8(ascii: "]")
    let newline = UInt8(ascii: "\n")
    var found: [[UInt8]] = []
    var i = 0
    let count = bytes.count
    scanning: while i + 1 < count {
      guard unsafe bytes[i] == open, unsafe bytes[i + 1] == open else {
        i += 1
        continue
      }
      // `[[[`: the link opens at the last two brackets of the run.
      while i + 2 < count, unsafe bytes[i + 2] == open { i += 1 }
      var j = i + 2
      while j + 1 < count {
        let b = unsafe bytes[j]
        if b == newline {
          i = j + 1
          continue scanning
        }
        if b == open, unsafe bytes[j + 1] == open {
          i = j
          continue scanning
        }
        if b == close, unsafe bytes[j + 1] == close {
          if let target = unsafe target(UnsafeBufferPointer(rebasing: bytes[(i + 2)..<j])) {
            found.append(target)
          }
          i = j + 2
          continue scanning
        }
        j += 1
      }
      break
    }
    if found.isEmpty { return [] }
    if found.count > 1 {
      found.sort { $0.lexicographicallyPrecedes($1) }
    }
    var out: [String] = []
    out.reserveCapacity(found.count)
    var previous: [UInt8]? = nil
    for target in found where target != previous {
      out.append(String(decoding: target, as: UTF8.self))
      previous = target
    }
    return out
  }

  /// The trimmed target of a link's inside (`target|label`), nil when empty.
  private static func target(_ inside: UnsafeBufferPointer<UInt8>) -> [UInt8]? {
    let name = unsafe UnsafeBufferPointer(
      rebasing: inside[..<(inside.firstIndex(of: UInt8(ascii: "|")) ?? inside.endIndex)])
    // ASCII without a space or control character at either end: nothing to trim.
    if let first = unsafe name.first, let last = unsafe name.last, first > 0x20, first < 0x7F,
      last > 0x20,
      last < 0x7F, unsafe name.allSatisfy({ $0 < 0x80 })
    {
      return unsafe Array(name)
    }
    let scalars = unsafe String(decoding: name, as: UTF8.self).unicodeScalars
    guard let first = scalars.firstIndex(where: { !$0.properties.isWhitespace }),
      let last = scalars.lastIndex(where: { !$0.properties.isWhitespace })
    else { return nil }
    return Array(String(scalars[first...last]).utf8)
  }
}
