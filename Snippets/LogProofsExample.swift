// A signed tree head, and the proofs that an event is in the log and that the log only grew
// since the head was published.
import Foundation
import Log

let dir = FileManager.default.temporaryDirectory.appendingPathComponent("proofs-\(UUID())").path
defer { try? FileManager.default.removeItem(atPath: dir) }
let log = try EventLog(directory: dir)
defer { log.close() }

try log.append((1...5).map { NewEvent(type: "note.added", stream: "note-\($0)", actor: "ann") })
// Published to auditors: size 5, its root, signed with the log's Ed25519 key.
let published = try log.signedTreeHead().head
print(published.size, published.isSigned(by: try log.publicKey().key))  // 5 true

try log.append((6...8).map { NewEvent(type: "note.added", stream: "note-\($0)", actor: "bob") })
let now = try log.treeHead()

// Event 3 is leaf 2 of the tree of 8 events; the proof carries the event itself.
let proof = try log.inclusionProof(position: LogPosition(3))
print(EventLog.event(fromLeaf: proof.leaf)!.stream)  // note-3
print(
  MerkleTree.verifyInclusion(
    index: proof.position.rawValue - 1, size: proof.treeSize,
    leafHash: MerkleTree.leafHash(proof.leaf), path: proof.path, root: now.root))  // true

// The tree of 8 extends the published tree of 5.
let path = try log.consistencyProof(oldSize: published.size)
print(
  MerkleTree.verifyConsistency(
    oldSize: published.size, newSize: now.size, oldRoot: published.root, newRoot: now.root,
    path: path))  // true

// Every page, record, stream link and the tree, checked against the published head.
let report = try log.verify(head: EventLog.TreeHead(size: published.size, root: published.root))
print(report.isValid, report.eventCount)  // true 8
