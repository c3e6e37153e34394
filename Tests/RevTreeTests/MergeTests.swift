import JSON
import RevTree
import Testing

/// Cases written from CouchDB's `couch_key_tree_tests.erl` (our own code, same behaviours).
/// Names are text hashes, so siblings sort by their bytes: "1a" < "1b".
@Suite struct MergeTests {
  @Test("merging into an empty tree is .newLeaf")
  func mergeIntoEmpty() {
    var t = RevisionTree()
    #expect(t.add(path(from: 1, "1")).result == .newLeaf)
    #expect(t.shape == ["1-1:available"])
  }

  @Test("merging a tree into itself is .internalNode and not an update")
  func mergeReflexive() {
    var t = RevisionTree()
    t.add(path(from: 1, "1"))
    let o = t.add(path(from: 1, "1"))
    #expect(o.result == .internalNode)
    #expect(!o.updated)
    #expect(!o.createdLeaf)
  }

  @Test("merging a prefix of a tree is .internalNode")
  func mergePrefix() {
    var t = RevisionTree()
    t.add(path(from: 1, "1"))
    t.add(path(from: 1, "2"))
    let before = t
    #expect(t.add(path(from: 1, "1")).result == .internalNode)
    #expect(t == before)
  }

  @Test("an unrelated root is .newBranch and a conflict")
  func unrelatedBranch() {
    var t = RevisionTree()
    t.add(path(from: 1, "1"))
    t.add(path(from: 1, "2"))
    #expect(t.add(path(from: 1, "3")).result == .newBranch)
    #expect(t.shape == ["1-1:available", "1-2:available", "1-3:available"])
    #expect(t.winner?.rev == rev(1, "3"))
    #expect(t.conflicts == [rev(1, "2"), rev(1, "1")])
  }

  @Test("re-merging a path with children is .internalNode")
  func reflexiveChildNodes() {
    var t = RevisionTree()
    t.add(path(from: 1, "1", "1a", "1aa"))
    let o = t.add(path(from: 1, "1", "1a", "1aa"))
    #expect(o.result == .internalNode)
    #expect(!o.updated)
  }

  @Test("merging every leaf path of a tree into it is .internalNode each time")
  func mergeTreeToItself() {
    var t = RevisionTree()
    t.add(path(from: 1, "1", "1a"))
    t.add(path(from: 1, "1", "1b"))
    let before = t
    for leaf in t.leaves {
      let p = t.storedPath(of: leaf.rev)!
      #expect(t.add(p).result == .internalNode)
    }
    #expect(t == before)
  }

  @Test("extending one of two sibling leaves is .newLeaf")
  func oddLength() {
    var t = RevisionTree()
    t.add(path(from: 1, "1", "1a"))
    t.add(path(from: 1, "1", "1b"))
    #expect(t.add(path(from: 1, "1", "1a", "1aa")).result == .newLeaf)
    #expect(t.shape == ["1-1:missing", " 2-1a:available", "  3-1aa:available", " 2-1b:available"])
  }

  @Test("a stemmed path matching an inner node is .internalNode")
  func stemmedInternal() {
    var t = RevisionTree()
    t.add(path(from: 1, "1", "1a"))
    t.add(path(from: 1, "1", "1b", "1bb"))
    let before = t
    #expect(t.add(path(from: 2, "1a")).result == .internalNode)
    #expect(t.add(path(from: 3, "1bb")).result == .internalNode)
    #expect(t == before)
  }

  @Test("a stem at a deeper level joins disjoint stemmed roots")
  func stemDeeperPaths() {
    var t = RevisionTree()
    t.add(path(from: 2, "1a"))
    t.add(path(from: 2, "1b", "1bb"))
    #expect(t.rootRevisions.map(\.rev) == [rev(2, "1a"), rev(2, "1b")])
    #expect(t.add(path(from: 3, "1bb")).result == .internalNode)
    #expect(t.add(path(from: 2, "1a", "1aa")).result == .newLeaf)
  }

  @Test("a longer stem joins its existing suffix")
  func mergeStems() {
    var t = RevisionTree()
    t.add(path(from: 2, "1a", "1aa"))
    #expect(t.add(path(from: 3, "1aa")).result == .internalNode)
    #expect(t.count == 2)
  }

  @Test("a stem that matches nothing creates a conflict")
  func stemConflict() {
    var t = RevisionTree()
    t.add(path(from: 1, "1", "1a"))
    #expect(t.add(path(from: 3, "1aa")).result == .newBranch)
    #expect(t.rootRevisions.map(\.rev) == [rev(1, "1"), rev(3, "1aa")])
    #expect(t.conflicts == [rev(2, "1a")])
  }

