import Auth
import HTTPTypes
public import Hummingbird
public import JSON
import Log
public import Projections

/// Who makes a request: the signed-in user (CouchDB's `userCtx`), the actor their writes are
/// recorded under, and a refreshed session cookie to send back.
struct Caller: Sendable {
  var authentication: Authentication
  /// The user the rules see: the signed-in one, or a server administrator for an anonymous
  /// request while the server has no administrator at all ("admin party", loopback only).
  var user: UserContext
  /// The actor of the request's writes: the user's name, or `anonymous`.
  var actor: String

  /// A server administrator, as the library-embedded server without an ``Authenticator`` sees
  /// every request.
  static func administrator(actor: String) -> Caller {
    Caller(
      authentication: Authentication(context: .anonymous, method: nil),
      user: UserContext(name: nil, roles: [UserContext.adminRole]), actor: actor)
  }
}

/// What the caller may do with one database: its security object and access rules, worked out
/// once per request.
public struct DatabaseAccess: Sendable {
  public let name: String
  public let user: UserContext
  public let security: SecurityObject
  /// Per-document rules (the wiki's membership); nil for a plain database.
  public let rules: (any DocumentAccess)?
  /// How the database is served when it is a system database (``SystemDatabasePolicy``).
  public let policy: SystemDatabasePolicy?

  public var isServerAdmin: Bool { user.isAdmin }
  public var isAdmin: Bool { security.isAdmin(user) }
  public var isMember: Bool { security.isMember(user) }
  /// Whether reads are filtered to what the rules grant (a user other than a server
  /// administrator, in a database with rules).
  public var restricted: Bool { rules != nil && !user.isAdmin }

  /// The caller's view of `store`, when ``restricted``.
  public func view(_ store: DocumentStore) throws -> (any AccessView)? {
    guard restricted, let rules else { return nil }
    return try rules.view(for: user, isMember: isMember, in: store)
  }

  /// Whether the caller may read document `docID`.
  public func canRead(_ docID: String, in store: DocumentStore) throws -> Bool {
    guard restricted, rules != nil else { return true }
    return try store.read { txn in try canRead(docID, in: store, txn: txn) }
  }

  /// ``canRead(_:in:)`` in the caller's read transaction.
  func canRead(_ docID: String, in store: DocumentStore, txn: ReadTransaction) throws -> Bool {
    guard restricted, let rules else { return true }
    guard let rights = try rules.rights(of: user, to: docID, in: store, txn: txn) else {
      return isMember
    }
    return rights >= .member
  }

  /// Whether documents are shown as stored (no ``SystemDatabasePolicy/shown`` of a system
  /// database changes them).
  public var showsAsStored: Bool { policy?.shown == nil }

  /// Whether bodies are stored as sent (no ``SystemDatabasePolicy/owned`` changes them).
  public var storesAsSent: Bool { policy?.owned == nil }

  /// `doc` as the caller may see it: by the system database's policy (in `_replicator`,
  /// another user's document without its credentials); elsewhere as it is.
  public func shown(_ doc: JSONValue, madeUpRev: Bool = true) -> JSONValue {
    guard let shown = policy?.shown else { return doc }
    return shown(doc, self, madeUpRev)
  }

  /// `value` as every write of it is stored by the system database's policy
  /// (``SystemDatabasePolicy/stored``: in `_users`, a clear password hashed); elsewhere, and
  /// when it is not a JSON object (the write then fails on its own), as it is.
  public func stored(_ value: JSONValue) throws -> JSONValue {
    guard let stored = policy?.stored, case .object(let object) = value else { return value }
    return .object(try stored(object))
  }

  /// Whether the caller must be a server administrator for a write other than a `PUT` or
  /// `DELETE` of a JSON document (``SystemDatabasePolicy/plainWritesOnly``).
  public var plainWritesOnly: Bool { policy?.plainWritesOnly == true && !user.isAdmin }

