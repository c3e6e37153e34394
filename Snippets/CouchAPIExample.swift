// CouchDB's HTTP API, answered in process (the same server `wikilog serve` runs on a port).
import CouchAPI
import CouchReplicator
import Foundation
import Logging
import Projections
import Wiki

let dir = FileManager.default.temporaryDirectory.appendingPathComponent("api-\(UUID())").path
defer { try? FileManager.default.removeItem(atPath: dir) }
let data = DataDirectory.wiki(path: dir)
defer { data.closeAll() }
var quiet = Logger(label: "example")
quiet.logLevel = .warning  // no line per request
let api = LocalTransport(server: CouchServer(dataDirectory: data, logger: quiet))
for (method, path, body) in [
  ("PUT", "/notes", nil), ("PUT", "/notes/n1", #"{"text":"hello"}"#),
  ("GET", "/notes/n1", nil), ("GET", "/notes/_changes", nil),
] as [(String, String, String?)] {
  let response = try await api.send(method, path, body: body.map { Array($0.utf8) })
  print(method, path, response.status, String(decoding: response.body, as: UTF8.self))
}
