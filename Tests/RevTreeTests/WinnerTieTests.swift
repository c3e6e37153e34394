import JSON
import TestSupport
import Testing

@testable import RevTree

/// One revision id on two branches (an inconsistent peer): the winner and the order of the
/// leaves must not depend on merge order or on where nodes sit in memory.
@Suite struct WinnerTieTests {
  /// (rev, status, body) of each leaf in order; the winner first.
  func leaves(_ t: RevisionTree) -> [String] {
    t.leaves.map { "\($0.rev) \($0.status.rawValue) \($0.body ?? 0)" }
  }

  @Test("the same leaf under two parents: the branch with the higher ancestor wins, in any order")
  func twoParents() throws {
    var ab = RevisionTree()
    ab.add(path(from: 1, "a", "x"), body: 10)
    ab.add(path(from: 1, "b", "x"), body: 20)
    var ba = RevisionTree()
    ba.add(path(from: 1, "b", "x"), body: 20)
    ba.add(path(from: 1, "a", "x"), body: 10)
    for t in [
      ab, ba, try RevisionTree(decoding: ab.encoded()), try RevisionTree(decoding: ba.encoded()),
    ] {
      #expect(t.winner?.body == 20)
      #expect(leaves(t) == ["2-x available 20", "2-x available 10"])
      // Left to the decoder: the encoding alone does not say which 2-x wins.
      #expect(RevisionTree.winner(encoded: t.encoded().span) == nil)
      #expect(encodedWinnerAgrees(t))
      #expect(t.conflicts == [rev(2, "x")])
    }
  }

  @Test("deeper ties are compared from the parent up, to the common ancestor")
  func deeperTies() throws {
    // 3-x under 2-a and under 2-b, which share 1-r: the b branch wins.
    var ba = RevisionTree()
    ba.add(path(from: 1, "r", "b", "x"), body: 20)
    ba.add(path(from: 1, "r", "a", "x"), body: 10)
    var ab = RevisionTree()
    ab.add(path(from: 1, "r", "a", "x"), body: 10)
    ab.add(path(from: 1, "r", "b", "x"), body: 20)
    for t in [
      ab, ba, try RevisionTree(decoding: ab.encoded()), try RevisionTree(decoding: ba.encoded()),
    ] {
      #expect(t.winner?.body == 20)
      #expect(leaves(t) == ["3-x available 20", "3-x available 10"])
    }
  }

  @Test(
    "random histories with repeated ids: winner and leaves survive encoding and node order",
    arguments: 0..<40)
  func randomDuplicates(seed: UInt64) throws {
    var rng = SplitMix64(seed: seed &+ 7000)
    let names = ["a", "b", "c"]
    var paths: [(RevisionPath, Bool, UInt64)] = []
    for i in 0..<12 {
      let length = 1 + Int(rng.next() % 4)
      let start = 1 + Int(rng.next() % 3)
      let ids = (0..<length).map { _ in names[Int(rng.next() % 3)] }
      paths.append(
        (path(from: start, ids), rng.next() % 5 == 0, UInt64(100 + i)))
    }
    var forward = RevisionTree()
    for (p, deleted, body) in paths { forward.add(p, deleted: deleted, body: body) }
    let decoded = try RevisionTree(decoding: forward.encoded())
    #expect(leaves(decoded) == leaves(forward))
    #expect(decoded.winner == forward.winner)
    // The same tree with its nodes laid out in another order (removed slots, then compaction).
    var stemmed = forward
    stemmed.stem(revsLimit: 1000)
    #expect(leaves(stemmed) == leaves(forward))
  }
}

/// `path(from:_:)` for a list of names.
func path(from generation: Int, _ names: [String]) -> RevisionPath {
  try! RevisionPath(start: generation + names.count - 1, ids: names.reversed().map(h))
}
