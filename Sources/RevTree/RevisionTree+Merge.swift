// Merging a replicated path into a revision tree, as CouchDB's `couch_key_tree:merge/2` does.
//
// Worked example (the tree is drawn root at the left, children sorted by hash):
//
//     stored:  1-a ── 2-b ── 3-c            path {start: 4, ids: [e, c, b]}  =  2-b → 3-c → 4-e
//
// 1. Find where the path starts. Its oldest revision is 2-b. Roots are tried in order (generation,
//    then hash); the path attaches to the first root that accepts it:
//    - a root at the path's starting generation or deeper accepts if the path holds the root's
//      revision at that generation (the path's older part is then grafted above the root);
//    - a shallower root accepts if a node at the path's starting generation with the same hash is
//      in its subtree (the first one depth-first, children by hash).
//    Here the root 1-a is shallower and 2-b is in its subtree: attach at 2-b.
// 2. Walk down: 3-c is a child of 2-b, so follow it; 4-e is not a child of 3-c, so graft 4-e under
//    3-c. 3-c had no children: the result is `.newLeaf` (a leaf was extended). Grafting under a
//    node that has children is `.newBranch`; a path that ends on existing nodes is
//    `.internalNode`. A path no root accepts becomes a root of its own (`.newBranch`, or
//    `.newLeaf` in an empty tree).
// 3. Values: a node that exists keeps what it has, except that a `missing` node (no body) takes
//    the incoming leaf's body and deleted flag.
// 4. Stem to revs_limit (RevisionTree+Stem.swift), then decide whether the write changed anything.
//
//     result:  1-a ── 2-b ── 3-c ── 4-e      .newLeaf, updated

/// What a merge did, in CouchDB's words (`couch_key_tree:merge/2`).
public enum MergeResult: String, Sendable, Hashable {
  /// A leaf was extended, or the first revision of a document was stored.
  case newLeaf = "new_leaf"
  /// A new branch was created: a child under a node that already had one, or a disjoint root.
  case newBranch = "new_branch"
  /// Nothing new was added below the point of attachment: the revision was already known.
  case internalNode = "internal_node"
}

/// The outcome of merging one replicated revision into a tree.
///
/// ```swift
/// let outcome = try tree.merge(path, deleted: false, body: seq, revsLimit: 1000)
/// if outcome.updated { /* new update sequence, changes-feed row */ }
/// ```
public struct MergeOutcome: Hashable, Sendable {
  /// CouchDB's label for the merge.
  public let result: MergeResult
  /// Whether the stored tree changed after merge and stem (new nodes, grafted ancestors, a body
  /// given to a `missing` node). `false` means the write was a no-op for CouchDB: no new update
  /// sequence, no changes-feed row.
  public let updated: Bool
  /// Whether the written revision became a leaf that was not a leaf before. These are the writes
  /// CouchDB would pass to `validate_doc_update` (other replicated writes are accepted unchecked).
  public let createdLeaf: Bool

  /// Creates an outcome.
  public init(result: MergeResult, updated: Bool, createdLeaf: Bool) {
    self.result = result
    self.updated = updated
    self.createdLeaf = createdLeaf
  }
}

/// A node of a path being merged, with its value.
struct PathEntry {
  var hash: RevHash
  var state: RevisionTree.NodeState
  var body: UInt64
  /// Erlang value class for repair ordering: 0 stored leaf record, 1 incoming doc, 2 missing.
  var valueClass: UInt8
}

/// Where and how a path attaches; computed without mutating the tree.
struct MergePlan {
  /// Index in `roots` of the accepting root, or `nil` for a new root.
  var rootSlot: Int?
  /// The node the path attaches at (`path[j]` matches it).
  var attach: Int32
  /// Number of path entries grafted above the accepting root.
  var j: Int
  /// Index of the first path entry that is new below the attach point (`path.count` if none).
  var k: Int
  /// The node matching `path[k - 1]`; the nodes for `path[j..<k]` are it and its ancestors up
  /// to `attach` (-1 without a root).
  var lastMatched: Int32
  /// Where new nodes `path[k...]` go: their parent and the siblings around them.
  var insertParent: Int32
  var insertPrev: Int32
  var insertNext: Int32
  var result: MergeResult
}

/// Statistics of an applied merge, for the no-op decision.
struct MergeStats {
  var result: MergeResult
  /// How many nodes the merge appended (they are the last slots of `nodes`).
  var addedCount = 0
  /// The slot count before the merge: slots from here on are new.
  var firstNew: Int32 = 0
  var valueChanged = false
  var leafCreated = false
  var leafNode: Int32 = -1
  var freshNode: Int32 = -1
  var prefixAdded = false
  var newRoot = false
  /// Generation of the accepting root before the merge.
  var rootPos = 0
}

