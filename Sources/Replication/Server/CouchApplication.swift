public import Hummingbird
public import HummingbirdCore
import JSON
public import Logging
public import Projections

/// The `wikilog serve` application: a ``CouchServer`` on Hummingbird's HTTP/1.1 server.
///
/// The command line and the tests build the application the same way.
///
/// ```swift
/// let app = buildApplication(
///   dataDirectory: DataDirectory(path: dir),
///   configuration: ApplicationConfiguration(address: .hostname("127.0.0.1", port: 5984)))
/// try await app.runService()
/// ```
public func buildApplication(
  dataDirectory: DataDirectory, options: CouchServerOptions = CouchServerOptions(),
  server: HTTPServerBuilder = .http1(),
  configuration: ApplicationConfiguration = ApplicationConfiguration(
    address: .hostname("127.0.0.1", port: 5984)),
  logger: Logger = Logger(label: "wikilog.http"),
  onServerRunning: @escaping @Sendable (Int?) async -> Void = { _ in }
) -> some ApplicationProtocol {
  buildApplication(
    responder: CouchServer(dataDirectory: dataDirectory, options: options, logger: logger),
    server: server, configuration: configuration, logger: logger,
    onServerRunning: onServerRunning)
}

/// The application around any responder of ``CouchRequestContext`` (the web UI's, which wraps a
/// ``CouchServer``): `onServerRunning` gets the port it listens on.
public func buildApplication<Responder: HTTPResponder>(
  responder: Responder, server: HTTPServerBuilder, configuration: ApplicationConfiguration,
  logger: Logger, onServerRunning: @escaping @Sendable (Int?) async -> Void
) -> some ApplicationProtocol where Responder.Context == CouchRequestContext {
  Application(
    responder: responder,
    server: server,
    configuration: configuration,
    onServerRunning: { channel in await onServerRunning(channel.localAddress?.port) },
    logger: logger)
}
