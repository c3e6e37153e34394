/// A line-based diff of two texts: what exactly changed between two revisions of a page.
///
/// ## Lines
///
/// A text is cut into lines *after* every `"\n"`, and every line keeps its terminator:
///
/// | text          | lines                  |
/// |---------------|------------------------|
/// | `""`          | `[]`                   |
/// | `"a"`         | `["a"]`                |
/// | `"a\n"`       | `["a\n"]`              |
/// | `"a\nb"`      | `["a\n", "b"]`         |
/// | `"a\nb\n"`    | `["a\n", "b\n"]`       |
/// | `"\n\n"`      | `["\n", "\n"]`         |
///
/// Only the last line of a text can lack its `"\n"`, and joining the lines gives the text back
/// byte for byte. So `"b"` and `"b\n"` are different lines, and a diff of `"a\nb"` against
/// `"a\nb\n"` deletes `"b"` and inserts `"b\n"`; ``unified(context:oldLabel:newLabel:)`` then
/// marks the unterminated line with `\ No newline at end of file`, as GNU diff does.
///
/// Only `"\n"` ends a line. A `"\r"` before it stays part of the line, so `"a\r\n"` and `"a\n"`
/// are different lines, and CRLF text round-trips unchanged.
///
/// Lines are compared byte for byte (their UTF-8), not with `String`'s `==`, which treats
/// canonically equivalent Unicode (precomposed and decomposed "é") as equal.
///
/// ## Algorithm
///
/// Common leading and trailing lines are set aside, lines that occur in only one of the texts are
/// marked changed at once (they can never match), and Myers' O((N+M)D) algorithm in its
/// linear-space form ("find the middle snake", divide and conquer, driven by an explicit work
/// list rather than recursion) finds a shortest edit script for the rest. The result is a
/// minimal diff: ``insertions`` + ``deletions`` is as small as possible. Among the minimal
/// diffs, runs of changed lines are then slid as GNU diff and git do, so that a block of
/// changes ends as low as it can or lines up with a change in the other text (adding a
/// paragraph after another paragraph that also ends in a blank line shows the new paragraph,
/// not a shifted one).
///
/// ## Example
///
/// ```swift
/// let diff = LineDiff(old: "title\nold line\nend\n", new: "title\nnew line\nend\n")
/// diff.insertions  // 1
/// diff.deletions   // 1
/// diff.edits.map(\.operation)  // [.equal, .delete, .insert, .equal]
/// print(diff.unified(oldLabel: "Home@3", newLabel: "Home@4"))
/// // --- Home@3
/// // +++ Home@4
/// // @@ -1,3 +1,3 @@
/// //  title
/// // -old line
/// // +new line
/// //  end
/// ```
///
/// ## Worked example of the search
///
/// Old `A B C A B B A`, new `C B A B A C` (the example of Myers' paper, one letter a line).
/// The texts share no first or last line and every letter occurs in both, so the search gets
/// all of them. N = 7, M = 6, and Δ = N − M = 1 is odd, so the forward search from (0, 0) and
/// the backward search from (7, 6) take turns, each keeping for every diagonal k = x − y the
/// furthest point it reached with d edits, and each following runs of equal lines ("snakes")
/// for free. With d = 3 the forward search reaches (5, 2) on diagonal 3, a point the backward
/// search already passed with d = 2: a shortest script has 3 + 2 = 5 edits and goes through
/// (5, 2). The two halves, `A B C A B` → `C B` (3 edits) and `B A` → `A B A C` (2 edits), go on
/// the work list and are split the same way until each is a run of only deletions or only
/// insertions. The diff keeps `C B B A`, and `unified(context: 7)` prints, as GNU diff does:
///
/// ```
/// @@ -1,7 +1,6 @@
/// -A
/// -B
///  C
/// -A
///  B
/// +A
///  B
///  A
/// +C
/// ```
public struct LineDiff: Sendable, Hashable {
  /// What an ``Edit`` does with its lines.
  public enum Operation: Sendable, Hashable {
    /// The lines are in both texts.
    case equal
    /// The lines are only in the new text.
    case insert
    /// The lines are only in the old text.
    case delete
  }

