import Formats
public import JSON
import Log
public import Projections
import Synchronization

/// A user of `_users`, as ``UserStore`` reads it: never with its derived key or salt in any
/// public member.
public struct User: Sendable, Hashable {
  public var name: String
  public var roles: [String]
  /// The document's current revision.
  public var rev: String
  /// The stored PBKDF2 hash, if the user has a password.
  let credentials: StoredCredentials?
  /// Whether an administrator disabled the user (`"disabled": true` in the document): a
  /// disabled user signs in no way — password, session, API or feed token — until enabled.
  /// Only administrators change it (see ``UserStore/setDisabled(_:_:actor:)``).
  public var isDisabled: Bool = false

  /// Whether the user can sign in with a password.
  public var hasPassword: Bool { credentials != nil }
  /// Whether the user has the `_admin` role.
  public var isAdmin: Bool { roles.contains(UserContext.adminRole) }
  /// The user as a request's context.
  public var context: UserContext { UserContext(name: name, roles: roles) }
  /// The salt of the password hash ("" without a password): part of the session cookie's key,
  /// so a password change ends every session (as in CouchDB).
  public var salt: String { credentials?.salt ?? "" }
}

/// A password hash as a `_users` document stores it.
struct StoredCredentials: Sendable, Hashable {
  var salt: String
  var derivedKey: [UInt8]
  var iterations: Int
  var prf: String

  init?(_ body: JSONObject) {
    guard body["password_scheme"]?.stringValue == "pbkdf2",
      let salt = body["salt"]?.stringValue,
      let key = body["derived_key"]?.stringValue.flatMap(Hex.decode), !key.isEmpty,
      let iterations = body["iterations"]?.numberValue?.int64Value, iterations > 0,
      iterations <= 1_000_000_000
    else { return nil }
    self.salt = salt
    self.derivedKey = key
    self.iterations = Int(iterations)
    // CouchDB's default for documents without the field (older CouchDB wrote SHA-1 hashes).
    self.prf = body["pbkdf2_prf"]?.stringValue ?? "sha"
  }
}

/// The users of a data directory, in its `_users` database (CouchDB's document shape:
/// `_id` `org.couchdb.user:NAME`, `name`, `roles`, `type: "user"`, and the PBKDF2 fields).
///
/// Every write goes through ``hashingPassword(_:)`` first: a `password` member is replaced by
/// `derived_key`, `salt`, `iterations` (``Password/iterations``), `password_scheme: "pbkdf2"`
/// and `pbkdf2_prf: "sha256"` before the document reaches the store, and the database's
/// validation (``UsersValidator``) refuses a clear password from any other path.
///
/// Administrators are users with the `_admin` role.
///
/// ```swift
/// let data = DataDirectory(path: dir, systemDatabases: [.users])
/// let users = try UserStore(data: data)
/// try users.add(name: "ann", password: "correct horse", roles: ["editor"], actor: "admin")
/// ```
public final class UserStore: Sendable {
  /// The database's name.
  public static let databaseName = "_users"
  /// Where `_users` is: one open store, or the data directory's database of that name (which a
  /// server administrator may delete and create again, as in CouchDB).
  private let source: Source
  /// Users looked up since `_users` last changed (its last committed position): every signed-in
  /// request looks its user up, and a commit to `_users` (a new password, new roles, a removal)
  /// empties it. Kept with the store it caches, so a `_users` deleted and made again never
  /// answers from the old one's entries.
  private let cache = Mutex<(store: DocumentStore?, users: CommittedCache<String, User?>)>(
    (nil, CommittedCache<String, User?>()))
  /// The database users are read from and written to (``authenticationDatabase``).
  private let current = Mutex(UserStore.databaseName)

  private enum Source: Sendable {
    case store(DocumentStore)
    case directory(DataDirectory)
  }

  /// Uses an open `_users` store (opened with ``Projections/SystemDatabase/users``' validation).
  public init(store: DocumentStore) {
    self.source = .store(store)
  }

  /// The database users sign in from: `_users`, or the one CouchDB's
  /// `chttpd_auth/authentication_db` names (``useAuthenticationDatabase(_:)``).
  public var authenticationDatabase: String { current.withLock { $0 } }

  /// Reads and writes users in database `name` from now on (CouchDB's
  /// `chttpd_auth/authentication_db`): the data directory gives it the rules of `_users`
  /// (``Projections/DataDirectory/designate(_:as:)``: passwords hashed, documents checked,
  /// `_design/_auth`), and the one designated before becomes an ordinary database again.
  /// `_users` keeps its rules whatever is named. A store given at ``init(store:)`` stays the
  /// one used.
  public func useAuthenticationDatabase(_ name: String) throws {
    guard case .directory(let data) = source else { return }
    try data.check(name: name)
    data.designate(name == Self.databaseName ? nil : name, as: .authenticationDatabase)
    current.withLock { $0 = name }
  }

