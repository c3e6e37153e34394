import Formats
import Foundation
import TestSupport
import Testing

@testable import Log

/// A reference tree in memory: RFC 6962's recursive definition, straight from the leaves.
struct ReferenceTree {
  var leaves: [MerkleTree.Hash]

  init(hashes: [MerkleTree.Hash]) { leaves = hashes }
  init(inputs: [[UInt8]]) { leaves = inputs.map { MerkleTree.leafHash($0) } }

  func mth(_ start: Int, _ end: Int) -> MerkleTree.Hash {
    let n = end - start
    if n == 0 { return MerkleTree.emptyRoot }
    if n == 1 { return leaves[start] }
    var k = 1
    while k * 2 < n { k *= 2 }
    return MerkleTree.nodeHash(mth(start, start + k), mth(start + k, end))
  }

  func node(_ level: Int, _ index: UInt64) -> MerkleTree.Hash {
    let start = Int(index) << level
    return mth(start, start + (1 << level))
  }

  func root(_ size: Int) -> MerkleTree.Hash { mth(0, size) }
}

func hex(_ text: String) -> [UInt8] { Hex.decode(text)! }

/// The test tree of the Certificate Transparency / Trillian reference implementations
/// (transparency-dev/merkle `testonly/constants.go` and `proof/verify_test.go`).
enum CTVectors {
  static let leafInputs: [[UInt8]] = [
    "", "00", "10", "2021", "3031", "40414243", "5051525354555657",
    "606162636465666768696a6b6c6d6e6f",
  ].map(hex)

  static let roots: [String] = [
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
    "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
    "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
    "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
    "4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
    "76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
    "ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
    "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328",
  ]

  static let leafHashes: [String] = [
    "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
    "96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
    "0298d122906dcfc10892cb53a73992fc5b9f493ea4c9badb27b791b4127a7fe7",
    "07506a85fd9dd2f120eb694f86011e5bb4662e5c415a62917033d4a9624487e7",
    "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
    "4271a26be0d8a84f0bd54c8c302e7cb3a3b5d1fa6780a40bcce2873477dab658",
    "b08693ec2e721597130641e8211e7eedccb4c26413963eee6c1e2ed16ffb1a5f",
    "46f6ffadd3d06a09ff3c5860d2755c8b9819db7df44251788c7d8e3180de8eb1",
  ]

  /// (leaf, 1-based as in the reference; size; path)
  static let inclusion: [(UInt64, UInt64, [String])] = [
    (1, 1, []),
    (
      1, 8,
      [
        "96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
        "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
        "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4",
      ]
    ),
    (
      6, 8,
      [
        "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
        "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
        "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
      ]
    ),
    (3, 3, ["fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125"]),
    (
      2, 5,
      [
        "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
        "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
        "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
      ]
    ),
  ]

  static let consistency: [(UInt64, UInt64, [String])] = [
    (1, 1, []),
    (
      1, 8,
      [
        "96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
        "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
        "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4",
      ]
    ),
    (
      6, 8,
      [
        "0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a",
        "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
        "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
      ]
    ),
    (
      2, 5,
      [
        "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
        "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
      ]
    ),
    (
      6, 7,
      [
        "0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a",
        "b08693ec2e721597130641e8211e7eedccb4c26413963eee6c1e2ed16ffb1a5f",
        "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
      ]
    ),
  ]
}

@Suite struct MerkleKnownAnswerTests {
  let tree = ReferenceTree(inputs: CTVectors.leafInputs)

