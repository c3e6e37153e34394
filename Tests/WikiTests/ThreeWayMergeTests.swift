import Foundation
import JSON
import Projections
import Query
import StoreTestSupport
import TestSupport
import Testing
import Wiki

@Suite struct ThreeWayMergeTests {
  typealias Support = TextTestSupport
  typealias Outcome = ThreeWayMerge.MergeOutcome

  func merge(_ base: String, _ ours: String, _ theirs: String) -> Outcome {
    ThreeWayMerge.merge(base: base, ours: ours, theirs: theirs)
  }

  func conflict(_ outcome: Outcome) throws -> ThreeWayMerge.MergeConflict {
    guard case .conflict(let conflict) = outcome else {
      Issue.record("expected a conflict, got \(outcome)")
      throw Failure()
    }
    return conflict
  }

  struct Failure: Error {}

  let base = "Title\na\nb\nc\nd\ne\n"

  @Test("the worked example of the documentation")
  func workedExample() throws {
    #expect(
      merge(base, "Title\na\nB\nc\nd\ne\n", "Title\na\nb\nc\nD\ne\n")
        == .merged("Title\na\nB\nc\nD\ne\n"))
    let c = try conflict(merge(base, "Title\na\nB\nc\nd\ne\n", "Title\na\nb\nC\nd\ne\n"))
    #expect(c.regions.count == 1)
    #expect(
      c.regions[0].baseRange == 2..<4 && c.regions[0].oursRange == 2..<4
        && c.regions[0].theirsRange == 2..<4)
    let both = "Title\na\nB\nc\nd\ne\n"
    #expect(merge(base, both, both) == .merged(both))
  }

  @Test("the examples of the API documentation hold")
  func documentationExamples() throws {
    #expect(
      merge("a\nb\nc\nd\n", "A\nb\nc\nd\n", "a\nb\nc\nD\n") == .merged("A\nb\nc\nD\n"))
    let c = try conflict(merge("a\nb\nc\n", "a\nB\nc\n", "a\nX\nc\n"))
    #expect(c.regions[0].baseRange == 1..<2)
    #expect(c.regions[0].oursLines == ["B\n"] && c.regions[0].theirsLines == ["X\n"])
    #expect(
      c.markedText()
        == "a\n<<<<<<< ours\nB\n||||||| base\nb\n=======\nX\n>>>>>>> theirs\nc\n")
  }

  @Test("edits separated by an unchanged line both apply")
  func disjointEdits() {
    #expect(
      merge(base, "Title\na\nB\nc\nd\ne\n", "Title\na\nb\nc\nD\ne\n")
        == .merged("Title\na\nB\nc\nD\ne\n"))
    // A deletion on one side, an insertion on the other.
    #expect(
      merge(base, "Title\nb\nc\nd\ne\n", "Title\na\nb\nc\nd\ne\nf\n")
        == .merged("Title\nb\nc\nd\ne\nf\n"))
  }

  @Test("the same edit on both sides is applied once")
  func sameEdit() {
    let edited = "Title\na\nB\nc\nd\ne\n"
    #expect(merge(base, edited, edited) == .merged(edited))
    // The same edit plus a separate one on one side.
    #expect(merge(base, "Title\na\nB\nc\nd\nE\n", edited) == .merged("Title\na\nB\nc\nd\nE\n"))
    // The same deletion.
    #expect(
      merge(base, "Title\na\nc\nd\nE\n", "Title\nA\na\nc\nd\ne\n")
        == .merged("Title\nA\na\nc\nd\nE\n"))
  }

  @Test("a side that changed nothing yields the other side, byte for byte")
  func oneSideUnchanged() {
    let other = "Title\r\nsomething else entirely"
    #expect(merge(base, base, other) == .merged(other))
    #expect(merge(base, other, base) == .merged(other))
    #expect(merge(base, base, base) == .merged(base))
  }

  @Test("overlapping edits conflict, and the conflict carries both texts")
  func overlapping() throws {
    let ours = "Title\na\nB1\nC1\nd\ne\n"
    let theirs = "Title\na\nb\nC2\nD2\ne\n"
    let c = try conflict(merge(base, ours, theirs))
    #expect(c.base == base && c.ours == ours && c.theirs == theirs)
    #expect(c.regions.count == 1)
    let region = c.regions[0]
    #expect(region.baseRange == 2..<5)
    #expect(region.oursRange == 2..<5 && region.theirsRange == 2..<5)
    #expect(region.baseLines == ["b\n", "c\n", "d\n"])
    #expect(region.oursLines == ["B1\n", "C1\n", "d\n"])
    #expect(region.theirsLines == ["b\n", "C2\n", "D2\n"])
    #expect(
      c.markedText()
        == """
        Title
        a
        <<<<<<< ours
        B1
        C1
        d
        ||||||| base
        b
        c
        d
        =======
        b
        C2
        D2
        >>>>>>> theirs
        e

        """)
  }

  @Test("edits of neighbouring lines conflict")
  func adjacent() throws {
    let c = try conflict(merge(base, "Title\na\nB\nc\nd\ne\n", "Title\na\nb\nC\nd\ne\n"))
    #expect(c.regions.map(\.baseRange) == [2..<4])
    #expect(
      c.regions[0].oursLines == ["B\n", "c\n"] && c.regions[0].theirsLines == ["b\n", "C\n"])
    // An insertion right after a changed line touches it too.
    let d = try conflict(merge(base, "Title\na\nB\nc\nd\ne\n", "Title\na\nb\nnew\nc\nd\ne\n"))
    #expect(d.regions.map(\.baseRange) == [2..<3])
    #expect(d.regions[0].theirsRange == 2..<4)
  }

  @Test("insertions at the same point conflict unless they are the same")
  func insertionsAtSamePoint() throws {
    let c = try conflict(
      merge(base, "Title\na\nours\nb\nc\nd\ne\n", "Title\na\ntheirs\nb\nc\nd\ne\n"))
    let region = c.regions[0]
    #expect(region.baseRange == 2..<2 && region.baseLines.isEmpty)
    #expect(region.oursRange == 2..<3 && region.oursLines == ["ours\n"])
    #expect(region.theirsRange == 2..<3 && region.theirsLines == ["theirs\n"])
    let same = "Title\na\nboth\nb\nc\nd\ne\n"
    #expect(
      merge(base, same, "Title\na\nboth\nb\nc\nd\nE\n") == .merged("Title\na\nboth\nb\nc\nd\nE\n"))
  }

  @Test("deleting lines the other side edited conflicts")
  func deleteVersusEdit() throws {
    let c = try conflict(merge(base, "Title\na\nd\ne\n", "Title\na\nb\nC\nd\ne\n"))
    let region = c.regions[0]
    #expect(region.baseRange == 2..<4)
    #expect(region.oursRange == 2..<2 && region.oursLines.isEmpty)
    #expect(region.theirsLines == ["b\n", "C\n"])
  }

  @Test("an empty base: one side's text, the same text, or a conflict")
  func emptyBase() throws {
    #expect(merge("", "new page\n", "") == .merged("new page\n"))
    #expect(merge("", "same\n", "same\n") == .merged("same\n"))
    let c = try conflict(merge("", "mine\n", "yours\n"))
    #expect(c.regions.map(\.baseRange) == [0..<0])
    #expect(c.markedText() == "<<<<<<< ours\nmine\n||||||| base\n=======\nyours\n>>>>>>> theirs\n")
  }

  @Test("a change of the final newline is a change of the last line")
  func trailingNewline() throws {
    // Far from the other edit: both apply.
    #expect(merge("a\nb\nc\nd", "A\nb\nc\nd", "a\nb\nc\nd\n") == .merged("A\nb\nc\nd\n"))
    // Next to the other edit: a conflict; the marked text ends every side with "\n".
    let c = try conflict(merge("a\nb\nc", "a\nB\nc", "a\nb\nc\n"))
    #expect(c.regions[0].oursLines == ["B\n", "c"] && c.regions[0].theirsLines == ["b\n", "c\n"])
    #expect(
      c.markedText(oursLabel: "draft", baseLabel: "Home@1", theirsLabel: "Home@2")
        == "a\n<<<<<<< draft\nB\nc\n||||||| Home@1\nb\nc\n=======\nb\nc\n>>>>>>> Home@2\n")
    // Both sides add it: the same edit, applied once.
    #expect(merge("a\nb\nc\nd", "A\nb\nc\nd\n", "a\nb\nc\nd\n") == .merged("A\nb\nc\nd\n"))
    // One side also edits the line before: the regions touch, a conflict.
    let d = try conflict(merge("a\nb", "A\nb\n", "a\nb\n"))
    #expect(d.regions.map(\.baseRange) == [0..<2])
  }

  @Test("several conflicts keep the resolved lines between them")
  func severalConflicts() throws {
    let base = (1...9).map { "\($0)\n" }.joined()
    let c = try conflict(
      merge(base, "1\nX\n3\n4\n5\n6\n7\nY\n9\n", "1\nx\n3\n4\nfive\n6\n7\ny\n9\n"))
    #expect(c.regions.map(\.baseRange) == [1..<2, 7..<8])
    #expect(
      c.markedText()
        == "1\n<<<<<<< ours\nX\n||||||| base\n2\n=======\nx\n>>>>>>> theirs\n3\n4\nfive\n6\n7\n"
        + "<<<<<<< ours\nY\n||||||| base\n8\n=======\ny\n>>>>>>> theirs\n9\n")
  }

  // MARK: - Random cases

  /// A base of distinct lines, optionally without a final newline.
  static func randomBase(_ count: Int, using rng: inout SplitMix64) -> [String] {
    var lines = (0..<count).map { "base \($0)\n" }
    if !lines.isEmpty && Int.random(in: 0..<4, using: &rng) == 0 {
      lines[lines.count - 1].removeLast()
    }
    return lines
  }

  /// An edit of `base` made of blocks of base lines `[start, end)` replaced by new lines; the
  /// blocks are in order and at least one unchanged line apart.
  struct Block {
    var range: Range<Int>
    var lines: [String]
  }

  static func apply(_ blocks: [Block], to base: [String]) -> String {
    var out = ""
    var position = 0
    for block in blocks {
      out += base[position..<block.range.lowerBound].joined()
      out += block.lines.joined()
      position = block.range.upperBound
    }
    return out + base[position...].joined()
  }

  /// Disjoint random blocks over `base`'s lines, each at least one line from the next. Nothing
  /// is inserted after a last line without newline (that would extend the line instead).
  static func randomBlocks(
    _ base: [String], tag: String, using rng: inout SplitMix64
  ) -> [Block] {
    let count = base.count
    let end = base.last.map { $0.utf8.last == 0x0A } ?? true ? count : count - 1
    var blocks: [Block] = []
    var position = Int.random(in: 0...2, using: &rng)
    var serial = 0
    while position <= end {
      let length = min(Int.random(in: 0...3, using: &rng), count - position)
      let added = Int.random(in: length == 0 ? 1...2 : 0...2, using: &rng)
      let lines = (0..<added).map { _ -> String in
        serial += 1
        return "\(tag) \(position).\(serial)\n"
      }
      blocks.append(Block(range: position..<(position + length), lines: lines))
      position += length + Int.random(in: 1...4, using: &rng)
    }
    return blocks
  }

  @Test("random merges where one side kept the base give the other side")
  func randomOneSided() {
    var rng = SplitMix64(seed: 77)
    for round in 0..<200 {
      let base = Self.randomBase(Int.random(in: 0...15, using: &rng), using: &rng)
      let edited = Self.apply(Self.randomBlocks(base, tag: "e", using: &rng), to: base)
      let baseText = base.joined()
      #expect(merge(baseText, edited, baseText) == .merged(edited), "round \(round)")
      #expect(merge(baseText, baseText, edited) == .merged(edited), "round \(round)")
    }
  }

  @Test("random edits of disjoint blocks merge cleanly, symmetrically, to both applied")
  func randomDisjointBlocks() {
    var rng = SplitMix64(seed: 4242)
    for round in 0..<300 {
      let base = Self.randomBase(Int.random(in: 0...25, using: &rng), using: &rng)
      // Deal the blocks to ours, theirs, or both (the same edit).
      var ours: [Block] = []
      var theirs: [Block] = []
      var all: [Block] = []
      for block in Self.randomBlocks(base, tag: "new", using: &rng) {
        switch Int.random(in: 0..<5, using: &rng) {
        case 0, 1: ours.append(block)
        case 2, 3: theirs.append(block)
        default:
          ours.append(block)
          theirs.append(block)
        }
        all.append(block)
      }
      let baseText = base.joined()
      let oursText = Self.apply(ours, to: base)
      let theirsText = Self.apply(theirs, to: base)
      let expected = Self.apply(all, to: base)
      let forward = merge(baseText, oursText, theirsText)
      let backward = merge(baseText, theirsText, oursText)
      #expect(forward == .merged(expected), "round \(round)")
      #expect(forward == backward, "round \(round)")
    }
  }

  @Test("clean or not, and the merge, agree with git merge-file on random cases")
  func matchesGitMergeFile() throws {
    let git = "/usr/bin/git"
    guard FileManager.default.isExecutableFile(atPath: git) else {
      Issue.record("skipped: \(git) is not installed, so there is nothing to compare with")
      return
    }
    let directory = try Support.makeDirectory("git-merge-file")
    defer { Support.removeDirectory(directory) }
    var rng = SplitMix64(seed: 31337)
    var clean = 0
    var conflicting = 0
    for round in 0..<48 {
      let base = Self.randomBase(Int.random(in: 0...14, using: &rng), using: &rng)
      // Per base position: a shared plan that both, one or neither side follows, so the cases
      // mix identical, overlapping, adjacent and separate edits.
      var ours: [Block] = []
      var theirs: [Block] = []
      for block in Self.randomBlocks(base, tag: "shared", using: &rng) {
        let roll = Int.random(in: 0..<10, using: &rng)
        let own = Block(range: block.range, lines: block.lines.map { "own " + $0 })
        switch roll {
        case 0...2: ours.append(block)
        case 3...5: theirs.append(block)
        case 6, 7:
          ours.append(block)
          theirs.append(block)
        case 8:
          ours.append(block)
          theirs.append(own)
        default:
          // Neighbouring lines: ours takes the block, theirs the line after it.
          ours.append(block)
          if block.range.upperBound < base.count {
            let next = block.range.upperBound
            theirs.append(Block(range: next..<(next + 1), lines: ["theirs \(next)\n"]))
          }
        }
      }
      // Keep each side's blocks one line apart from each other.
      func separated(_ blocks: [Block]) -> [Block] {
        var kept: [Block] = []
        for block in blocks {
          if let last = kept.last, block.range.lowerBound <= last.range.upperBound { continue }
          kept.append(block)
        }
        return kept
      }
      let baseText = base.joined()
      let oursText = Self.apply(separated(ours), to: base)
      let theirsText = Self.apply(separated(theirs), to: base)
      let files = ["base": baseText, "ours": oursText, "theirs": theirsText]
      for (name, text) in files {
        try Support.write(text, to: directory.appendingPathComponent(name))
      }
      let labels = ["-L", "ours", "-L", "base", "-L", "theirs", "ours", "base", "theirs"]
      let plain = try Support.run(git, ["merge-file", "-p"] + labels, in: directory)
      let outcome = merge(baseText, oursText, theirsText)
      switch outcome {
      case .merged(let text):
        clean += 1
        #expect(plain.status == 0, "round \(round): git found a conflict")
        #expect(text == plain.output, "round \(round)")
      case .conflict(let c):
        conflicting += 1
        #expect(plain.status > 0, "round \(round): git merged cleanly")
        let diff3 = try Support.run(git, ["merge-file", "-p", "--diff3"] + labels, in: directory)
        #expect(c.markedText() == diff3.output, "round \(round)")
      }
    }
    #expect(clean >= 5 && conflicting >= 5, "clean \(clean), conflicting \(conflicting)")
  }
}
