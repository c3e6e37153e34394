/// A diff3-style merge of two edits of a page against their common ancestor, for publishing a
/// draft whose base revision is no longer the current one.
///
/// ## Semantics
///
/// Texts are cut into lines as ``LineDiff`` cuts them (every line keeps its `"\n"`, so a change
/// of the final newline is a change of the last line), and lines are compared byte for byte.
///
/// 1. If `ours` is `base`, the result is `theirs`; if `theirs` is `base` or equals `ours`, the
///    result is `ours`. (Byte-identical texts; no diff is made.)
/// 2. Otherwise the minimal line diffs base→ours and base→theirs are computed. Each is a list of
///    *changes*: a range of base lines (maybe empty, for a pure insertion at a position) and
///    the lines that replace it. Two changes of the same side are always at least one
///    unchanged line apart.
/// 3. Changes of both sides are gathered into *regions*: two changes are in the same region
///    when their base ranges overlap or *touch*, that is when no unchanged base line lies
///    between them: `[2, 4)` and `[4, 5)` touch, an insertion at 4 touches both `[2, 4)` and
///    `[4, 5)`, two insertions at 4 touch each other, and `[2, 4)` and `[5, 6)` do not (base
///    line 4 separates them). Regions grow transitively. This is the rule of GNU diff3 and
///    `git merge-file`.
/// 4. Base lines outside every region are copied. A region changed by one side only takes that
///    side's lines. A region changed by both sides takes their lines if both sides' text for
///    the region is the same (the same edit made twice is applied once), and is a *conflict*
///    otherwise. Insertions at the same position with different content are therefore a
///    conflict, and so are edits of neighbouring lines.
/// 5. Without conflicts the outcome is ``MergeOutcome/merged(_:)``; with any conflict it is
///    ``MergeOutcome/conflict(_:)``, which carries the three texts, every conflicting region
///    (its line ranges and lines in base, ours and theirs), and can render the whole merge with
///    conflict markers.
///
/// The clean results and the clean/conflict verdict agree with `git merge-file -p ours base
/// theirs`, and ``MergeConflict/markedText(oursLabel:baseLabel:theirsLabel:)`` with
/// `git merge-file -p --diff3`, whenever both tools pick the same line diffs (always so when
/// the texts have no repeated lines; with repeated lines two equally short diffs may differ).
///
/// ## Worked example
///
/// ```
/// base      ours      theirs
/// 0 Title   Title     Title
/// 1 a       a         a
/// 2 b       B         b
/// 3 c       c         c
/// 4 d       d         D
/// 5 e       e         e
/// ```
///
/// Ours changes base `[2, 3)` (`b` → `B`), theirs changes `[4, 5)` (`d` → `D`). Base line 3 (`c`)
/// lies between them, so they are two regions, each changed by one side: the merge is
/// `Title a B c D e`.
///
/// Had theirs changed `c` (`[3, 4)`) instead, the changes `[2, 3)` and `[3, 4)` would touch:
/// one region `[2, 4)` with ours' text `B c` and theirs' text `b C`, which differ, so it is a
/// conflict with `baseRange == 2..<4`, `oursRange == 2..<4`, `theirsRange == 2..<4`.
///
/// Had both sides changed `b` to `B`, the region `[2, 3)` would have the same text `B` on both
/// sides and be applied once.
///
/// ```swift
/// switch ThreeWayMerge.merge(base: base, ours: draft, theirs: current) {
/// case .merged(let text):
///   publish(text)
/// case .conflict(let conflict):
///   show(conflict.markedText(oursLabel: "your draft", theirsLabel: "current page"))
/// }
/// ```
public enum ThreeWayMerge {
  /// The result of a merge.
  public enum MergeOutcome: Sendable, Hashable {
    /// Both edits applied without conflict: the merged text.
    case merged(String)
    /// The edits conflict in one or more regions.
    case conflict(MergeConflict)
  }

