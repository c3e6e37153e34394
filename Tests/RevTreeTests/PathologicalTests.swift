import JSON
import RevTree
import Testing

/// Documents that stress size and depth. All iterative: nothing may overflow the stack.
@Suite struct PathologicalTests {
  @Test("10,000 conflicting leaves: winner, conflicts, revs_diff and encoding")
  func tenThousandLeaves() throws {
    var t = RevisionTree()
    let root = RevHash(high: 0, low: 1)
    for i in 0..<10_000 {
      let p = try RevisionPath(
        start: 2, ids: [RevHash(high: UInt64(i) &* 0x9E37_79B9_7F4A_7C15, low: 2), root])
      let o = try t.merge(p, deleted: i % 3 == 0, body: UInt64(i), revsLimit: 1000)
      #expect(o.result == (i == 0 ? .newLeaf : .newBranch))
    }
    t.checkInvariants()
    #expect(t.leaves.count == 10_000)
    let live = t.leaves.filter { !$0.isDeleted }
    #expect(t.winner == live.first)
    #expect(t.conflicts.count == live.count - 1)
    #expect(t.deletedConflicts.count == 10_000 - live.count)
    #expect(t.revsDiff([try RevID("3-abc")]).possibleAncestors.count == 10_000)
    #expect(try RevisionTree(decoding: t.encoded()) == t)
  }

  @Test("a 100,000-revision chain built edit by edit with revs_limit 1000")
  func hundredThousandEdits() throws {
    var t = RevisionTree()
    var parent: RevID? = nil
    for i in 0..<100_000 {
      let next = try RevID(generation: i + 1, hash: RevHash(high: UInt64(i), low: 0xABCD))
      try t.applyEdit(
        newRevision: next, parent: parent, deleted: false, body: UInt64(i), revsLimit: 1000)
      parent = next
      if i % 10_000 == 0 { t.checkInvariants() }
    }
    t.checkInvariants()
    #expect(t.count == 1000)
    #expect(t.winner?.rev == parent)
    #expect(t.revisions(of: parent!, limit: 1000)?.ids.count == 1000)
    #expect(t.rootRevisions.first?.rev.generation == 99_001)
    #expect(try RevisionTree(decoding: t.encoded()) == t)
  }

  @Test("a 100,000-revision path merged at once, then stemmed, queried and freed")
  func hundredThousandPath() throws {
    let ids = (0..<100_000).map { RevHash(high: UInt64($0), low: 7) }
    let p = try RevisionPath(start: 100_000, ids: ids)
    do {
      var t = RevisionTree()
      try t.merge(p, deleted: false, body: 1, revsLimit: 200_000)
      t.checkInvariants()
      #expect(t.count == 100_000)
      #expect(t.storedPath(of: p.leaf)?.ids.count == 100_000)
      #expect(t.revsDiff([p.leaf, try RevID("1-x")]).missing.count == 1)
      let decoded = try RevisionTree(decoding: t.encoded())
      #expect(decoded == t)
      t.stem(revsLimit: 10)
      t.checkInvariants()
      #expect(t.count == 10)
    }
    // Leaving the scope freed both 100,000-node trees without recursion.
  }
}
