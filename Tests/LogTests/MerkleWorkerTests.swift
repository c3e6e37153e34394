import Foundation
import TestSupport
import Testing

@testable import Log

/// Large transactions hand their Merkle leaves to the hashing worker (``MerkleHashWorker``):
/// the tree must come out as when the writer hashes each leaf, and failures must leave it as
/// before.
@Suite struct MerkleWorkerTests {
  /// The tree recomputed from the records as stored, leaf by leaf, in memory.
  func reference(_ log: EventLog) throws -> ReferenceTree {
    try log.read { txn in
      let size = try txn.log.committedPosition.rawValue
      var leaves: [MerkleTree.Hash] = []
      leaves.reserveCapacity(Int(size))
      for p in stride(from: 1, through: size, by: 1) {
        let record = try #require(try txn.raw.record(txn.log.dbs.events, at: p))
        leaves.append(MerkleTree.leafHash(p.bigEndianBytes + record))
      }
      return ReferenceTree(hashes: leaves)
    }
  }

  /// Checks the stored head, proofs at random positions and sizes, and `verify`, against the
  /// reference tree.
  func expectTree(
    _ log: EventLog, count: Int, sourceLocation: SourceLocation = #_sourceLocation
  ) throws {
    try expectDense(log, count: count, sourceLocation: sourceLocation)
    let tree = try reference(log)
    let head = try log.treeHead()
    #expect(head.size == UInt64(count), sourceLocation: sourceLocation)
    #expect(head.root == tree.root(count), sourceLocation: sourceLocation)
    #expect(log.writer.frontier.root.bytes == head.root, sourceLocation: sourceLocation)
    var rng = SplitMix64(seed: UInt64(count))
    for _ in 0..<30 {
      let size = UInt64.random(in: 1...UInt64(count), using: &rng)
      let position = UInt64.random(in: 1...size, using: &rng)
      let proof = try log.inclusionProof(position: LogPosition(position), treeSize: size)
      #expect(proof.root == tree.root(Int(size)), sourceLocation: sourceLocation)
      let old = UInt64.random(in: 0...size, using: &rng)
      #expect(
        MerkleTree.verifyConsistency(
          oldSize: old, newSize: size, oldRoot: tree.root(Int(old)), newRoot: tree.root(Int(size)),
          path: try log.consistencyProof(oldSize: old, newSize: size)),
        sourceLocation: sourceLocation)
    }
    let report = try log.verify()
    #expect(report.isValid, "\(report.problems)", sourceLocation: sourceLocation)
  }

  /// An event whose payload is `size` bytes.
  func sized(_ n: Int, _ size: Int, stream: String = "s", expected: ExpectedVersion = .any)
    -> NewEvent
  {
    NewEvent(
      type: "test", stream: stream, actor: "tester",
      payload: (0..<size).map { UInt8(truncatingIfNeeded: $0 &+ n) }, expectedVersion: expected)
  }

  @Test("large batches hashed on the worker give the tree hashed leaf by leaf")
  func largeBatches() throws {
    let dir = TemporaryDirectory()
    let log = try EventLog(directory: dir.path, options: EventLog.Options(durability: .unsynced))
    defer { log.close() }
    var count = 0
    // Small first (the writer hashes), then batches on the worker: chunk and slot boundaries,
    // records larger than the worker copies (hashed by the writer, handed over as digests),
    // empty payloads, and the batch path that checks expected versions.
    try log.append((0..<5).map { event($0) })
    count += 5
    for (n, size) in [(128, 300), (129, 0), (257, 300), (1000, 300), (3001, 40)] {
      try log.append((0..<n).map { sized(count + $0, size, stream: "b\(($0 + count) % 17)") })
      count += n
    }
    try log.append(
      (0..<300).map { i in
        sized(count + i, i % 50 == 7 ? MerkleHashWorker.largeRecord + 100 : 200 + i % 700)
      })
    count += 300
    try log.append(
      (0..<600).map { sized(count + $0, 100, stream: "new\(count + $0)", expected: .noStream) })
    count += 600
    #expect(log.writer.hashWorker != nil)
    try expectTree(log, count: count)
    // Single appends in one transaction: the worker takes over once there are enough.
    try log.write { txn in
      for i in 0..<700 { try txn.append(sized(count + i, 150, stream: "one\(i % 3)")) }
    }
    count += 700
    // And batches after, on the frontier it handed back.
    try log.append((0..<3).map { event(count + $0) })
    count += 3
    try log.append((0..<200).map { sized(count + $0, 64) })
    count += 200
    try expectTree(log, count: count)
  }

  @Test("a transaction that fails after a large batch leaves the head and frontier as before")
  func failedTransaction() throws {
    let dir = TemporaryDirectory()
    let log = try EventLog(directory: dir.path)
    defer { log.close() }
    try log.append((0..<100).map { sized($0, 300) })
    let head = try log.treeHead()
    struct Refused: Error {}
    #expect(throws: Refused.self) {
      try log.write { txn in
        try txn.append(contentsOf: (0..<2000).map { sized(100 + $0, 300) })
        throw Refused()
      }
    }
    #expect(try log.treeHead() == head)
    #expect(try log.committedPosition == 100)
    // The batch that checks versions fails before writing anything.
    #expect(throws: LogError.self) {
      try log.write { txn in
        try txn.append(contentsOf: (0..<500).map { sized(100 + $0, 300) })
        try txn.append(
          contentsOf: (0..<200).map { sized($0, 10, stream: "v", expected: .exactly(3)) })
      }
    }
    #expect(try log.treeHead() == head)
    try log.append((0..<300).map { sized(100 + $0, 300) })
    try expectTree(log, count: 400)
  }

  @Test("a savepoint that fails after a large batch restores the frontier; its parent goes on")
  func failedSavepoint() throws {
    let dir = TemporaryDirectory()
    let log = try EventLog(directory: dir.path)
    defer { log.close() }
    try log.append((0..<10).map { event($0) })
    struct Refused: Error {}
    try log.write { txn in
      // The parent's own session, finished before the savepoint begins.
      try txn.append(contentsOf: (0..<500).map { sized(10 + $0, 300) })
      // The worker holds the frontier until a savepoint begins (or the transaction commits).
      try txn.savepoint { _ in }
      let before = txn.writer.frontier
      #expect(before.size == 510)
      #expect(throws: Refused.self) {
        try txn.savepoint { child in
          try child.append(contentsOf: (0..<1000).map { sized(510 + $0, 300) })
          throw Refused()
        }
      }
      #expect(txn.writer.frontier == before)
      // Fails in its checks after an earlier batch went to the worker.
      #expect(throws: LogError.self) {
        try txn.savepoint { child in
          try child.append(contentsOf: (0..<300).map { sized(510 + $0, 300) })
          try child.append(contentsOf: [sized(0, 10, stream: "w", expected: .exactly(5))])
        }
      }
      #expect(txn.writer.frontier == before)
      try txn.savepoint { child in
        try child.append(contentsOf: (0..<400).map { sized(510 + $0, 300) })
      }
      try txn.append(contentsOf: (0..<200).map { sized(910 + $0, 300) })
      for i in 0..<5 { try txn.append(event(1110 + i)) }
    }
    try expectTree(log, count: 1115)
  }

  @Test("a map that fills in the middle of a large batch grows, and the tree is right after")
  func mapFullMidBatch() throws {
    let dir = TemporaryDirectory()
    var options = EventLog.Options(durability: .unsynced)
    options.mapSize = 64 << 10
    let log = try EventLog(directory: dir.path, options: options)
    defer { log.close() }
    try log.append((0..<10).map { event($0) })
    try log.append((0..<3000).map { sized(10 + $0, 300, stream: "m\($0 % 50)") })
    try expectTree(log, count: 3010)
  }

  @Test("a batch past the map's limit fails whole; the tree is as before and appends go on")
  func mapLimitMidBatch() throws {
    let dir = TemporaryDirectory()
    var options = EventLog.Options(durability: .unsynced)
    options.mapSize = 64 << 10
    options.maxMapSize = 512 << 10
    let log = try EventLog(directory: dir.path, options: options)
    defer { log.close() }
    try log.append((0..<200).map { sized($0, 300) })
    let head = try log.treeHead()
    #expect(throws: LogError.self) {
      try log.append((0..<3000).map { sized(200 + $0, 300) })
    }
    #expect(try log.treeHead() == head)
    try log.append((0..<150).map { sized(200 + $0, 300) })
    try expectTree(log, count: 350)
  }
}