  /// Both edits of a merge that conflicts, and where they conflict.
  ///
  /// ```swift
  /// // base "a\nb\nc\n", ours "a\nB\nc\n", theirs "a\nX\nc\n"
  /// conflict.regions[0].baseRange   // 1..<2
  /// conflict.regions[0].oursLines   // ["B\n"]
  /// conflict.regions[0].theirsLines // ["X\n"]
  /// conflict.markedText()
  /// // a
  /// // <<<<<<< ours
  /// // B
  /// // ||||||| base
  /// // b
  /// // =======
  /// // X
  /// // >>>>>>> theirs
  /// // c
  /// ```
  public struct MergeConflict: Sendable, Hashable {
    /// One region that both sides changed differently.
    ///
    /// Ranges are 0-based, half-open line indices into the respective text; lines keep their
    /// `"\n"` as in ``LineDiff``. An empty range is a position (for a side that only inserted
    /// lines there, the base range is empty; for a side that deleted the region, its range is).
    public struct Region: Sendable, Hashable {
      /// The region's lines in the common ancestor.
      public var baseRange: Range<Int>
      /// The region's lines in our text.
      public var oursRange: Range<Int>
      /// The region's lines in their text.
      public var theirsRange: Range<Int>
      /// `base`'s lines in ``baseRange``.
      public var baseLines: [String]
      /// `ours`' lines in ``oursRange``.
      public var oursLines: [String]
      /// `theirs`' lines in ``theirsRange``.
      public var theirsLines: [String]

      /// Makes a region.
      public init(
        baseRange: Range<Int>, oursRange: Range<Int>, theirsRange: Range<Int>,
        baseLines: [String], oursLines: [String], theirsLines: [String]
      ) {
        self.baseRange = baseRange
        self.oursRange = oursRange
        self.theirsRange = theirsRange
        self.baseLines = baseLines
        self.oursLines = oursLines
        self.theirsLines = theirsLines
      }
    }

    /// The common ancestor.
    public let base: String
    /// Our edit of it (the draft).
    public let ours: String
    /// Their edit of it (the current revision).
    public let theirs: String
    /// The conflicting regions, in text order (at least one).
    public let regions: [Region]
    /// The merge in order: resolved lines and conflicting regions.
    let pieces: [Piece]

    enum Piece: Sendable, Hashable {
      case resolved([String])
      case conflict(Int)
    }

    /// The merge with every conflict between markers, as `git merge-file -p --diff3 -L
    /// oursLabel -L baseLabel -L theirsLabel` prints it.
    ///
    /// Resolved lines appear as merged; each conflict shows ours, base and theirs:
    ///
    /// ```
    /// <<<<<<< ours
    /// our lines
    /// ||||||| base
    /// base lines
    /// =======
    /// their lines
    /// >>>>>>> theirs
    /// ```
    ///
    /// A side whose last line in the region has no `"\n"` gets one, so every marker starts a
    /// line.
    public func markedText(
      oursLabel: String = "ours", baseLabel: String = "base", theirsLabel: String = "theirs"
    ) -> String {
      var out = ""
      func section(_ lines: [String]) {
        for line in lines { out += line }
        if let last = lines.last, last.utf8.last != 0x0A { out += "\n" }
      }
      for piece in pieces {
        switch piece {
        case .resolved(let lines):
          for line in lines { out += line }
        case .conflict(let index):
          let region = regions[index]
          out += "<<<<<<< \(oursLabel)\n"
          section(region.oursLines)
          out += "||||||| \(baseLabel)\n"
          section(region.baseLines)
          out += "=======\n"
          section(region.theirsLines)
          out += ">>>>>>> \(theirsLabel)\n"
        }
      }
      return out
    }
  }