extension RevisionTree {
  /// Merges a replicated revision (CouchDB `new_edits: false`) and stems to `revsLimit`.
  ///
  /// The path's newest revision gets `body` and `deleted`; its ancestors are stored as `missing`
  /// unless already known. Exactly CouchDB's `couch_key_tree:merge/2` followed by
  /// `couch_key_tree:stem/2` (including the repair of duplicate hashes).
  ///
  /// ```swift
  /// var tree = RevisionTree()
  /// let path = try RevisionPath(start: 2, ids: ["b", "a"])
  /// let o = try tree.merge(path, deleted: false, body: 42, revsLimit: 1000)
  /// // o.result == .newLeaf, o.updated == true, tree.winner?.rev == 2-b
  /// ```
  /// - Parameters:
  ///   - path: `_revisions` of the written revision.
  ///   - deleted: the written revision's `_deleted`.
  ///   - body: where the written revision's body lives.
  ///   - revsLimit: the database's `_revs_limit`, at least 1.
  /// - Returns: CouchDB's merge label, whether the document changed, and whether the revision is
  ///   a newly created leaf.
  /// - Throws: ``RevTreeError/invalidRevsLimit(_:)``.
  @discardableResult
  public mutating func merge(
    _ path: RevisionPath, deleted: Bool, body: BodyReference, revsLimit: Int
  ) throws(RevTreeError) -> MergeOutcome {
    guard revsLimit >= 1 else { throw .invalidRevsLimit(revsLimit) }
    if nodes.isEmpty, let outcome = chain(path, deleted: deleted, body: body, revsLimit: revsLimit)
    {
      return outcome
    }
    var entries: [PathEntry] = []
    entries.reserveCapacity(path.ids.count)
    for h in path.ids.reversed() {
      entries.append(PathEntry(hash: h, state: .missing, body: 0, valueClass: 2))
    }
    entries[entries.count - 1].state = deleted ? .deleted : .available
    entries[entries.count - 1].body = body
    entries[entries.count - 1].valueClass = 1
    return mergeEntries(start: path.rootGeneration, entries, revsLimit: revsLimit)
  }

  /// The first revision path of a new document, when it needs no stemming and has no hash
  /// twice: the tree is the path itself, a chain from its root to the leaf, as the general
  /// merge would make it (``mergeEntries(start:_:revsLimit:)``: a new root, a created leaf, a
  /// fixed point of stemming with `revsLimit`), without planning a merge or building the hash
  /// index (built by the next merge that needs it). Nil otherwise.
  mutating func chain(
    _ path: RevisionPath, deleted: Bool, body: BodyReference, revsLimit: Int
  ) -> MergeOutcome? {
    let ids = path.ids
    let n = ids.count
    guard n > 0, n <= revsLimit, n <= 16 else { return nil }
    for a in 0..<n {
      for b in (a + 1)..<n where ids[a] == ids[b] { return nil }
    }
    let start = path.rootGeneration
    nodes.reserveCapacity(n)
    // `ids` is newest first; the chain is laid out root first, each node's child next to it.
    for o in 0..<n {
      let isLeaf = o == n - 1
      nodes.append(
        Node(
          hash: ids[n - 1 - o], pos: start + o, parent: Int32(o) - 1,
          firstChild: isLeaf ? -1 : Int32(o + 1), nextSibling: -1,
          state: isLeaf ? (deleted ? .deleted : .available) : .missing, body: isLeaf ? body : 0))
    }
    roots = [0]
    leafCount = 1
    lookup = nil
    stemmedLimit = revsLimit
    return MergeOutcome(result: .newLeaf, updated: true, createdLeaf: true)
  }

  /// The merge pipeline shared by replicated writes and local edits.
  mutating func mergeEntries(start: Int, _ entries: [PathEntry], revsLimit: Int) -> MergeOutcome {
    let clean = ensureLookup()
    let plan = planMerge(start: start, entries)
    if clean, !introducesDuplicate(plan, entries) {
      var stats = applyMerge(plan, start: start, entries)
      let (removedOld, removedNew) = stemClean(revsLimit: revsLimit, stats: &stats)
      let survived = stats.addedCount > removedNew
      return MergeOutcome(
        result: stats.result, updated: survived || stats.valueChanged || removedOld,
        createdLeaf: stats.leafCreated)
    }
    // Slow path: the tree holds (or is about to hold) a duplicate hash; CouchDB then rebuilds
    // the tree path by path when stemming. Compare the whole tree for the no-op decision.
    let old = self
    lookup = nil
    let stats = applyMerge(plan, start: start, entries)
    var createdLeaf = stats.leafCreated
    if createdLeaf {
      let leafRev = RevID(
        unchecked: start + entries.count - 1, hash: entries[entries.count - 1].hash)
      for n in old.nodes
      where n.isLive && n.isLeaf && n.pos == leafRev.generation && n.hash == leafRev.hash {
        createdLeaf = false
      }
    }
    stemFull(revsLimit: revsLimit, freshNode: stats.freshNode)
    _ = ensureLookup()
    return MergeOutcome(result: stats.result, updated: self != old, createdLeaf: createdLeaf)
  }