  /// The users database as it is now; `404 not_found` while it does not exist (a server
  /// administrator deleted it, and no one has made it again with `PUT /_users`).
  public var store: DocumentStore {
    get throws {
      switch source {
      case .store(let store): return store
      case .directory(let data):
        let name = authenticationDatabase
        if let store = data.storeIfOpen(name) { return store }
        guard data.exists(name) else {
          throw StoreError.notFound("Database does not exist.")
        }
        return try data.open(name, create: false)
      }
    }
  }

  /// Whether the users database exists now.
  public var exists: Bool {
    switch source {
    case .store: return true
    case .directory(let data): return data.exists(authenticationDatabase)
    }
  }

  /// `_users` as it is now, or nil while it does not exist.
  func currentStore() throws -> DocumentStore? {
    do {
      return try store
    } catch let error as StoreError where error.code == .notFound {
      return nil
    }
  }

  /// The cache of `store`'s users (emptied when `_users` is another store than before).
  private func users(of store: DocumentStore) -> CommittedCache<String, User?> {
    cache.withLock { held in
      if held.store !== store { held = (store, CommittedCache<String, User?>()) }
      return held.users
    }
  }

  /// Opens `_users` in `data`, which must know it (`systemDatabases: [.users]`), creating it
  /// when `create` is true.
  public init(data: DataDirectory, create: Bool = true) throws {
    guard data.systemDatabases[Self.databaseName] != nil else {
      throw StoreError.internalError(
        "the data directory was opened without the _users database (systemDatabases: [.users])")
    }
    _ = try data.open(Self.databaseName, create: create)
    self.source = .directory(data)
  }

  /// The document id of user `name`.
  public static func documentID(of name: String) -> String { UsersValidator.idPrefix + name }

  /// User `name`, or nil when there is none (or it was removed).
  public func user(named name: String) throws -> User? {
    guard let store = try currentStore() else { return nil }
    try ensureDesign(store)
    do {
      return try users(of: store).value(for: name, in: store.log) {
        let doc: JSONValue
        do {
          doc = try store.get(Self.documentID(of: name))
        } catch let error as StoreError where error.code == .notFound {
          return nil
        }
        return doc.objectValue.flatMap(Self.user(from:))
      }
    } catch let error as LogError {
      throw StoreError.storage(error)
    }
  }

  /// Administrator `name` of `_users` while another database is the users database
  /// (``useAuthenticationDatabase(_:)``): wikilog's server administrators are `_users`
  /// documents with the `_admin` role, and they keep signing in, as CouchDB's (in its
  /// configuration) do. Nil for anyone else, and while `_users` is the users database.
  public func administrator(named name: String) throws -> User? {
    guard case .directory(let data) = source, authenticationDatabase != Self.databaseName,
      data.exists(Self.databaseName)
    else { return nil }
    let store = try data.storeIfOpen(Self.databaseName) ?? data.open(Self.databaseName)
    let doc: JSONValue
    do {
      doc = try store.get(Self.documentID(of: name))
    } catch let error as StoreError where error.code == .notFound {
      return nil
    }
    guard let user = doc.objectValue.flatMap(Self.user(from:)), user.isAdmin else { return nil }
    return user
  }

  /// Writes `_design/_auth` into the users database `chttpd_auth/authentication_db` names,
  /// if it exists and lacks it: what CouchDB's auth cache does when it starts listening to a
  /// users database anew, after the one it listened to was deleted or made again.
  public func ensureDesignDocument() throws {
    guard let store = try currentStore() else { return }
    designed.withLock { $0 = nil }
    try ensureDesign(store)
  }

  /// The store whose `_design/_auth` was seen (``ensureDesign(_:)``).
  private let designed = Mutex<ObjectIdentifier?>(nil)

  /// Writes `_design/_auth` into a users database `chttpd_auth/authentication_db` named,
  /// once it is first read for a sign-in, as CouchDB's auth cache does (`_users` is made with
  /// it).
  private func ensureDesign(_ store: DocumentStore) throws {
    guard authenticationDatabase != Self.databaseName, !store.log.options.readOnly,
      designed.withLock({ $0 }) != ObjectIdentifier(store)
    else { return }
    if (try? store.get(UsersValidator.designID)) == nil {
      _ = try WriteAccess.$user.withValue(nil) {
        try store.put(UsersValidator.designDocument, id: UsersValidator.designID, actor: "wikilog")
      }
    }
    designed.withLock { $0 = ObjectIdentifier(store) }
  }

  /// Every user, by name.
  public func users() throws -> [User] {
    guard let store = try currentStore() else { return [] }
    var options = AllDocsOptions()
    options.startKey = UsersValidator.idPrefix
    options.endKey = UsersValidator.idPrefix + "\u{10FFFF}"
    options.includeDocs = true
    return try store.allDocs(options).rows.compactMap { row in
      row["doc"]?.objectValue.flatMap(Self.user(from:))
    }
  }

