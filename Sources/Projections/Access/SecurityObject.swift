public import JSON

/// A database's security object (`GET/PUT /{db}/_security`), with CouchDB's semantics
/// (`couch_db:check_is_member/2`, `check_is_admin/2`):
///
/// - **admins** (names and roles) may change the database's design documents and its security
///   object, compact it and set its revs_limit; server administrators (role `_admin`) always may;
/// - **members** (names and roles) may read and write its documents; when `members` names
///   nobody (no name and no role) every user may, anonymous requests included (CouchDB's
///   "public database"). Database admins are members too.
///
/// ```swift
/// let security = try SecurityObject(json: #"{"members":{"roles":["staff"]}}"#)
/// security.isMember(UserContext(name: "ann", roles: ["staff"]))   // true
/// security.isMember(.anonymous)                                     // false
/// ```
///
/// It is kept as a `_local` document of the database (``DocumentStore/security()``,
/// ``DocumentStore/setSecurityAsync(_:actor:)``): an event like every write, never replicated.
public struct SecurityObject: Sendable, Hashable {
  /// Names and roles.
  public struct Group: Sendable, Hashable {
    public var names: [String]
    public var roles: [String]

    public init(names: [String] = [], roles: [String] = []) {
      self.names = names
      self.roles = roles
    }

    /// Whether it names nobody.
    public var isEmpty: Bool { names.isEmpty && roles.isEmpty }

    /// Whether `user` is named, or has one of the roles.
    public func contains(_ user: UserContext) -> Bool {
      if let name = user.name, names.contains(name) { return true }
      return user.roles.contains { roles.contains($0) }
    }

    var json: JSONValue {
      .object(
        JSONObject([
          "names": .array(names.map(JSONValue.string)),
          "roles": .array(roles.map(JSONValue.string)),
        ]))
    }
  }

  public var admins: Group { didSet { given = nil } }
  public var members: Group { didSet { given = nil } }
  /// The other top-level members of the object as given (CouchDB keeps them).
  public var extra: [JSONObject.Member] { didSet { given = nil } }
  /// The object exactly as it was set (CouchDB answers `GET /{db}/_security` with the stored
  /// JSON, not a rewritten one); dropped when a part is changed.
  private var given: JSONValue?

  public init(admins: Group = Group(), members: Group = Group()) {
    self.admins = admins
    self.members = members
    self.extra = []
  }

  /// Nobody named: a public database, as CouchDB 2 created them.
  public static let empty = SecurityObject()

  /// The object of a database that never had one set, as CouchDB 3 gives a new database
  /// (`[couchdb] default_security = admin_only`): admins and members are the `_admin` role,
  /// so only server administrators use it. (Under a ``DocumentAccess``, signed-in users still
  /// reach the documents its rules grant them.)
  /// Its JSON is CouchDB's (`couch_db_updater:default_security_object`):
  /// `{"members":{"roles":["_admin"]},"admins":{"roles":["_admin"]}}`.
  public static let adminOnly: SecurityObject = {
    var object = SecurityObject(
      admins: Group(roles: [UserContext.adminRole]), members: Group(roles: [UserContext.adminRole]))
    let admin = JSONValue.object(
      JSONObject([
        .init(key: "roles", value: .array([.string(UserContext.adminRole)]))
      ]))
    object.given = .object(
      JSONObject([.init(key: "members", value: admin), .init(key: "admins", value: admin)]))
    return object
  }()

  /// Parses and checks a security object as `PUT /{db}/_security` receives it: an object whose
  /// `admins` and `members`, when present, are objects whose `names` and `roles`, when present,
  /// are arrays of strings (CouchDB's `couch_db:validate_security_object`).
  ///
  /// - Throws: ``StoreError`` `bad_request` naming what is wrong.
  public init(json: JSONValue) throws(StoreError) {
    guard let object = json.objectValue else {
      throw StoreError.badRequest("The security object must be a JSON object")
    }
    func group(_ key: String) throws(StoreError) -> Group {
      guard let value = object[key] else { return Group() }
      guard let members = value.objectValue else {
        throw StoreError.badRequest("Security object `\(key)` must be an object")
      }
      func list(_ field: String) throws(StoreError) -> [String] {
        guard let value = members[field] else { return [] }
        guard let array = value.arrayValue else {
          throw StoreError.badRequest("`\(key).\(field)` must be a JSON list of strings")
        }
        var out: [String] = []
        for element in array {
          guard let s = element.stringValue else {
            throw StoreError.badRequest("`\(key).\(field)` must be a JSON list of strings")
          }
          out.append(s)
        }
        return out
      }
      return Group(names: try list("names"), roles: try list("roles"))
    }
    admins = try group("admins")
    members = try group("members")
    extra = object.members.filter { $0.key != "admins" && $0.key != "members" }
    given = json
  }

  /// Parses a security object from JSON bytes, checked as ``init(json:)`` checks it.
  public init(json bytes: [UInt8]) throws(StoreError) {
    let value: JSONValue
    do { value = try JSONValue(parsing: bytes) } catch {
      throw StoreError.badRequest("invalid UTF-8 JSON: \(error)")
    }
    try self.init(json: value)
  }

  /// The object as CouchDB answers `GET /{db}/_security`: as it was set (`{}` for ``empty``).
  public var json: JSONValue {
    if let given { return given }
    if self == .empty { return .object(JSONObject()) }
    return .object(
      JSONObject(
        [.init(key: "admins", value: admins.json), .init(key: "members", value: members.json)]
          + extra))
  }

  /// Whether `user` administers the database: a server administrator or one of `admins`.
  public func isAdmin(_ user: UserContext) -> Bool {
    user.isAdmin || admins.contains(user)
  }

  /// CouchDB's rule for design documents: only the database's administrators write them
  /// (`403 forbidden`, `You are not a db or server admin.`). The one statement of the rule: the
  /// store checks it in the write transaction (``DocumentStore/checkAccess``), the HTTP API
  /// before it reads a body.
  public func checkDesignWrite(_ docID: String, by user: UserContext) throws(StoreError) {
    if docID.hasPrefix("_design/") && !isAdmin(user) && !user.isMemberOfEveryDatabase {
      throw StoreError.forbidden("You are not a db or server admin.")
    }
  }

  /// Whether `user` may read and write the database's documents (CouchDB's reader check).
  public func isMember(_ user: UserContext) -> Bool {
    if isAdmin(user) || user.isMemberOfEveryDatabase { return true }
    if members.isEmpty { return true }
    return members.contains(user)
  }

  /// The `_local` document id that holds the object (reserved: the HTTP server refuses every
  /// `_local/org.wikilog.*` id).
  public static let localID = "org.wikilog.security"
}

extension DocumentStore {
  /// The database's security object (``SecurityObject/adminOnly`` when none was set).
  public func security() throws -> SecurityObject {
    try read { txn in try securityObject(txn: txn) }
  }

  /// Replaces the database's security object: a `local.put` event by `actor`, durable when it
  /// returns.
  public func setSecurityAsync(_ security: SecurityObject, actor: String) async throws {
    try await putLocalAsync(
      SecurityObject.localID, security.json.serialized(), actor: actor)
  }
}
