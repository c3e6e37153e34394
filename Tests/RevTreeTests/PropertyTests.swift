import JSON
import RevTree
import TestSupport
import Testing

/// Seeded random histories: invariants hold after every operation, nothing is lost except by
/// stemming, and the result does not depend on arrival order when CouchDB's does not.
@Suite struct PropertyTests {
  /// A consistent random history: every revision has one parent and a unique hash.
  struct History {
    var parent: [Int] = []  // -1 for the root
    var generation: [Int] = []
    var hashes: [RevHash] = []
    var deleted: [Bool] = []

    init(size: Int, rng: inout SplitMix64) {
      for i in 0..<size {
        let p = i == 0 ? -1 : Int(rng.next() % UInt64(i))
        parent.append(p)
        generation.append(p < 0 ? 1 : generation[p] + 1)
        hashes.append(RevHash(high: rng.next(), low: rng.next()))
        deleted.append(rng.next() % 5 == 0)
      }
    }

    var leaves: [Int] { (0..<parent.count).filter { i in !parent.contains(i) } }

    /// The path of `i`, cut to `keep` ids.
    func path(_ i: Int, keep: Int = .max) -> RevisionPath {
      var ids: [RevHash] = []
      var c = i
      while c >= 0 && ids.count < keep {
        ids.append(hashes[c])
        c = parent[c]
      }
      return try! RevisionPath(start: generation[i], ids: ids)
    }

    func rev(_ i: Int) -> RevID { try! RevID(generation: generation[i], hash: hashes[i]) }
  }

  @Test("full paths in any order give the same tree, and no revision is lost", arguments: 0..<40)
  func orderIndependence(seed: UInt64) {
    var rng = SplitMix64(seed: seed)
    let h = History(size: 2 + Int(rng.next() % 40), rng: &rng)
    var writes = Array(0..<h.parent.count)
    var trees: [RevisionTree] = []
    for _ in 0..<3 {
      writes.shuffle(using: &rng)
      var t = RevisionTree()
      for i in writes {
        t.add(h.path(i), deleted: h.deleted[i], body: UInt64(i))
      }
      #expect(t.revisionSet == Set((0..<h.parent.count).map(h.rev)))
      #expect(Set(t.leaves.map(\.rev)) == Set(h.leaves.map(h.rev)))
      #expect(encodedWinnerAgrees(t))
      // Bodies: every revision was written, so none is missing.
      t.forEachRevision { r, _ in #expect(r.status != .missing) }
      trees.append(t)
    }
    #expect(trees[0] == trees[1])
    #expect(trees[1] == trees[2])
  }

  @Test("cut paths in any order give the same leaves", arguments: 0..<40)
  func cutPathsLeaves(seed: UInt64) {
    var rng = SplitMix64(seed: seed &+ 1000)
    let h = History(size: 2 + Int(rng.next() % 30), rng: &rng)
    let cuts = h.leaves.map { ($0, 1 + Int(rng.next() % 6)) }
    var leafSets: [Set<RevID>] = []
    var revSets: [Set<RevID>] = []
    for _ in 0..<3 {
      var t = RevisionTree()
      for (i, keep) in cuts.shuffled(using: &rng) {
        let o = t.add(h.path(i, keep: keep), body: UInt64(i))
        #expect(o.updated)
      }
      leafSets.append(Set(t.leaves.map(\.rev)))
      revSets.append(t.revisionSet)
    }
    #expect(leafSets[0] == Set(h.leaves.map(h.rev)))
    #expect(leafSets.allSatisfy { $0 == leafSets[0] })
    #expect(revSets.allSatisfy { $0 == revSets[0] })
  }

  @Test(
    "with stemming: invariants hold, leaves survive, paths stay within reach", arguments: 0..<40)
  func stemmingKeepsLeaves(seed: UInt64) throws {
    var rng = SplitMix64(seed: seed &+ 2000)
    let h = History(size: 2 + Int(rng.next() % 60), rng: &rng)
    let limit = 1 + Int(rng.next() % 6)
    var t = RevisionTree()
    var written = Set<Int>()
    for i in (0..<h.parent.count).shuffled(using: &rng) {
      t.add(h.path(i, keep: 1 + Int(rng.next() % 8)), body: UInt64(i), limit: limit)
      written.insert(i)
      // Every written revision with no written descendant is still a leaf.
      var covered = Set<Int>()
      for x in written {
        var c = h.parent[x]
        while c >= 0 && covered.insert(c).inserted { c = h.parent[c] }
      }
      let heads = written.subtracting(covered)
      let leaves = Set(t.leaves.map(\.rev))
      for w in heads { #expect(leaves.contains(h.rev(w))) }
      // Every node is within limit - 1 edges of a leaf below it.
      for r in t.leaves {
        #expect(t.revisions(of: r.rev, limit: limit)!.ids.count <= limit)
      }
      let copy = try RevisionTree(decoding: t.encoded())
      #expect(copy == t)
      #expect(encodedWinnerAgrees(t))
    }
    // Stemming is idempotent once no hash repeats. (It need not be a no-op on the tree a
    // merge left: when a path joins a disjoint fragment, CouchDB's duplicate-hash repair can
    // leave nodes that its next stem removes.)
    var again = t
    again.stem(revsLimit: limit)
    let snapshot = again
    again.stem(revsLimit: limit)
    #expect(again == snapshot)
  }

  @Test("random local edits keep invariants and round-trip through the encoding", arguments: 0..<20)
  func randomEdits(seed: UInt64) throws {
    var rng = SplitMix64(seed: seed &+ 3000)
    var t = RevisionTree()
    for step in 0..<200 {
      let leaves = t.leaves
      let parent =
        leaves.isEmpty || rng.next() % 10 == 0
        ? nil : leaves[Int(rng.next() % UInt64(leaves.count))].rev
      let deleted = rng.next() % 6 == 0
      let content = JSONValue.object(
        JSONObject([
          "step": .number(JSONNumber(Int64(step))), "r": .number(JSONNumber(Int64(rng.next() % 3))),
        ]))
      do {
        try t.edit(
          parent: parent, deleted: deleted, content: content, body: UInt64(step), revsLimit: 5)
      } catch {
        // Conflicts are expected for creates on live documents and edits on deleted ones.
        if case .conflict = error {} else { Issue.record("unexpected \(error)") }
      }
      t.checkInvariants()
      // A conflicting branch made by replication.
      if rng.next() % 15 == 0, let w = t.winner {
        let p = try RevisionPath(
          start: w.rev.generation + 1, ids: [RevHash(high: rng.next(), low: 1), w.rev.hash])
        t.add(p, body: UInt64(step), limit: 5)
      }
    }
    #expect(try RevisionTree(decoding: t.encoded()) == t)
    #expect(encodedWinnerAgrees(t))
  }
}