  /// Builds the hash index if needed. Returns `false` when a hash occurs twice (no index).
  @discardableResult
  mutating func ensureLookup() -> Bool {
    if lookup != nil { return true }
    guard let index = NodeIndex.build(nodes, liveCount: count) else { return false }
    lookup = index
    return true
  }

  /// Whether applying `plan` would add a hash that is already in the tree (or twice).
  func introducesDuplicate(_ plan: MergePlan, _ entries: [PathEntry]) -> Bool {
    guard let lookup else { return true }
    let newCount = plan.j + (entries.count - plan.k)
    if newCount == 0 { return false }
    // The new entries are `0..<j` then `k...`; `n` counts them.
    let j = plan.j
    let k = plan.k
    @inline(__always) func newEntry(_ n: Int) -> Int { n < j ? n : k + (n - j) }
    if newCount <= 8 {
      for n in 0..<newCount {
        let h = entries[newEntry(n)].hash
        if lookup.find(h, in: nodes) != nil { return true }
        for m in 0..<n where entries[newEntry(m)].hash == h { return true }
      }
      return false
    }
    var seen = Set<RevHash>(minimumCapacity: newCount)
    for n in 0..<newCount {
      let h = entries[newEntry(n)].hash
      if lookup.find(h, in: nodes) != nil || !seen.insert(h).inserted { return true }
    }
    return false
  }

  /// Finds where `entries` (root first, the first at generation `start`) attaches. Read-only.
  func planMerge(start: Int, _ entries: [PathEntry]) -> MergePlan {
    var attach: Int32 = -1
    var j = 0
    var slot: Int? = nil
    // With the index, the only candidate inside a shallower root is the node holding path[0].
    var candidateRoot: Int32 = -1
    var candidate: Int32 = -1
    if let lookup, let c = lookup.find(entries[0].hash, in: nodes), nodes[Int(c)].pos == start {
      candidate = c
      if roots.count == 1 {
        candidateRoot = roots[0]
      } else {
        var r = c
        while nodes[Int(r)].parent >= 0 { r = nodes[Int(r)].parent }
        candidateRoot = r
      }
    }
    for (s, r) in roots.enumerated() {
      let rp = nodes[Int(r)].pos
      if rp >= start {
        let jj = rp - start
        if jj < entries.count, entries[jj].hash == nodes[Int(r)].hash {
          attach = r
          j = jj
          slot = s
          break
        }
      } else if lookup != nil {
        if candidateRoot == r {
          attach = candidate
          slot = s
          break
        }
      } else if let found = firstNode(under: r, atGeneration: start, hash: entries[0].hash) {
        attach = found
        slot = s
        break
      }
    }
    guard slot != nil else {
      return MergePlan(
        rootSlot: nil, attach: -1, j: 0, k: 0, lastMatched: -1, insertParent: -1, insertPrev: -1,
        insertNext: -1, result: roots.isEmpty ? .newLeaf : .newBranch)
    }
    var cur = attach
    var k = j + 1
    while k < entries.count {
      var prev: Int32 = -1
      var c = nodes[Int(cur)].firstChild
      var order = 1
      while c >= 0 {
        order = RevHash.compare(nodes[Int(c)].hash, entries[k].hash)
        if order >= 0 { break }
        prev = c
        c = nodes[Int(c)].nextSibling
      }
      if c >= 0 && order == 0 {
        cur = c
        k += 1
        continue
      }
      let result: MergeResult = nodes[Int(cur)].firstChild < 0 ? .newLeaf : .newBranch
      return MergePlan(
        rootSlot: slot, attach: attach, j: j, k: k, lastMatched: cur, insertParent: cur,
        insertPrev: prev, insertNext: c, result: result)
    }
    return MergePlan(
      rootSlot: slot, attach: attach, j: j, k: k, lastMatched: cur, insertParent: -1,
      insertPrev: -1, insertNext: -1, result: .internalNode)
  }

