public import CouchAPI
import HTTPTypes
public import Hummingbird
public import HummingbirdCore
public import Logging
public import Projections
import Query
public import Replication

/// Settings of the web UI.
public struct WikiAppOptions: Sendable {
  /// The database whose wikis the UI shows (`wikilog serve --wiki-db`).
  public var database = "wiki"

  public init() {}
}

/// `wikilog serve`'s responder: the wiki in a browser under `/_wiki/` (``WikiSite``'s routes, a
/// Hummingbird `RouteCollection`), a browser's `GET /` redirected there, and everything else
/// CouchDB's API (``CouchServer``), on one port.
public struct WikiServer: HTTPResponder {
  public typealias Context = CouchRequestContext

  public let couch: CouchServer
  let router: RouterResponder<CouchRequestContext>

  public init(couch: CouchServer, options: WikiAppOptions = WikiAppOptions()) {
    self.couch = couch
    let site = WikiSite(couch: couch, options: options)
    let router = Router(context: CouchRequestContext.self)
    // UI requests are logged as the API's are.
    router.add(middleware: RequestLog(logger: couch.logger))
    router.addRoutes(site.routes(), atPath: "/_wiki")
    self.router = router.buildResponder()
  }

  public func respond(to request: Request, context: Context) async throws -> Response {
    let path = request.uri.path
    if path == "/_wiki" || path.hasPrefix("/_wiki/") {
      var response: Response
      do {
        response = try await router.respond(to: request, context: context)
      } catch let error as HTTPError where error.status == .notFound {
        response = WikiSite.plainError(404, "Not found")
      }
      response.headers[.server] = "wikilog/\(CouchServer.version)"
      return response
    }
    if path == "/", request.method == .get || request.method == .head,
      let accept = request.headers[.accept], accept.contains("text/html")
    {
      var headers = HTTPFields()
      headers[.location] = "/_wiki/"
      return Response(status: .found, headers: headers)
    }
    return try await couch.respond(to: request, context: context)
  }
}

/// The `wikilog serve` application with the web UI: ``WikiServer`` on Hummingbird's HTTP/1.1
/// server (or `server`, HTTPS). The command line and the tests build it the same way.
public func buildWikiApplication(
  dataDirectory: DataDirectory, options: CouchServerOptions = CouchServerOptions(),
  wiki: WikiAppOptions = WikiAppOptions(), server: HTTPServerBuilder = .http1(),
  configuration: ApplicationConfiguration = ApplicationConfiguration(
    address: .hostname("127.0.0.1", port: 5984)),
  logger: Logger = Logger(label: "wikilog.http"),
  onServerRunning: @escaping @Sendable (Int?) async -> Void = { _ in }
) -> some ApplicationProtocol {
  let couch = CouchServer(dataDirectory: dataDirectory, options: options, logger: logger)
  return buildApplication(
    responder: WikiServer(couch: couch, options: wiki), server: server,
    configuration: configuration, logger: logger, services: couch.services,
    onServerRunning: onServerRunning)
}
