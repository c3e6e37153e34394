import AsyncHTTPClient
import Auth
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import JSON
import Log
import Logging
import NIOCore
import NIOHTTP1
import Projections
import Replication
import RevTree
import TestSupport
import Testing
import Wiki

/// A data directory of its own, removed afterwards.
final class TestDirectory: Sendable {
  let path: String
  let data: DataDirectory

  /// With `users`, the directory also knows `_users`; with `replicator`, `_replicator`.
  init(
    _ name: String = #function, options: EventLog.Options = EventLog.Options(),
    users: Bool = false, replicator: Bool = false
  ) {
    let safe = name.filter { $0.isLetter || $0.isNumber }.prefix(40)
    path = NSTemporaryDirectory() + "wikilog-repltests-\(safe)-\(UUID().uuidString)"
    try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    data = DataDirectory.wiki(
      path: path, options: options,
      systemDatabases: (users ? [.users] : []) + (replicator ? [.replicator] : []))
  }

  deinit {
    data.closeAll()
    try? FileManager.default.removeItem(atPath: path)
  }
}

let quietLogger = Logger(label: "wikilog.tests") { _ in SwiftLogNoOpLogHandler() }

/// Runs `body` against a server on a fresh data directory.
func withServer<T: Sendable>(
  _ setup: TestingSetup = .router, options: CouchServerOptions = CouchServerOptions(),
  logOptions: EventLog.Options = EventLog.Options(), name: String = #function,
  _ body: @Sendable (any TestClientProtocol, TestDirectory) async throws -> T
) async throws -> T {
  let dir = TestDirectory(name, options: logOptions)
  let app = buildApplication(
    dataDirectory: dir.data, options: options,
    configuration: ApplicationConfiguration(address: .hostname("127.0.0.1", port: 0)),
    logger: quietLogger)
  return try await app.test(setup) { client in try await body(client, dir) }
}

/// A response with its body parsed as JSON.
struct JSONResponse {
  let status: HTTPResponse.Status
  let headers: HTTPFields
  let text: String
  let json: JSONValue?

  var code: Int { status.code }
  subscript(key: String) -> JSONValue? { json?[key] }
  var error: String? { json?["error"]?.stringValue }
}

extension TestClientProtocol {
  /// Sends a request with an optional JSON (or raw) body and, unless `headers` has one,
  /// `Accept: application/json`, as CouchDB clients send it (without it CouchDB, and wikilog,
  /// answer `open_revs` and `attachments=true` reads as multipart).
  @discardableResult
  func call(
    _ method: HTTPRequest.Method, _ uri: String, _ body: String? = nil,
    headers: HTTPFields = [:]
  ) async throws -> JSONResponse {
    var fields = headers
    if body != nil { fields[.contentType] = "application/json" }
    if fields[.accept] == nil { fields[.accept] = "application/json" }
    return try await execute(
      uri: uri, method: method, headers: fields, body: body.map { ByteBuffer(string: $0) }
    ) { response in
      let text = String(buffer: response.body)
      return JSONResponse(
        status: response.status, headers: response.headers, text: text,
        json: try? JSONValue(parsing: text))
    }
  }
}

func json(_ text: String) -> JSONValue { try! JSONValue(parsing: text) }

extension JSONValue {
  var strings: [String] { arrayValue?.compactMap(\.stringValue) ?? [] }
  var int: Int? { numberValue?.int64Value.map { Int($0) } }
}

/// A ``CouchTransport`` over AsyncHTTPClient, for the end-to-end tests.
struct HTTPClientTransport: CouchTransport {
  let baseURL: String
  /// An `Authorization` header value to send with every request.
  var authorization: String? = nil

  func send(_ method: String, _ path: String, body: [UInt8]?) async throws
    -> CouchTransportResponse
  {
    var request = HTTPClientRequest(url: baseURL + path)
    request.method = .init(rawValue: method)
    if let authorization { request.headers.add(name: "Authorization", value: authorization) }
    if let body {
      request.headers.add(name: "Content-Type", value: "application/json")
      request.body = .bytes(body)
    }
    let response = try await HTTPClient.shared.execute(request, timeout: .seconds(120))
    let bytes = try await response.body.collect(upTo: 512 << 20)
    return CouchTransportResponse(
      status: Int(response.status.code), body: Array(bytes.readableBytesView))
  }
}

/// The server's `wikilog.waiting_feeds` statistic: the live feeds waiting for a change now.
func waitingFeeds(_ client: any TestClientProtocol, headers: HTTPFields = [:]) async throws
  -> Int?
{
  try await client.call(.get, "/_node/_local/_stats/wikilog/waiting_feeds", headers: headers)[
    "value"]?.int
}
