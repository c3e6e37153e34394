public import Hummingbird
public import Logging

/// One line per request in the server's log, as ``CouchServer`` writes for the API:
/// `GET /_wiki/ 200 1.2ms` (at `info`; a failure of 500 and above at `error`, with its reason).
/// A Hummingbird middleware, so that every front end on the server's pipeline logs alike (the
/// web UI's router uses it).
///
/// ```swift
/// let router = Router(context: CouchRequestContext.self)
/// router.add(middleware: RequestLog(logger: couch.logger))
/// ```
public struct RequestLog<Context: RequestContext>: RouterMiddleware {
  let logger: Logger

  public init(logger: Logger) { self.logger = logger }

  public func handle(
    _ request: Request, context: Context,
    next: (Request, Context) async throws -> Response
  ) async throws -> Response {
    let start = ContinuousClock.now
    let line = "\(request.method) \(request.uri.string)"
    do {
      let response = try await next(request, context)
      CouchServer.log(logger, line, status: response.status.code, since: start, failure: nil)
      return response
    } catch {
      let e = (error as? any HTTPResponseError)?.status.code ?? 500
      CouchServer.log(
        logger, line, status: e, since: start,
        failure: CouchError("error", "\(error)", status: e))
      throw error
    }
  }
}
