/// A document's revision history, CouchDB-compatible down to the order of its answers.
///
/// A revision tree is a forest: rooted subtrees, each root at some generation (`pos`), children
/// sorted by hash. Leaves are the document's current heads; more than one live leaf is a
/// conflict. Every node is a revision; it holds a body (a ``BodyReference`` the caller chose,
/// such as the log position of the event that stored it) or is `missing`, an ancestor known
/// only by id.
///
/// ## A worked example
/// ```
///   1-a ── 2-b ── 3-c              one root at generation 1, one leaf (3-c)
/// ```
/// A peer replicates `{"start": 3, "ids": ["d", "b", "a"]}`. It shares `1-a ── 2-b` and adds a
/// sibling of `3-c`; 2-b already had a child, so the merge is ``MergeResult/newBranch``:
/// ```
///   1-a ── 2-b ─┬─ 3-c             leaves 3-d, 3-c: a conflict
///               └─ 3-d             winner 3-d (same generation, "d" > "c")
/// ```
/// Merging `{"start": 5, "ids": ["f", "e", "c"]}` extends the leaf 3-c (``MergeResult/newLeaf``);
/// merging `{"start": 2, "ids": ["b", "a"]}` again adds nothing (``MergeResult/internalNode``,
/// `updated == false`).
/// ```
///   1-a ── 2-b ─┬─ 3-c ── 4-e ── 5-f
///               └─ 3-d
/// ```
/// Stemming with `revsLimit: 2` keeps a node only if a leaf is at most one edge below it: 1-a
/// and 3-c go, 2-b stays for 3-d, and 4-e becomes a root of its own, a disjoint subtree that
/// later merges must still join correctly:
/// ```
///   2-b ── 3-d                     roots sorted by (generation, hash)
///   4-e ── 5-f                     winner 5-f; _conflicts [3-d]
/// ```
///
/// ```swift
/// var tree = RevisionTree()
/// try tree.merge(RevisionPath(start: 3, ids: ["c", "b", "a"]), deleted: false, body: 10, revsLimit: 2)
/// let o = try tree.merge(RevisionPath(start: 3, ids: ["d", "b", "a"]), deleted: false, body: 11, revsLimit: 2)
/// // o.result == .newBranch, o.updated == true
/// try tree.merge(RevisionPath(start: 5, ids: ["f", "e", "c"]), deleted: false, body: 12, revsLimit: 2)
/// tree.winner?.rev        // 5-f
/// tree.conflicts          // [3-d]
/// tree.rootRevisions      // [2-b, 4-e]
/// ```
///
/// Every answer follows CouchDB's own code (`couch_key_tree`, `couch_doc`, `couch_db_updater`),
/// including the repair it performs when an inconsistent peer makes one hash appear twice; the
/// tests replay 150 scenarios computed with CouchDB and match every field.
///
/// ## Representation
/// Nodes live in one flat array and point to each other by index (parent, first child, next
/// sibling), so no operation recurses and freeing a 100,000-revision chain cannot overflow the
/// stack. Removed nodes leave holes that are compacted in bulk, which makes one edit on a long
/// stemmed chain amortized O(1).
public struct RevisionTree: Sendable {
  /// Where a revision's body lives. The tree never interprets it; Projections stores the log
  /// position of the event that wrote the body.
  public typealias BodyReference = UInt64

  @usableFromInline
  struct Node: Sendable {
    var hash: RevHash
    var pos: Int
    var parent: Int32
    var firstChild: Int32
    var nextSibling: Int32
    var state: NodeState
    var body: UInt64

    @inline(__always) var isLeaf: Bool { firstChild < 0 }
    @inline(__always) var isLive: Bool { state != .dead }
  }

  @usableFromInline
  enum NodeState: UInt8, Sendable {
    case missing = 0
    case available = 1
    case deleted = 2
    /// A removed slot awaiting compaction.
    case dead = 3
  }

