import Testing

@testable import RevTree

/// A new document's first path is laid down as a chain without planning a merge
/// (``RevisionTree/chain(_:deleted:body:revsLimit:)``): it must give what the general merge
/// gives, and leave a tree that later merges treat the same.
@Suite struct ChainMergeTests {
  /// The general merge of `path` into `tree`, as ``RevisionTree/merge(_:deleted:body:revsLimit:)``
  /// runs it when the chain does not apply.
  static func generalMerge(
    _ tree: inout RevisionTree, _ path: RevisionPath, deleted: Bool, body: UInt64, revsLimit: Int
  ) -> MergeOutcome {
    var entries: [PathEntry] = path.ids.reversed().map {
      PathEntry(hash: $0, state: .missing, body: 0, valueClass: 2)
    }
    entries[entries.count - 1].state = deleted ? .deleted : .available
    entries[entries.count - 1].body = body
    entries[entries.count - 1].valueClass = 1
    return tree.mergeEntries(start: path.rootGeneration, entries, revsLimit: revsLimit)
  }

  static func same(_ a: MergeOutcome, _ b: MergeOutcome) -> Bool {
    a.result == b.result && a.updated == b.updated && a.createdLeaf == b.createdLeaf
  }

  @Test("a first path gives the general merge's tree, outcome and encoding, and later merges agree")
  func agreesWithTheGeneralMerge() throws {
    var random = SystemRandomNumberGenerator()
    var chained = 0
    for round in 0..<3_000 {
      // Short names repeat now and then (a path with a hash twice takes the general merge);
      // every fifth path has digest ids.
      let length = Int.random(in: 1...20, using: &random)
      let names = (0..<length).map { _ in
        round % 5 == 0
          ? String(repeating: String(Int.random(in: 0...9, using: &random)), count: 32)
          : "r\(Int.random(in: 0..<(length * 3), using: &random))"
      }
      let generation = Int.random(in: 1...40, using: &random) + length
      let path = try RevisionPath(start: generation, ids: names.map { try RevHash($0) })
      let limit = Int.random(in: 1...25, using: &random)
      let deleted = Bool.random(using: &random)

      var fast = RevisionTree()
      let a = try fast.merge(path, deleted: deleted, body: 7, revsLimit: limit)
      var general = RevisionTree()
      let b = Self.generalMerge(&general, path, deleted: deleted, body: 7, revsLimit: limit)
      var probe = RevisionTree()
      if probe.chain(path, deleted: deleted, body: 7, revsLimit: limit) != nil { chained += 1 }
      #expect(Self.same(a, b))
      #expect(fast == general)
      #expect(fast.encoded() == general.encoded())
      #expect(fast.invariantViolations().isEmpty)
      #expect(fast.winner == general.winner)

      // A second path into both: a sibling branch off a random revision of the first, or an
      // unrelated root, merged with the same limit.
      let cut = Int.random(in: 0..<length, using: &random)
      let kept = Array(path.ids.dropFirst(cut))
      let extra = (0..<Int.random(in: 1...3, using: &random)).map {
        try! RevHash("n\(round)x\($0)")
      }
      let second = try RevisionPath(
        start: path.start - cut + extra.count,
        ids: Bool.random(using: &random) ? extra.reversed() + kept : extra.reversed())
      let c = try fast.merge(second, deleted: false, body: 9, revsLimit: limit)
      let d = try general.merge(second, deleted: false, body: 9, revsLimit: limit)
      #expect(Self.same(c, d))
      #expect(fast == general)
      #expect(fast.encoded() == general.encoded())
      #expect(fast.invariantViolations().isEmpty)
    }
    // Paths within the limit and without a repeated hash (about a fifth here) take the chain.
    #expect(chained > 300)
  }
}
