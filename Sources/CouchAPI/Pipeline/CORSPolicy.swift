import HTTPTypes
import Hummingbird

/// Which browser origins may call the server, and the headers that say so.
///
/// An allowed request's `Origin` is echoed in `Access-Control-Allow-Origin` with
/// `Access-Control-Allow-Credentials: true` on every response, errors included (as CouchDB does
/// with CORS enabled), and preflight `OPTIONS` requests are answered with the methods, headers
/// and max age.
///
/// ```swift
/// let open = CORSPolicy.anyOrigin
/// let strict = CORSPolicy.origins(["https://wiki.example"])
/// ```
public struct CORSPolicy: Sendable, Hashable {
  /// Every origin (`*`), or these exact origins (`scheme://host[:port]`).
  public let allowedOrigins: Set<String>?

  /// No cross-origin access.
  public static let none = CORSPolicy(allowedOrigins: [])
  /// Any origin: the default when the server listens on a loopback address.
  public static let anyOrigin = CORSPolicy(allowedOrigins: nil)
  /// Only these origins; `*` among them means any.
  public static func origins(_ origins: [String]) -> CORSPolicy {
    origins.contains("*") ? .anyOrigin : CORSPolicy(allowedOrigins: Set(origins))
  }

  /// Whether a request from `origin` may read the response.
  public func allows(_ origin: String) -> Bool {
    allowedOrigins?.contains(origin) ?? true
  }

  static let allowedMethods = "GET, HEAD, POST, PUT, DELETE, OPTIONS"
  static let allowedHeaders =
    "accept, accept-language, authorization, content-type, content-language, if-match, origin, referer, x-requested-with"
  static let exposedHeaders =
    "cache-control, content-type, etag, server, x-couch-request-id, x-couch-update-newrev"
  static let maxAge = "600"

  /// Adds the CORS headers for a request carrying `origin` (nothing when absent or refused).
  func apply(to headers: inout HTTPFields, origin: String?) {
    guard let origin, allows(origin) else { return }
    headers[.accessControlAllowOrigin] = origin
    headers[.accessControlAllowCredentials] = "true"
    headers[.accessControlExposeHeaders] = Self.exposedHeaders
    headers.append(HTTPField(name: .vary, value: "Origin"))
  }

  /// The answer to a preflight `OPTIONS` request (it has `Origin` and
  /// `Access-Control-Request-Method`): the methods and headers allowed, when the origin is.
  func preflight(_ request: Request) -> Response {
    var headers = HTTPFields()
    headers[.allow] = Self.allowedMethods
    headers[.contentLength] = "0"
    if let origin = request.headers[.origin], allows(origin),
      request.headers[.accessControlRequestMethod] != nil
    {
      headers[.accessControlAllowMethods] = Self.allowedMethods
      var allowed = Self.allowedHeaders
      if let requested = request.headers[.accessControlRequestHeaders], !requested.isEmpty {
        allowed += ", " + requested
      }
      headers[.accessControlAllowHeaders] = allowed
      headers[.accessControlMaxAge] = Self.maxAge
    }
    return Response(status: .noContent, headers: headers, body: ResponseBody())
  }
}
