/// The HTTP a ``Replicator`` needs: one request, one complete response.
///
/// The replicator speaks only CouchDB's JSON endpoints, so any HTTP client can carry it; the
/// test suite adapts AsyncHTTPClient. Paths are absolute on the server (`/wiki/_changes?...`),
/// already percent-encoded; bodies are JSON.
///
/// ```swift
/// struct MyTransport: CouchTransport {
///   func send(_ method: String, _ path: String, body: [UInt8]?) async throws -> CouchTransportResponse {
///     // issue the request with `Content-Type: application/json` when there is a body
///   }
/// }
/// ```
public protocol CouchTransport: Sendable {
  /// Sends one request and returns the status and the whole body.
  func send(_ method: String, _ path: String, body: [UInt8]?) async throws
    -> CouchTransportResponse
}

/// A complete HTTP response.
public struct CouchTransportResponse: Sendable, Hashable {
  public var status: Int
  public var body: [UInt8]

  public init(status: Int, body: [UInt8]) {
    self.status = status
    self.body = body
  }
}

/// One database on one server, as a replication source or target.
public struct CouchEndpoint: Sendable {
  public let transport: any CouchTransport
  /// The database name.
  public let database: String
  /// A stable identity of the database, such as its URL; part of the replication id.
  public let identity: String

  public init(transport: any CouchTransport, database: String, identity: String) {
    self.transport = transport
    self.database = database
    self.identity = identity
  }

  /// `/{db}` percent-encoded, then `suffix`.
  func path(_ suffix: String = "") -> String {
    "/" + PercentDecoding.encode(database) + suffix
  }
}
