public import Hummingbird
public import HummingbirdCore
import JSON
public import Logging
public import Projections
public import ServiceLifecycle

/// The `wikilog serve` application without the web UI: a ``CouchServer`` behind
/// ``CouchPipeline`` on Hummingbird's HTTP/1.1 server.
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
  let couch = CouchServer(dataDirectory: dataDirectory, options: options, logger: logger)
  return buildApplication(
    responder: CouchPipeline(couch: couch), server: server, configuration: configuration,
    logger: logger,
    services: couch.services, onServerRunning: onServerRunning)
}

/// The application around any responder of ``CouchRequestContext`` (a ``CouchPipeline``, with
/// or without the web UI's routes): `onServerRunning` gets the port it listens on; `services` run beside the
/// server for its lifetime (a ``CouchServer``'s ``CouchServer/services``: the `_replicator`
/// jobs).
public func buildApplication<Responder: HTTPResponder>(
  responder: Responder, server: HTTPServerBuilder, configuration: ApplicationConfiguration,
  logger: Logger, services: [any Service] = [],
  onServerRunning: @escaping @Sendable (Int?) async -> Void
) -> some ApplicationProtocol where Responder.Context == CouchRequestContext {
  Application(
    responder: responder,
    server: server,
    configuration: configuration,
    services: services,
    onServerRunning: { channel in await onServerRunning(channel.localAddress?.port) },
    logger: logger)
}