  /// All node slots, live and dead.
  @usableFromInline var nodes: [Node] = []
  /// Root indices, sorted by (pos, hash).
  @usableFromInline var roots: [Int32] = []
  /// Number of dead slots in `nodes`.
  @usableFromInline var deadCount = 0
  /// Number of leaves.
  @usableFromInline var leafCount = 0

  /// Whether the tree has more than one leaf (live or deleted): only such a tree can have
  /// `_conflicts`, and once it has, it keeps its branches.
  public var hasBranches: Bool { leafCount > 1 }
  /// Hash → node index for every live node, when built and when no hash occurs twice. `nil`
  /// when not built yet (after decoding) or when the tree holds a duplicate hash.
  @usableFromInline var lookup: NodeIndex? = nil
  /// The revs_limit the tree was last stemmed with (0: unknown, as after decoding). A tree
  /// without duplicate hashes stemmed with a limit is a fixed point of stemming with it, which
  /// lets most merges skip the whole-tree pass.
  @usableFromInline var stemmedLimit = 0

  /// An empty tree: a document that does not exist yet.
  public init() {}

  /// Whether the tree has no revisions.
  public var isEmpty: Bool { roots.isEmpty }

  /// The number of revisions (nodes) stored.
  public var count: Int { nodes.count - deadCount }

}

// MARK: - Public views

/// What the tree knows about a revision: CouchDB's `revs_info` status.
public enum RevisionStatus: String, Sendable, Hashable {
  /// A body is stored and the revision is not a deletion.
  case available
  /// A body is stored and the revision is a deletion (tombstone).
  case deleted
  /// Known only by id (an ancestor from a replicated path, or a body never received).
  case missing
}

extension RevisionTree {
  /// One revision of the tree as seen from outside.
  ///
  /// ```swift
  /// if let r = tree.revision(try RevID("2-b")), let body = r.body { load(body) }
  /// ```
  public struct Revision: Hashable, Sendable, CustomStringConvertible {
    /// The revision id.
    public let rev: RevID
    /// `available`, `deleted` or `missing`.
    public let status: RevisionStatus
    /// Where the body lives, `nil` when ``status`` is `missing`.
    public let body: BodyReference?
    /// Whether the revision is a leaf (a current head).
    public let isLeaf: Bool

    /// Whether this revision is a deletion. A `missing` revision counts as deleted, as CouchDB
    /// counts it when deciding whether a document is deleted.
    public var isDeleted: Bool { status != .available }

    public var description: String { "\(rev) (\(status.rawValue)\(isLeaf ? ", leaf" : ""))" }
  }

  @inline(__always)
  func revision(at i: Int32) -> Revision {
    let i = Int(i)
    let status: RevisionStatus
    switch nodes[i].state {
    case .available: status = .available
    case .deleted: status = .deleted
    default: status = .missing
    }
    return Revision(
      rev: RevID(unchecked: nodes[i].pos, hash: nodes[i].hash), status: status,
      body: status == .missing ? nil : nodes[i].body, isLeaf: nodes[i].isLeaf)
  }

  /// The roots of the forest, in CouchDB's order (generation, then hash).
  public var rootRevisions: [Revision] { roots.map { revision(at: $0) } }

  /// Visits every revision depth-first in CouchDB's order: roots in order, a node before its
  /// children, children by hash.
  ///
  /// `level` is the distance from the node's root (0 for a root). Iterative: safe on a
  /// 100,000-revision chain.
  ///
  /// ```swift
  /// tree.forEachRevision { rev, level in print(String(repeating: "  ", count: level), rev) }
  /// ```
  public func forEachRevision(_ body: (_ revision: Revision, _ level: Int) throws -> Void) rethrows
  {
    var stack: [(Int32, Int)] = []
    for r in roots.reversed() { stack.append((r, 0)) }
    var kids: [Int32] = []
    while let (i, level) = stack.popLast() {
      try body(revision(at: i), level)
      kids.removeAll(keepingCapacity: true)
      var c = nodes[Int(i)].firstChild
      while c >= 0 {
        kids.append(c)
        c = nodes[Int(c)].nextSibling
      }
      for k in kids.reversed() { stack.append((k, level + 1)) }
    }
  }

