public import HTTPTypes
public import Hummingbird

/// The server's one HTTP pipeline: a Hummingbird router whose middlewares every request goes
/// through, the routes of any front end (the web UI's controllers), and the CouchDB API
/// (``CouchServer``) as the fallback behind them.
///
/// In order, outermost first:
/// 1. ``ServerHeader``: the `Server` header of every answer;
/// 2. ``RequestLog``: one line per request, the front ends' included;
/// 3. ``CouchErrorAnswers``: CouchDB's `{"error","reason"}` for anything a route lets escape
///    (and `405` for a method no route takes);
/// 4. what `frontEnd` adds: its route collections (which render their own errors, as HTML
///    pages for the UI) and middlewares of its own (they apply to the API's routes too);
/// 5. the API, at `/` and `/**` for every method of ``methods``, behind ``CORSMiddleware`` and
///    its own ``CouchErrorAnswers``; ``CouchServer`` dispatches it by its endpoint tables.
///
/// ```swift
/// let couch = CouchServer(dataDirectory: data)
/// let api = CouchPipeline(couch: couch)  // the API alone, as `buildApplication` serves it
/// let withUI = CouchPipeline(couch: couch) { router in
///   router.addRoutes(wikiRoutes, atPath: "/_wiki")
/// }
/// ```
public struct CouchPipeline: HTTPResponder {
  public typealias Context = CouchRequestContext

  /// The API's server, which the pipeline falls back to.
  public let couch: CouchServer
  let responder: RouterResponder<Context>

  /// The methods the API's routes take; any other is answered 405.
  public static let methods: [HTTPRequest.Method] = [
    .get, .head, .post, .put, .delete, .options, .patch, .trace, .connect,
    HTTPRequest.Method("COPY")!,
  ]

  public init(
    couch: CouchServer, frontEnd: (Router<Context>) -> Void = { _ in }
  ) {
    self.couch = couch
    let router = Router(context: Context.self)
    let settings = couch.settings
    router.add(
      middleware: ServerHeader(secure: couch.options.secure) { settings.current.forwarded })
    router.add(middleware: RequestLog(logger: couch.logger, metrics: couch.metrics))
    router.add(middleware: CouchErrorAnswers())
    frontEnd(router)
    let api = router.group()
      .add(middleware: JSONPMiddleware(couch: couch))
      .add(middleware: CORSMiddleware(couch.options.cors))
      .add(middleware: CouchErrorAnswers())
    let handler = APIResponder(couch: couch)
    for method in Self.methods {
      api.on("", method: method, responder: handler)
      api.on("**", method: method, responder: handler)
    }
    responder = router.buildResponder()
  }

  public func respond(to request: Request, context: Context) async throws -> Response {
    try await responder.respond(to: request, context: context)
  }

  /// The API's route: ``CouchServer/answer(_:context:)``.
  struct APIResponder: HTTPResponder {
    let couch: CouchServer
    func respond(to request: Request, context: Context) async throws -> Response {
      try await couch.answer(request, context: context)
    }
  }
}
