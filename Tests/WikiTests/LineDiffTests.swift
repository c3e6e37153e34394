import Foundation
import JSON
import Projections
import Query
import StoreTestSupport
import TestSupport
import Testing
import Wiki

/// Helpers for the text algorithm tests (the seeded generator is `SplitMix64` in Support.swift).
enum TextTestSupport {
  /// A fresh directory of its own for one test; remove it with `removeDirectory`.
  static func makeDirectory(_ name: String) throws -> URL {
    let url = FileManager.default.temporaryDirectory
      .appendingPathComponent("wikilog-text-\(name)-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    return url
  }

  static func removeDirectory(_ url: URL) {
    try? FileManager.default.removeItem(at: url)
  }

  static func write(_ text: String, to url: URL) throws {
    try Data(text.utf8).write(to: url)
  }

  /// Runs a program with an isolated environment and returns its exit status and stdout.
  static func run(_ executable: String, _ arguments: [String], in directory: URL) throws -> (
    status: Int32, output: String
  ) {
    let process = SpawnedProcess()
    process.executableURL = URL(fileURLWithPath: executable)
    process.arguments = arguments
    process.currentDirectoryURL = directory
    process.environment = [
      "PATH": "/usr/bin:/bin", "LC_ALL": "C", "HOME": directory.path,
      "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null",
    ]
    let pipe = Pipe()
    process.standardOutput = pipe
    process.standardError = FileHandle.nullDevice
    try ChildProcess.launch(process)
    let data = pipe.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return (process.terminationStatus, String(decoding: data, as: UTF8.self))
  }

  /// The text a diff's edits make of the old text: `.equal` lines checked against it and kept,
  /// `.delete` lines checked and dropped, `.insert` lines added.
  static func apply(_ diff: LineDiff, to old: String) -> String? {
    let oldLines = LineDiff.lines(of: old)
    var position = 0
    var out = ""
    for edit in diff.edits {
      switch edit.operation {
      case .equal, .delete:
        guard edit.oldRange == position..<(position + edit.lines.count),
          edit.oldRange.upperBound <= oldLines.count,
          zip(oldLines[edit.oldRange], edit.lines).allSatisfy({ $0.utf8.elementsEqual($1.utf8) })
        else { return nil }
        position = edit.oldRange.upperBound
        if edit.operation == .equal { out += edit.text }
      case .insert:
        guard edit.oldRange == position..<position else { return nil }
        out += edit.text
      }
    }
    return position == oldLines.count ? out : nil
  }

  /// The length of a longest common subsequence of two line lists (byte-wise), by dynamic
  /// programming: the number of lines a minimal diff keeps.
  static func lcsLength(_ a: [String], _ b: [String]) -> Int {
    let a = a.map { Array($0.utf8) }
    let b = b.map { Array($0.utf8) }
    var previous = [Int](repeating: 0, count: b.count + 1)
    var current = previous
    for i in 0..<a.count {
      for j in 0..<b.count {
        current[j + 1] = a[i] == b[j] ? previous[j] + 1 : max(previous[j + 1], current[j])
      }
      swap(&previous, &current)
    }
    return previous[b.count]
  }

  /// A random text of `count` lines from `vocabulary`, ending in `"\n"` or (sometimes) not.
  static func randomText(
    _ count: Int, from vocabulary: [String], using rng: inout SplitMix64
  ) -> String {
    var lines = (0..<count).map { _ in vocabulary.randomElement(using: &rng)! + "\n" }
    if !lines.isEmpty && Int.random(in: 0..<4, using: &rng) == 0 {
      lines[lines.count - 1].removeLast()
    }
    return lines.joined()
  }

  /// `text` with a few random deletions, insertions and replacements of lines from
  /// `vocabulary`, and sometimes its final newline toggled.
  static func mutate(_ text: String, from vocabulary: [String], using rng: inout SplitMix64)
    -> String
  {
    var lines = LineDiff.lines(of: text)
    if let last = lines.last, last.utf8.last != 0x0A { lines[lines.count - 1] = last + "\n" }
    let steps = Int.random(in: 0...4, using: &rng)
    for _ in 0..<steps {
      let position = Int.random(in: 0...lines.count, using: &rng)
      switch Int.random(in: 0..<3, using: &rng) {
      case 0 where position < lines.count:
        lines.removeSubrange(
          position..<min(lines.count, position + Int.random(in: 1...3, using: &rng)))
      case 1 where position < lines.count:
        lines[position] = vocabulary.randomElement(using: &rng)! + "\n"
      default:
        for _ in 0..<Int.random(in: 1...3, using: &rng) {
          lines.insert(vocabulary.randomElement(using: &rng)! + "\n", at: position)
        }
      }
    }
    if !lines.isEmpty && Int.random(in: 0..<4, using: &rng) == 0 {
      lines[lines.count - 1].removeLast()
    }
    return lines.joined()
  }
}

@Suite struct LineDiffTests {
  typealias Support = TextTestSupport

