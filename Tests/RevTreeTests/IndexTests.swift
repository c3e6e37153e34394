import JSON
import RevTree
import TestSupport
import Testing

/// The tree's hash index (an open-addressing table) under insertions, removals by stemming,
/// compaction and decoding.
@Suite struct IndexTests {
  @Test("a 3,000-edit history stemmed to 50 finds exactly its last 50 revisions")
  func longStemmedChain() throws {
    var t = RevisionTree()
    var revs: [RevID] = []
    var parent: RevID? = nil
    for step in 0..<3_000 {
      let body = JSONValue.object(JSONObject(["n": .number(JSONNumber(Int64(step)))]))
      let r = try t.edit(
        parent: parent, deleted: false, content: body, body: UInt64(step), revsLimit: 50)
      revs.append(r)
      parent = r
      if step % 250 == 0 {
        t.checkInvariants()
        t = try RevisionTree(decoding: t.encoded())
      }
    }
    t.checkInvariants()
    #expect(t.count == 50)
    for (k, r) in revs.enumerated() { #expect(t.contains(r) == (k >= revs.count - 50)) }
    let decoded = try RevisionTree(decoding: t.encoded())
    for (k, r) in revs.enumerated() { #expect(decoded.contains(r) == (k >= revs.count - 50)) }
  }

  @Test("many branches stemmed and merged again keep the index consistent", arguments: 0..<5)
  func branches(seed: UInt64) throws {
    var rng = SplitMix64(seed: 1000 + seed)
    var t = RevisionTree()
    var leaves: [RevID] = []
    for step in 0..<600 {
      let base =
        leaves.isEmpty || rng.next() % 5 == 0 ? nil : leaves[Int(rng.next() % UInt64(leaves.count))]
      let start = (base?.generation ?? 0) + 1
      let h = RevHash(high: rng.next(), low: rng.next())
      let ids = base.map { [h, $0.hash] } ?? [h]
      t.add(try RevisionPath(start: start, ids: ids), body: UInt64(step), limit: 3)
      leaves = t.leaves.map(\.rev)
      if step % 100 == 99 { t = try RevisionTree(decoding: t.encoded()) }
    }
    t.checkInvariants()
    for r in leaves { #expect(t.contains(r)) }
  }
}
