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
//
// Ties: an inconsistent peer can put one revision id on two branches,
//
//     1-a ── 2-x   (body 10)
//     1-b ── 2-x   (body 20)
//
// Both leaves are 2-x, live: CouchDB's key does not separate them, and taking whichever comes
// first in memory would make the winner (and its body) depend on merge order and on decoding,
// which lays nodes out afresh. The order goes on along the leaves' ancestries instead, from the
// parent up, by hash descending (2-x under 1-b wins here), then a longer known ancestry first,
// then the smaller body reference: a total order on what the tree holds, not on where it is
// held.

extension RevisionTree {
  /// Whether leaf `a` sorts before leaf `b` in CouchDB's winner-first order, ties broken as
  /// described above.
  @inline(__always)
  func leafPrecedes(_ a: Int32, _ b: Int32) -> Bool {
    // Fields read in place: a node is not copied (its hash may hold an array).
    let xl = nodes[Int(a)].state == .available
    let yl = nodes[Int(b)].state == .available
    if xl != yl { return xl }
    let xp = nodes[Int(a)].pos
    let yp = nodes[Int(b)].pos
    if xp != yp { return xp > yp }
    let c = RevHash.compare(nodes[Int(a)].hash, nodes[Int(b)].hash)
    if c != 0 { return c > 0 }
    return a != b && tiedLeafPrecedes(a, b)
  }

  /// For two leaves with the same revision and status: compares their ancestries from the
  /// parent up (both are at the same generation, so they climb in step), by hash descending;
  /// a leaf whose known ancestry goes further back comes first; then the smaller body.
  func tiedLeafPrecedes(_ a: Int32, _ b: Int32) -> Bool {
    var x = nodes[Int(a)].parent
    var y = nodes[Int(b)].parent
    while x >= 0 && y >= 0 && x != y {
      let c = RevHash.compare(nodes[Int(x)].hash, nodes[Int(y)].hash)
      if c != 0 { return c > 0 }
      x = nodes[Int(x)].parent
      y = nodes[Int(y)].parent
    }
    if x != y { return y < 0 }  // exactly one ancestry ended; a's goes on when b's did
    return nodes[Int(a)].body < nodes[Int(b)].body
  }

  func leafIndices() -> [Int32] {
    var out: [Int32] = []
    out.reserveCapacity(leafCount)
    for i in nodes.indices where nodes[i].isLive && nodes[i].isLeaf { out.append(Int32(i)) }
    return out
  }

  func sortedLeafIndices() -> [Int32] {
    var l = leafIndices()
    if l.count > 1 { l.sort { leafPrecedes($0, $1) } }
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
    for i in nodes.indices where nodes[i].isLive && nodes[i].isLeaf {
      if best < 0 || leafPrecedes(Int32(i), best) { best = Int32(i) }
    }
    return best >= 0 ? revision(at: best) : nil
  }

  /// Whether the document is deleted: it exists and every leaf is deleted (a `missing` leaf
  /// counts as deleted, as in CouchDB). An empty tree is not deleted; it does not exist.
  public var isDeleted: Bool {
    guard !isEmpty else { return false }
    for i in nodes.indices where nodes[i].isLeaf && nodes[i].state == .available {
      return false
    }
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
