public import AsyncHTTPClient
import Formats
import Foundation
import NIOCore
import NIOHTTP1
import NIOHTTPCompression

/// The production ``CouchTransport``: HTTP/1.1 and HTTPS to a CouchDB-compatible server on
/// AsyncHTTPClient.
///
/// One client per process (``sharedClient``) pools connections per host and keeps them alive
/// between requests; HTTPS uses the system's trust roots; connecting gives up after 10 s and a
/// response that sends nothing for ``readTimeout`` fails (a feed's heartbeats keep it alive);
/// responses may come gzip- or deflate-compressed (`Accept-Encoding: deflate, gzip` goes with
/// every request and the answer is inflated). Every request carries `Accept: application/json`
/// and, when the transport has credentials, its `Authorization` header. Credentials never
/// appear in ``description``.
///
/// ```swift
/// let transport = HTTPTransport(
///   baseURL: "https://couch.example.org", credentials: .basic(user: "bob", password: pw))
/// let target = CouchEndpoint(transport: transport, database: "wiki", identity: "https://couch.example.org/wiki")
/// ```
public struct HTTPTransport: CouchTransport, CustomStringConvertible {
  /// How requests sign in.
  public enum Credentials: Sendable, Hashable {
    /// HTTP Basic: a `_users` name and password.
    case basic(user: String, password: String)
    /// `Authorization: Bearer` (a JWT).
    case bearer(String)
    /// `Authorization: Token token=...` (a wikilog API token).
    case token(String)
    /// An `Authorization` header value as given (a `_replicate` endpoint's `headers`).
    case header(String)

    /// The `Authorization` header value.
    var header: String {
      switch self {
      case .basic(let user, let password):
        "Basic " + Base64.encode(Array("\(user):\(password)".utf8))
      case .bearer(let token): "Bearer " + token
      case .token(let token): "Token token=" + token
      case .header(let value): value
      }
    }
  }

  /// `scheme://host:port` and any path prefix, without a trailing slash.
  public let baseURL: String
  public let credentials: Credentials?
  /// The longest a whole exchange may take (a longpoll feed's wait included).
  public var requestTimeout: Duration
  /// The largest response body accepted.
  public var maximumBodySize = 1 << 30
  let client: HTTPClient

  public init(
    baseURL: String, credentials: Credentials? = nil, requestTimeout: Duration = .seconds(300),
    client: HTTPClient = HTTPTransport.sharedClient
  ) {
    var base = baseURL
    while base.hasSuffix("/") { base.removeLast() }
    self.baseURL = base
    self.credentials = credentials
    self.requestTimeout = requestTimeout
    self.client = client
  }

  /// Seconds without a byte from the server before a request fails.
  public static let readTimeout: Int64 = 60

  /// The process's client: a connection pool of up to 8 connections per host kept alive for
  /// 60 s, connect timeout 10 s, read timeout ``readTimeout``, decompression of gzip and deflate
  /// answers (at most 100 times the compressed size), no redirects followed into other hosts.
  /// A connection that cannot be made (refused, unreachable) fails its request at once rather
  /// than after the connect timeout: the replicator's own retries and backoff take over, and
  /// its status says `offline` with the reason.
  public static let sharedClient: HTTPClient = {
    var pool = HTTPClient.Configuration.ConnectionPool(
      idleTimeout: .seconds(60), concurrentHTTP1ConnectionsPerHostSoftLimit: 8)
    pool.retryConnectionEstablishment = false
    var configuration = HTTPClient.Configuration(
      redirectConfiguration: .follow(max: 5, allowCycles: false),
      timeout: .init(connect: .seconds(10), read: .seconds(readTimeout)),
      connectionPool: pool,
      decompression: .enabled(limit: .ratio(100)))
    configuration.httpVersion = .http1Only
    return HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
  }()

  public var description: String { baseURL }

  public func send(_ method: String, _ path: String, body: [UInt8]?) async throws
    -> CouchTransportResponse
  {
    var request = HTTPClientRequest(url: baseURL + path)
    request.method = HTTPMethod(rawValue: method)
    request.headers.add(name: "Accept", value: "application/json")
    if let credentials { request.headers.add(name: "Authorization", value: credentials.header) }
    if let body {
      request.headers.add(name: "Content-Type", value: "application/json")
      request.body = .bytes(body)
    }
    let seconds = requestTimeout.components.seconds
    let response = try await client.execute(request, timeout: .seconds(seconds))
    let bytes = try await response.body.collect(upTo: maximumBodySize)
    return CouchTransportResponse(
      status: Int(response.status.code), body: Array(bytes.readableBytesView))
  }
}

/// A source or target given as a URL: `http(s)://[user:password@]host[:port][/prefix]/db`.
public struct CouchURL: Sendable, Hashable, CustomStringConvertible {
  /// `scheme://host:port/prefix`, without credentials.
  public let baseURL: String
  /// The database name, percent-decoded.
  public let database: String
  /// The user name and password of the URL's userinfo, if any.
  public let user: String?
  public let password: String?

  /// Parses `text`; nil when it is not an `http` or `https` URL with a database path and, if it
  /// names one, a port from 1 to 65535.
  public init?(_ text: String) {
    guard let components = URLComponents(string: text),
      let scheme = components.scheme?.lowercased(), scheme == "http" || scheme == "https",
      let host = components.host, !host.isEmpty
    else { return nil }
    // A TCP port is 1 to 65535 (NIO traps on a larger one, and would wrap it for a name).
    if let port = components.port, !(1...65_535).contains(port) { return nil }
    var path = components.percentEncodedPath
    while path.hasSuffix("/") { path.removeLast() }
    guard let slash = path.lastIndex(of: "/") else { return nil }
    let encodedName = String(path[path.index(after: slash)...])
    guard !encodedName.isEmpty, let name = encodedName.removingPercentEncoding else { return nil }
    let prefix = String(path[..<slash])
    let hostPart = host.contains(":") && !host.hasPrefix("[") ? "[\(host)]" : host
    let port = components.port.map { ":\($0)" } ?? ""
    baseURL = "\(scheme)://\(hostPart)\(port)\(prefix)"
    database = name
    user = components.user
    password = components.password
  }

  /// The URL without its credentials: the replication's identity and what is shown.
  public var description: String {
    baseURL + "/" + PercentDecoding.encode(database)
  }
}