  /// A run of consecutive lines that are equal, inserted or deleted.
  ///
  /// Ranges are 0-based line indices, half-open. An insertion has an empty ``oldRange`` that
  /// marks where its lines go in the old text; a deletion has an empty ``newRange``.
  ///
  /// ```swift
  /// LineDiff(old: "a\nb\n", new: "a\nx\nb\n").edits
  /// // [equal  old 0..<1 new 0..<1 ["a\n"],
  /// //  insert old 1..<1 new 1..<2 ["x\n"],
  /// //  equal  old 1..<2 new 2..<3 ["b\n"]]
  /// ```
  public struct Edit: Sendable, Hashable {
    /// Whether the lines are kept, inserted or deleted.
    public var operation: Operation
    /// The lines' indices in the old text (empty for an insertion).
    public var oldRange: Range<Int>
    /// The lines' indices in the new text (empty for a deletion).
    public var newRange: Range<Int>
    /// The lines, each with its `"\n"` (only a text's last line may lack it).
    public var lines: [String]

    /// Makes an edit; the ranges must agree with the operation and the number of lines.
    public init(operation: Operation, oldRange: Range<Int>, newRange: Range<Int>, lines: [String]) {
      self.operation = operation
      self.oldRange = oldRange
      self.newRange = newRange
      self.lines = lines
    }

    /// The lines joined, exactly as they appear in the text.
    public var text: String { lines.joined() }
  }

  /// A group of changes with the unchanged lines around them, as one `@@` block of a unified
  /// diff shows it.
  ///
  /// Changes whose unchanged gap is at most twice the context are in the same hunk, the rule of
  /// GNU diff and git.
  public struct Hunk: Sendable, Hashable {
    /// The old lines the hunk covers, context included (0-based, half-open).
    public var oldRange: Range<Int>
    /// The new lines the hunk covers, context included (0-based, half-open).
    public var newRange: Range<Int>
    /// The hunk's context, deletions and insertions in order; each deletion comes before the
    /// insertion that replaces it.
    public var edits: [Edit]

    /// Makes a hunk.
    public init(oldRange: Range<Int>, newRange: Range<Int>, edits: [Edit]) {
      self.oldRange = oldRange
      self.newRange = newRange
      self.edits = edits
    }

    /// The `@@ -l,s +l,s @@` line, numbered as GNU `diff -u` numbers it.
    ///
    /// Lines are counted from 1. A range of one line prints only its number (`-3`); an empty
    /// range prints the number of the line *before* it and a count of 0 (`-0,0` for an empty
    /// old text, `+2,0` for lines deleted after line 2 of the new text).
    public var header: String {
      "@@ -\(Self.range(oldRange)) +\(Self.range(newRange)) @@"
    }

    static func range(_ r: Range<Int>) -> String {
      switch r.count {
      case 0: "\(r.lowerBound),0"
      case 1: "\(r.lowerBound + 1)"
      default: "\(r.lowerBound + 1),\(r.count)"
      }
    }
  }

  /// Both texts as runs of equal, deleted and inserted lines, in order.
  ///
  /// The edits cover both texts: the `.equal` and `.delete` lines in order are the old text,
  /// and the `.equal` and `.insert` lines in order are the new text. No edit is empty, two
  /// neighbours never have the same operation, and a `.delete` comes before an `.insert` that
  /// replaces it. Two empty texts have no edits.
  public let edits: [Edit]

  /// Compares two texts line by line.
  ///
  /// ```swift
  /// let diff = LineDiff(old: "a\nb\nc\n", new: "a\nc\nd\n")
  /// diff.deletions   // 1 ("b\n")
  /// diff.insertions  // 1 ("d\n")
  /// ```
  public init(old: String, new: String) {
    var table = LineTable()
    let a = table.add(old)
    let b = table.add(new)
    var edits: [Edit] = []
    var i = 0
    var j = 0
    func equal(to oldEnd: Int) {
      guard oldEnd > i else { return }
      let count = oldEnd - i
      edits.append(
        Edit(
          operation: .equal, oldRange: i..<oldEnd, newRange: j..<(j + count),
          lines: Array(a.lines[i..<oldEnd])))
      i = oldEnd
      j += count
    }
    for block in Self.changeBlocks(a.ids, b.ids) {
      equal(to: block.old.lowerBound)
      if !block.old.isEmpty {
        edits.append(
          Edit(
            operation: .delete, oldRange: block.old, newRange: j..<j,
            lines: Array(a.lines[block.old])))
      }
      if !block.new.isEmpty {
        edits.append(
          Edit(
            operation: .insert, oldRange: block.old.upperBound..<block.old.upperBound,
            newRange: block.new, lines: Array(b.lines[block.new])))
      }
      i = block.old.upperBound
      j = block.new.upperBound
    }
    equal(to: a.lines.count)
    self.edits = edits
  }

