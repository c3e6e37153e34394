public import CouchAPI
public import HTTPTypes
public import Hummingbird
public import Logging
import NIOCore
public import Replication

/// A `CouchTransport` that hands each request to a ``CouchServer`` in this process, through
/// its ``CouchPipeline``: no socket, no port, the server's own routes and answers. `wikilog replicate` uses it for a
/// database of the local data directory.
///
/// Requests are an administrator's unless the server has an authenticator; then they are
/// made with `credentials` (`Authorization` and `Cookie` headers: `POST /_replicate` with a
/// plain database name passes its caller's), or with none.
///
/// ```swift
/// let local = LocalTransport(server: CouchServer(dataDirectory: data))
/// let source = CouchEndpoint(transport: local, database: "wiki", identity: "local:/srv/wikilog/wiki")
/// ```
public struct LocalTransport: CouchTransport {
  public let server: CouchServer
  /// The server's pipeline, as a request from a socket meets it.
  let pipeline: CouchPipeline
  let credentials: HTTPFields
  let logger: Logger

  public init(
    server: CouchServer, credentials: HTTPFields = HTTPFields(),
    logger: Logger = Logger(label: "wikilog.local")
  ) {
    self.server = server
    self.pipeline = CouchPipeline(couch: server)
    self.credentials = credentials
    self.logger = logger
  }

  public func send(_ method: String, _ path: String, body: [UInt8]?) async throws
    -> CouchTransportResponse
  {
    var fields = credentials
    fields[.accept] = "application/json"
    if body != nil { fields[.contentType] = "application/json" }
    let head = HTTPRequest(
      method: HTTPRequest.Method(method) ?? .get, scheme: nil, authority: "localhost", path: path,
      headerFields: fields)
    let request = Request(
      head: head, body: RequestBody(buffer: ByteBuffer(bytes: body ?? [])))
    let context = CouchRequestContext(local: logger)
    let response = try await pipeline.respond(to: request, context: context)
    let bytes = Bytes()
    try await response.body.write(Collector(bytes: bytes))
    return CouchTransportResponse(status: response.status.code, body: bytes.value)
  }

  /// Gathers a response body.
  final class Bytes {
    var value: [UInt8] = []
  }

  struct Collector: ResponseBodyWriter {
    let bytes: Bytes
    mutating func write(_ buffer: ByteBuffer) async throws {
      bytes.value.append(contentsOf: buffer.readableBytesView)
    }
    consuming func finish(_ trailingHeaders: HTTPFields?) async throws {}
  }
}
