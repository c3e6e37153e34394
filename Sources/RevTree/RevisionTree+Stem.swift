// Stemming a revision tree to `revs_limit`, as CouchDB's `couch_key_tree:stem/2` does.
//
// Worked example, revsLimit 2. `h` is a node's distance to the nearest leaf below it.
//
//     1-a ── 2-b ─┬─ 3-c ── 4-e ── 5-f       h: 1-a 2, 2-b 1, 3-c 2, 4-e 1, 5-f 0, 3-d 0
//                 └─ 3-d
//
// A node is kept iff h <= revsLimit - 1; leaves (h = 0) are always kept; every edge between two
// kept nodes is kept; a kept node whose parent is dropped becomes a root. 1-a and 3-c go:
//
//     2-b ── 3-d                              two roots, sorted by (generation, hash)
//     4-e ── 5-f
//
// A stored path can be longer than revs_limit (2-b would keep a long chain above it if another
// leaf were near); `_revisions` is cut to revs_limit when read.
//
// Repair. CouchDB checks every hash while stemming; if one occurs twice anywhere (only an
// inconsistent peer can cause that), it rebuilds the tree instead: every leaf's path to its root,
// cut to its newest revs_limit revisions, sorted by (first generation, path compared element by
// element as Erlang terms {hash, value}), merged one by one into an empty tree. A stale former
// leaf can survive that as a leaf of its own, a "phantom" leaf.

extension RevisionTree {
  /// Stems the tree to `revsLimit` exactly as CouchDB does after every write.
  ///
  /// ``merge(_:deleted:body:revsLimit:)`` and the edit methods already stem; call this when the
  /// database's `_revs_limit` changes and the tree should shrink without a write.
  ///
  /// ```swift
  /// tree.stem(revsLimit: 2)
  /// ```
  /// - Returns: whether the tree changed.
  @discardableResult
  public mutating func stem(revsLimit: Int) -> Bool {
    guard revsLimit >= 1, !isEmpty else { return false }
    let old = self
    _ = ensureLookup()
    stemFull(revsLimit: max(1, revsLimit), freshNode: -1)
    _ = ensureLookup()
    return self != old
  }

  /// Stemming after a merge into a tree without duplicate hashes. Returns whether a node that
  /// existed before the merge was removed, and how many of the merge's new nodes were removed.
  mutating func stemClean(revsLimit: Int, stats: inout MergeStats) -> (Bool, Int) {
    let firstNew = stats.firstNew
    defer { stemmedLimit = revsLimit }
    if stemmedLimit == revsLimit && !stats.prefixAdded {
      // The tree was a fixed point of this limit; only the merge's additions can change that.
      switch stats.result {
      case .internalNode:
        return (false, 0)
      case .newBranch where stats.addedCount <= revsLimit:
        return (false, 0)
      case .newLeaf where stats.newRoot && stats.addedCount <= revsLimit:
        return (false, 0)
      case .newLeaf
      where !stats.newRoot && stats.leafNode >= 0
        && nodes[Int(stats.leafNode)].pos - stats.rootPos < revsLimit:
        return (false, 0)
      default:
        break
      }
    }
    if leafCount == 1, stats.result == .newLeaf, !stats.prefixAdded, stats.leafNode >= 0,
      roots.count == 1
    {
      // One leaf: the tree is a chain. Drop nodes from the root while they are revsLimit or
      // more edges above the leaf. Amortized O(1) per edit.
      let cutoff = nodes[Int(stats.leafNode)].pos - revsLimit
      var r = roots[0]
      var removedOld = false
      var removedNew = 0
      guard nodes[Int(r)].pos <= cutoff else { return (false, 0) }
      while nodes[Int(r)].pos <= cutoff {
        let next = nodes[Int(r)].firstChild
        if r < firstNew { removedOld = true } else { removedNew += 1 }
        kill(r)
        r = next
      }
      nodes[Int(r)].parent = -1
      roots[0] = r
      if deadCount > 64 && deadCount > nodes.count / 2 { compact() }
      return (removedOld, removedNew)
    }
    return stemNormal(revsLimit: revsLimit, firstNew: firstNew)
  }

  /// Marks a slot dead and unindexes it. Links are fixed by the caller.
  @inline(__always)
  mutating func kill(_ i: Int32) {
    lookup?.remove(nodes[Int(i)].hash, in: nodes)
    nodes[Int(i)].state = .dead
    deadCount += 1
  }

  /// CouchDB's stem including the duplicate check and repair.
  mutating func stemFull(revsLimit: Int, freshNode: Int32) {
    var seen = Set<RevHash>(minimumCapacity: count)
    var duplicate = false
    for n in nodes where n.isLive {
      if !seen.insert(n.hash).inserted {
        duplicate = true
        break
      }
    }
    if duplicate {
      // A repaired tree is not necessarily a fixed point: CouchDB's next stem may drop more.
      repair(revsLimit: revsLimit, freshNode: freshNode)
      stemmedLimit = 0
    } else {
      _ = stemNormal(revsLimit: revsLimit, firstNew: Int32.max)
      stemmedLimit = revsLimit
    }
  }

