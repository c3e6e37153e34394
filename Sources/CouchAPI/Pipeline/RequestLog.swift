public import Hummingbird
public import Logging
import Synchronization

/// One line per request in the server's log: `GET /db/doc 200 1.2ms`, at `info`; a failure
/// with CouchDB's error and reason (`GET /db/x 404 0.3ms not_found: missing`), at `error` from
/// 500 up. A streamed answer (a continuous feed) is logged when it ends, with its whole
/// duration.
///
/// The first middleware of every request on ``CouchPipeline`` (the API's and the web UI's
/// alike), outside the error rendering: it reads the failure an inner ``CouchErrorAnswers``
/// rendered from the request's ``CouchRequestContext/notes``.
public struct RequestLog: RouterMiddleware {
  public typealias Context = CouchRequestContext
  let logger: Logger
  /// Where each answer is counted (the server's, for `_node/_local/_prometheus`).
  let metrics: HTTPMetrics?

  public init(logger: Logger) {
    self.logger = logger
    self.metrics = nil
  }

  init(logger: Logger, metrics: HTTPMetrics) {
    self.logger = logger
    self.metrics = metrics
  }

  public func handle(
    _ request: Request, context: Context,
    next: (Request, Context) async throws -> Response
  ) async throws -> Response {
    let start = ContinuousClock.now
    var response: Response
    do {
      response = try await next(request, context)
    } catch {
      let status = (error as? any HTTPResponseError)?.status.code ?? 500
      metrics?.count(request.method.rawValue, status: status)
      Self.log(
        logger, request, status: status, since: start,
        failure: CouchError("error", "\(error)", status: status))
      throw error
    }
    let failure = context.notes.failure
    let status = response.status.code
    metrics?.count(request.method.rawValue, status: status)
    if response.body.contentLength == nil && failure == nil {
      // A streamed feed: log once it ends, with its whole duration.
      let body = response.body
      let logger = self.logger
      response.body = ResponseBody { writer in
        do {
          try await body.write(writer)
          Self.log(logger, request, status: status, since: start, failure: nil)
        } catch {
          Self.log(logger, request, status: status, since: start, failure: CouchError(error))
          throw error
        }
      }
    } else {
      Self.log(logger, request, status: status, since: start, failure: failure)
    }
    return response
  }

  static func log(
    _ logger: Logger, _ request: Request, status: Int, since start: ContinuousClock.Instant,
    failure: CouchError?
  ) {
    // Nothing to format when the line would be dropped (`--log-level warning` and above).
    let level: Logger.Level = status >= 500 ? .error : .info
    guard logger.logLevel <= level else { return }
    let elapsed = ContinuousClock.now - start
    let tenths =
      elapsed.components.seconds * 10_000 + elapsed.components.attoseconds / 100_000_000_000_000
    let line = "\(request.method) \(request.uri.string) \(status) \(tenths / 10).\(tenths % 10)ms"
    let message: Logger.Message =
      failure.map { "\(line) \($0.error): \($0.reason)" } ?? "\(line)"
    if level == .error { logger.error(message) } else { logger.info(message) }
  }
}

/// What a request's middlewares tell each other: the failure an error was rendered from,
/// for ``RequestLog``'s line. One per request (``CouchRequestContext/notes``).
public final class RequestNotes: Sendable {
  private let state = Mutex<CouchError?>(nil)

  public init() {}

  /// The failure the answer was rendered from, if it was.
  public var failure: CouchError? {
    get { state.withLock { $0 } }
    set { state.withLock { $0 = newValue } }
  }
}

/// Requests answered, by method and by status: CouchDB's `couchdb_httpd_request_methods` and
/// `couchdb_httpd_status_codes`.
final class HTTPMetrics: Sendable {
  private let counts = Mutex((methods: [String: Int](), statuses: [Int: Int]()))

  func count(_ method: String, status: Int) {
    counts.withLock {
      $0.methods[method, default: 0] += 1
      $0.statuses[status, default: 0] += 1
    }
  }

  var snapshot: (methods: [String: Int], statuses: [Int: Int]) { counts.withLock { $0 } }
}