  /// The operations of a diff with their line counts, e.g. `["=2", "-1", "+1"]`.
  func shape(_ diff: LineDiff) -> [String] {
    diff.edits.map { edit in
      let symbol =
        switch edit.operation {
        case .equal: "="
        case .delete: "-"
        case .insert: "+"
        }
      return "\(symbol)\(edit.lines.count)"
    }
  }

  @Test("lines keep their newline, and only the last may lack one")
  func lineSplitting() {
    #expect(LineDiff.lines(of: "") == [])
    #expect(LineDiff.lines(of: "a") == ["a"])
    #expect(LineDiff.lines(of: "a\n") == ["a\n"])
    #expect(LineDiff.lines(of: "a\nb") == ["a\n", "b"])
    #expect(LineDiff.lines(of: "a\nb\n") == ["a\n", "b\n"])
    #expect(LineDiff.lines(of: "\n\n") == ["\n", "\n"])
    #expect(LineDiff.lines(of: "a\r\nb\r\n") == ["a\r\n", "b\r\n"])
    #expect(LineDiff.lines(of: "a\rb") == ["a\rb"])
  }

  @Test("two empty texts have no edits and no unified output")
  func emptyVersusEmpty() {
    let diff = LineDiff(old: "", new: "")
    #expect(diff.edits.isEmpty)
    #expect(diff.insertions == 0 && diff.deletions == 0)
    #expect(!diff.hasChanges)
    #expect(diff.hunks().isEmpty)
    #expect(diff.unified() == "")
  }

  @Test("an empty old text is one insertion numbered -0,0")
  func emptyVersusText() {
    let diff = LineDiff(old: "", new: "# Home\nWelcome\n")
    #expect(
      diff.edits == [
        .init(
          operation: .insert, oldRange: 0..<0, newRange: 0..<2, lines: ["# Home\n", "Welcome\n"])
      ])
    #expect(diff.insertions == 2 && diff.deletions == 0)
    #expect(diff.unified() == "--- a\n+++ b\n@@ -0,0 +1,2 @@\n+# Home\n+Welcome\n")
  }