  @Test("a full path joins a disjoint stem and removes the conflict")
  func fullPathJoinsStem() {
    var t = RevisionTree()
    t.add(path(from: 1, "1", "1a"))
    t.add(path(from: 3, "1aa"))
    let o = t.add(path(from: 1, "1", "1a", "1aa"))
    #expect(o.result == .newLeaf)
    // 1aa now occurs twice, so stemming repairs the tree into one path.
    #expect(t.leaves.map(\.rev) == [rev(3, "1aa")])
    #expect(t.shape == ["1-1:missing", " 2-1a:available", "  3-1aa:available"])
  }

  @Test("a path that shares a prefix only extends the matching branch (COUCHDB-902)")
  func ignoreConflictingBranch() {
    var t = RevisionTree()
    t.add(path(from: 1, "foo", "foo2"))
    t.add(path(from: 1, "foo", "foo3"))
    #expect(t.add(path(from: 1, "foo", "foo3", "foo4")).result == .newLeaf)
    #expect(
      t.shape == ["1-foo:missing", " 2-foo2:available", " 2-foo3:available", "  3-foo4:available"])
  }

  @Test("a missing node takes the incoming body and deleted flag; that is an update")
  func missingTakesBody() {
    var t = RevisionTree()
    t.add(path(from: 1, "a", "b"), body: 1)
    #expect(t.revision(rev(1, "a"))?.status == .missing)
    let o = t.add(path(from: 1, "a"), deleted: true, body: 9)
    #expect(o.result == .internalNode)
    #expect(o.updated)
    #expect(t.revision(rev(1, "a"))?.status == .deleted)
    #expect(t.revision(rev(1, "a"))?.body == 9)
    // A stored body is kept: re-sending with another flag changes nothing.
    let again = t.add(path(from: 1, "a", "b"), deleted: true, body: 10)
    #expect(!again.updated)
    #expect(t.revision(rev(2, "b"))?.status == .available)
  }

  @Test("prepending ancestors to a root is .internalNode but an update")
  func prependAncestors() {
    var t = RevisionTree()
    t.add(path(from: 3, "c"))
    let o = t.add(path(from: 1, "a", "b", "c"))
    #expect(o.result == .internalNode)
    #expect(o.updated)
    #expect(t.rootRevisions.map(\.rev) == [rev(1, "a")])
  }

  @Test("stemming can undo a merge, making it a no-op")
  func stemUndoesMerge() {
    var t = RevisionTree()
    t.add(path(from: 3, "c"), limit: 1)
    let o = t.add(path(from: 1, "a", "b", "c"), limit: 1)
    #expect(o.result == .internalNode)
    #expect(!o.updated)
    #expect(t.shape == ["3-c:available"])
  }

  @Test("stemming deeper than the tree has no effect")
  func stemNoEffect() {
    var t = RevisionTree()
    t.add(path(from: 1, "1", "1a", "1aa"))
    let changed = t.stem(revsLimit: 3)
    #expect(!changed)
    #expect(t.count == 3)
  }

  @Test("stemming to 1 keeps only the leaves")
  func stemToOne() {
    var t = RevisionTree()
    t.add(path(from: 1, "1", "1a", "1aa"))
    let changed = t.stem(revsLimit: 1)
    #expect(changed)
    t.checkInvariants()
    #expect(t.shape == ["3-1aa:available"])
  }

  @Test("stemming to 2 keeps the two deepest nodes")
  func stemToTwo() {
    var t = RevisionTree()
    t.add(path(from: 1, "1", "1a", "1aa"))
    t.stem(revsLimit: 2)
    t.checkInvariants()
    #expect(t.shape == ["2-1a:missing", " 3-1aa:available"])
  }

  @Test("stemming splits a tree into disjoint roots (the worked example)")
  func stemSplits() {
    var t = RevisionTree()
    t.add(path(from: 1, "a", "b", "c", "e", "f"), limit: 2)
    #expect(t.shape == ["4-e:missing", " 5-f:available"])
    var u = RevisionTree()
    u.add(path(from: 1, "a", "b", "d"))
    u.add(path(from: 1, "a", "b", "c", "e", "f"))
    u.stem(revsLimit: 2)
    u.checkInvariants()
    #expect(u.shape == ["2-b:missing", " 3-d:available", "4-e:missing", " 5-f:available"])
  }

  @Test("the documented worked example behaves as documented")
  func documentedExample() throws {
    var tree = RevisionTree()
    try tree.merge(
      RevisionPath(start: 3, ids: ["c", "b", "a"]), deleted: false, body: 10, revsLimit: 2)
    tree.checkInvariants()
    let o = try tree.merge(
      RevisionPath(start: 3, ids: ["d", "b", "a"]), deleted: false, body: 11, revsLimit: 2)
    tree.checkInvariants()
    #expect(o.result == .newBranch)
    #expect(o.updated)
    let e = try tree.merge(
      RevisionPath(start: 5, ids: ["f", "e", "c"]), deleted: false, body: 12, revsLimit: 2)
    tree.checkInvariants()
    #expect(e.result == .newLeaf)
    #expect(tree.winner?.rev == rev(5, "f"))
    #expect(tree.conflicts == [rev(3, "d")])
    #expect(tree.rootRevisions.map(\.rev) == [rev(2, "b"), rev(4, "e")])
    #expect(tree.shape == ["2-b:missing", " 3-d:available", "4-e:missing", " 5-f:available"])
  }

  @Test("revisions are cut to revs_limit but stored paths may be longer")
  func revisionsCut() {
    var t = RevisionTree()
    t.add(path(from: 1, "a", "b", "x"), limit: 2)
    t.add(path(from: 1, "a", "b", "c", "d", "e"), limit: 2)
    // b is kept for x (its child), so e's stored path runs up to b.
    #expect(t.storedPath(of: rev(5, "e"))?.ids.count == 2)
    #expect(t.revisions(of: rev(5, "e"), limit: 2)?.ids == [h("e"), h("d")])
  }

  @Test("find missing: known nodes with or without bodies are not missing")
  func findMissing() {
    var t = RevisionTree()
    t.add(path(from: 1, "1", "1a"))
    t.add(path(from: 1, "1", "1b"))
    #expect(t.revsDiff([rev(1, "1"), rev(2, "1a")]).missing == [])
    let d = t.revsDiff([rev(1, "1"), rev(1, "10"), rev(2, "1a"), rev(100, "x")])
    #expect(d.missing == [rev(1, "10"), rev(100, "x")])
    #expect(d.possibleAncestors == [rev(2, "1b"), rev(2, "1a")])
  }

  @Test("revs_diff reports a held revision sent k times k-1 times")
  func revsDiffDuplicates() {
    var t = RevisionTree()
    t.add(path(from: 1, "a"))
    let d = t.revsDiff([rev(1, "a"), rev(1, "a"), rev(2, "z"), rev(2, "z")])
    #expect(d.missing == [rev(1, "a"), rev(2, "z"), rev(2, "z")])
  }

  @Test("leaves under a node are what open_revs latest returns")
  func leavesUnder() {
    var t = RevisionTree()
    t.add(path(from: 1, "1", "1a"))
    t.add(path(from: 1, "1", "1b"))
    #expect(t.leaves(descendingFrom: rev(1, "1")).map(\.rev) == [rev(2, "1a"), rev(2, "1b")])
    #expect(t.leaves(descendingFrom: rev(2, "1a")).map(\.rev) == [rev(2, "1a")])
    #expect(t.leaves(descendingFrom: rev(1, "x")).isEmpty)
  }

  @Test("the nearest common ancestor of two conflicting leaves")
  func commonAncestor() {
    var t = RevisionTree()
    t.add(path(from: 1, "a", "b", "c"), body: 1)
    t.add(path(from: 1, "a", "b", "d"), body: 2)
    t.add(path(from: 1, "a"), body: 3)
    #expect(t.nearestCommonAncestor(of: rev(3, "c"), and: rev(3, "d"))?.rev == rev(2, "b"))
    #expect(
      t.nearestCommonAncestor(of: rev(3, "c"), and: rev(3, "d"), withBody: true)?.rev == rev(1, "a")
    )
    #expect(t.ancestors(of: rev(3, "c")).map(\.rev) == [rev(2, "b"), rev(1, "a")])
    #expect(t.parent(of: rev(3, "c"))?.rev == rev(2, "b"))
    #expect(t.children(of: rev(2, "b")).map(\.rev) == [rev(3, "c"), rev(3, "d")])
  }

  @Test("winner: live beats deleted, then generation, then hash bytes")
  func winnerOrder() {
    var t = RevisionTree()
    t.add(path(from: 1, "a", "b", "c"), deleted: true)
    t.add(path(from: 1, "a", "d"))
    t.add(path(from: 1, "a", "e"))
    #expect(t.winner?.rev == rev(2, "e"))
    #expect(t.conflicts == [rev(2, "d")])
    #expect(t.deletedConflicts == [rev(3, "c")])
    #expect(!t.isDeleted)
    t.add(path(from: 1, "a", "d", "f"), deleted: true)
    t.add(path(from: 1, "a", "e", "g"), deleted: true)
    #expect(t.isDeleted)
    #expect(t.winner?.rev == rev(3, "g"))
    #expect(t.revsInfo(of: rev(3, "g"))?.map(\.status) == [.deleted, .available, .missing])
  }

  @Test("invalid paths and limits are rejected")
  func invalidInput() {
    #expect(throws: RevTreeError.emptyPath) { try RevisionPath(start: 1, ids: [RevHash]()) }
    #expect(throws: RevTreeError.invalidPathStart(start: 1, count: 2)) {
      try RevisionPath(start: 1, ids: ["a", "b"])
    }
    #expect(throws: RevTreeError.self) { try RevisionPath(start: 2, ids: ["a", "b c"]) }
    var t = RevisionTree()
    #expect(throws: RevTreeError.invalidRevsLimit(0)) {
      try t.merge(path(from: 1, "a"), deleted: false, body: 1, revsLimit: 0)
    }
  }
}
