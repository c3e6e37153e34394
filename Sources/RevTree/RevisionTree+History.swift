// Reading a revision's history: `_revisions`, `revs_info`, ancestors, `_revs_diff`.

/// The answer of `_revs_diff` for one document.
///
/// ```swift
/// let diff = tree.revsDiff([try RevID("3-x")])
/// // {"missing": diff.missing, "possible_ancestors": diff.possibleAncestors}
/// ```
public struct RevsDiff: Hashable, Sendable {
  /// Requested revisions the tree does not hold, sorted by (generation, hash). A revision sent k
  /// times is listed k − 1 times when the tree holds it once, k times when it holds none.
  public var missing: [RevID]
  /// Leaves whose generation is lower than the highest missing one, in leaf order (winner
  /// first); empty when nothing is missing.
  public var possibleAncestors: [RevID]

  /// Creates a diff.
  public init(missing: [RevID], possibleAncestors: [RevID]) {
    self.missing = missing
    self.possibleAncestors = possibleAncestors
  }
}

extension RevisionTree {
  /// The stored path from `rev` up to its root, `rev` first.
  func pathIndices(from i: Int32) -> [Int32] {
    var out: [Int32] = []
    var c = i
    while c >= 0 {
      out.append(c)
      c = nodes[Int(c)].parent
    }
    return out
  }

  /// `_revisions` of `rev` as `GET /db/doc?rev=…&revs=true` answers: `rev` and its stored
  /// ancestors, newest first, cut to `limit` ids.
  ///
  /// ```swift
  /// let p = tree.revisions(of: leaf, limit: 1000)
  /// // {"start": p.start, "ids": p.ids.map(\.description)}
  /// ```
  /// - Returns: `nil` if the tree does not hold `rev`.
  public func revisions(of rev: RevID, limit: Int = .max) -> RevisionPath? {
    guard let i = index(of: rev) else { return nil }
    var ids: [RevHash] = []
    var c = i
    while c >= 0 && ids.count < max(limit, 1) {
      ids.append(nodes[Int(c)].hash)
      c = nodes[Int(c)].parent
    }
    return RevisionPath(uncheckedStart: rev.generation, ids: ids)
  }

  /// The full stored path of `rev` (not cut): what the tree keeps, possibly longer than
  /// `revs_limit` after stemming.
  public func storedPath(of rev: RevID) -> RevisionPath? {
    revisions(of: rev, limit: .max)
  }

  /// `_revs_info` of `rev`: each stored revision from `rev` to its root with its status.
  ///
  /// ```swift
  /// for r in tree.revsInfo(of: rev) ?? [] { print(r.rev, r.status.rawValue) }
  /// ```
  /// - Returns: `nil` if the tree does not hold `rev`.
  public func revsInfo(of rev: RevID, limit: Int = .max) -> [Revision]? {
    guard let i = index(of: rev) else { return nil }
    return pathIndices(from: i).prefix(max(limit, 1)).map { revision(at: $0) }
  }

  /// The ancestors of `rev`, nearest first, excluding `rev` itself.
  ///
  /// ```swift
  /// let base = tree.ancestors(of: mine).first { $0.body != nil }
  /// ```
  public func ancestors(of rev: RevID) -> [Revision] {
    guard let i = index(of: rev) else { return [] }
    return pathIndices(from: i).dropFirst().map { revision(at: $0) }
  }

  /// The nearest revision that is `a`, `b` or an ancestor of both: the base of a three-way merge
  /// of two conflicting leaves.
  ///
  /// ```swift
  /// if let base = tree.nearestCommonAncestor(of: mine, and: theirs, withBody: true) { ... }
  /// ```
  /// - Parameter withBody: skip ancestors whose body is `missing`.
  /// - Returns: `nil` when either revision is unknown or the two are in disjoint subtrees.
  public func nearestCommonAncestor(of a: RevID, and b: RevID, withBody: Bool = false) -> Revision?
  {
    guard let ia = index(of: a), let ib = index(of: b) else { return nil }
    let pa = Set(pathIndices(from: ia))
    var c = ib
    while c >= 0 && !pa.contains(c) { c = nodes[Int(c)].parent }
    if withBody {
      while c >= 0 && nodes[Int(c)].state == .missing { c = nodes[Int(c)].parent }
    }
    return c >= 0 ? revision(at: c) : nil
  }

  /// The leaves at or below `rev`: what `open_revs=[rev]&latest=true` returns.
  ///
  /// ```swift
  /// tree.leaves(descendingFrom: rev).map(\.rev)
  /// ```
  public func leaves(descendingFrom rev: RevID) -> [Revision] {
    guard let i = index(of: rev) else { return [] }
    var out: [Revision] = []
    var stack: [Int32] = [i]
    var kids: [Int32] = []
    while let c = stack.popLast() {
      if nodes[Int(c)].isLeaf {
        out.append(revision(at: c))
        continue
      }
      kids.removeAll(keepingCapacity: true)
      var k = nodes[Int(c)].firstChild
      while k >= 0 {
        kids.append(k)
        k = nodes[Int(k)].nextSibling
      }
      stack.append(contentsOf: kids.reversed())
    }
    return out
  }

  /// `_revs_diff` for one document: which of `revs` the tree lacks and which leaves could be
  /// their ancestors.
  ///
  /// A revision held as any node (with or without a body) is not missing.
  ///
  /// ```swift
  /// let d = tree.revsDiff([try RevID("2-b"), try RevID("9-z")])
  /// ```
  public func revsDiff(_ revs: [RevID]) -> RevsDiff {
    var counts: [RevID: Int] = [:]
    for r in revs { counts[r, default: 0] += 1 }
    if let lookup {
      for (r, c) in counts {
        if let i = lookup.find(r.hash, in: nodes), nodes[Int(i)].pos == r.generation {
          counts[r] = c - 1
        }
      }
    } else {
      for n in nodes where n.isLive {
        let r = RevID(unchecked: n.pos, hash: n.hash)
        if let c = counts[r], c > 0 { counts[r] = c - 1 }
      }
    }
    var missing: [RevID] = []
    for (r, c) in counts where c > 0 {
      for _ in 0..<c { missing.append(r) }
    }
    missing.sort()
    guard let top = missing.last?.generation else {
      return RevsDiff(missing: [], possibleAncestors: [])
    }
    let ancestors = sortedLeafIndices().filter { nodes[Int($0)].pos < top }.map { rev(at: $0) }
    return RevsDiff(missing: missing, possibleAncestors: ancestors)
  }
}
