// Codable documents, a conflict merged, a query and a change stream.
import Foundation
import TypedDocuments

struct Note: StoredDocument {
  static let documentType = "note"
  var id: String
  var revision: String?
  var title: String
  var tags: [String] = []
}

let dir = FileManager.default.temporaryDirectory.appendingPathComponent("typed-\(UUID())").path
defer { try? FileManager.default.removeItem(atPath: dir) }
let db = try DocumentDatabase(path: dir, name: "notes", actor: "ann")
defer { db.close() }

let changes = db.changes(of: Note.self, from: .after(db.lastSequence))
let stale = try await db.save(Note(id: "n1", title: "Soup", tags: ["food"]))
var other = stale
other.tags.append("winter")
try await db.save(other)
var mine = stale
mine.tags.append("quick")
// `mine` was read before `other` was saved: merged instead of lost.
let saved = try await db.save(mine) { current, mine in
  var merged = current
  merged.tags = Array(Set(current.tags + mine.tags)).sorted()
  return merged
}
print(saved.revision!.prefix(2), saved.tags)  // 3- ["food", "quick", "winter"]
print(try db.find(Note.self, where: .field("tags", contains: "quick")).map(\.id))  // ["n1"]
var kinds: [String] = []
for try await change in changes {
  kinds.append("\(change.kind) by \(change.actor)")
  if kinds.count == 3 { break }
}
print(kinds)  // ["created by ann", "updated by ann", "updated by ann"]
