// Parsing JSON strictly, reading it, and writing it back.
import JSON

let value = try JSONValue(parsing: #"{"title":"Home","tags":["a","b"],"views":3}"#)
print(value["title"]?.stringValue ?? "")  // Home
print(value["tags"]?.arrayValue?.count ?? 0)  // 2
var object = value.objectValue!
object["views"] = .int(4)
print(String(decoding: JSONValue.object(object).serialized(), as: UTF8.self))
do {
  _ = try JSONValue(parsing: #"{"a":}"#)
} catch {
  print("refused:", error)
}
