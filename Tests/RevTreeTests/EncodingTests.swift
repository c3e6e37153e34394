import JSON
import RevTree
import TestSupport
import Testing

@Suite struct EncodingTests {
  func sampleTree() -> RevisionTree {
    var t = RevisionTree()
    t.add(path(from: 1, "a", "b", "c"), body: 300)
    t.add(path(from: 1, "a", "b", "d"), deleted: true, body: 7)
    t.add(try! RevisionPath(start: 2, ids: [MD5.hash([1]), MD5.hash([2])]), body: UInt64.max)
    return t
  }

  @Test("encode then decode gives an equal tree")
  func roundTrip() throws {
    let t = sampleTree()
    let bytes = t.encoded()
    #expect(bytes.first == RevisionTree.encodingVersion)
    let u = try RevisionTree(decoding: bytes)
    u.checkInvariants()
    #expect(u == t)
    #expect(u.leaves == t.leaves)
    #expect(u.encoded() == bytes)
    #expect(try RevisionTree(decoding: RevisionTree().encoded()) == RevisionTree())
  }

  @Test("a digest hash takes 16 raw bytes")
  func compactDigest() throws {
    var t = RevisionTree()
    t.add(try RevisionPath(start: 2, ids: [MD5.hash([1]), MD5.hash([2])]), body: 7)
    // version, count, (flags, children, pos, 16) + (flags, children, 16, body)
    #expect(t.encoded().count == 2 + 19 + 19)
  }

  @Test("a decoded tree accepts merges like the original")
  func decodedMerges() throws {
    var t = sampleTree()
    var u = try RevisionTree(decoding: t.encoded())
    let p = path(from: 1, "a", "b", "c", "e")
    #expect(t.add(p) == u.add(p))
    #expect(t == u)
  }

  @Test(
    "every truncation and every single-byte corruption is an error or a valid tree, never a trap")
  func corruption() {
    let bytes = sampleTree().encoded()
    for n in 0..<bytes.count {
      #expect(throws: RevTreeDecodingError.self) { try RevisionTree(decoding: bytes[0..<n]) }
    }
    for i in bytes.indices {
      for v: UInt8 in [0x00, 0x01, 0x7F, 0x80, 0xFF, bytes[i] ^ 0x04] {
        var b = bytes
        b[i] = v
        if let t = try? RevisionTree(decoding: b) {
          #expect(t.invariantViolations() == [])
        }
      }
    }
  }

  @Test("specific corruptions have specific errors")
  func specificErrors() {
    #expect(throws: RevTreeDecodingError.empty) { try RevisionTree(decoding: []) }
    #expect(throws: RevTreeDecodingError.unsupportedVersion(9)) {
      try RevisionTree(decoding: [9, 0])
    }
    #expect(throws: RevTreeDecodingError.trailingBytes(offset: 2)) {
      try RevisionTree(decoding: [1, 0, 0])
    }
    #expect(throws: RevTreeDecodingError.malformedVarint(offset: 1)) {
      try RevisionTree(decoding: [1] + [UInt8](repeating: 0xFF, count: 11))
    }
    #expect(throws: RevTreeDecodingError.truncated(offset: 1)) {
      try RevisionTree(decoding: [1, 0xFF, 0xFF, 0xFF, 0x0F])
    }
    // one root, generation 0
    #expect(throws: RevTreeDecodingError.generationOutOfRange(offset: 4)) {
      try RevisionTree(decoding: [1, 1, 0, 0, 0] + [UInt8](repeating: 0, count: 16))
    }
    #expect(throws: RevTreeDecodingError.invalidFlags(offset: 2)) {
      try RevisionTree(decoding: [1, 1, 0x40, 0, 1] + [UInt8](repeating: 0, count: 16))
    }
  }

  @Test("random bytes never trap the decoder")
  func fuzz() {
    var rng = SplitMix64(seed: 5)
    for _ in 0..<20_000 {
      let n = Int(rng.next() % 60)
      var bytes = (0..<n).map { _ in
        UInt8(truncatingIfNeeded: rng.next() % 4 == 0 ? rng.next() : rng.next() % 3)
      }
      if !bytes.isEmpty { bytes[0] = 1 }
      if let t = try? RevisionTree(decoding: bytes) {
        #expect(t.invariantViolations() == [])
      }
    }
  }
}
