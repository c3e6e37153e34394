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

/// One database, as a replication source or target: a ``ReplicationPeer`` (``HTTPPeer`` on a
/// server, ``StorePeer`` on a store of this process) and its identity.
public struct CouchEndpoint: Sendable {
  public let peer: any ReplicationPeer
  /// A stable identity of the database, such as its URL; part of the replication id.
  public var identity: String { peer.identity }

  public init(peer: any ReplicationPeer) {
    self.peer = peer
  }

  /// Database `database` on the server `transport` reaches (an ``HTTPPeer``).
  public init(transport: any CouchTransport, database: String, identity: String) {
    self.peer = HTTPPeer(transport: transport, database: database, identity: identity)
  }
}