  /// The number of inserted lines.
  public var insertions: Int {
    edits.reduce(0) { $0 + ($1.operation == .insert ? $1.lines.count : 0) }
  }

  /// The number of deleted lines.
  public var deletions: Int {
    edits.reduce(0) { $0 + ($1.operation == .delete ? $1.lines.count : 0) }
  }

  /// Whether the texts differ at all.
  public var hasChanges: Bool {
    edits.contains { $0.operation != .equal }
  }

  /// The changes grouped into hunks with up to `context` unchanged lines around each.
  ///
  /// A negative context counts as 0. Identical texts have no hunks.
  public func hunks(context: Int = 3) -> [Hunk] {
    let context = max(0, context)
    var hunks: [Hunk] = []
    var index = 0
    while index < edits.count {
      guard edits[index].operation != .equal else {
        index += 1
        continue
      }
      var members: [Edit] = []
      if index > 0 {
        // Leading context: the end of the unchanged run before the first change.
        let before = edits[index - 1]
        let lead = min(context, before.lines.count)
        if lead > 0 {
          members.append(Self.slice(before, (before.lines.count - lead)..<before.lines.count))
        }
      }
      // Take changes, and the unchanged runs between them that are at most twice the context.
      while index < edits.count {
        let edit = edits[index]
        if edit.operation == .equal
          && (index == edits.count - 1 || edit.lines.count > 2 * context)
        {
          break
        }
        members.append(edit)
        index += 1
      }
      if index < edits.count {
        // Trailing context: the start of the unchanged run after the last change.
        let tail = min(context, edits[index].lines.count)
        if tail > 0 { members.append(Self.slice(edits[index], 0..<tail)) }
      }
      hunks.append(
        Hunk(
          oldRange: members[0].oldRange.lowerBound..<members[members.count - 1].oldRange.upperBound,
          newRange: members[0].newRange.lowerBound..<members[members.count - 1].newRange.upperBound,
          edits: members))
    }
    return hunks
  }

  /// The diff as unified diff text, byte for byte what `diff -u --label oldLabel --label
  /// newLabel` (GNU diffutils) prints for the same texts, or `""` when they are equal.
  ///
  /// ```swift
  /// LineDiff(old: "a\nb", new: "a\nb\n").unified()
  /// // --- a
  /// // +++ b
  /// // @@ -1,2 +1,2 @@
  /// //  a
  /// // -b
  /// // \ No newline at end of file
  /// // +b
  /// ```
  ///
  /// - Parameters:
  ///   - context: Unchanged lines shown around each change (`diff -U`); negative counts as 0.
  ///   - oldLabel: The name on the `---` line.
  ///   - newLabel: The name on the `+++` line.
  public func unified(context: Int = 3, oldLabel: String = "a", newLabel: String = "b") -> String {
    let hunks = hunks(context: context)
    guard !hunks.isEmpty else { return "" }
    var out = "--- \(oldLabel)\n+++ \(newLabel)\n"
    for hunk in hunks {
      out += hunk.header
      out += "\n"
      for edit in hunk.edits {
        let prefix =
          switch edit.operation {
          case .equal: " "
          case .delete: "-"
          case .insert: "+"
          }
        for line in edit.lines {
          out += prefix
          out += line
          if line.utf8.last != 0x0A { out += "\n\\ No newline at end of file\n" }
        }
      }
    }
    return out
  }

  /// Cuts a text into lines that keep their `"\n"` (see "Lines" above).
  ///
  /// ```swift
  /// LineDiff.lines(of: "a\r\nb")  // ["a\r\n", "b"]
  /// ```
  public static func lines(of text: String) -> [String] {
    var table = LineTable()
    return table.add(text).lines
  }

