// The winning revision, as CouchDB's `couch_doc:to_doc_info/1` picks it.
//
// Worked example:
//
//     1-a ─┬─ 2-b ── 3-c (deleted)         leaves: 3-c deleted, 2-d, 2-e
//          ├─ 2-d
//          └─ 2-e
//
// Leaves sort descending by (not deleted, generation, hash bytes): 2-e, 2-d, 3-c. The winner is
// 2-e even though 3-c is deeper, because a live leaf beats a deleted one. `_conflicts` = [2-d],
// `_deleted_conflicts` = [3-c]. Only when every leaf is deleted is the document deleted; the
// winner is then the deepest tombstone.

extension RevisionTree {
  /// Whether leaf `a` sorts before leaf `b` in CouchDB's winner-first order.
  @inline(__always)
  func leafPrecedes(_ a: Int32, _ b: Int32) -> Bool {
    let x = nodes[Int(a)]
    let y = nodes[Int(b)]
    let xl = x.state == .available
    let yl = y.state == .available
    if xl != yl { return xl }
    if x.pos != y.pos { return x.pos > y.pos }
    return RevHash.compare(x.hash, y.hash) > 0
  }

  func leafIndices() -> [Int32] {
    var out: [Int32] = []
    out.reserveCapacity(leafCount)
    for (i, n) in nodes.enumerated() where n.isLive && n.isLeaf { out.append(Int32(i)) }
    return out
  }

  func sortedLeafIndices() -> [Int32] {
    var l = leafIndices()
    l.sort { leafPrecedes($0, $1) }
    return l
  }

  /// Every leaf, winner first, then in CouchDB's order: live before deleted, then by generation
  /// and hash, descending.
  ///
  /// ```swift
  /// tree.leaves.map(\.rev)   // what `_changes?style=all_docs` lists
  /// ```
  public var leaves: [Revision] { sortedLeafIndices().map { revision(at: $0) } }

  /// The winning revision: what `GET /db/doc` returns. `nil` for an empty tree.
  ///
  /// ```swift
  /// if let w = tree.winner, !w.isDeleted { serve(w.body) }
  /// ```
  public var winner: Revision? {
    var best: Int32 = -1
    for (i, n) in nodes.enumerated() where n.isLive && n.isLeaf {
      if best < 0 || leafPrecedes(Int32(i), best) { best = Int32(i) }
    }
    return best >= 0 ? revision(at: best) : nil
  }

  /// Whether the document is deleted: it exists and every leaf is deleted (a `missing` leaf
  /// counts as deleted, as in CouchDB). An empty tree is not deleted; it does not exist.
  public var isDeleted: Bool {
    guard !isEmpty else { return false }
    for n in nodes where n.isLive && n.isLeaf && n.state == .available { return false }
    return true
  }

  /// `_conflicts`: the live leaves other than the winner, in CouchDB's order.
  public var conflicts: [RevID] {
    let l = sortedLeafIndices()
    return l.dropFirst().filter { nodes[Int($0)].state == .available }.map { rev(at: $0) }
  }

  /// `_deleted_conflicts`: the deleted leaves other than the winner, in CouchDB's order.
  public var deletedConflicts: [RevID] {
    let l = sortedLeafIndices()
    return l.dropFirst().filter { nodes[Int($0)].state != .available }.map { rev(at: $0) }
  }

  @inline(__always)
  func rev(at i: Int32) -> RevID {
    RevID(unchecked: nodes[Int(i)].pos, hash: nodes[Int(i)].hash)
  }
}