  /// The first node depth-first (children by hash) under `root` at `generation` with `hash`.
  func firstNode(under root: Int32, atGeneration generation: Int, hash: RevHash) -> Int32? {
    var stack: [Int32] = [root]
    var kids: [Int32] = []
    while let i = stack.popLast() {
      let n = nodes[Int(i)]
      if n.pos == generation {
        if n.hash == hash { return i }
        continue
      }
      kids.removeAll(keepingCapacity: true)
      var c = n.firstChild
      while c >= 0 {
        kids.append(c)
        c = nodes[Int(c)].nextSibling
      }
      stack.append(contentsOf: kids.reversed())
    }
    return nil
  }

  /// Appends a node and indexes it (the caller has ruled out duplicates when indexing).
  mutating func appendNode(_ e: PathEntry, pos: Int, parent: Int32) -> Int32 {
    let i = Int32(nodes.count)
    nodes.append(
      Node(
        hash: e.hash, pos: pos, parent: parent, firstChild: -1, nextSibling: -1, state: e.state,
        body: e.state == .missing ? 0 : e.body))
    lookup?.insert(i, in: nodes, replace: true)
    return i
  }

  /// Applies a plan made by ``planMerge(start:_:)`` on the unchanged tree.
  mutating func applyMerge(_ plan: MergePlan, start: Int, _ entries: [PathEntry]) -> MergeStats {
    var stats = MergeStats(result: plan.result)
    stats.firstNew = Int32(nodes.count)
    let last = entries.count - 1
    guard let slot = plan.rootSlot else {
      // A new root holding the whole path.
      var parent: Int32 = -1
      for (o, e) in entries.enumerated() {
        let i = appendNode(e, pos: start + o, parent: parent)
        if parent >= 0 { nodes[Int(parent)].firstChild = i } else { roots.append(i) }
        stats.addedCount += 1
        parent = i
      }
      stats.leafNode = parent
      stats.leafCreated = true
      stats.newRoot = true
      if entries[last].valueClass == 1 { stats.freshNode = parent }
      leafCount += 1
      sortRoots()
      return stats
    }
    stats.rootPos = nodes[Int(roots[slot])].pos
    // Values of matched nodes: a missing node takes the incoming value.
    // They are `lastMatched` and its ancestors (entries k - 1 down to j); at most one entry is
    // the incoming document (valueClass 1), so the order of this walk does not matter.
    var i = plan.lastMatched
    var o = plan.k - 1
    while true {
      let e = entries[o]
      if nodes[Int(i)].state == .missing && e.state != .missing {
        nodes[Int(i)].state = e.state
        nodes[Int(i)].body = e.body
        stats.valueChanged = true
        if e.valueClass == 1 { stats.freshNode = i }
      }
      if o == plan.j { break }
      i = nodes[Int(i)].parent
      o -= 1
    }
    // New nodes below the attach point.
    if plan.k < entries.count {
      var parent = plan.insertParent
      let hadChildren = nodes[Int(parent)].firstChild >= 0
      for k in plan.k..<entries.count {
        let i = appendNode(entries[k], pos: start + k, parent: parent)
        if k == plan.k {
          nodes[Int(i)].nextSibling = plan.insertNext
          if plan.insertPrev >= 0 {
            nodes[Int(plan.insertPrev)].nextSibling = i
          } else {
            nodes[Int(parent)].firstChild = i
          }
        } else {
          nodes[Int(parent)].firstChild = i
        }
        stats.addedCount += 1
        parent = i
      }
      stats.leafNode = parent
      stats.leafCreated = true
      if entries[last].valueClass == 1 { stats.freshNode = parent }
      if hadChildren { leafCount += 1 }
    } else {
      stats.leafNode = plan.lastMatched
    }
    // Ancestors grafted above the accepting root.
    if plan.j > 0 {
      let oldRoot = roots[slot]
      var parent: Int32 = -1
      var top: Int32 = -1
      for o in 0..<plan.j {
        let i = appendNode(entries[o], pos: start + o, parent: parent)
        if parent >= 0 { nodes[Int(parent)].firstChild = i } else { top = i }
        stats.addedCount += 1
        parent = i
      }
      nodes[Int(parent)].firstChild = oldRoot
      nodes[Int(oldRoot)].parent = parent
      roots[slot] = top
      stats.prefixAdded = true
      sortRoots()
    }
    return stats
  }

  mutating func sortRoots() {
    if roots.count < 2 { return }
    let ns = nodes
    roots.sort { a, b in
      let x = ns[Int(a)]
      let y = ns[Int(b)]
      if x.pos != y.pos { return x.pos < y.pos }
      let c = RevHash.compare(x.hash, y.hash)
      return c != 0 ? c < 0 : a < b
    }
  }
}