  /// The body of a write to `docID` as the system database's policy stores it (in
  /// `_replicator`, with its `owner` set); elsewhere as it is. A body that is not a JSON
  /// object is left as it is (the write then fails on its own).
  public func owned(_ body: [UInt8], id: String?) throws -> [UInt8] {
    guard let owned = policy?.owned else { return body }
    guard case .object(let object)? = try? JSONValue(parsing: body) else { return body }
    let docID = id ?? object["_id"]?.stringValue ?? ""
    return JSONValue.object(try owned(object, docID, self)).serialized()
  }

  /// ``owned(_:id:)`` for a parsed document.
  public func owned(_ object: JSONObject, id: String) throws -> JSONObject {
    guard let owned = policy?.owned else { return object }
    return try owned(object, id, self)
  }

  /// Throws 404 `not_found` (as for a document that does not exist) unless the caller may
  /// read `docID`.
  public func checkRead(_ docID: String, in store: DocumentStore) throws {
    if try !canRead(docID, in: store) { throw StoreError.notFound("missing") }
  }

  /// Refuses a write the caller may not make: design documents need a database admin; the
  /// rules decide the rest (the security object, for a plain database: checked at the gate).
  public func checkWrite(
    _ write: AccessWrite, in store: DocumentStore, batch: inout AccessBatch
  ) throws {
    try security.checkDesignWrite(write.docID, by: user)
    if let check = policy?.checkWrite { try check(write, self, store) }
    guard let rules, !user.isAdmin else { return }
    do {
      try store.read { txn in
        try rules.checkWrite(
          write, by: user, isMember: isMember, in: store, txn: txn, batch: &batch)
      }
    } catch let refusal as StoreError
      where refusal.error == "forbidden" && write.replicated
      && store.holdsRevisions(of: write.docID)
    {
      // A replicated page its writer may not write now: the store decides in the write
      // transaction, and holds it until its wiki lets the writer in, with the same refusal.
    }
  }

  /// ``checkWrite(_:in:batch:)`` for a JSON body.
  public func checkWrite(
    docID: String, body: JSONValue?, replicated: Bool, in store: DocumentStore
  ) throws {
    var batch = AccessBatch()
    let object = body?.objectValue
    let deleted = object?["_deleted"] == .bool(true)
    try checkWrite(
      AccessWrite(docID: docID, body: deleted ? nil : object, replicated: replicated), in: store,
      batch: &batch)
  }
}

extension CouchServer {
  /// Signs the request in (``CouchServerOptions/authenticator``); without an authenticator
  /// every request is a server administrator's.
  func caller(_ request: Request, context: Context) async throws -> Caller {
    guard let auth = options.authenticator else { return .administrator(actor: options.actor) }
    let proxy = HTTPField.Name("X-Auth-CouchDB-UserName").flatMap { request.headers[$0] }.map {
      Authenticator.ProxyCredentials(
        name: $0, roles: HTTPField.Name("X-Auth-CouchDB-Roles").flatMap { request.headers[$0] },
        token: HTTPField.Name("X-Auth-CouchDB-Token").flatMap { request.headers[$0] })
    }
    let result = await auth.authenticate(
      authorization: request.headers[.authorization], cookie: request.headers[.cookie],
      client: context.peerAddress, secure: options.secure, proxy: proxy)
    switch result {
    case .failure(let error):
      throw CouchError(error.error, error.reason, status: error.status)
    case .success(let authentication):
      var user = authentication.context
      if user.name == nil, try adminParty(auth) {
        user = UserContext(name: nil, roles: [UserContext.adminRole])
      }
      return Caller(
        authentication: authentication, user: user, actor: user.name ?? "anonymous")
    }
  }

  /// Whether no user is an administrator: anonymous requests are then an administrator's, as
  /// in CouchDB's old "admin party" (`wikilog serve` binds only loopback addresses then).
  func adminParty(_ auth: Authenticator) throws -> Bool {
    try !adminPresence.hasAdmin(auth)
  }

  /// Throws CouchDB's refusal unless the caller is a server administrator.
  func requireServerAdmin(_ caller: Caller) throws {
    guard caller.user.isAdmin else {
      throw CouchError("unauthorized", "You are not a server admin.", status: 401)
    }
  }