  @Test("an emptied text is one deletion numbered +0,0")
  func textVersusEmpty() {
    let diff = LineDiff(old: "one\n", new: "")
    #expect(shape(diff) == ["-1"])
    #expect(
      diff.unified(oldLabel: "Home@1", newLabel: "Home@2")
        == "--- Home@1\n+++ Home@2\n@@ -1 +0,0 @@\n-one\n")
  }

  @Test("identical texts are one equal run and print nothing")
  func identical() {
    let text = "# Title\n\nSome *text*.\n"
    let diff = LineDiff(old: text, new: text)
    #expect(
      diff.edits == [
        .init(operation: .equal, oldRange: 0..<3, newRange: 0..<3, lines: LineDiff.lines(of: text))
      ])
    #expect(!diff.hasChanges)
    #expect(diff.unified() == "")
  }

  @Test(
    "an insertion at the start, middle or end is one insert edit in place",
    arguments: [
      ("x\na\nb\nc\n", ["+1", "=3"], 0..<0, 0..<1),
      ("a\nb\nx\nc\n", ["=2", "+1", "=1"], 2..<2, 2..<3),
      ("a\nb\nc\nx\n", ["=3", "+1"], 3..<3, 3..<4),
    ])
  func insertion(new: String, expected: [String], oldRange: Range<Int>, newRange: Range<Int>) throws
  {
    let diff = LineDiff(old: "a\nb\nc\n", new: new)
    #expect(shape(diff) == expected)
    let insert = try #require(diff.edits.first { $0.operation == .insert })
    #expect(insert.oldRange == oldRange)
    #expect(insert.newRange == newRange)
    #expect(insert.lines == ["x\n"])
    #expect(diff.insertions == 1 && diff.deletions == 0)
  }

  @Test("a deletion is one delete edit with an empty new range")
  func deletion() throws {
    let diff = LineDiff(old: "a\nb\nc\nd\n", new: "a\nd\n")
    #expect(shape(diff) == ["=1", "-2", "=1"])
    let delete = diff.edits[1]
    #expect(delete.oldRange == 1..<3 && delete.newRange == 1..<1 && delete.lines == ["b\n", "c\n"])
    #expect(diff.unified() == "--- a\n+++ b\n@@ -1,4 +1,2 @@\n a\n-b\n-c\n d\n")
  }

  @Test("a replacement deletes before it inserts")
  func replacement() {
    let diff = LineDiff(old: "title\nold line\nend\n", new: "title\nnew line\nend\n")
    #expect(shape(diff) == ["=1", "-1", "+1", "=1"])
    #expect(diff.edits[1].oldRange == 1..<2 && diff.edits[2].newRange == 1..<2)
    #expect(diff.edits[2].oldRange == 2..<2)
    #expect(
      diff.unified(oldLabel: "Home@3", newLabel: "Home@4")
        == "--- Home@3\n+++ Home@4\n@@ -1,3 +1,3 @@\n title\n-old line\n+new line\n end\n")
  }

  @Test("adding or removing the final newline is a change of the last line")
  func trailingNewline() {
    let added = LineDiff(old: "a\nb", new: "a\nb\n")
    #expect(shape(added) == ["=1", "-1", "+1"])
    #expect(added.edits[1].lines == ["b"] && added.edits[2].lines == ["b\n"])
    #expect(
      added.unified()
        == "--- a\n+++ b\n@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+b\n")
    let removed = LineDiff(old: "a\nb\n", new: "a\nb")
    #expect(
      removed.unified()
        == "--- a\n+++ b\n@@ -1,2 +1,2 @@\n a\n-b\n+b\n\\ No newline at end of file\n")
    let context = LineDiff(old: "x\nb", new: "y\nb")
    #expect(
      context.unified()
        == "--- a\n+++ b\n@@ -1,2 +1,2 @@\n-x\n+y\n b\n\\ No newline at end of file\n")
  }

  @Test("CRLF lines are kept as they are, and differ from LF lines")
  func crlf() {
    let diff = LineDiff(old: "a\r\nb\r\nc\r\n", new: "a\r\nB\r\nc\r\n")
    #expect(shape(diff) == ["=1", "-1", "+1", "=1"])
    #expect(diff.edits[1].lines == ["b\r\n"] && diff.edits[2].lines == ["B\r\n"])
    #expect(Support.apply(diff, to: "a\r\nb\r\nc\r\n") == "a\r\nB\r\nc\r\n")
    #expect(diff.unified() == "--- a\n+++ b\n@@ -1,3 +1,3 @@\n a\r\n-b\r\n+B\r\n c\r\n")
    #expect(shape(LineDiff(old: "a\r\n", new: "a\n")) == ["-1", "+1"])
  }

  @Test("Unicode lines are compared by their bytes")
  func unicode() {
    let diff = LineDiff(old: "# Café ☕️\nnaïve\n👩‍👩‍👧\n", new: "# Café ☕️\nnaïf\n👩‍👩‍👧\n")
    #expect(shape(diff) == ["=1", "-1", "+1", "=1"])
    #expect(diff.edits[1].lines == ["naïve\n"] && diff.edits[2].lines == ["naïf\n"])
    // Precomposed and decomposed "é" are equal Strings but different bytes: a change.
    let composed = "caf\u{E9}\n"
    let decomposed = "cafe\u{301}\n"
    #expect(composed == decomposed)
    let nfc = LineDiff(old: composed, new: decomposed)
    #expect(nfc.insertions == 1 && nfc.deletions == 1)
    #expect(Support.apply(nfc, to: composed).map { Array($0.utf8) } == Array(decomposed.utf8))
  }

  @Test("the examples of the API documentation hold")
  func documentationExamples() {
    let insert = LineDiff(old: "a\nb\n", new: "a\nx\nb\n").edits
    #expect(
      insert == [
        .init(operation: .equal, oldRange: 0..<1, newRange: 0..<1, lines: ["a\n"]),
        .init(operation: .insert, oldRange: 1..<1, newRange: 1..<2, lines: ["x\n"]),
        .init(operation: .equal, oldRange: 1..<2, newRange: 2..<3, lines: ["b\n"]),
      ])
    let diff = LineDiff(old: "a\nb\nc\n", new: "a\nc\nd\n")
    #expect(diff.deletions == 1 && diff.insertions == 1)
    #expect(diff.edits.map(\.operation) == [.equal, .delete, .equal, .insert])
  }

  @Test("Myers' example from the documentation keeps C B B A")
  func myersExample() {
    let diff = LineDiff(old: "A\nB\nC\nA\nB\nB\nA\n", new: "C\nB\nA\nB\nA\nC\n")
    #expect(diff.deletions == 3 && diff.insertions == 2)
    #expect(
      diff.unified(context: 7)
        == "--- a\n+++ b\n@@ -1,7 +1,6 @@\n-A\n-B\n C\n-A\n B\n+A\n B\n A\n+C\n")
  }

  @Test("changes close together share a hunk; far apart they get their own")
  func hunkGrouping() {
    let old = (1...20).map { "line \($0)\n" }.joined()
    var lines = LineDiff.lines(of: old)
    lines[2] = "changed 3\n"
    lines[8] = "changed 9\n"  // 5 unchanged lines between: within 2 * 3, same hunk
    lines[17] = "changed 18\n"  // 8 unchanged lines after line 9: a new hunk
    let diff = LineDiff(old: old, new: lines.joined())
    let hunks = diff.hunks()
    #expect(hunks.map(\.header) == ["@@ -1,12 +1,12 @@", "@@ -15,6 +15,6 @@"])
    #expect(hunks[0].oldRange == 0..<12 && hunks[1].newRange == 14..<20)
    #expect(
      diff.hunks(context: 0).map(\.header) == ["@@ -3 +3 @@", "@@ -9 +9 @@", "@@ -18 +18 @@"])
    #expect(diff.hunks(context: 10).count == 1)
    #expect(
      LineDiff(old: "a\nb\nc\n", new: "a\nc\n").hunks(context: 0).map(\.header) == ["@@ -2 +1,0 @@"]
    )
    #expect(
      LineDiff(old: "a\nc\n", new: "a\nb\nc\n").hunks(context: 0).map(\.header) == ["@@ -1,0 +2 @@"]
    )
  }

  @Test("a block moved down is shown as the block, not its shifted neighbours")
  func slidingToTheEnd() {
    // Adding a paragraph after a paragraph: both end in a blank line.
    let old = "# T\n\nfirst\n\nlast\n"
    let new = "# T\n\nfirst\n\nnew\n\nlast\n"
    let diff = LineDiff(old: old, new: new)
    #expect(diff.insertions == 2 && diff.deletions == 0)
    #expect(diff.edits.first { $0.operation == .insert }?.lines == ["new\n", "\n"])
  }

  @Test("500 random pairs: the edits turn the old text into the new one, minimally")
  func randomEditsApply() throws {
    var rng = SplitMix64(seed: 0x5EED)
    let vocabulary = ["", "# Title", "text", "more text", "- item", "```", "}", "a", "b", "ü ✓"]
    for round in 0..<500 {
      let small = vocabulary.prefix(Int.random(in: 2...vocabulary.count, using: &rng))
      let old = Support.randomText(
        Int.random(in: 0...30, using: &rng), from: Array(small), using: &rng)
      let new =
        round % 3 == 0
        ? Support.randomText(Int.random(in: 0...30, using: &rng), from: Array(small), using: &rng)
        : Support.mutate(old, from: Array(small), using: &rng)
      let diff = LineDiff(old: old, new: new)
      let applied = try #require(
        Support.apply(diff, to: old), "round \(round): edits do not fit the old text")
      #expect(Array(applied.utf8) == Array(new.utf8), "round \(round)")
      let oldLines = LineDiff.lines(of: old)
      let newLines = LineDiff.lines(of: new)
      let kept = Support.lcsLength(oldLines, newLines)
      #expect(diff.deletions == oldLines.count - kept, "round \(round): not minimal")
      #expect(diff.insertions == newLines.count - kept, "round \(round): not minimal")
      // Runs are maximal, nonempty, and a deletion precedes the insertion next to it.
      for (left, right) in zip(diff.edits, diff.edits.dropFirst()) {
        #expect(left.operation != right.operation)
        #expect(!(left.operation == .insert && right.operation == .delete))
      }
      #expect(diff.edits.allSatisfy { !$0.lines.isEmpty })
    }
  }

  /// The `+` and `-` lines of unified diff text.
  func changedLineCount(_ unified: String) -> Int {
    unified.split(separator: "\n", omittingEmptySubsequences: false).dropFirst(2)
      .filter { $0.hasPrefix("+") || $0.hasPrefix("-") }.count
  }

  /// With distinct lines there is one shortest diff, and the output must be GNU's exactly. With
  /// repeated lines there can be several equally short ones; which one GNU diff picks depends
  /// on heuristics of its own (`discard_confusing_lines`), so there the output must be as short
  /// as GNU's and, as we see in about 99% of such cases, is nearly always the very same text.
  @Test("unified output matches GNU diff -u byte for byte on random pairs")
  func matchesGNUDiff() throws {
    let diffPath = "/usr/bin/diff"
    guard FileManager.default.isExecutableFile(atPath: diffPath) else {
      Issue.record("skipped: \(diffPath) is not installed, so there is nothing to compare with")
      return
    }
    let directory = try Support.makeDirectory("gnu-diff")
    defer { Support.removeDirectory(directory) }
    let oldURL = directory.appendingPathComponent("old")
    let newURL = directory.appendingPathComponent("new")
    var rng = SplitMix64(seed: 2024)
    let distinct = (0..<200).map { "line \($0)" }
    let markdown = ["", "", "", "# Title", "text", "- item", "- item", "```", "}", "😀 ✓"]
    var repeatedRounds = 0
    var repeatedExact = 0
    for round in 0..<48 {
      let (old, new): (String, String)
      let isDistinct = round % 2 == 0
      if isDistinct {
        var pool = distinct.shuffled(using: &rng)
        let oldLines = Array(pool.prefix(Int.random(in: 0...25, using: &rng)))
        pool.removeFirst(oldLines.count)
        old = oldLines.map { $0 + "\n" }.joined()
        var newLines = oldLines
        for _ in 0..<Int.random(in: 0...5, using: &rng) {
          let position = Int.random(in: 0...newLines.count, using: &rng)
          if position < newLines.count && Bool.random(using: &rng) {
            newLines.remove(at: position)
          } else {
            newLines.insert(pool.removeLast(), at: position)
          }
        }
        var text = newLines.map { $0 + "\n" }.joined()
        if !text.isEmpty && round % 6 == 0 { text.removeLast() }
        new = text
      } else {
        old = Support.randomText(Int.random(in: 0...25, using: &rng), from: markdown, using: &rng)
        new = Support.mutate(old, from: markdown, using: &rng)
      }
      try Support.write(old, to: oldURL)
      try Support.write(new, to: newURL)
      let context = [3, 3, 1, 0, 5][round % 5]
      let result = try Support.run(
        diffPath, ["-U\(context)", "--label", "a", "--label", "b", "old", "new"], in: directory)
      #expect(result.status == (old == new ? 0 : 1))
      let mine = LineDiff(old: old, new: new).unified(context: context)
      if isDistinct {
        #expect(mine == result.output, "round \(round):\n\(old)\n---\n\(new)")
      } else {
        #expect(changedLineCount(mine) == changedLineCount(result.output), "round \(round)")
        repeatedRounds += 1
        repeatedExact += mine == result.output ? 1 : 0
      }
    }
    #expect(repeatedExact * 10 >= repeatedRounds * 9, "\(repeatedExact) of \(repeatedRounds) exact")
  }

  @Test("a 10,000-line page with a few small edits")
  func bigPageSmallEdits() {
    var lines = (0..<10_000).map { $0 % 7 == 0 ? "\n" : "Paragraph \($0) of the page.\n" }
    let old = lines.joined()
    lines[10] = "edited\n"
    lines.insert("inserted\n", at: 5_000)
    lines.remove(at: 9_000)
    let new = lines.joined()
    let start = ContinuousClock.now
    let diff = LineDiff(old: old, new: new)
    let elapsed = ContinuousClock.now - start
    #expect(diff.insertions == 2 && diff.deletions == 2)
    #expect(diff.hunks().count == 3)
    #expect(elapsed < .seconds(5), "took \(elapsed)")
    print("LineDiff 10,000 lines, 3 edits: \(elapsed)")
  }

  @Test("two completely different 5,000-line texts")
  func bigCompletelyDifferent() {
    // Markdown-like: the blank lines are shared, everything else differs.
    let old = (0..<5_000).map { $0 % 4 == 3 ? "\n" : "old text \($0)\n" }.joined()
    let new = (0..<5_000).map { $0 % 5 == 4 ? "\n" : "new words \($0)\n" }.joined()
    let start = ContinuousClock.now
    let diff = LineDiff(old: old, new: new)
    let elapsed = ContinuousClock.now - start
    #expect(Support.apply(diff, to: old) == new)
    let kept = 1_000  // the blank lines of the new text all find one in the old text
    #expect(diff.deletions == 5_000 - kept && diff.insertions == 5_000 - kept)
    // With no line in common at all.
    let start2 = ContinuousClock.now
    let disjoint = LineDiff(old: old.replacingOccurrences(of: "\n\n", with: "\n-\n"), new: new)
    let elapsed2 = ContinuousClock.now - start2
    #expect(disjoint.deletions == 5_000 && disjoint.insertions == 5_000)
    #expect(elapsed < .seconds(10) && elapsed2 < .seconds(10), "took \(elapsed), \(elapsed2)")
    print(
      "LineDiff 5,000 vs 5,000 different (shared blank lines): \(elapsed); no common line: \(elapsed2)"
    )
  }
}
