/// The words that changed between two versions of one line: what a side-by-side or inline
/// comparison marks inside a changed line.
///
/// A line is cut into tokens (runs of letters and digits, runs of spaces, each other character
/// on its own), and ``LineDiff`` compares the token lists (one token a line), so the result is
/// a minimal diff of tokens.
///
/// ```swift
/// let w = WordDiff(old: "The cat sat.", new: "The dog sat.")
/// w.old  // [("The ", false), ("cat", true), (" sat.", false)]
/// w.new  // [("The ", false), ("dog", true), (" sat.", false)]
/// ```
public struct WordDiff: Sendable, Hashable {
  /// A run of a line's text, changed or kept.
  public struct Segment: Sendable, Hashable {
    public var text: String
    public var changed: Bool

    public init(_ text: String, changed: Bool) {
      self.text = text
      self.changed = changed
    }
  }

  /// The old line's runs: `changed` where the new line does not have them.
  public let old: [Segment]
  /// The new line's runs: `changed` where the old line did not have them.
  public let new: [Segment]

  /// Compares two lines (a final `"\n"` is not part of the comparison, nor of the segments).
  public init(old: String, new: String) {
    let a = Self.tokens(String(old.trimmingNewline))
    let b = Self.tokens(String(new.trimmingNewline))
    // Each distinct token becomes a line of its own number, so no token's bytes (a "\r", a
    // "\n") can cut the lists differently.
    var ids: [String: Int] = [:]
    func line(_ token: String) -> String {
      if let id = ids[token] { return "\(id)\n" }
      ids[token] = ids.count
      return "\(ids.count - 1)\n"
    }
    let diff = LineDiff(old: a.map(line).joined(), new: b.map(line).joined())
    var oldSegments: [Segment] = []
    var newSegments: [Segment] = []
    func add(_ text: String, changed: Bool, to list: inout [Segment]) {
      guard !text.isEmpty else { return }
      if let last = list.last, last.changed == changed {
        list[list.count - 1].text += text
      } else {
        list.append(Segment(text, changed: changed))
      }
    }
    for edit in diff.edits {
      switch edit.operation {
      case .equal:
        add(a[edit.oldRange].joined(), changed: false, to: &oldSegments)
        add(b[edit.newRange].joined(), changed: false, to: &newSegments)
      case .delete: add(a[edit.oldRange].joined(), changed: true, to: &oldSegments)
      case .insert: add(b[edit.newRange].joined(), changed: true, to: &newSegments)
      }
    }
    self.old = oldSegments
    self.new = newSegments
  }

  /// The tokens of a line: runs of letters and digits, runs of whitespace, and each other
  /// character alone. Joined, they give the line back.
  static func tokens(_ line: String) -> [String] {
    enum Class { case word, space, other }
    func kind(_ c: Character) -> Class {
      if c.isLetter || c.isNumber || c == "_" { return .word }
      if c.isWhitespace { return .space }
      return .other
    }
    var out: [String] = []
    var current = ""
    var currentKind: Class? = nil
    for c in line {
      let k = kind(c)
      if k == currentKind && k != .other {
        current.append(c)
      } else {
        if !current.isEmpty { out.append(current) }
        current = String(c)
        currentKind = k
      }
    }
    if !current.isEmpty { out.append(current) }
    return out
  }
}

extension String {
  /// The line without its final `"\n"` (a `"\r\n"` is one character to Swift: it goes too).
  fileprivate var trimmingNewline: Substring {
    guard let last = unicodeScalars.last, last == "\n" else { return self[...] }
    return dropLast()
  }
}
