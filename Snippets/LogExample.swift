// An append-only event log in LMDB: append, read back, prove.
import Foundation
import Log

let dir = FileManager.default.temporaryDirectory.appendingPathComponent("log-\(UUID())").path
defer { try? FileManager.default.removeItem(atPath: dir) }
let log = try EventLog(directory: dir)
defer { log.close() }
try log.append([
  NewEvent(type: "note.added", stream: "note-1", actor: "ann", payload: Array("hello".utf8)),
  NewEvent(type: "note.edited", stream: "note-1", actor: "bob", payload: Array("hello!".utf8)),
])
for event in try log.read(from: LogPosition(1)) {
  print(event.position, event.type, event.actor, String(decoding: event.payload, as: UTF8.self))
}
print(try log.treeHead().size)  // 2: the Merkle tree covers both events
