public import AsyncHTTPClient
public import Auth
public import CouchAPI
public import CouchQuery
public import CouchReplicator
public import Foundation
public import HTTPTypes
public import Hummingbird
public import HummingbirdTesting
public import JSON
public import Log
public import Logging
public import NIOCore
import NIOHTTP1
public import Projections
import Query
public import Replication
import RevTree
import TestSupport
import Testing
public import Wiki

/// Helpers of the server and replication tests: a data directory and a server per test,
/// requests with JSON answers, a transport over AsyncHTTPClient.

/// A data directory of its own, removed afterwards.
public final class TestDirectory: Sendable {
  public let path: String
  public let data: DataDirectory

  /// With `users`, the directory also knows `_users`; with `replicator`, `_replicator`.
  public init(
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

public let quietLogger = Logger(label: "wikilog.tests") { _ in SwiftLogNoOpLogHandler() }

/// Runs `body` against a server on a fresh data directory.
public func withServer<T: Sendable>(
  _ setup: TestingSetup = .router, options: CouchServerOptions = CouchServerOptions.standard,
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
public struct JSONResponse {
  public let status: HTTPResponse.Status
  public let headers: HTTPFields
  public let text: String
  public let json: JSONValue?

  public var code: Int { status.code }
  public subscript(key: String) -> JSONValue? { json?[key] }
  public var error: String? { json?["error"]?.stringValue }
}

extension TestClientProtocol {
  /// Sends a request with an optional JSON (or raw) body and, unless `headers` has one,
  /// `Accept: application/json`, as CouchDB clients send it (without it CouchDB, and wikilog,
  /// answer `open_revs` and `attachments=true` reads as multipart).
  @discardableResult
  public func call(
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

public func json(_ text: String) -> JSONValue { try! JSONValue(parsing: text) }

extension JSONValue {
  public var strings: [String] { arrayValue?.compactMap(\.stringValue) ?? [] }
  public var int: Int? { numberValue?.int64Value.map { Int($0) } }
  /// A CouchDB sequence's number: the number itself, or the one before the `-` of an opaque
  /// `"N-…"` string.
  public var seq: Int? {
    int ?? stringValue.flatMap { text in text.split(separator: "-").first.flatMap { Int($0) } }
  }
}

/// A ``CouchTransport`` over AsyncHTTPClient, for the end-to-end tests.
public struct HTTPClientTransport: CouchTransport {
  public let baseURL: String
  /// An `Authorization` header value to send with every request.
  public var authorization: String? = nil

  public init(baseURL: String, authorization: String? = nil) {
    self.baseURL = baseURL
    self.authorization = authorization
  }

  public func send(_ method: String, _ path: String, body: [UInt8]?) async throws
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
public func waitingFeeds(_ client: any TestClientProtocol, headers: HTTPFields = [:]) async throws
  -> Int?
{
  try await client.call(.get, "/_node/_local/_stats/wikilog/waiting_feeds", headers: headers)[
    "value"]?.int
}

extension CouchServerOptions {
  /// The API `wikilog serve` answers: CouchQuery's feature and the replicator's.
  public static var standard: CouchServerOptions {
    var options = CouchServerOptions.withQuery
    options.useReplicator()
    return options
  }
}
