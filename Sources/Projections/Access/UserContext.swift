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
