// The replicator between two data directories (over HTTP, an `HTTPTransport` takes the place
// of the in-process transports used here).
import CouchAPI
import CouchReplicator
import Foundation
import Logging
import Projections
import Replication
import Wiki

let base = FileManager.default.temporaryDirectory.appendingPathComponent("repl-\(UUID())").path
defer { try? FileManager.default.removeItem(atPath: base) }
let laptop = DataDirectory.wiki(path: base + "/laptop")
let server = DataDirectory.wiki(path: base + "/server")
defer {
  laptop.closeAll()
  server.closeAll()
}
var quiet = Logger(label: "example")
quiet.logLevel = .warning  // no line per request
let notes = try laptop.create("notes")
for i in 1...3 { try notes.put(#"{"_id":"n\#(i)","text":"note \#(i)"}"#, actor: "ann") }

let source = CouchEndpoint(
  transport: LocalTransport(server: CouchServer(dataDirectory: laptop, logger: quiet)),
  database: "notes",
  identity: "laptop/notes")
let target = CouchEndpoint(
  transport: LocalTransport(server: CouchServer(dataDirectory: server, logger: quiet)),
  database: "notes",
  identity: "server/notes")
var options = ReplicationOptions()
options.createTarget = true
let report = try await Replicator(source: source, target: target, options: options).replicate()
print(report.docsWritten)  // 3
print(try server.open("notes").info.docCount)  // 3