  /// Indices of live nodes in DFS pre-order (CouchDB's traversal order).
  func preorder() -> [Int32] {
    var out: [Int32] = []
    out.reserveCapacity(count)
    var stack: [Int32] = roots.reversed()
    var kids: [Int32] = []
    while let i = stack.popLast() {
      out.append(i)
      kids.removeAll(keepingCapacity: true)
      var c = nodes[Int(i)].firstChild
      while c >= 0 {
        kids.append(c)
        c = nodes[Int(c)].nextSibling
      }
      stack.append(contentsOf: kids.reversed())
    }
    return out
  }

  /// The node index holding `rev`, the first in DFS order if an adversarial peer made the same
  /// revision appear twice.
  func index(of rev: RevID) -> Int32? {
    if let lookup {
      guard let i = lookup.find(rev.hash, in: nodes), nodes[Int(i)].pos == rev.generation else {
        return nil
      }
      return i
    }
    var found: Int32? = nil
    var foundCount = 0
    // Field by field, generation first: no copy of each node.
    for i in nodes.indices
    where nodes[i].pos == rev.generation && nodes[i].isLive && nodes[i].hash == rev.hash {
      if found == nil { found = Int32(i) }
      foundCount += 1
    }
    if foundCount <= 1 { return found }
    return preorder().first {
      nodes[Int($0)].pos == rev.generation && nodes[Int($0)].hash == rev.hash
    }
  }

  /// The revision `rev` if the tree holds it (with or without a body).
  ///
  /// ```swift
  /// tree.revision(try RevID("1-a"))?.status   // .missing, .available or .deleted
  /// ```
  public func revision(_ rev: RevID) -> Revision? {
    index(of: rev).map { revision(at: $0) }
  }

  /// Whether the tree holds `rev` as a node (with or without a body).
  public func contains(_ rev: RevID) -> Bool { index(of: rev) != nil }

  /// The children of `rev`, sorted by hash.
  public func children(of rev: RevID) -> [Revision] {
    guard let i = index(of: rev) else { return [] }
    var out: [Revision] = []
    var c = nodes[Int(i)].firstChild
    while c >= 0 {
      out.append(revision(at: c))
      c = nodes[Int(c)].nextSibling
    }
    return out
  }

  /// The parent of `rev`, `nil` for a root or an unknown revision.
  public func parent(of rev: RevID) -> Revision? {
    guard let i = index(of: rev) else { return nil }
    let p = nodes[Int(i)].parent
    return p >= 0 ? revision(at: p) : nil
  }
}

// MARK: - Equality

extension RevisionTree: Equatable {
  /// Two trees are equal when they hold the same forest: same roots, same nodes with the same
  /// statuses and bodies, same edges. Internal layout (slot order, holes, caches) is ignored.
  public static func == (a: RevisionTree, b: RevisionTree) -> Bool {
    guard a.count == b.count, a.roots.count == b.roots.count else { return false }
    var stack: [(Int32, Int32)] = []
    for (x, y) in zip(a.roots, b.roots) { stack.append((x, y)) }
    while let (x, y) = stack.popLast() {
      let nx = a.nodes[Int(x)]
      let ny = b.nodes[Int(y)]
      guard nx.pos == ny.pos, nx.hash == ny.hash, nx.state == ny.state else { return false }
      if nx.state != .missing && nx.body != ny.body { return false }
      var cx = nx.firstChild
      var cy = ny.firstChild
      while cx >= 0 && cy >= 0 {
        stack.append((cx, cy))
        cx = a.nodes[Int(cx)].nextSibling
        cy = b.nodes[Int(cy)].nextSibling
      }
      if cx >= 0 || cy >= 0 { return false }
    }
    return true
  }
}
