import JSON
import RevTree
import TestSupport
import Testing

/// The storage encoding and the decoder's errors, pinned to what the original (unoptimized)
/// encoder and decoder produced.
@Suite struct EncodingGoldenTests {
  /// Branches, text hashes, deletions, several roots after stemming, generations above 128.
  static func sampleTree() throws -> RevisionTree {
    var t = RevisionTree()
    var rng = SplitMix64(seed: 77)
    var leaves: [RevID] = []
    for step in 0..<60 {
      let base =
        leaves.isEmpty || rng.next() % 6 == 0
        ? nil : leaves[Int(rng.next() % UInt64(leaves.count))]
      let start = (base?.generation ?? Int(rng.next() % 300)) + 1
      let h =
        step % 7 == 3 ? try RevHash("t\(step)-x.y_z~") : RevHash(high: rng.next(), low: rng.next())
      let ids = base.map { [h, $0.hash] } ?? [h]
      try t.merge(
        try RevisionPath(start: start, ids: ids), deleted: step % 5 == 0,
        body: rng.next() >> (rng.next() % 64), revsLimit: 4)
      leaves = t.leaves.map(\.rev)
    }
    return t
  }

  @Test("encoding, every truncation and 3,000 damaged copies decode as before")
  func fingerprint() throws {
    let t = try Self.sampleTree()
    t.checkInvariants()
    #expect(t.count == 37)
    #expect(t.rootRevisions.count > 1)
    let bytes = t.encoded()
    #expect(bytes.count == 838)
    #expect(MD5.hash(bytes).description == "8fd47f00e73d04ff4ec87d2a96affc34")
    var f = FNV1a()
    for n in 0...bytes.count {
      do {
        f.add("ok \(try RevisionTree(decoding: bytes[0..<n]).count)")
      } catch {
        f.add("\(error)")
      }
    }
    var rng = SplitMix64(seed: 5)
    for _ in 0..<3_000 {
      var b = bytes
      b[Int(rng.next() % UInt64(b.count))] = UInt8(truncatingIfNeeded: rng.next())
      do {
        let d = try RevisionTree(decoding: b)
        f.add("ok \(d.count) \(d.encoded() == b)")
      } catch {
        f.add("\(error)")
      }
    }
    // FNV1a (JSONCorpus.swift) adds a separator after each string: the same fold as above.
    #expect(String(f.state, radix: 16) == "fb93705a97f2bdfc")
  }
}
