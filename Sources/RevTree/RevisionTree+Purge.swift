// Purging leaf revisions, as CouchDB's `couch_key_tree:remove_leafs/2` does for `_purge`.
//
// The tree that remains is the union of the paths of the leaves that are not purged: every
// leaf's full path from its root, the purged ones left out, merged one by one into an empty tree
// in CouchDB's order (by first generation, then the paths compared as Erlang terms). A
// revision that only purged leaves descend from goes with them; one that another leaf descends
// from stays. A revision named that is not a leaf is not purged.
//
//     1-a ── 2-b ─┬─ 3-c        purge 3-c:   1-a ── 2-b ── 3-d
//                 └─ 3-d        purge 3-c and 3-d: (empty)
//     1-a ─┬─ 2-b               purge 2-x:   1-a ── 2-b
//          └─ 2-x

extension RevisionTree {
  /// Removes the leaves among `revisions` and every revision that only they descend from.
  ///
  /// ```swift
  /// let purged = tree.removeLeaves([try RevID("3-c")])   // [3-c] when it was a leaf
  /// ```
  /// - Returns: the leaves removed, in the tree's order; empty when none of `revisions` is a
  ///   leaf (the tree is then unchanged).
  public mutating func removeLeaves(_ revisions: Set<RevID>) -> [RevID] {
    var removed: [RevID] = []
    var paths: [(start: Int, entries: [PathEntry])] = []
    for i in preorder() {
      let n = nodes[Int(i)]
      guard n.isLive, n.isLeaf else { continue }
      let rev = RevID(unchecked: n.pos, hash: n.hash)
      if revisions.contains(rev) {
        removed.append(rev)
        continue
      }
      var entries: [PathEntry] = []  // leaf first
      var c = i
      while c >= 0 {
        let m = nodes[Int(c)]
        entries.append(
          PathEntry(
            hash: m.hash, state: m.state, body: m.body, valueClass: m.state == .missing ? 2 : 0))
        c = m.parent
      }
      paths.append((n.pos + 1 - entries.count, entries))
    }
    guard !removed.isEmpty else { return [] }
    self = Self.merging(paths)
    return removed
  }

  /// Every revision of the tree (live nodes), in CouchDB's order.
  public var allRevisions: [Revision] {
    var all: [Revision] = []
    forEachRevision { revision, _ in all.append(revision) }
    return all
  }
}
