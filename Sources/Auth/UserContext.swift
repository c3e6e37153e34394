public import JSON

/// Who a request is made by, as CouchDB's `userCtx`: a name (nil for an anonymous request) and
/// roles. `_admin` among the roles makes an administrator.
public struct UserContext: Sendable, Hashable {
  public var name: String?
  public var roles: [String]

  public init(name: String?, roles: [String] = []) {
    self.name = name
    self.roles = roles
  }

  /// Nobody signed in.
  public static let anonymous = UserContext(name: nil, roles: [])

  /// The role that makes an administrator.
  public static let adminRole = "_admin"

  /// Whether the user is an administrator (has the `_admin` role).
  public var isAdmin: Bool { roles.contains(Self.adminRole) }

  /// CouchDB's `userCtx` object: `{"name": ..., "roles": [...]}` (name null when anonymous).
  public var json: JSONValue {
    .object(
      JSONObject([
        "name": name.map(JSONValue.string) ?? .null,
        "roles": .array(roles.map(JSONValue.string)),
      ]))
  }
}

/// How a request was signed in: CouchDB's names of its authentication handlers (`info.authenticated`
/// in `GET /_session`), plus wikilog's API tokens.
public enum AuthenticationMethod: String, Sendable, Hashable {
  case cookie
  case basic = "default"
  case jwt
  case token
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

  /// The body CouchDB sends.
  public var json: JSONValue {
    .object(JSONObject(["error": .string(error), "reason": .string(reason)]))
  }

  public var description: String { "\(error): \(reason)" }
}
