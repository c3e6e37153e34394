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
  Application(
    responder: CouchServer(dataDirectory: dataDirectory, options: options, logger: logger),
    server: server,
    configuration: configuration,
    onServerRunning: { channel in await onServerRunning(channel.localAddress?.port) },
    logger: logger)
}