  static func slice(_ edit: Edit, _ range: Range<Int>) -> Edit {
    Edit(
      operation: edit.operation,
      oldRange: (edit.oldRange.lowerBound + range.lowerBound)..<(edit.oldRange.lowerBound
        + range.upperBound),
      newRange: (edit.newRange.lowerBound + range.lowerBound)..<(edit.newRange.lowerBound
        + range.upperBound),
      lines: Array(edit.lines[range]))
  }
}

// MARK: - Lines as numbers

extension LineDiff {
  /// The lines of several texts, each line numbered so that byte-identical lines get the same
  /// number and comparing lines is comparing integers.
  struct LineTable {
    private var numbers: [LineKey: Int] = [:]

    /// The number of distinct lines seen so far.
    var distinctCount: Int { numbers.count }

    /// A line's bytes with a hash computed while cutting the line, so the dictionary hashes one
    /// word instead of feeding every byte to `Hasher`.
    struct LineKey: Hashable {
      let bytes: ArraySlice<UInt8>
      let fnv: UInt64

      func hash(into hasher: inout Hasher) { hasher.combine(fnv) }
      static func == (a: LineKey, b: LineKey) -> Bool { a.fnv == b.fnv && a.bytes == b.bytes }
    }

    /// Cuts `text` into lines and numbers them.
    mutating func add(_ text: String) -> (lines: [String], ids: [Int]) {
      let bytes = Array(text.utf8)
      var lines: [String] = []
      var ids: [Int] = []
      numbers.reserveCapacity(numbers.count + bytes.count / 32)
      var start = 0
      while start < bytes.count {
        var end = start
        var fnv: UInt64 = 0xcbf2_9ce4_8422_2325  // FNV-1a
        while end < bytes.count && bytes[end] != 0x0A {
          fnv = (fnv ^ UInt64(bytes[end])) &* 0x100_0000_01b3
          end += 1
        }
        if end < bytes.count { end += 1 }  // keep the "\n"
        let line = LineKey(bytes: bytes[start..<end], fnv: fnv)
        let id: Int
        if let known = numbers[line] {
          id = known
        } else {
          id = numbers.count
          numbers[line] = id
        }
        ids.append(id)
        lines.append(String(decoding: line.bytes, as: UTF8.self))
        start = end
      }
      return (lines, ids)
    }
  }

  /// A change: old lines `old` are replaced by new lines `new` (either may be empty, not both).
  struct ChangeBlock: Hashable {
    var old: Range<Int>
    var new: Range<Int>
  }

  /// The changes of a minimal, slid diff of two numbered line sequences, in order; consecutive
  /// blocks have at least one unchanged line between them.
  static func changeBlocks(_ a: [Int], _ b: [Int]) -> [ChangeBlock] {
    var changedA = [Bool](repeating: false, count: a.count)
    var changedB = [Bool](repeating: false, count: b.count)
    markChanges(a, b, &changedA, &changedB)
    slide(a, &changedA, changedB)
    slide(b, &changedB, changedA)
    var blocks: [ChangeBlock] = []
    var i = 0
    var j = 0
    while i < a.count || j < b.count {
      if i < a.count && j < b.count && !changedA[i] && !changedB[j] {
        i += 1
        j += 1
        continue
      }
      let i0 = i
      let j0 = j
      while i < a.count && changedA[i] { i += 1 }
      while j < b.count && changedB[j] { j += 1 }
      precondition(i > i0 || j > j0, "LineDiff: inconsistent change marks")
      blocks.append(ChangeBlock(old: i0..<i, new: j0..<j))
    }
    return blocks
  }