  /// Keeps nodes within `revsLimit - 1` edges of a leaf below them. Returns whether a node with
  /// index below `firstNew` was removed, and how many at or above it were.
  mutating func stemNormal(revsLimit: Int, firstNew: Int32) -> (Bool, Int) {
    guard let first = roots.first else { return (false, 0) }
    // Cheap bound: no node is farther from its nearest leaf than maxPos - minRootPos.
    var maxPos = 0
    for n in nodes where n.isLive && n.pos > maxPos { maxPos = n.pos }
    if maxPos - nodes[Int(first)].pos < revsLimit { return (false, 0) }

    let order = preorder()
    var h = [Int](repeating: Int.max, count: nodes.count)
    for i in order.reversed() {
      let n = nodes[Int(i)]
      if n.isLeaf { h[Int(i)] = 0 }
      if n.parent >= 0 {
        let p = Int(n.parent)
        let v = h[Int(i)] + 1
        if v < h[p] { h[p] = v }
      }
    }
    var removedOld = false
    var removedNew = 0
    var any = false
    for i in order where h[Int(i)] >= revsLimit {
      any = true
      if i < firstNew { removedOld = true } else { removedNew += 1 }
      kill(i)
    }
    if !any { return (false, 0) }
    var newRoots: [Int32] = []
    for i in order where nodes[Int(i)].isLive {
      let p = nodes[Int(i)].parent
      if p < 0 || !nodes[Int(p)].isLive {
        nodes[Int(i)].parent = -1
        nodes[Int(i)].nextSibling = -1
        newRoots.append(i)
      }
      var c = nodes[Int(i)].firstChild
      var prevLive: Int32 = -1
      var newFirst: Int32 = -1
      while c >= 0 {
        let next = nodes[Int(c)].nextSibling
        if nodes[Int(c)].isLive {
          if prevLive >= 0 { nodes[Int(prevLive)].nextSibling = c } else { newFirst = c }
          prevLive = c
        }
        c = next
      }
      if prevLive >= 0 { nodes[Int(prevLive)].nextSibling = -1 }
      nodes[Int(i)].firstChild = newFirst
    }
    roots = newRoots
    sortRoots()
    compact()
    return (removedOld, removedNew)
  }

  /// Removes dead slots and renumbers the rest.
  mutating func compact() {
    guard deadCount > 0 else { return }
    var map = [Int32](repeating: -1, count: nodes.count)
    var out: [Node] = []
    out.reserveCapacity(nodes.count - deadCount)
    for (i, n) in nodes.enumerated() where n.isLive {
      map[i] = Int32(out.count)
      out.append(n)
    }
    for j in out.indices {
      if out[j].parent >= 0 { out[j].parent = map[Int(out[j].parent)] }
      if out[j].firstChild >= 0 { out[j].firstChild = map[Int(out[j].firstChild)] }
      if out[j].nextSibling >= 0 { out[j].nextSibling = map[Int(out[j].nextSibling)] }
    }
    for r in roots.indices { roots[r] = map[Int(roots[r])] }
    nodes = out
    deadCount = 0
    if lookup != nil {
      lookup = nil
      _ = ensureLookup()
    }
  }

  /// CouchDB's `repair_tree`: rebuild from every leaf's path cut to `revsLimit`.
  mutating func repair(revsLimit: Int, freshNode: Int32) {
    var paths: [(start: Int, entries: [PathEntry])] = []
    for (i, n) in nodes.enumerated() where n.isLive && n.isLeaf {
      var entries: [PathEntry] = []  // leaf first
      var c = Int32(i)
      while c >= 0 && entries.count < revsLimit {
        let m = nodes[Int(c)]
        let cls: UInt8 = m.state == .missing ? 2 : (c == freshNode ? 1 : 0)
        entries.append(PathEntry(hash: m.hash, state: m.state, body: m.body, valueClass: cls))
        c = m.parent
      }
      paths.append((n.pos + 1 - entries.count, entries))
    }
    self = Self.merging(paths)
  }

  /// The tree that leaf-first `paths` make when merged one by one into an empty tree in
  /// CouchDB's order: by first generation, then the paths compared as Erlang terms (what
  /// `repair_tree` and `remove_leafs` both do).
  static func merging(_ paths: [(start: Int, entries: [PathEntry])]) -> RevisionTree {
    let sorted = paths.sorted { a, b in
      if a.start != b.start { return a.start < b.start }
      return RevisionTree.erlangCompare(a.entries, b.entries) < 0
    }
    var t = RevisionTree()
    for p in sorted {
      let rootFirst = Array(p.entries.reversed())
      let plan = t.planMerge(start: p.start, rootFirst)
      _ = t.applyMerge(plan, start: p.start, rootFirst)
    }
    t.leafCount = 0
    for n in t.nodes where n.isLive && n.isLeaf { t.leafCount += 1 }
    return t
  }

  /// Compares two leaf-first paths as Erlang compares lists of `{Key, Value}` tuples.
  static func erlangCompare(_ a: [PathEntry], _ b: [PathEntry]) -> Int {
    for (x, y) in zip(a, b) {
      let c = RevHash.compare(x.hash, y.hash)
      if c != 0 { return c }
      // Values: a stored #leaf record (6-tuple) < an incoming #doc record (7-tuple) < [] (missing).
      if x.valueClass != y.valueClass { return x.valueClass < y.valueClass ? -1 : 1 }
      if x.valueClass != 2 {
        if x.state != y.state { return x.state == .available ? -1 : 1 }
        if x.body != y.body { return x.body < y.body ? -1 : 1 }
      }
    }
    if a.count != b.count { return a.count < b.count ? -1 : 1 }
    return 0
  }
}
