import HTTPTypes
public import Hummingbird

/// Renders any error a handler throws as CouchDB does: `{"error","reason"}` with its status
/// (`CouchError(_:)` maps the store's, the log's and the parser's errors),
/// an empty body for `HEAD`, and the failure noted for ``RequestLog``.
///
/// On ``CouchPipeline`` it wraps the CouchDB API (inside ``CORSMiddleware``, so that an error
/// carries the CORS headers as CouchDB's do) and, as the last of the pipeline's own
/// middlewares, whatever a front end lets escape. A request whose method no route takes
/// (Hummingbird's not-found responder) is answered `405 method_not_allowed`.
public struct CouchErrorAnswers: RouterMiddleware {
  public typealias Context = CouchRequestContext

  public init() {}

  public func handle(
    _ request: Request, context: Context,
    next: (Request, Context) async throws -> Response
  ) async throws -> Response {
    do {
      return try await next(request, context)
    } catch {
      var failure = CouchError(error)
      if let http = error as? HTTPError, http.status == .notFound,
        context.endpointPath == "NotFound"
      {
        // Every path has a route (the API takes `/**`): only the method can be unknown.
        failure = .methodNotAllowed(CouchPipeline.methods.map(\.rawValue))
      }
      context.notes.failure = failure
      return failure.response(includeBody: request.method != .head)
    }
  }
}

/// Sets the headers CouchDB gives every response: `Server` (`CouchDB/3.4.2 (wikilog/0.1.0)`),
/// `X-Couch-Request-ID` (the client's, if it sent a valid one, else ten new hex digits) and
/// `X-CouchDB-Body-Time`; and makes the `Location` of a `201`/`202` absolute, as
/// `couch_httpd:absolute_uri` does: the request's `X-Forwarded-Host` (else its `Host`), with
/// `https` behind a proxy that says so (`X-Forwarded-Proto`, `X-Forwarded-Ssl: on`) or on a
/// TLS server.
///
/// The three header names are CouchDB's `chttpd/x_forwarded_host`, `x_forwarded_proto` and
/// `x_forwarded_ssl`, which `_config` changes (``forwarded``).
public struct ServerHeader: RouterMiddleware {
  public typealias Context = CouchRequestContext
  let secure: Bool
  let forwarded: @Sendable () -> ForwardedHeaders

  /// The headers a proxy names the original host, scheme and TLS with.
  public struct ForwardedHeaders: Sendable {
    public var host = ServerHeader.forwardedHost
    public var proto = ServerHeader.forwardedProto
    public var ssl = ServerHeader.forwardedSSL
    public init() {}
  }

  public init(
    secure: Bool = false, forwarded: @escaping @Sendable () -> ForwardedHeaders = { .init() }
  ) {
    self.secure = secure
    self.forwarded = forwarded
  }

  public func handle(
    _ request: Request, context: Context,
    next: (Request, Context) async throws -> Response
  ) async throws -> Response {
    var response = try await next(request, context)
    response.headers[.server] = CouchServer.serverHeader
    response.headers[Self.requestID] = Self.requestID(given: request.headers[Self.requestID])
    response.headers[Self.bodyTime] = "0"
    if response.status == .created || response.status == .accepted,
      let location = response.headers[.location], location.hasPrefix("/"),
      case let names = forwarded(),
      let host = request.headers[names.host] ?? request.head.authority, !host.isEmpty
    {
      let proto = request.headers[names.proto]?.lowercased()
      let https =
        proto == "https" || request.headers[names.ssl]?.lowercased() == "on"
        || (proto == nil && secure)
      response.headers[.location] = (https ? "https://" : "http://") + host + location
    }
    return response
  }

  static let requestID = HTTPField.Name("X-Couch-Request-ID")!
  static let bodyTime = HTTPField.Name("X-CouchDB-Body-Time")!
  static let forwardedHost = HTTPField.Name("X-Forwarded-Host")!
  static let forwardedProto = HTTPField.Name("X-Forwarded-Proto")!
  static let forwardedSSL = HTTPField.Name("X-Forwarded-Ssl")!

  /// The client's `X-Couch-Request-ID` when it is at most 36 letters, digits, `-` and `_`
  /// (CouchDB's `chttpd:nonce`), else a new one.
  static func requestID(given: String?) -> String {
    if let given, !given.isEmpty, given.utf8.count <= 36,
      given.utf8.allSatisfy({ byte in
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "a")...UInt8(ascii: "z"),
          UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "-"), UInt8(ascii: "_"):
          true
        default: false
        }
      })
    {
      return given
    }
    return newRequestID()
  }

  static func newRequestID() -> String {
    let hex = Array("0123456789abcdef")
    return String((0..<10).map { _ in hex[Int.random(in: 0..<16)] })
  }
}

/// CORS for the CouchDB API (``CORSPolicy``): a preflight `OPTIONS` (with `Origin` and
/// `Access-Control-Request-Method`) is answered here; every other answer, errors included,
/// gets the allow headers when the request's origin is allowed. Any other `OPTIONS` goes on to
/// its endpoint like every method, as in CouchDB (`chttpd_cors` treats it as "not a
/// preflight"), where it is 405 or 404.
public struct CORSMiddleware: RouterMiddleware {
  public typealias Context = CouchRequestContext
  let policy: CORSPolicy

  public init(_ policy: CORSPolicy) { self.policy = policy }

  public func handle(
    _ request: Request, context: Context,
    next: (Request, Context) async throws -> Response
  ) async throws -> Response {
    let origin = request.headers[.origin]
    if request.method == .options && origin != nil
      && request.headers[.accessControlRequestMethod] != nil
    {
      var response = policy.preflight(request)
      policy.apply(to: &response.headers, origin: origin)
      return response
    }
    var response = try await next(request, context)
    policy.apply(to: &response.headers, origin: origin)
    return response
  }
}
