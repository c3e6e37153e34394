public import CouchAPI
import CouchQuery
import CouchReplicator
import HTTPTypes
public import Hummingbird
public import HummingbirdCore
public import Logging
public import Projections
import Query
import Replication

/// Settings of the web UI.
public struct WikiAppOptions: Sendable {
  /// The database whose wikis the UI shows (`wikilog serve --wiki-db`).
  public var database = "wiki"

  public init() {}
}

/// `wikilog serve`'s responder: `CouchPipeline` with the wiki's controllers under
/// `/_wiki/` (each a Hummingbird `RouteCollection`, behind `PageErrors`, which renders their
/// failures as HTML pages), a browser's `GET /` sent there (`BrowserHome`), and CouchDB's API
/// (`CouchServer`) behind them, on one port and one router: the request log, the `Server`
/// header and the API's CORS and error rendering are the pipeline's middlewares.
public struct WikiServer: HTTPResponder {
  public typealias Context = CouchRequestContext

  public let couch: CouchServer
  let pipeline: CouchPipeline

  public init(couch: CouchServer, options: WikiAppOptions = WikiAppOptions()) {
    self.couch = couch
    let site = WikiSite(couch: couch, options: options)
    pipeline = CouchPipeline(couch: couch) { router in
      router.add(middleware: BrowserHome())
      let ui = router.group("/_wiki").add(middleware: PageErrors(site: site))
      for controller in site.controllers() {
        ui.addRoutes(controller.routes())
      }
    }
  }

  public func respond(to request: Request, context: Context) async throws -> Response {
    try await pipeline.respond(to: request, context: context)
  }
}

/// Sends a browser's `GET /` (one that accepts `text/html`) to the wiki, `/_wiki/`; CouchDB's
/// welcome stays the answer to every other client.
struct BrowserHome: RouterMiddleware {
  typealias Context = CouchRequestContext

  func handle(
    _ request: Request, context: Context,
    next: (Request, Context) async throws -> Response
  ) async throws -> Response {
    if request.uri.path == "/", request.method == .get || request.method == .head,
      let accept = request.headers[.accept], accept.contains("text/html")
    {
      var headers = HTTPFields()
      headers[.location] = "/_wiki/"
      return Response(status: .found, headers: headers)
    }
    return try await next(request, context)
  }
}

/// The `wikilog serve` application with the web UI: ``WikiServer`` on Hummingbird's HTTP/1.1
/// server (or `server`, HTTPS). The command line and the tests build it the same way. Its API
/// always has CouchQuery's feature (`_find`, views, design functions), which PouchDB apps and
/// CouchDB's clients use beside the wiki, and CouchReplicator's (`_replicate`, `_replicator`:
/// the Sync page's jobs), each added to `options.features` when it is not there.
public func buildWikiApplication(
  dataDirectory: DataDirectory, options: CouchServerOptions = CouchServerOptions(),
  wiki: WikiAppOptions = WikiAppOptions(), server: HTTPServerBuilder = .http1(),
  configuration: ApplicationConfiguration = ApplicationConfiguration(
    address: .hostname("127.0.0.1", port: 5984)),
  logger: Logger = Logger(label: "wikilog.http"),
  onServerRunning: @escaping @Sendable (Int?) async -> Void = { _ in }
) -> some ApplicationProtocol {
  var options = options
  if !options.features.contains(where: { $0.name == CouchFeature.query.name }) {
    options.features.append(.query)
  }
  if !options.features.contains(where: { $0.name == "replicator" }) {
    options.features.append(.replicator())
  }
  let couch = CouchServer(dataDirectory: dataDirectory, options: options, logger: logger)
  return buildApplication(
    responder: WikiServer(couch: couch, options: wiki), server: server,
    configuration: configuration, logger: logger, services: couch.services,
    onServerRunning: onServerRunning)
}
