import Formats
import HTTPTypes
public import Hummingbird
public import JSON
import Log
import NIOCore
public import Projections
import RevTree

/// An HTTP error in CouchDB's shape: `{"error": name, "reason": text}` with CouchDB's status.
///
/// Every failure the server answers goes through here: `StoreError`s from the document store
/// keep their name, reason and status; a body over the size limit is `too_large` (413); anything
/// unexpected is `internal_server_error` (500).
///
/// ```swift
/// throw CouchError.badRequest("Invalid rev format")
/// // HTTP/1.1 400 Bad Request
/// // {"error":"bad_request","reason":"Invalid rev format"}
/// ```
public struct CouchError: Error, Sendable, Hashable, HTTPResponseError {
  /// CouchDB's error name: `bad_request`, `not_found`, `conflict`, ...
  public let error: String
  public let reason: String
  public let statusCode: Int
  /// Extra response headers (`Allow` for 405).
  public var extraHeaders: [(String, String)] = []

  public init(_ error: String, _ reason: String, status: Int) {
    self.error = error
    self.reason = reason
    self.statusCode = status
  }

  /// An error given as CouchDB answers it (a failed replication's `ReplicatorError.answer`).
  public init(_ answer: (error: String, reason: String, status: Int)) {
    self.init(answer.error, answer.reason, status: answer.status)
  }

  /// Wraps any error the server meets.
  public init(_ any: any Error) {
    switch any {
    case let e as CouchError: self = e
    case let e as StoreError:
      // A failure of the log names its file by the path on the server, which is no caller's
      // business: what is wrong stays, the path goes.
      var reason = e.reason
      if let path = (e.detail as? LogError)?.path, !path.isEmpty {
        let name = path.hasSuffix(".mdb") ? "the database's data file" : "the database's directory"
        reason = reason.replacing(path, with: name)
      }
      self.init(e.error, reason, status: e.code.httpStatus)
    case let e as LogError: self.init(StoreError.storage(e))
    case is NIOTooManyBytesError:
      self.init("too_large", "the request body is larger than the server accepts", status: 413)
    case let e as JSONParseError: self.init("bad_request", "invalid UTF-8 JSON: \(e)", status: 400)
    default: self.init("internal_server_error", "\(any)", status: 500)
    }
  }

  public static func badRequest(_ reason: String) -> CouchError {
    CouchError("bad_request", reason, status: 400)
  }

  public static func notFound(_ reason: String = "missing") -> CouchError {
    CouchError("not_found", reason, status: 404)
  }

  /// `501 not_implemented`: "`feature` is not implemented by wikilog", with an optional note
  /// after it. The answer for every CouchDB endpoint and option wikilog does not serve.
  public static func notImplemented(_ feature: String, _ note: String? = nil) -> CouchError {
    CouchError(
      "not_implemented",
      "\(feature) is not implemented by wikilog" + (note.map { "; " + $0 } ?? ""),
      status: 501)
  }

  /// `405 method_not_allowed`, listing the methods the resource takes in `Allow`.
  public static func methodNotAllowed(_ methods: [String]) -> CouchError {
    var e = CouchError(
      "method_not_allowed", "Only \(methods.joined(separator: ",")) allowed", status: 405)
    e.extraHeaders = [("Allow", methods.joined(separator: ","))]
    return e
  }

  public static func == (a: CouchError, b: CouchError) -> Bool {
    a.error == b.error && a.reason == b.reason && a.statusCode == b.statusCode
  }

  public func hash(into hasher: inout Hasher) {
    hasher.combine(error)
    hasher.combine(reason)
    hasher.combine(statusCode)
  }

  // MARK: HTTPResponseError

  public var status: HTTPResponse.Status { HTTPResponse.Status(code: statusCode) }

  /// The JSON body, `{"error":...,"reason":...}`.
  public var json: JSONValue {
    .object(JSONObject(["error": .string(error), "reason": .string(reason)]))
  }

  public func response(from request: Request, context: some RequestContext) throws -> Response {
    response(includeBody: request.method != .head)
  }

  /// The response, with an empty body for `HEAD`.
  func response(includeBody: Bool) -> Response {
    var response = CouchResponse.json(json, status: status, includeBody: includeBody)
    for (name, value) in extraHeaders {
      if let field = HTTPField.Name(name) { response.headers[field] = value }
    }
    return response
  }
}

extension PercentDecoding {
  /// ``PercentDecoding/decode(_:plusIsSpace:)`` for the server: a malformed escape is a
  /// `400 bad_request` answer.
  static func decoded(_ text: Substring, plusIsSpace: Bool = false) throws(CouchError) -> String {
    do {
      return try decode(text, plusIsSpace: plusIsSpace)
    } catch {
      throw CouchError.badRequest(error.reason)
    }
  }
}
