// TouchWiki databases: wikis with an owner and members, Markdown pages and their links.
import Foundation
import Projections
import Wiki

let dir = FileManager.default.temporaryDirectory.appendingPathComponent("wiki-\(UUID())").path
defer { try? FileManager.default.removeItem(atPath: dir) }
let data = DataDirectory.wiki(path: dir)
defer { data.closeAll() }
let store = try data.open("wiki", create: true)
let now = Timestamp.iso8601()
try store.put(
  #"{"_id":"w1","type":"wiki","title":"Recipes","owner_id":"ann","members":["bob"],"created_at":"\#(now)","updated_at":"\#(now)"}"#,
  actor: "ann")
try store.put(
  #"{"_id":"w1:Soup","type":"page","wiki_id":"w1","markdown":"See [[Stock]].","created_at":"\#(now)","updated_at":"\#(now)"}"#,
  actor: "bob")
let wiki = try WikiQueries(store)
print(try wiki.pages(in: "w1").map(\.title))  // ["Soup"]
print(try wiki.links(from: "Soup", in: "w1"))  // ["Stock"]