  /// Marks the lines of `a` and `b` that are not on one shortest edit script.
  static func markChanges(
    _ a: [Int], _ b: [Int], _ changedA: inout [Bool], _ changedB: inout [Bool]
  ) {
    // A line that occurs in only one text is changed in every edit script; leave it out of
    // the search, which then often has little or nothing left to do.
    let top = (a.max() ?? -1) + (b.max() ?? -1) + 2
    var inA = [Bool](repeating: false, count: top)
    var inB = [Bool](repeating: false, count: top)
    for v in a { inA[v] = true }
    for v in b { inB[v] = true }
    var keptA: [Int] = []
    var indexA: [Int] = []
    for (i, v) in a.enumerated() {
      if inB[v] {
        keptA.append(v)
        indexA.append(i)
      } else {
        changedA[i] = true
      }
    }
    var keptB: [Int] = []
    var indexB: [Int] = []
    for (j, v) in b.enumerated() {
      if inA[v] {
        keptB.append(v)
        indexB.append(j)
      } else {
        changedB[j] = true
      }
    }
    var markA = [Bool](repeating: false, count: keptA.count)
    var markB = [Bool](repeating: false, count: keptB.count)
    Myers.run(keptA, keptB, &markA, &markB)
    for (k, i) in indexA.enumerated() where markA[k] { changedA[i] = true }
    for (k, j) in indexB.enumerated() where markB[k] { changedB[j] = true }
  }

  /// Slides runs of changed lines of `x` (whose other text has change marks `other`) to a
  /// canonical place among the equally short diffs: down as far as they go, merging with the
  /// runs they meet, then back up to the lowest place where they line up with a change in the
  /// other text, if there is one.
  ///
  /// Sliding a run `x[s..<e]` down by one is possible when `x[s] == x[e]`: line `e` becomes
  /// changed and line `s` takes over its match. The runs of both texts stay in step: the run
  /// of `x` after `c` unchanged lines faces the run (maybe empty) of the other text after `c`
  /// unchanged lines.
  static func slide(_ x: [Int], _ changed: inout [Bool], _ other: [Bool]) {
    let n = x.count
    let m = other.count
    var start = 0
    var end = 0
    while end < n && changed[end] { end += 1 }
    var otherStart = 0
    var otherEnd = 0
    while otherEnd < m && other[otherEnd] { otherEnd += 1 }

    func otherPrevious() {
      otherEnd = otherStart - 1
      otherStart = otherEnd
      while otherStart > 0 && other[otherStart - 1] { otherStart -= 1 }
    }
    func otherNext() {
      otherStart = otherEnd + 1
      otherEnd = otherStart
      while otherEnd < m && other[otherEnd] { otherEnd += 1 }
    }

    while true {
      if end > start {
        var size = 0
        var endMatchingOther = -1
        repeat {
          size = end - start
          // Up as far as possible, swallowing the runs met on the way.
          while start > 0 && x[start - 1] == x[end - 1] {
            start -= 1
            end -= 1
            changed[start] = true
            changed[end] = false
            while start > 0 && changed[start - 1] { start -= 1 }
            otherPrevious()
          }
          endMatchingOther = otherEnd > otherStart ? end : -1
          // Then down as far as possible.
          while end < n && x[start] == x[end] {
            changed[start] = false
            changed[end] = true
            start += 1
            end += 1
            while end < n && changed[end] { end += 1 }
            otherNext()
            if otherEnd > otherStart { endMatchingOther = end }
          }
        } while size != end - start
        if endMatchingOther >= 0 {
          while end > endMatchingOther {
            start -= 1
            end -= 1
            changed[start] = true
            changed[end] = false
            otherPrevious()
          }
        }
      }
      guard end < n else { break }
      start = end + 1
      end = start
      while end < n && changed[end] { end += 1 }
      otherNext()
    }
  }
}

// MARK: - Myers

extension LineDiff {
  /// Myers' linear-space shortest edit script search.
  enum Myers {
    /// Marks in `changedA`/`changedB` the lines not on one shortest edit script from `a` to
    /// `b`.
    static func run(_ a: [Int], _ b: [Int], _ changedA: inout [Bool], _ changedB: inout [Bool]) {
      let size = a.count + b.count + 3
      // Furthest x reached per diagonal, forward and backward, shared by all subproblems.
      var forward = [Int](repeating: 0, count: size)
      var backward = [Int](repeating: 0, count: size)
      var work: [(a0: Int, a1: Int, b0: Int, b1: Int)] = [(0, a.count, 0, b.count)]
      while let (start0, end0, start1, end1) = work.popLast() {
        var a0 = start0
        var a1 = end0
        var b0 = start1
        var b1 = end1
        while a0 < a1 && b0 < b1 && a[a0] == b[b0] {
          a0 += 1
          b0 += 1
        }
        while a0 < a1 && b0 < b1 && a[a1 - 1] == b[b1 - 1] {
          a1 -= 1
          b1 -= 1
        }
        if a0 == a1 {
          for j in b0..<b1 { changedB[j] = true }
          continue
        }
        if b0 == b1 {
          for i in a0..<a1 { changedA[i] = true }
          continue
        }
        let (x, y) = middle(a, a0, a1, b, b0, b1, &forward, &backward)
        // Both halves are strictly smaller problems (the middle splits a script of at least
        // two edits), so the work list empties.
        work.append((a0 + x, a1, b0 + y, b1))
        work.append((a0, a0 + x, b0, b0 + y))
      }
    }