  /// Merges two edits of `base` (see the semantics above).
  ///
  /// ```swift
  /// ThreeWayMerge.merge(base: "a\nb\nc\nd\n", ours: "A\nb\nc\nd\n", theirs: "a\nb\nc\nD\n")
  /// // .merged("A\nb\nc\nD\n")
  /// ```
  public static func merge(base: String, ours: String, theirs: String) -> MergeOutcome {
    if ours.utf8.elementsEqual(base.utf8) { return .merged(theirs) }
    if theirs.utf8.elementsEqual(base.utf8) || theirs.utf8.elementsEqual(ours.utf8) {
      return .merged(ours)
    }
    var table = LineDiff.LineTable()
    let b = table.add(base)
    let o = table.add(ours)
    let t = table.add(theirs)
    let oursChanges = LineDiff.changeBlocks(b.ids, o.ids)
    let theirsChanges = LineDiff.changeBlocks(b.ids, t.ids)

    var pieces: [MergeConflict.Piece] = []
    var regions: [MergeConflict.Region] = []
    var pending: [String] = []  // resolved lines not yet in `pieces`
    var basePosition = 0
    // Index in a side = index in base + the side's offset, outside its changes.
    var oursOffset = 0
    var theirsOffset = 0
    var i = 0
    var j = 0
    while i < oursChanges.count || j < theirsChanges.count {
      // Start a region with the change that begins first, then take every change that
      // overlaps or touches it.
      let regionStart: Int
      var regionEnd: Int
      let firstOurs = i
      let firstTheirs = j
      if j == theirsChanges.count
        || (i < oursChanges.count
          && oursChanges[i].old.lowerBound <= theirsChanges[j].old.lowerBound)
      {
        regionStart = oursChanges[i].old.lowerBound
        regionEnd = oursChanges[i].old.upperBound
        i += 1
      } else {
        regionStart = theirsChanges[j].old.lowerBound
        regionEnd = theirsChanges[j].old.upperBound
        j += 1
      }
      while true {
        if i < oursChanges.count && oursChanges[i].old.lowerBound <= regionEnd {
          regionEnd = max(regionEnd, oursChanges[i].old.upperBound)
          i += 1
        } else if j < theirsChanges.count && theirsChanges[j].old.lowerBound <= regionEnd {
          regionEnd = max(regionEnd, theirsChanges[j].old.upperBound)
          j += 1
        } else {
          break
        }
      }
      pending += b.lines[basePosition..<regionStart]

      let oursStart = regionStart + oursOffset
      for change in oursChanges[firstOurs..<i] {
        oursOffset += change.new.count - change.old.count
      }
      let oursRange = oursStart..<(regionEnd + oursOffset)
      let theirsStart = regionStart + theirsOffset
      for change in theirsChanges[firstTheirs..<j] {
        theirsOffset += change.new.count - change.old.count
      }
      let theirsRange = theirsStart..<(regionEnd + theirsOffset)

      if j == firstTheirs || o.ids[oursRange] == t.ids[theirsRange] {
        // Only ours changed the region, or both made the same change.
        pending += o.lines[oursRange]
      } else if i == firstOurs {
        pending += t.lines[theirsRange]
      } else {
        if !pending.isEmpty {
          pieces.append(.resolved(pending))
          pending = []
        }
        pieces.append(.conflict(regions.count))
        regions.append(
          MergeConflict.Region(
            baseRange: regionStart..<regionEnd, oursRange: oursRange, theirsRange: theirsRange,
            baseLines: Array(b.lines[regionStart..<regionEnd]),
            oursLines: Array(o.lines[oursRange]), theirsLines: Array(t.lines[theirsRange])))
      }
      basePosition = regionEnd
    }
    pending += b.lines[basePosition...]
    if regions.isEmpty {
      return .merged(pending.joined())
    }
    if !pending.isEmpty { pieces.append(.resolved(pending)) }
    return .conflict(
      MergeConflict(base: base, ours: ours, theirs: theirs, regions: regions, pieces: pieces))
  }
}
