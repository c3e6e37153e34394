// Structural invariants of a revision tree, checked by tests after every mutation.
//
// Worked example of what is checked, for
//
//     1-a ── 2-b ─┬─ 3-c
//                 └─ 3-d
//
// roots [1-a] sorted by (generation, hash); 2-b's parent is 1-a and its generation is 1-a's + 1;
// 2-b's children 3-c, 3-d strictly increasing by hash bytes; every live slot reachable exactly
// once from a root; 2 leaves counted; the hash index (when built) maps a, b, c, d to their slots.

extension RevisionTree {
  /// Every broken structural invariant, described; empty for a sound tree.
  ///
  /// ```swift
  /// #expect(tree.invariantViolations() == [])
  /// ```
  public func invariantViolations() -> [String] {
    var problems: [String] = []
    var seen = [Bool](repeating: false, count: nodes.count)
    var reached = 0
    var leaves = 0
    var previousRoot: Int32 = -1
    for r in roots {
      guard r >= 0, Int(r) < nodes.count else {
        problems.append("root index \(r) out of range")
        continue
      }
      let n = nodes[Int(r)]
      if n.parent != -1 { problems.append("root \(rev(at: r)) has a parent") }
      if n.nextSibling != -1 { problems.append("root \(rev(at: r)) has a sibling link") }
      if previousRoot >= 0 {
        let p = nodes[Int(previousRoot)]
        if !(p.pos < n.pos || (p.pos == n.pos && RevHash.compare(p.hash, n.hash) < 0)) {
          problems.append("roots out of order at \(rev(at: r))")
        }
      }
      previousRoot = r
    }
    var stack: [Int32] = roots.filter { $0 >= 0 && Int($0) < nodes.count }
    while let i = stack.popLast() {
      if seen[Int(i)] {
        problems.append("slot \(i) reached twice")
        continue
      }
      seen[Int(i)] = true
      reached += 1
      let n = nodes[Int(i)]
      if !n.isLive { problems.append("dead slot \(i) is linked") }
      if n.pos < 1 || n.pos > RevID.maxGeneration {
        problems.append("generation \(n.pos) out of range")
      }
      if n.state == .missing && n.body != 0 {
        problems.append("missing node \(rev(at: i)) has a body")
      }
      if n.isLeaf { leaves += 1 }
      var c = n.firstChild
      var previous: Int32 = -1
      var guardCount = 0
      while c >= 0 {
        guardCount += 1
        if Int(c) >= nodes.count || guardCount > nodes.count {
          problems.append("bad child link under \(rev(at: i))")
          break
        }
        let m = nodes[Int(c)]
        if m.parent != i { problems.append("\(rev(at: c)) has wrong parent") }
        if m.pos != n.pos + 1 { problems.append("\(rev(at: c)) generation is not parent's + 1") }
        if previous >= 0 && RevHash.compare(nodes[Int(previous)].hash, m.hash) >= 0 {
          problems.append("children of \(rev(at: i)) out of order")
        }
        previous = c
        stack.append(c)
        c = m.nextSibling
      }
    }
    let live = nodes.reduce(0) { $0 + ($1.isLive ? 1 : 0) }
    if live != reached { problems.append("\(live) live slots but \(reached) reachable") }
    if nodes.count - live != deadCount { problems.append("dead count \(deadCount) is wrong") }
    if leaves != leafCount { problems.append("leaf count \(leafCount), actual \(leaves)") }
    if let lookup {
      if lookup.count != live {
        problems.append("index has \(lookup.count) entries for \(live) nodes")
      }
      for i in lookup.slots
      where Int(i) >= nodes.count || !nodes[Int(i)].isLive
        || lookup.find(nodes[Int(i)].hash, in: nodes) != i
      {
        problems.append("index entry for slot \(i) is stale")
      }
    }
    return problems
  }

  /// Traps with a description if a structural invariant is broken (for tests).
  ///
  /// ```swift
  /// try tree.merge(path, deleted: false, body: 1, revsLimit: 10)
  /// tree.checkInvariants()
  /// ```
  public func checkInvariants() {
    let problems = invariantViolations()
    precondition(
      problems.isEmpty, "RevisionTree invariants broken: \(problems.joined(separator: "; "))")
  }
}