    /// A point (x, y), relative to (a0, b0), on a shortest edit script of `a[a0..<a1]` to
    /// `b[b0..<b1]` that splits it into two nonempty halves. Both ranges are nonempty and their
    /// first and last lines differ.
    static func middle(
      _ a: [Int], _ a0: Int, _ a1: Int, _ b: [Int], _ b0: Int, _ b1: Int,
      _ forward: inout [Int], _ backward: inout [Int]
    ) -> (x: Int, y: Int) {
      let n = a1 - a0
      let m = b1 - b0
      let delta = n - m
      let odd = delta & 1 != 0
      // Diagonal k = x - y lies in -m...n; it is stored at k + offset.
      let offset = m + 1
      let unreachedForward = -1
      let unreachedBackward = Int.max
      forward[offset] = 0
      backward[delta + offset] = n
      // The diagonals of the previous round, forward and backward.
      var fLow = 0
      var fHigh = 0
      var bLow = delta
      var bHigh = delta
      var d = 0
      while true {
        d += 1
        // The searches meet by d = ceil((n + m) / 2) at the latest.
        precondition(d <= n + m, "LineDiff: the searches did not meet")
        // Forward: diagonals -d...d of d's parity, inside the grid. Both searches scan the
        // diagonals from high to low, as GNU diff does, so that a choice between equally short
        // scripts mostly falls the way GNU diff's does.
        var low = max(-d, -m)
        if (low - d) & 1 != 0 { low += 1 }
        var high = min(d, n)
        if (high - d) & 1 != 0 { high -= 1 }
        var k = high
        while k >= low {
          var x = unreachedForward
          if k + 1 <= fHigh {
            let down = forward[k + 1 + offset]
            if down != unreachedForward && down - k <= m { x = down }
          }
          if k - 1 >= fLow {
            let right = forward[k - 1 + offset]
            if right != unreachedForward && right < n { x = max(x, right + 1) }
          }
          if x != unreachedForward {
            var y = x - k
            while x < n && y < m && a[a0 + x] == b[b0 + y] {
              x += 1
              y += 1
            }
            if odd && k >= bLow && k <= bHigh {
              let back = backward[k + offset]
              if back != unreachedBackward && back <= x { return (x, y) }
            }
          }
          forward[k + offset] = x
          k -= 2
        }
        fLow = low
        fHigh = high

        // Backward: diagonals delta-d...delta+d of (delta+d)'s parity, inside the grid.
        low = max(delta - d, -m)
        if (low - delta - d) & 1 != 0 { low += 1 }
        high = min(delta + d, n)
        if (high - delta - d) & 1 != 0 { high -= 1 }
        k = high
        while k >= low {
          var x = unreachedBackward
          if k - 1 >= bLow {
            let up = backward[k - 1 + offset]
            if up != unreachedBackward && up - k >= 0 { x = up }
          }
          if k + 1 <= bHigh {
            let left = backward[k + 1 + offset]
            if left != unreachedBackward && left > 0 { x = min(x, left - 1) }
          }
          if x != unreachedBackward {
            var y = x - k
            while x > 0 && y > 0 && a[a0 + x - 1] == b[b0 + y - 1] {
              x -= 1
              y -= 1
            }
            if !odd && k >= fLow && k <= fHigh {
              let front = forward[k + offset]
              if front != unreachedForward && x <= front { return (x, y) }
            }
          }
          backward[k + offset] = x
          k -= 2
        }
        bLow = low
        bHigh = high
      }
    }
  }
}
