import HTTPTypes
import Hummingbird
import JSON
import NIOCore

/// CouchDB's JSONP (`couch_httpd:initialize_jsonp`): when `chttpd/allow_jsonp` is on, a
/// request with `?callback=NAME` gets its JSON answer — errors and streamed feeds too — as
/// `/* CouchDB */NAME(…);` with `Content-Type: application/javascript`. A name of other
/// characters than letters, digits, `.`, `_`, `[` and `]` is `400 bad_request`
/// `invalid_callback`, and nothing runs. Off (CouchDB's default), `callback` is ignored.
struct JSONPMiddleware: RouterMiddleware {
  typealias Context = CouchRequestContext
  let couch: CouchServer

  func handle(
    _ request: Request, context: Context, next: (Request, Context) async throws -> Response
  ) async throws -> Response {
    guard couch.settings.current.allowJSONP,
      let callback = request.uri.queryParameters.get("callback"), !callback.isEmpty
    else { return try await next(request, context) }
    guard callback.utf8.allSatisfy(Self.allowed) else {
      throw CouchError.badRequest("invalid_callback")
    }
    var response = try await next(request, context)
    guard response.headers[.contentType]?.hasPrefix("application/json") == true else {
      return response
    }
    let prefix = ByteBuffer(string: "/* CouchDB */" + callback + "(")
    let suffix = ByteBuffer(string: ");")
    response.headers[.contentType] = "application/javascript"
    let body = response.body
    if let length = body.contentLength {
      response.headers[.contentLength] = String(
        length + prefix.readableBytes + suffix.readableBytes)
    }
    response.body = ResponseBody(
      contentLength: body.contentLength.map { $0 + prefix.readableBytes + suffix.readableBytes }
    ) { writer in
      try await writer.write(prefix)
      try await body.write(SuffixWriter(inner: writer, suffix: suffix))
    }
    return response
  }

  static func allowed(_ byte: UInt8) -> Bool {
    switch byte {
    case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
      UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "."), UInt8(ascii: "_"),
      UInt8(ascii: "["), UInt8(ascii: "]"):
      true
    default: false
    }
  }

  /// Passes a body through, writing `suffix` before it finishes.
  struct SuffixWriter: ResponseBodyWriter {
    var inner: any ResponseBodyWriter
    let suffix: ByteBuffer

    mutating func write(_ buffer: ByteBuffer) async throws { try await inner.write(buffer) }

    consuming func finish(_ trailingHeaders: HTTPFields?) async throws {
      var inner = self.inner
      try await inner.write(suffix)
      try await inner.finish(trailingHeaders)
    }
  }
}
