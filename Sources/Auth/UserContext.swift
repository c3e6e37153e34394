public import JSON

/// How a request was signed in: CouchDB's names of its authentication handlers (`info.authenticated`
/// in `GET /_session`), plus wikilog's API tokens.
public enum AuthenticationMethod: String, Sendable, Hashable {
  case cookie
  case basic = "default"
  case jwt
  case token
  case proxy
}

/// A refusal, shaped as CouchDB answers it: `{"error": ..., "reason": ...}` with its HTTP status.
public struct AuthError: Error, Sendable, Hashable, CustomStringConvertible {
  public let status: Int
  public let error: String
  public let reason: String

  public init(status: Int, error: String, reason: String) {
    self.status = status
    self.error = error
    self.reason = reason
  }

  /// 401 `unauthorized`.
  public static func unauthorized(_ reason: String) -> AuthError {
    AuthError(status: 401, error: "unauthorized", reason: reason)
  }

  /// 400 `bad_request`.
  public static func badRequest(_ reason: String) -> AuthError {
    AuthError(status: 400, error: "bad_request", reason: reason)
  }

  /// CouchDB's answer to a wrong name or password, whether or not the user exists.
  public static let incorrectCredentials = unauthorized("Name or password is incorrect.")

  /// The answer to the right password of a user an administrator disabled.
  public static let accountDisabled = unauthorized(
    "This account is disabled: an administrator can enable it again.")

  /// The body CouchDB sends.
  public var json: JSONValue {
    .object(JSONObject(["error": .string(error), "reason": .string(reason)]))
  }

  public var description: String { "\(error): \(reason)" }
}
