// The web UI and the API on one responder: `wikilog serve` runs it on a port; here a request
// is answered in process.
import CouchAPI
import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import Projections
import Wiki
import WikiApp

let dir = FileManager.default.temporaryDirectory.appendingPathComponent("ui-\(UUID())").path
defer { try? FileManager.default.removeItem(atPath: dir) }
let data = DataDirectory.wiki(path: dir)
defer { data.closeAll() }
var logger = Logger(label: "example")
logger.logLevel = .warning
let server = WikiServer(couch: CouchServer(dataDirectory: data, logger: logger))
let request = Request(
  head: HTTPRequest(method: .get, scheme: nil, authority: "localhost", path: "/_wiki/"),
  body: RequestBody(buffer: ByteBuffer()))
let response = try await server.respond(to: request, context: CouchRequestContext(local: logger))
// Without an authenticator every request is an administrator's: the list of wikis.
print(response.status)  // 200 OK