  @Test("leaf hashes and the roots of every size match the reference implementation's")
  func roots() {
    #expect(tree.leaves.map(Hex.encode) == CTVectors.leafHashes)
    var frontier = MerkleFrontier()
    #expect(Hex.encode(frontier.root.bytes) == CTVectors.roots[0])
    for size in 1...8 {
      #expect(
        Hex.encode(MerkleTree.root(size: UInt64(size), node: tree.node)) == CTVectors.roots[size])
      frontier.append(MerkleDigest(tree.leaves[size - 1])!) { _, _, _ in }
      #expect(Hex.encode(frontier.root.bytes) == CTVectors.roots[size])
      let loaded = MerkleFrontier.load(size: UInt64(size)) { MerkleDigest(tree.node($0, $1))! }
      #expect(loaded == frontier)
    }
  }

  @Test("inclusion proofs are the reference's, and verify")
  func inclusion() {
    for (leaf, size, expected) in CTVectors.inclusion {
      let path = MerkleTree.inclusionPath(index: leaf - 1, size: size, node: tree.node)
      #expect(path.map(Hex.encode) == expected, "leaf \(leaf) of \(size)")
      #expect(
        MerkleTree.verifyInclusion(
          index: leaf - 1, size: size, leafHash: tree.leaves[Int(leaf - 1)], path: path,
          root: hex(CTVectors.roots[Int(size)])))
    }
  }

  @Test("consistency proofs are the reference's, and verify")
  func consistency() {
    for (old, new, expected) in CTVectors.consistency {
      let path = MerkleTree.consistencyPath(oldSize: old, newSize: new, node: tree.node)
      #expect(path.map(Hex.encode) == expected, "\(old) to \(new)")
      #expect(
        MerkleTree.verifyConsistency(
          oldSize: old, newSize: new, oldRoot: hex(CTVectors.roots[Int(old)]),
          newRoot: hex(CTVectors.roots[Int(new)]), path: path))
    }
  }

  @Test("post-order numbers count the nodes completed before")
  func postorder() {
    var counter: UInt64 = 0
    var frontier = MerkleFrontier()
    for i in 0..<300 {
      frontier.append(MerkleDigest(MerkleTree.leafHash([UInt8(i & 0xFF)]))!) { level, index, _ in
        #expect(MerkleTree.postorderIndex(level: level, index: index) == counter)
        counter += 1
      }
    }
  }
}