  /// Adds user `name`; `conflict` when it exists.
  @discardableResult
  public func add(name: String, password: String?, roles: [String] = [], actor: String) throws
    -> User
  {
    if try user(named: name) != nil {
      throw StoreError("conflict", "The user \(name) already exists.", code: .conflict)
    }
    var body = JSONObject([
      "_id": .string(Self.documentID(of: name)), "name": .string(name),
      "roles": .array(roles.map(JSONValue.string)), "type": .string("user"),
    ])
    if let password { body["password"] = .string(password) }
    try write(body, actor: actor)
    guard let added = try user(named: name) else { throw StoreError.notFound("missing") }
    return added
  }

  /// Sets the password of user `name` (a new salt, so its sessions end).
  public func setPassword(of name: String, to password: String, actor: String) throws {
    try update(name, actor: actor) { body in body["password"] = .string(password) }
  }

  /// Replaces the roles of user `name`.
  public func setRoles(of name: String, to roles: [String], actor: String) throws {
    try update(name, actor: actor) { body in body["roles"] = .array(roles.map(JSONValue.string)) }
  }

  /// Disables (`true`) or enables user `name`: a disabled user's password, sessions, API and
  /// feed tokens sign nothing in until an administrator enables them again. Nothing else of
  /// the user changes (their roles, password and tokens are kept, ready for the enable).
  public func setDisabled(_ name: String, _ disabled: Bool, actor: String) throws {
    try update(name, actor: actor) { body in body["disabled"] = disabled ? .bool(true) : nil }
  }

  /// Removes user `name` (a deletion: the history stays in the log). Its API tokens stop
  /// working, since a token signs in only a user that exists.
  public func remove(name: String, actor: String) throws {
    guard let user = try user(named: name) else {
      throw StoreError.notFound("no user \(name)")
    }
    let result = try store.delete(Self.documentID(of: name), rev: user.rev, actor: actor)
    if let error = result.error { throw error }
  }

  /// Writes a user document given as JSON (with `_rev` to update), hashing its `password`
  /// first: what a `PUT /_users/org.couchdb.user:NAME` does in CouchDB.
  @discardableResult
  public func put(_ body: JSONObject, actor: String) throws -> DocumentWriteResult {
    try write(body, actor: actor)
  }

  /// `body` with its `password` replaced by a PBKDF2-SHA256 hash with a new salt (CouchDB's
  /// `couch_users_db:save_doc`); unchanged without a `password` (or with `"password": null`,
  /// which is removed). An empty or non-string password is refused. `iterations` are the
  /// PBKDF2 rounds (``Password/iterations`` unless a server's `chttpd_auth/iterations` says
  /// otherwise).
  public static func hashingPassword(_ body: JSONObject, iterations: Int = Password.iterations)
    throws -> JSONObject
  {
    guard let password = body["password"] else { return body }
    var out = body
    out["password"] = nil
    if password == .null { return out }
    guard let clear = password.stringValue, !clear.isEmpty else {
      throw StoreError.validation("The password must be a non-empty string.")
    }
    let salt = Password.newSalt()
    guard
      let key = Password.pbkdf2(
        password: Array(clear.utf8), salt: Array(salt.utf8), iterations: iterations)
    else { throw StoreError.internalError("cannot hash the password") }
    for field in [
      "derived_key", "iterations", "password_scheme", "password_sha", "preserve_salt",
      "pbkdf2_prf", "salt",
    ] {
      out[field] = nil
    }
    out["password_scheme"] = .string("pbkdf2")
    out["pbkdf2_prf"] = .string("sha256")
    out["salt"] = .string(salt)
    out["iterations"] = .number(JSONNumber(Int64(iterations)))
    out["derived_key"] = .string(Hex.encode(key))
    return out
  }

  // MARK: -

  private func update(_ name: String, actor: String, _ change: (inout JSONObject) -> Void)
    throws
  {
    let doc: JSONValue
    do {
      doc = try store.get(Self.documentID(of: name))
    } catch let error as StoreError where error.code == .notFound {
      throw StoreError.notFound("no user \(name)")
    }
    guard var body = doc.objectValue else { throw StoreError.notFound("no user \(name)") }
    change(&body)
    try write(body, actor: actor)
  }

  @discardableResult
  private func write(_ body: JSONObject, actor: String) throws -> DocumentWriteResult {
    let hashed = try Self.hashingPassword(body)
    let result = try store.put(JSONValue.object(hashed).serialized(), actor: actor)
    if let error = result.error { throw error }
    return result
  }

  static func user(from body: JSONObject) -> User? {
    // (No `type` is a user too, as CouchDB's auth cache reads one; `_users` has none such.)
    guard body["type"] == nil || body["type"]?.stringValue == "user",
      let name = body["name"]?.stringValue,
      let rev = body["_rev"]?.stringValue
    else { return nil }
    let roles = body["roles"]?.arrayValue?.compactMap(\.stringValue) ?? []
    return User(
      name: name, roles: roles, rev: rev, credentials: StoredCredentials(body),
      isDisabled: body["disabled"] == .bool(true))
  }
}