  /// The caller's access to database `name` (opened as `store`), after CouchDB's member check:
  /// 401 for an anonymous caller and 403 for a signed-in one who may not use the database. A
  /// database with rules lets every signed-in user in (they see what the rules grant).
  ///
  /// In a database with per-document rules, every signed-in user passes the gate and reads
  /// what the rules grant them: a newcomer in no wiki yet reads an empty database (a pull's
  /// `_changes` with no rows, an `_all_docs` with none, 404 for a document they may not read)
  /// and may create their first wiki, or push it by replication — as a user of a Sync
  /// Gateway with no channel yet gets an empty feed, not a refusal. A pull and a push started
  /// together (PouchDB's `sync`, the Sync page) both work from the first request.
  func databaseAccess(
    _ name: String, _ store: DocumentStore, _ caller: Caller
  ) throws -> DatabaseAccess {
    let access = DatabaseAccess(
      name: name, user: caller.user,
      security: caller.user.isAdmin ? .empty : try securityCache.security(of: store),
      rules: dataDirectory.access(of: name), policy: systemPolicy(name))
    if access.isServerAdmin { return access }
    if access.policy?.admitsEveryone == true {
      // `_users`: each user reaches their own document only (its policy's gate).
      return access
    }
    if access.isMember { return access }
    if access.rules != nil && caller.user.name != nil { return access }
    throw Self.notMember(caller.user)
  }

  static func notMember(_ user: UserContext) -> CouchError {
    user.name == nil
      ? CouchError("unauthorized", "You are not authorized to access this db.", status: 401)
      : CouchError("forbidden", "You are not allowed to access this db.", status: 403)
  }

  static func notDatabaseAdmin(_ user: UserContext) -> CouchError {
    user.name == nil
      ? CouchError("unauthorized", "You are not a db or server admin.", status: 401)
      : CouchError("forbidden", "You are not a db or server admin.", status: 403)
  }

  // MARK: _security

  /// `GET/PUT /{db}/_security`: members read it, database admins replace it.
  func securityObject(
    _ store: DocumentStore, access: DatabaseAccess, request: Request, caller: Caller
  ) async throws -> Response {
    switch request.method {
    case .get, .head:
      // The security object's readers, as in CouchDB: its members (a wiki's users who are not
      // pass the gate for their wikis only) and admins.
      guard access.isMember || access.isAdmin else { throw Self.notMember(caller.user) }
      return CouchResponse.json(
        try store.security().json, includeBody: request.method == .get)
    case .put:
      guard access.isAdmin else { throw Self.notDatabaseAdmin(caller.user) }
      let security: SecurityObject
      do { security = try SecurityObject(json: try await jsonBody(of: request)) } catch let e
        as StoreError
      {
        throw CouchError(e)
      }
      try await store.setSecurityAsync(security, actor: caller.actor)
      return CouchResponse.ok()
    default:
      throw CouchError.methodNotAllowed(["GET", "HEAD", "PUT"])
    }
  }

  // MARK: _users

  // MARK: /_session