@Suite struct MerklePropertyTests {
  @Test("every inclusion proof verifies, and fails for any changed byte, index or size")
  func inclusionProperties() {
    var rng = SplitMix64(seed: 0x6962)
    for _ in 0..<40 {
      let size = Int.random(in: 1...200, using: &rng)
      let tree = ReferenceTree(inputs: (0..<size).map { i in Array("leaf \(i)".utf8) })
      let root = tree.root(size)
      for _ in 0..<5 {
        let index = UInt64.random(in: 0..<UInt64(size), using: &rng)
        let leaf = tree.leaves[Int(index)]
        let path = MerkleTree.inclusionPath(index: index, size: UInt64(size), node: tree.node)
        #expect(
          MerkleTree.verifyInclusion(
            index: index, size: UInt64(size), leafHash: leaf, path: path, root: root))
        for i in path.indices {
          for byte in [0, 13, 31] {
            var changed = path
            changed[i][byte] ^= 1
            #expect(
              !MerkleTree.verifyInclusion(
                index: index, size: UInt64(size), leafHash: leaf, path: changed, root: root))
          }
        }
        var changedLeaf = leaf
        changedLeaf[7] ^= 0x80
        #expect(
          !MerkleTree.verifyInclusion(
            index: index, size: UInt64(size), leafHash: changedLeaf, path: path, root: root))
        var changedRoot = root
        changedRoot[31] ^= 1
        #expect(
          !MerkleTree.verifyInclusion(
            index: index, size: UInt64(size), leafHash: leaf, path: path, root: changedRoot))
        if size > 1 {
          let other = (index + 1) % UInt64(size)
          #expect(
            !MerkleTree.verifyInclusion(
              index: other, size: UInt64(size), leafHash: leaf, path: path, root: root))
        }
        #expect(
          !MerkleTree.verifyInclusion(
            index: index, size: UInt64(size) * 2 + 1, leafHash: leaf, path: path, root: root))
        #expect(
          !MerkleTree.verifyInclusion(
            index: index, size: UInt64(size), leafHash: leaf, path: path + [root], root: root))
      }
    }
  }

  @Test("every consistency proof verifies, and fails for any changed byte or size")
  func consistencyProperties() {
    var rng = SplitMix64(seed: 0x9162)
    for _ in 0..<60 {
      let new = Int.random(in: 2...200, using: &rng)
      let old = Int.random(in: 1..<new, using: &rng)
      let tree = ReferenceTree(inputs: (0..<new).map { i in Array("entry \(i)".utf8) })
      let oldRoot = tree.root(old)
      let newRoot = tree.root(new)
      let path = MerkleTree.consistencyPath(
        oldSize: UInt64(old), newSize: UInt64(new), node: tree.node)
      #expect(
        MerkleTree.verifyConsistency(
          oldSize: UInt64(old), newSize: UInt64(new), oldRoot: oldRoot, newRoot: newRoot,
          path: path))
      for i in path.indices {
        for byte in [0, 20, 31] {
          var changed = path
          changed[i][byte] ^= 4
          #expect(
            !MerkleTree.verifyConsistency(
              oldSize: UInt64(old), newSize: UInt64(new), oldRoot: oldRoot, newRoot: newRoot,
              path: changed))
        }
      }
      var changedOld = oldRoot
      changedOld[0] ^= 1
      #expect(
        !MerkleTree.verifyConsistency(
          oldSize: UInt64(old), newSize: UInt64(new), oldRoot: changedOld, newRoot: newRoot,
          path: path))
      #expect(
        !MerkleTree.verifyConsistency(
          oldSize: UInt64(old), newSize: UInt64(new), oldRoot: newRoot, newRoot: oldRoot,
          path: path))
      #expect(
        !MerkleTree.verifyConsistency(
          oldSize: UInt64(old), newSize: UInt64(new), oldRoot: oldRoot, newRoot: newRoot,
          path: Array(path.dropLast())))
      // A tree whose first `old` leaves differ does not extend the old one.
      var forked = tree
      forked.leaves[Int.random(in: 0..<old, using: &rng)][3] ^= 1
      let forkedPath = MerkleTree.consistencyPath(
        oldSize: UInt64(old), newSize: UInt64(new), node: forked.node)
      #expect(
        !MerkleTree.verifyConsistency(
          oldSize: UInt64(old), newSize: UInt64(new), oldRoot: oldRoot,
          newRoot: forked.root(new), path: forkedPath))
    }
  }
}

@Suite struct LogMerkleTests {
  /// The tree of a log, recomputed from its leaves as the proofs give them.
  func reference(_ log: EventLog) throws -> ReferenceTree {
    let size = try log.committedPosition.rawValue
    var leaves: [MerkleTree.Hash] = []
    for p in stride(from: 1, through: size, by: 1) {
      let proof = try log.inclusionProof(position: LogPosition(p))
      #expect(Array(proof.leaf.prefix(8)) == p.bigEndianBytes)
      leaves.append(MerkleTree.leafHash(proof.leaf))
    }
    return ReferenceTree(hashes: leaves)
  }

  func fill(_ log: EventLog, count: Int, seed: UInt64 = 1) throws {
    var rng = SplitMix64(seed: seed)
    var written = 0
    while written < count {
      let n = min(count - written, Int.random(in: 1...40, using: &rng))
      if n == 1 {
        try log.append([event(written, stream: "s\(written % 7)")])
      } else if Bool.random(using: &rng) {
        try log.append((0..<n).map { event(written + $0, stream: "s\((written + $0) % 7)") })
      } else {
        // The batch path that checks expected versions.
        try log.write { txn in
          for i in 0..<n {
            let stream = "x\(written + i)"
            try txn.append(contentsOf: [event(written + i, stream: stream, expected: .noStream)])
          }
        }
      }
      written += n
    }
  }

