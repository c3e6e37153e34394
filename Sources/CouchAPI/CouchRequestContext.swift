public import Hummingbird
public import Logging
import NIOCore

/// The request context of ``CouchServer``: Hummingbird's core storage plus the peer's address,
/// which names the origin of replicated writes.
public struct CouchRequestContext: RequestContext {
  public var coreContext: CoreRequestContextStorage
  /// The client's IP address, when the connection has one (not in router tests).
  public let peerAddress: String?
  /// The server's own address and port on the connection (`127.0.0.1:5984`, `[::1]:5984`),
  /// when it has one: where the server reaches itself.
  public let localAddress: String?
  /// What the request's middlewares tell each other (``RequestNotes``).
  public let notes = RequestNotes()

  public init(source: ApplicationRequestContextSource) {
    coreContext = CoreRequestContextStorage(source: source)
    peerAddress = source.channel.remoteAddress?.ipAddress
    localAddress = source.channel.localAddress.flatMap { address in
      guard let ip = address.ipAddress, let port = address.port else { return nil }
      return (ip.contains(":") ? "[\(ip)]" : ip) + ":\(port)"
    }
  }
}

extension CouchRequestContext {
  /// A context for a request made inside the process (CouchReplicator's `LocalTransport`): no peer address.
  public init(local logger: Logger) {
    coreContext = CoreRequestContextStorage(source: LocalSource(logger: logger))
    peerAddress = nil
    localAddress = nil
  }

  struct LocalSource: RequestContextSource {
    let logger: Logger
  }
}
