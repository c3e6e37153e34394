import Foundation
import Testing

@testable import Log

/// Erasing an event's payload: the bytes go, the tree and every proof stay.
@Suite struct EraseTests {
  static let secret = Array("SECRET-PAYLOAD-4711".utf8)

  /// A log of `count` events, the secret in event `secretAt`.
  func makeLog(_ dir: TemporaryDirectory, count: Int = 40, secretAt: Int) throws -> EventLog {
    let log = try EventLog(directory: dir.path)
    try log.write { txn in
      for i in 1...count {
        _ = try txn.append(
          NewEvent(
            type: "note.edited", stream: i % 3 == 0 ? "" : "note-\(i % 5)", actor: "ann",
            payload: i == secretAt ? Self.secret : Array("payload \(i)".utf8)))
      }
    }
    return log
  }

  func contains(_ haystack: [UInt8], _ needle: [UInt8]) -> Bool {
    guard haystack.count >= needle.count else { return false }
    return (0...(haystack.count - needle.count)).contains {
      haystack[$0..<$0 + needle.count].elementsEqual(needle)
    }
  }

  @Test(arguments: [7, 39])  // inside a stored subtree, and among the last events it does not cover
  func erasedEventKeepsItsLeafAndEveryProof(secretAt: Int) throws {
    let dir = TemporaryDirectory()
    var log = try makeLog(dir, secretAt: secretAt)
    let before = try log.treeHead()
    let proofBefore = try log.inclusionProof(position: LogPosition(UInt64(secretAt)))
    let otherBefore = try log.inclusionProof(position: 3)
    let original = try #require(try log.event(at: LogPosition(UInt64(secretAt))))
    // The search below finds the secret where it is.
    #expect(
      contains(
        Array(try Data(contentsOf: URL(fileURLWithPath: dir.path + "/data.mdb"))), Self.secret))

    var eraser = LogPosition.start
    try log.write { txn in
      eraser = try txn.append(
        NewEvent(type: "erased", stream: "", actor: "admin", payload: Array("court order".utf8))
      ).position
      try txn.erase(LogPosition(UInt64(secretAt)), by: eraser)
    }
    let erased = try #require(try log.event(at: LogPosition(UInt64(secretAt))))
    #expect(erased.payload.isEmpty)
    #expect(erased.erasedBy == eraser)
    #expect(erased.type == original.type && erased.stream == original.stream)
    #expect(erased.actor == original.actor && erased.streamVersion == original.streamVersion)
    #expect(erased.timestampMicroseconds == original.timestampMicroseconds)
    if !original.stream.isEmpty {
      var positions: [LogPosition] = []
      try log.read { txn in
        try txn.forEachEvent(inStream: original.stream, fromVersion: 1) {
          positions.append($0.position)
          return true
        }
      }
      #expect(positions.contains(erased.position))
    }

    // The tree over the old events is the same tree: heads taken before still hold.
    let after = try log.treeHead()
    #expect(try log.treeRoot(size: before.size) == before.root)
    let consistency = try log.consistencyProof(oldSize: before.size)
    #expect(
      MerkleTree.verifyConsistency(
        oldSize: before.size, newSize: after.size, oldRoot: before.root, newRoot: after.root,
        path: consistency))
    let other = try log.inclusionProof(position: 3)
    #expect(other.root == after.root)
    #expect(otherBefore.root == before.root)
    // The erased event's proof: the kept leaf hash, and who erased it.
    let proof = try log.inclusionProof(position: LogPosition(UInt64(secretAt)))
    #expect(proof.erasedLeafHash == MerkleTree.leafHash(proofBefore.leaf))
    #expect(proof.erasedBy == eraser)
    #expect(proof.root == after.root)
    #expect(!contains(proof.leaf, Self.secret))
    #expect(try log.verify(head: before).problems == [])
    #expect(try log.erasedEvents().map(\.position) == [LogPosition(UInt64(secretAt))])

    // Erased again (a second redaction): the same leaf, the new eraser named.
    try log.write { txn in
      let again = try txn.append(NewEvent(type: "erased", stream: "", actor: "admin", payload: []))
      try txn.erase(LogPosition(UInt64(secretAt)), payload: Array("{}".utf8), by: again.position)
    }
    #expect(try log.event(at: LogPosition(UInt64(secretAt)))?.payload == Array("{}".utf8))
    #expect(try log.verify(head: before).problems == [])

    // Opened again, the tree is loaded as it was and grows on.
    log.close()
    log = try EventLog(directory: dir.path)
    try log.write { txn in
      for _ in 0..<20 { _ = try txn.append(NewEvent(type: "later", stream: "", payload: [1])) }
    }
    #expect(try log.verify(head: before).problems == [])
    #expect(try log.treeRoot(size: before.size) == before.root)

    // The live file may keep the bytes in freed pages; a compacting copy keeps none.
    let copy = dir.path + "/copy"
    _ = try log.backup(to: copy)
    #expect(
      !contains(Array(try Data(contentsOf: URL(fileURLWithPath: copy + "/data.mdb"))), Self.secret))
    log.close()
  }

  @Test func erasingIsCheckedAndAtomic() throws {
    let dir = TemporaryDirectory()
    let log = try makeLog(dir, count: 5, secretAt: 2)
    defer { log.close() }
    #expect(throws: LogError.self) {
      try log.write { txn in try txn.erase(2, by: 1) }
    }
    #expect(throws: LogError.self) {
      try log.write { txn in try txn.erase(9, by: 10) }
    }
    struct Abandoned: Error {}
    // A transaction that fails after erasing leaves the event as it was.
    #expect(throws: Abandoned.self) {
      try log.write { txn in
        let eraser = try txn.append(NewEvent(type: "erased", stream: "", payload: []))
        try txn.erase(2, by: eraser.position)
        throw Abandoned()
      }
    }
    #expect(try log.event(at: 2)?.payload == Self.secret)
    #expect(try log.event(at: 2)?.erasedBy == nil)
    #expect(try log.erasedEvents().isEmpty)
  }

  @Test func aTamperedErasedLeafIsFound() throws {
    let dir = TemporaryDirectory()
    let log = try makeLog(dir, count: 20, secretAt: 4)
    defer { log.close() }
    let before = try log.treeHead()
    try log.write { txn in
      let eraser = try txn.append(NewEvent(type: "erased", stream: "", payload: []))
      try txn.erase(4, by: eraser.position)
    }
    // Someone replaces the kept leaf hash: the recomputed tree no longer matches.
    try log.write { txn in
      _ = try txn.raw.put(
        log.dbs.erased, UInt64(4).bigEndianBytes, [UInt8](repeating: 7, count: 32))
    }
    #expect(try !log.verify(head: before).problems.isEmpty)
  }
}