  /// `GET/POST/DELETE /_session`, as CouchDB's `couch_httpd_auth:handle_session_req`.
  func session(_ request: Request, caller: Caller, context: Context) async throws -> Response {
    guard let auth = options.authenticator else {
      throw CouchError.notImplemented("sign-in (/_session) on a server without users")
    }
    switch request.method {
    case .get, .head:
      var info = auth.sessionInfo(caller.authentication)
      if caller.user != caller.authentication.context, var object = info.objectValue {
        object["userCtx"] = caller.user.json  // admin party
        info = .object(object)
      }
      return CouchResponse.json(info, includeBody: request.method == .get)
    case .post:
      let bytes = try await body(of: request)
      let type = (request.headers[.contentType] ?? "").lowercased()
      var name: String?
      var password: String?
      if type.hasPrefix("application/x-www-form-urlencoded") {
        let form = try QueryParameters(String(decoding: bytes, as: UTF8.self))
        name = form["name"] ?? form["username"]
        password = form["password"]
      } else {
        guard type.hasPrefix("application/json") else {
          throw CouchError(
            "bad_content_type",
            "Content-Type must be 'application/x-www-form-urlencoded' or 'application/json'",
            status: 415)
        }
        let object: JSONObject?
        do { object = try JSONValue(parsing: bytes).objectValue } catch {
          throw CouchError.badRequest("invalid UTF-8 JSON: \(error)")
        }
        name = object?["name"]?.stringValue ?? object?["username"]?.stringValue
        password = object?["password"]?.stringValue
      }
      guard let name, let password else {
        throw CouchError.badRequest("Name or password is missing.")
      }
      do {
        let signed = try await auth.signIn(
          name: name, password: password, client: context.peerAddress, secure: options.secure)
        var headers = HTTPFields()
        headers[.setCookie] = signed.setCookie
        let query = try QueryParameters(request.uri.query)
        if let next = query["next"], next.hasPrefix("/"), !next.hasPrefix("//") {
          headers[.location] = next
          return CouchResponse.json(signed.body, status: .found, headers: headers)
        }
        return CouchResponse.json(signed.body, headers: headers)
      } catch let error as AuthError {
        var headers = HTTPFields()
        headers[.setCookie] = auth.signOutCookie(secure: options.secure)
        return CouchResponse.json(error.json, status: .init(code: error.status), headers: headers)
      }
    case .delete:
      var headers = HTTPFields()
      headers[.setCookie] = auth.signOutCookie(secure: options.secure)
      let query = try QueryParameters(request.uri.query)
      if let next = query["next"], next.hasPrefix("/"), !next.hasPrefix("//") {
        headers[.location] = next
        return CouchResponse.json(
          .object(JSONObject(["ok": .bool(true)])), status: .found, headers: headers)
      }
      return CouchResponse.json(.object(JSONObject(["ok": .bool(true)])), headers: headers)
    default:
      throw CouchError.methodNotAllowed(["DELETE", "GET", "HEAD", "POST"])
    }
  }
}

/// Whether `_users` holds an administrator, read again only when `_users` has changed.
final class AdminPresence: Sendable {
  private let cache = CommittedCache<Bool, Bool>(capacity: 1)

  /// Whether `auth` knows an administrator: a server administrator, or a user of `_users`
  /// with the `_admin` role (none while `_users` does not exist).
  func hasAdmin(_ auth: Authenticator) throws -> Bool {
    if !auth.serverAdminNames.isEmpty { return true }
    let users = auth.users
    guard users.exists else { return false }
    do {
      return try cache.value(for: true, in: users.store.log) {
        try users.users().contains { $0.isAdmin }
      }
    } catch let error as LogError {
      throw StoreError.storage(error)
    }
  }
}

/// Who makes a request, as another module serving pages beside the API (the web UI) sees it.
public struct SignedInUser: Sendable {
  /// The user the access rules see (an administrator for an anonymous request while the server
  /// has no administrator at all).
  public let user: UserContext
  /// Whether a name and password, cookie, token or JWT signed the request in.
  public let isSignedIn: Bool
  /// The actor of the user's writes.
  public let actor: String
  /// Where the request came from, for the events' origin.
  public let origin: String
  /// A refreshed `AuthSession` cookie to send with the response, if any.
  public let setCookie: String?
}

extension CouchServer {
  /// Signs a request in as the API does (cookie, Basic, token, JWT; the admin party); throws
  /// the API's refusal (a ``CouchError``) for bad credentials.
  public func signIn(_ request: Request, context: Context) async throws -> SignedInUser {
    let who = try await caller(request, context: context)
    return SignedInUser(
      user: who.user, isSignedIn: who.authentication.method != nil, actor: who.actor,
      origin: replicationOrigin(context), setCookie: who.authentication.setCookie)
  }
}

/// Each database's security object, read again only when the database has changed (its last
/// committed position): every request by a user who is not an administrator needs it.
final class SecurityCache: Sendable {
  private let cache = CommittedCache<ObjectIdentifier, SecurityObject>(capacity: 1_000)

  func security(of store: DocumentStore) throws -> SecurityObject {
    do {
      return try cache.value(for: ObjectIdentifier(store), in: store.log) {
        try store.security()
      }
    } catch let error as LogError {
      throw StoreError.storage(error)
    }
  }
}
