public import JSON

/// Who a request is made by, as CouchDB's `userCtx`: a name (nil for an anonymous request) and
/// roles. `_admin` among the roles makes an administrator.
public struct UserContext: Sendable, Hashable {
  public var name: String?
  public var roles: [String]
  /// Whether the front end vouches for the user as a member of every database's security
  /// object: the command line's `--actor` (whoever may open the files may read and write every
  /// document; the per-document rules still apply). Never set for a request over HTTP.
  public var isMemberOfEveryDatabase = false

  public init(name: String?, roles: [String] = [], isMemberOfEveryDatabase: Bool = false) {
    self.name = name
    self.roles = roles
    self.isMemberOfEveryDatabase = isMemberOfEveryDatabase
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