  @Test("the stored tree's head and proofs match the tree recomputed from the events")
  func headAndProofs() throws {
    let dir = TemporaryDirectory()
    let log = try EventLog(directory: dir.path)
    defer { log.close() }
    #expect(try log.treeHead() == EventLog.TreeHead(size: 0, root: MerkleTree.emptyRoot))
    try fill(log, count: 300)
    let tree = try reference(log)
    let head = try log.treeHead()
    #expect(head.size == 300)
    #expect(head.root == tree.root(300))
    var rng = SplitMix64(seed: 7)
    for _ in 0..<40 {
      let size = UInt64.random(in: 1...300, using: &rng)
      let position = UInt64.random(in: 1...size, using: &rng)
      let proof = try log.inclusionProof(position: LogPosition(position), treeSize: size)
      #expect(proof.root == tree.root(Int(size)))
      #expect(try log.treeRoot(size: size) == tree.root(Int(size)))
      let old = UInt64.random(in: 0...size, using: &rng)
      let path = try log.consistencyProof(oldSize: old, newSize: size)
      #expect(
        MerkleTree.verifyConsistency(
          oldSize: old, newSize: size, oldRoot: tree.root(Int(old)), newRoot: tree.root(Int(size)),
          path: path))
    }
    let event = EventLog.event(fromLeaf: try log.inclusionProof(position: 5).leaf)
    #expect(event == (try log.read(from: 5, limit: 1)).first)
    #expect(try log.verify().isValid)
    #expect(throws: LogError.self) { try log.inclusionProof(position: 301) }
    #expect(throws: LogError.self) { try log.inclusionProof(position: 10, treeSize: 9) }
  }

  @Test("a failed savepoint, a failed batch and async group commits leave the tree in step")
  func failuresAndGroups() async throws {
    let dir = TemporaryDirectory()
    var options = EventLog.Options()
    options.durability = .groupCommit
    let log = try EventLog(directory: dir.path, options: options)
    defer { log.close() }
    try await log.append([event(0), event(1)])
    struct Refused: Error {}
    try await log.write { txn in
      try txn.append(event(2))
      _ = try? txn.savepoint { child in
        try child.append(contentsOf: (3..<40).map { event($0) })
        throw Refused()
      }
      try txn.append(event(3))
    }
    await #expect(throws: LogError.self) {
      try await log.append([
        event(4, stream: "t", expected: .noStream), event(5, stream: "t", expected: .exactly(9)),
      ])
    }
    try await withThrowingTaskGroup(of: Void.self) { group in
      for i in 0..<64 {
        group.addTask { try await log.append([event(100 + i, stream: "g\(i % 5)")]) }
      }
      try await group.waitForAll()
    }
    let size = try log.committedPosition.rawValue
    #expect(size == 4 + 64)
    #expect(try log.treeHead().root == (try reference(log)).root(Int(size)))
    #expect(try log.verify().isValid)
  }

  @Test(
    "large batches hash their leaves on a helper thread: the same tree, through failed batches, savepoints and a full map"
  )
  func largeBatches() throws {
    let dir = TemporaryDirectory()
    var options = EventLog.Options()
    options.durability = .unsynced
    // Small enough that the first large batches fill the map mid-batch: the batch is abandoned,
    // the map grows and the batch runs again.
    options.mapSize = 256 << 10
    let log = try EventLog(directory: dir.path, options: options)
    defer { log.close() }
    let big = [UInt8](repeating: 0x5A, count: 700)
    var written = 0
    var rng = SplitMix64(seed: 3)
    for round in 0..<12 {
      let n = Int.random(in: LeafHasher.minimumBatch...400, using: &rng)
      let events = (0..<n).map { i in
        NewEvent(
          type: "big", stream: "r\((written + i) % 11)", actor: "tester",
          payload: big + Array("\(written + i)".utf8))
      }
      if round % 3 == 2 {
        // The batch path that checks expected versions.
        let checked = events.enumerated().map { i, e in
          NewEvent(
            type: e.type, stream: "c\(written + i)", actor: e.actor, payload: e.payload,
            expectedVersion: .noStream)
        }
        try log.append(checked)
      } else {
        try log.append(events)
      }
      written += n
      // A large batch in a savepoint that fails: nothing of it stays, in the log or the tree.
      struct Refused: Error {}
      try log.write { txn in
        _ = try? txn.savepoint { child in
          try child.append(contentsOf: (0..<100).map { event(9_000 + $0, stream: "gone") })
          throw Refused()
        }
        try txn.append(event(written))
      }
      written += 1
      // A large batch that fails after the checks: one of its streams' heads is as expected,
      // the other not, so nothing is written.
      #expect(throws: LogError.self) {
        try log.append(
          (0..<80).map { event($0, stream: "e\($0)", expected: .noStream) }
            + [event(0, stream: "r0", expected: .noStream)])
      }
    }
    #expect(log.env.mapSize > 256 << 10)
    let size = try log.committedPosition.rawValue
    #expect(size == UInt64(written))
    let tree = try reference(log)
    #expect(try log.treeHead() == EventLog.TreeHead(size: size, root: tree.root(Int(size))))
    #expect(try log.verify().isValid)
    // The stored subtrees the helper made serve proofs like those made on the writer's thread.
    for p in stride(from: 1, through: size, by: 97) {
      #expect(try log.inclusionProof(position: LogPosition(p)).root == tree.root(Int(size)))
    }
  }

  @Test(
    "a large batch after one that failed part-way in the same transaction: no commit, tree right")
  func largeBatchAfterFailure() throws {
    let dir = TemporaryDirectory()
    let log = try EventLog(directory: dir.path)
    defer { log.close() }
    try log.append([event(0, stream: "bad")])
    // A damaged head: a batch reaching this stream fails after writing the events before it.
    try log.write { txn throws in
      try txn.raw.put(log.dbs.streams, StreamKey.prefix("bad"), [1, 2, 3])
    }
    let failing = (1...100).map { event($0, stream: $0 == 60 ? "bad" : "ok\($0)") }
    let good = (101...200).map { event($0, stream: "ok\($0)") }
    // The second batch of the transaction starts where the first left the next position, ahead
    // of the tree's frontier: it must not hand the hasher positions that do not follow it.
    #expect(throws: LogError.self) {
      try log.write { txn throws in
        _ = try? txn.append(contentsOf: failing)
        try txn.append(contentsOf: good)
      }
    }
    #expect(try log.committedPosition.rawValue == 1)
    try log.append(good)
    let tree = try reference(log)
    #expect(try log.treeHead() == EventLog.TreeHead(size: 101, root: tree.root(101)))
  }

  @Test("the leaf hasher's thread ends when idle and the next large batch starts another")
  func hasherIdle() throws {
    let dir = TemporaryDirectory()
    let log = try EventLog(directory: dir.path)
    defer { log.close() }
    let batch = { (start: Int) in (0..<100).map { event(start + $0, stream: "s\($0 % 9)") } }
    try log.append(batch(0))
    #expect(log.writer.leafHasher?.isRunning == true)
    Thread.sleep(forTimeInterval: 1.4)
    #expect(log.writer.leafHasher?.isRunning == false)
    try log.append(batch(100))
    #expect(log.writer.leafHasher?.isRunning == true)
    try log.append(batch(200))
    let tree = try reference(log)
    #expect(try log.treeHead() == EventLog.TreeHead(size: 300, root: tree.root(300)))
    #expect(try log.verify().isValid)
  }

  @Test("the tree survives reopening, and a log without one gets it on a writable open")
  func upgrade() throws {
    let dir = TemporaryDirectory()
    var log = try EventLog(directory: dir.path)
    try fill(log, count: 70)
    let head = try log.treeHead()
    // Take the tree away, as a log made before it has none.
    try log.write { txn in
      try txn.raw.delete(log.dbs.meta, EventLog.merkleHeadKey)
      try txn.raw.clear(log.dbs.merkle)
    }
    log.close()
    var readOnly = EventLog.Options()
    readOnly.readOnly = true
    let reader = try EventLog(directory: dir.path, options: readOnly)
    #expect(throws: LogError.self) { try reader.treeHead() }
    reader.close()
    log = try EventLog(directory: dir.path)
    #expect(try log.treeHead() == head)
    try log.append([event(70)])
    log.close()
    log = try EventLog(directory: dir.path)
    defer { log.close() }
    try log.append([event(71)])
    #expect(try log.treeHead().root == (try reference(log)).root(72))
    #expect(try log.verify().isValid)
  }

  @Test("appends with the tree turned off leave it behind, and the next open builds it")
  func treeOff() throws {
    let dir = TemporaryDirectory()
    var log = try EventLog(directory: dir.path)
    try fill(log, count: 30)
    log.close()
    var off = EventLog.Options()
    off.merkleTree = false
    log = try EventLog(directory: dir.path, options: off)
    try log.append((0..<20).map { event($0, stream: "") })
    try log.append((20..<50).map { event($0, stream: "off\($0 % 3)") })
    for i in 50..<80 { try log.append([event(i, stream: "off")]) }
    #expect(try log.treeHead().size == 30)
    log.close()
    log = try EventLog(directory: dir.path)
    defer { log.close() }
    #expect(try log.treeHead().size == 110)
    #expect(try log.treeHead().root == (try reference(log)).root(110))
    #expect(try log.verify().isValid)
  }

  /// Rewrites the record at `position` in place with a changed payload and a valid checksum,
  /// as someone with the files could.
  func rewrite(_ log: EventLog, position: UInt64) throws {
    try log.write { txn in
      var record = try #require(try txn.raw.record(log.dbs.events, at: position))
      record[record.count - 5] ^= 0x20  // the payload's last byte
      let body = Array(record.dropLast(4))
      let crc = CRC32C.finalize(
        body.withUnsafeBytes {
          CRC32C.update(CRC32C.update(CRC32C.initial, bigEndian: position), $0)
        })
      record = body + withUnsafeBytes(of: crc.littleEndian) { Array($0) }
      try txn.raw.put(log.dbs.events, position.bigEndianBytes, record)
    }
  }

  @Test(
    "an event rewritten in LMDB with a valid checksum is found by verify", arguments: [5, 37, 66])
  func rewrittenEvent(position: UInt64) throws {
    let dir = TemporaryDirectory()
    let log = try EventLog(directory: dir.path)
    defer { log.close() }
    try fill(log, count: 70)
    let head = try log.treeHead()
    try rewrite(log, position: position)
    let report = try log.verify(head: head)
    // The checksum holds: only the tree sees the change.
    #expect(!report.problems.contains { $0.contains("checksum") })
    let tree = try #require(report.problems.first { $0.contains("disagrees with its Merkle tree") })
    if position <= 64 {
      let chunk = (position - 1) / 16 * 16 + 1
      #expect(tree.contains("from position \(chunk)"))
    } else {
      #expect(tree.contains("after position 64"))
    }
    #expect(report.problems.contains { $0.contains("does not match the head") })
  }

  @Test("a tree rebuilt over changed events still fails the head taken before")
  func rebuiltTree() throws {
    let dir = TemporaryDirectory()
    var log = try EventLog(directory: dir.path)
    try fill(log, count: 40)
    let head = try log.treeHead()
    try rewrite(log, position: 3)
    try log.write { txn in
      try txn.raw.delete(log.dbs.meta, EventLog.merkleHeadKey)
      try txn.raw.clear(log.dbs.merkle)
    }
    log.close()
    log = try EventLog(directory: dir.path)
    defer { log.close() }
    #expect(try log.verify().isValid)  // consistent with itself...
    let report = try log.verify(head: head)  // ...but not with what was published
    #expect(report.problems.count == 1)
    #expect(report.problems[0].contains("does not match the head"))
    #expect(try log.treeRoot(size: 40) != head.root)
  }

  @Test("a log truncated and re-appended fails consistency with the head taken before")
  func truncated() throws {
    let dir = TemporaryDirectory()
    var log = try EventLog(directory: dir.path)
    try log.append((0..<30).map { event($0, stream: "") })
    let head = try log.treeHead()
    let head20 = EventLog.TreeHead(size: 20, root: try log.treeRoot(size: 20))
    // Remove the last ten events and the tree, as someone with the files could.
    try log.write { txn in
      for p in UInt64(21)...30 { try txn.raw.delete(log.dbs.events, p.bigEndianBytes) }
      try txn.raw.delete(log.dbs.meta, EventLog.merkleHeadKey)
      try txn.raw.clear(log.dbs.merkle)
    }
    log.close()
    log = try EventLog(directory: dir.path)
    defer { log.close() }
    try log.append((0..<15).map { event(100 + $0, stream: "") })
    let now = try log.treeHead()
    #expect(now.size == 35)
    let path = try log.consistencyProof(oldSize: head.size)
    #expect(
      !MerkleTree.verifyConsistency(
        oldSize: head.size, newSize: now.size, oldRoot: head.root, newRoot: now.root, path: path))
    #expect(try log.treeRoot(size: head.size) != head.root)
    #expect(try log.verify(head: head).problems.contains { $0.contains("does not match the head") })
    // The first 20 events are untouched: a head of them is still extended.
    #expect(
      MerkleTree.verifyConsistency(
        oldSize: 20, newSize: now.size, oldRoot: head20.root, newRoot: now.root,
        path: try log.consistencyProof(oldSize: 20)))
  }

  @Test("a log whose tree covers more events than it has refuses writes")
  func removedEventsRefuseWrites() throws {
    let dir = TemporaryDirectory()
    let log = try EventLog(directory: dir.path)
    defer { log.close() }
    try log.append((0..<20).map { event($0, stream: "") })
    try log.write { txn in
      for p in UInt64(18)...20 { try txn.raw.delete(log.dbs.events, p.bigEndianBytes) }
    }
    #expect(try !log.verify().isValid)
    // Another process's view: the writer reloads its state.
    log.writer.cacheValid = false
    #expect(throws: LogError.self) { try log.append([event(99, stream: "")]) }
  }

  @Test("signed heads verify with the log's key, and not when changed")
  func signedHeads() throws {
    let dir = TemporaryDirectory()
    let log = try EventLog(directory: dir.path)
    defer { log.close() }
    try fill(log, count: 20)
    let (signed, created) = try log.signedTreeHead()
    #expect(created)
    let (key, again) = try log.publicKey()
    #expect(!again)
    #expect(signed.publicKey == key)
    #expect(signed.size == 20)
    #expect(signed.root == (try log.treeHead()).root)
    #expect(signed.isSigned(by: key))
    var changed = signed
    changed.size = 19
    #expect(!changed.isSigned(by: key))
    changed = signed
    changed.root[0] ^= 1
    #expect(!changed.isSigned(by: key))
    changed = signed
    changed.time = "2000-01-01T00:00:00.000Z"
    #expect(!changed.isSigned(by: key))
    let other = try EventLog(directory: dir.sub("other"))
    defer { other.close() }
    #expect(!signed.isSigned(by: try other.publicKey().key))
    let attributes = try FileManager.default.attributesOfItem(atPath: dir.path + "/log.key")
    #expect((attributes[.posixPermissions] as? Int) == 0o600)
    #expect(
      SignedTreeHead.timeString(Date(timeIntervalSince1970: 1_795_000_000.123))
        == "2026-11-18T11:06:40.123Z")
    #expect(SignedTreeHead.timeString(Date(timeIntervalSince1970: 0)) == "1970-01-01T00:00:00.000Z")
  }
}
