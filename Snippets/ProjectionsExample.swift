// A CouchDB-compatible document store on the log: write, read, the changes feed, and the
// store as it was.
import Foundation
import Log
import Projections

let dir = FileManager.default.temporaryDirectory.appendingPathComponent("db-\(UUID())").path
defer { try? FileManager.default.removeItem(atPath: dir) }
let store = try DocumentStore(directory: dir)
defer { store.close() }
let created = try store.put(#"{"_id":"note","text":"hello"}"#, actor: "ann")
try store.put(#"{"_id":"note","_rev":"\#(created.rev!)","text":"hello again"}"#, actor: "bob")
print(try store.get("note")["text"]!.stringValue!)  // hello again
for row in try store.changes().results { print(row.seq, row.id) }
let then = try store.asOf(LogPosition(1))
print(try then.get("note")["text"]!.stringValue!)  // hello
