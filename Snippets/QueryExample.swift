// Mango queries and full-text search as indexes of the store.
import Foundation
import JSON
import Projections
import Query

let dir = FileManager.default.temporaryDirectory.appendingPathComponent("query-\(UUID())").path
defer { try? FileManager.default.removeItem(atPath: dir) }
// Notes are searched by their text, grouped by their owner.
let notes = TextSearchSchema { id, body in
  guard let owner = body["owner"]?.stringValue else { return nil }
  return .init(group: owner, title: id, text: body["text"]?.stringValue ?? "")
}
let store = try DocumentStore(
  directory: dir, projections: [MangoProjection()],
  indexes: [TextSearchProjection(schema: notes)])
defer { store.close() }
try store.put(#"{"_id":"n1","owner":"ann","text":"leek and potato soup"}"#, actor: "ann")
try store.put(#"{"_id":"n2","owner":"ann","text":"bread"}"#, actor: "ann")
let found = try MangoQueries(store).find(
  FindQuery(JSONValue(parsing: #"{"selector":{"owner":"ann"}}"#)))
print(found.docs.count)  // 2
let hits = try TextSearch(store).search(SearchQuery("soup"), groups: ["ann"])
print(hits.hits.map(\.docID))  // ["n1"]
