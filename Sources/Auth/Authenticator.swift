import Crypto
import Formats
public import Foundation
public import JSON
public import Projections
import Synchronization

/// Who signed a request in, and how.
public struct Authentication: Sendable, Hashable {
  public var context: UserContext
  /// nil for an anonymous request.
  public var method: AuthenticationMethod?
  /// A `Set-Cookie` value to send with the response: a fresh `AuthSession` cookie when the
  /// presented one has used up more than 10% of its time (CouchDB's refresh rule).
  public var setCookie: String?

  public init(context: UserContext, method: AuthenticationMethod?, setCookie: String? = nil) {
    self.context = context
    self.method = method
    self.setCookie = setCookie
  }
}

/// Signs requests in: the one place an HTTP server asks, with the request's `Authorization` and
/// `Cookie` header values, who is making the request (``authenticate(authorization:cookie:client:secure:)``),
/// and what `/_session` answers (``signIn(name:password:client:secure:)``, ``sessionInfo(_:)``,
/// ``signOutCookie(secure:)``).
///
/// Accepted, in CouchDB's order: an `AuthSession` cookie (``SessionCookies``; an invalid or
/// expired one is ignored, as CouchDB does), then the `Authorization` header: `Basic`
/// (a `_users` name and password), `Bearer` (a JWT, when ``jwt`` is configured), `Token
/// token=...` (an ``APITokens`` token). Nothing presented is an anonymous request.
///
/// Passwords: PBKDF2 runs once per user and password, then the match is cached in memory
/// (``CredentialCache``, keyed by the stored hash so a password change misses); comparisons are
/// constant-time; a wrong password and an unknown user get the same answer after the same work;
/// repeated failures per user name and client address wait longer and longer
/// (``SignInThrottle``).
///
/// ```swift
/// let data = DataDirectory.wiki(path: dir, systemDatabases: [.users])
/// let auth = try Authenticator(data: data)
/// switch await auth.authenticate(authorization: request.headers[.authorization],
///                                cookie: request.headers[.cookie], client: peerAddress) {
/// case .success(let who): ... who.context.name, who.context.roles; who.setCookie
/// case .failure(let error): respond(error.status, error.json)
/// }
/// ```
public final class Authenticator: Sendable {
  public let users: UserStore
  public let tokens: APITokens
  /// One-time links that make an account (the web UI's invitations).
  public let invitations: Invitations
  public let sessions: SessionCookies
  /// The JWT verifier, when it has keys (a `Bearer` token is otherwise not read).
  public var jwt: JWTVerifier? {
    jwtState.withLock { verifier in verifier.flatMap { $0.hasKeys ? $0 : nil } }
  }
  private let jwtState: Mutex<JWTVerifier?>
  /// The JWT verifier's settings and keys, keys or not (a default one when none was given).
  public var jwtSettings: JWTVerifier { jwtState.withLock { $0 ?? JWTVerifier(now: now) } }
  /// The handlers that sign requests in, in CouchDB's names (`chttpd/authentication_handlers`):
  /// `cookie`, `default` (HTTP Basic) and `jwt`; wikilog's API tokens are always read.
  public var handlers: Set<Handler> {
    get { handlerState.withLock { $0 } }
    set { handlerState.withLock { $0 = newValue } }
  }
  private let handlerState = Mutex<Set<Handler>>(Handler.standard)
  /// The PBKDF2 rounds of passwords hashed by this server's writes to `_users` (CouchDB's
  /// `chttpd_auth/iterations`; ``Password/iterations`` unless changed).
  public var passwordIterations: Int {
    get { iterationState.withLock { $0 } }
    set { iterationState.withLock { $0 = max(1, newValue) } }
  }
  private let iterationState = Mutex(Password.iterations)

  /// A way of signing a request in that `chttpd/authentication_handlers` can leave out.
  public enum Handler: String, Sendable, CaseIterable, Hashable {
    case cookie, `default`, jwt
    /// CouchDB's proxy authentication: a proxy in front of the server names the user and
    /// roles in headers (``ProxyCredentials``). Off unless named: without a secret it trusts
    /// whoever sends the headers.
    case proxy

    /// The handlers a server has unless told otherwise (CouchDB's `cookie` and `default`, and
    /// `jwt` when keys are set).
    public static let standard: Set<Handler> = [.cookie, .default, .jwt]
  }

  /// What a proxy sent (`X-Auth-CouchDB-UserName`, `X-Auth-CouchDB-Roles`,
  /// `X-Auth-CouchDB-Token`).
  public struct ProxyCredentials: Sendable {
    public var name: String
    /// The roles header as sent: names separated by commas.
    public var roles: String?
    /// The hex HMAC of the name under the proxy secret.
    public var token: String?

    public init(name: String, roles: String?, token: String?) {
      self.name = name
      self.roles = roles
      self.token = token
    }
  }

  /// CouchDB's `chttpd_auth/proxy_use_secret` and `chttpd_auth/secret`: whether a proxy's
  /// request needs a token, and the secret it is the HMAC (SHA-256 or SHA-1) of the name under.
  public struct ProxySettings: Sendable {
    public var usesSecret = false
    public var secret: String?
  }

  public var proxy: ProxySettings {
    get { proxyState.withLock { $0 } }
    set { proxyState.withLock { $0 = newValue } }
  }
  private let proxyState = Mutex(ProxySettings())
  public let throttle: SignInThrottle
  let cache: CredentialCache
  let now: @Sendable () -> Date
  /// Server administrators kept outside `_users`, as CouchDB keeps its `[admins]` in its
  /// configuration: `wikilog serve --admin NAME` makes one for the server's lifetime, so that
  /// deleting `_users` (which CouchDB lets a server administrator do) locks no one out.
  private let serverAdmins = Mutex<[String: StoredCredentials]>([:])

  public init(
    users: UserStore, sessions: SessionCookies, jwt: JWTVerifier? = nil,
    throttle: SignInThrottle = SignInThrottle(), cacheCapacity: Int = 1_000,
    tokenLastUsedGranularity: TimeInterval = 60, now: @escaping @Sendable () -> Date = { Date() }
  ) {
    self.users = users
    self.tokens = APITokens(users: users, lastUsedGranularity: tokenLastUsedGranularity, now: now)
    self.invitations = Invitations(users: users, now: now)
    self.sessions = sessions
    self.jwtState = Mutex(jwt)
    self.throttle = throttle
    self.cache = CredentialCache(capacity: cacheCapacity)
    self.now = now
  }

  /// For a data directory that knows `_users` (`systemDatabases: [.users]`): its users and its
  /// server secret (``ServerSecret``, made on first use).
  public convenience init(
    data: DataDirectory, jwt: JWTVerifier? = nil, sessionTimeout: Int = 600,
    throttle: SignInThrottle = SignInThrottle()
  ) throws {
    let secret = try ServerSecret.load(directory: data.path)
    self.init(
      users: try UserStore(data: data),
      sessions: SessionCookies(secret: secret, timeout: sessionTimeout), jwt: jwt,
      throttle: throttle)
  }

  /// Changes the JWT verifier (keys and claims set at run time, `[jwt_keys]` and `[jwt_auth]`);
  /// one is made when there is none.
  public func updateJWT(_ change: (inout JWTVerifier) throws -> Void) rethrows {
    try jwtState.withLock { state in
      var verifier = state ?? JWTVerifier(now: now)
      try change(&verifier)
      state = verifier
    }
  }

  // MARK: Server administrators

  /// Makes `name` a server administrator with `password` for this authenticator's lifetime,
  /// outside `_users` (its PBKDF2 hash kept in memory, never written): it signs in (Basic,
  /// `/_session`, cookies) whether or not `_users` holds a user of that name, or exists.
  public func addServerAdmin(name: String, password: String) throws {
    guard !name.isEmpty, !password.isEmpty else {
      throw StoreError.badRequest("a server administrator needs a name and a password")
    }
    let hashed = try UserStore.hashingPassword(JSONObject(["password": .string(password)]))
    guard let credentials = StoredCredentials(hashed) else {
      throw StoreError.internalError("cannot hash the administrator's password")
    }
    serverAdmins.withLock { $0[name] = credentials }
  }

  /// Removes server administrator `name`; false when there is none.
  @discardableResult
  public func removeServerAdmin(name: String) -> Bool {
    serverAdmins.withLock { $0.removeValue(forKey: name) != nil }
  }

  /// Server administrator `name`'s password hash as CouchDB's `[admins]` shows one:
  /// `-pbkdf2-<derived key>,<salt>,<iterations>`; nil when there is none.
  public func serverAdminHash(name: String) -> String? {
    guard let c = serverAdmins.withLock({ $0[name] }) else { return nil }
    return "-pbkdf2-\(Hex.encode(c.derivedKey)),\(c.salt),\(c.iterations)"
  }

  /// The names of the server administrators kept outside `_users`.
  public var serverAdminNames: [String] { serverAdmins.withLock { $0.keys.sorted() } }

  /// Server administrator `name` as a user (the `_admin` role), or nil.
  func serverAdmin(named name: String) -> User? {
    guard let credentials = serverAdmins.withLock({ $0[name] }) else { return nil }
    return User(
      name: name, roles: [UserContext.adminRole], rev: "", credentials: credentials)
  }

  /// The user a session, a password or a token names: a server administrator first, else
  /// the users database's user (with another `authentication_db`, `_users`' administrators
  /// still, as CouchDB's server administrators live outside it).
  func user(named name: String) throws -> User? {
    if let admin = serverAdmin(named: name) { return admin }
    if let user = try users.user(named: name) { return user }
    return try users.administrator(named: name)
  }

  // MARK: Passwords

  /// User `name` if `password` is theirs, else nil; no throttling (see
  /// ``verifyPassword(name:password:client:)``). Runs PBKDF2 unless the pair is cached; for an
  /// unknown user or one without a password it runs it too, on a dummy, so that the time taken
  /// does not tell whether the user exists.
  public func checkPassword(name: String, password: String) throws -> User? {
    if let admin = serverAdmin(named: name), let stored = admin.credentials,
      matches(admin, stored, password)
    {
      return admin
    }
    guard let user = try users.user(named: name) ?? users.administrator(named: name),
      let stored = user.credentials
    else {
      _ = Password.pbkdf2(
        password: Array(password.utf8), salt: Array("wikilog-no-such-user".utf8),
        iterations: Password.iterations)
      return nil
    }
    return matches(user, stored, password) ? user : nil
  }

  /// Whether `password` is `user`'s (PBKDF2 unless the pair is cached).
  private func matches(_ user: User, _ stored: StoredCredentials, _ password: String) -> Bool {
    if cache.contains(user.name, stored, password: password) { return true }
    guard
      let derived = Password.pbkdf2(
        password: Array(password.utf8), salt: Array(stored.salt.utf8),
        iterations: stored.iterations, prf: stored.prf, length: stored.derivedKey.count),
      Password.constantTimeEqual(derived, stored.derivedKey)
    else { return false }
    cache.insert(user.name, stored, password: password)
    return true
  }

  /// User `name` if `password` is theirs; otherwise 401 "Name or password is incorrect."
  /// whether or not the user exists (and 401 ``AuthError/accountDisabled`` for the right
  /// password of a disabled user). Waits first as long as the throttle says for this name
  /// and client address, and records the outcome.
  public func verifyPassword(name: String, password: String, client: String?)
    async throws(AuthError) -> User
  {
    if throttle.isLockedOut(user: name, client: client) { throw SignInThrottle.lockedOut }
    await wait(throttle.delay(user: name, client: client))
    let user: User?
    do {
      user = try checkPassword(name: name, password: password)
    } catch {
      throw Self.internalError(error)
    }
    guard let user else {
      throttle.recordFailure(user: name, client: client)
      throw AuthError.incorrectCredentials
    }
    throttle.recordSuccess(user: name, client: client)
    // Said only to whoever knows the password: it tells nothing to anyone else.
    if user.isDisabled { throw AuthError.accountDisabled }
    return user
  }

  // MARK: Sessions

  /// `POST /_session`: checks the name and password and returns CouchDB's answer
  /// (`{"ok":true,"name":...,"roles":[...]}`) with the `Set-Cookie` value of a new session.
  /// A refusal is 401 "Name or password is incorrect." (send ``signOutCookie(secure:)`` with
  /// it, as CouchDB does).
  public func signIn(name: String, password: String, client: String?, secure: Bool = false)
    async throws(AuthError) -> (body: JSONValue, setCookie: String)
  {
    let user = try await verifyPassword(name: name, password: password, client: client)
    let body = JSONValue.object(
      JSONObject([
        "ok": .bool(true), "name": .string(user.name),
        "roles": .array(user.roles.map(JSONValue.string)),
      ]))
    return (body, cookie(for: user, secure: secure))
  }

  /// The `Set-Cookie` value of a new session of `user`.
  public func cookie(for user: User, secure: Bool = false) -> String {
    let time = now()
    return sessions.setCookie(
      value: sessions.value(name: user.name, salt: user.salt, time: time), secure: secure,
      now: time)
  }

  /// `DELETE /_session`'s `Set-Cookie` value (an emptied `AuthSession`).
  public func signOutCookie(secure: Bool = false) -> String {
    sessions.clearCookie(secure: secure, now: now())
  }

  /// `GET /_session`'s answer for a request signed in as `authentication`.
  public func sessionInfo(_ authentication: Authentication) -> JSONValue {
    var info = JSONObject([
      // JWT is listed only with a key to check tokens against; API tokens always are.
      "authentication_handlers": .array(
        ([Handler.proxy, .cookie, .default, .jwt].filter {
          handlers.contains($0) && ($0 != .jwt || jwt != nil)
        }
        .map(\.rawValue) + ["token"]).map(JSONValue.string))
    ])
    if let method = authentication.method {
      info["authenticated"] = .string(method.rawValue)
    }
    info["authentication_db"] = .string(users.authenticationDatabase)
    return .object(
      JSONObject([
        "ok": .bool(true), "userCtx": authentication.context.json, "info": .object(info),
      ]))
  }

  /// The user a presented `AuthSession` cookie value signs in, with the refresh to send; nil
  /// when it is not valid (wrong MAC, expired, unknown user, password changed since).
  public func verifyCookie(_ value: String, secure: Bool = false) throws(AuthError)
    -> Authentication?
  {
    let parts = try SessionCookies.parse(value)
    let user: User?
    do { user = try self.user(named: parts.name) } catch { throw Self.internalError(error) }
    guard let user, !user.isDisabled else { return nil }
    let time = now()
    guard
      let verified = sessions.verify(
        name: parts.name, time: parts.time, mac: parts.mac, salt: user.salt, now: time)
    else { return nil }
    return Authentication(
      context: user.context, method: .cookie,
      setCookie: verified.needsRefresh ? cookie(for: user, secure: secure) : nil)
  }

  // MARK: Requests

  /// Who makes a request, from its `Authorization` and `Cookie` header values (nil when
  /// absent) and the client's address (for the throttle). `secure` is whether the request came
  /// over HTTPS (a refreshed cookie is then `Secure`).
  ///
  /// - Returns: the signed-in user (``UserContext/anonymous`` when nothing was presented), or
  ///   CouchDB's error: 401 `unauthorized` for a wrong name or password, token or expired JWT;
  ///   400 `bad_request` for a malformed header, cookie or JWT (CouchDB's answers).
  public func authenticate(
    authorization: String?, cookie: String?, client: String?, secure: Bool = false,
    proxy: ProxyCredentials? = nil
  ) async -> Result<Authentication, AuthError> {
    let handlers = self.handlers
    if handlers.contains(.proxy), let proxy, let signedIn = proxied(proxy) {
      return .success(signedIn)
    }
    do throws(AuthError) {
      if handlers.contains(.cookie), let cookie,
        let value = SessionCookies.cookieValue(inHeader: cookie), !value.isEmpty,
        let signedIn = try verifyCookie(value, secure: secure)
      {
        return .success(signedIn)
      }
      guard let header = authorization.map({ Self.trimmedSpaces($0[...]) }),
        let space = header.firstIndex(of: " ")
      else { return .success(Authentication(context: .anonymous, method: nil)) }
      let scheme = header[..<space].lowercased()
      let credentials = String(Self.trimmedSpaces(header[header.index(after: space)...]))
      switch scheme {
      case "basic":
        guard handlers.contains(.default) else {
          return .success(Authentication(context: .anonymous, method: nil))
        }
        guard let decoded = Base64.decode(String(credentials)),
          let text = String(validating: decoded, as: UTF8.self)
        else { throw AuthError.badRequest("Authorization header has invalid base64 value") }
        guard let colon = text.firstIndex(of: ":") else {
          return .success(Authentication(context: .anonymous, method: nil))
        }
        let name = String(text[..<colon])
        let password = String(text[text.index(after: colon)...])
        if name == "_" && password == "_" {  // CouchDB's "signed out" pair
          return .success(Authentication(context: .anonymous, method: nil))
        }
        let user = try await verifyPassword(name: name, password: password, client: client)
        return .success(Authentication(context: user.context, method: .basic))
      case "bearer":
        guard let jwt, handlers.contains(.jwt) else {
          return .success(Authentication(context: .anonymous, method: nil))
        }
        return .success(Authentication(context: try jwt.verify(credentials), method: .jwt))
      case "token":
        return .success(try await verifyToken(Self.tokenParameter(credentials), client: client))
      default:
        return .success(Authentication(context: .anonymous, method: nil))
      }
    } catch {
      return .failure(error)
    }
  }

  /// The user a proxy names (`couch_httpd_auth:proxy_auth_user`): with
  /// `proxy_use_secret` and a secret set, only when the token is the hex HMAC-SHA256 (or
  /// HMAC-SHA1) of the name under the secret; nil otherwise, and the next handlers try.
  func proxied(_ proxy: ProxyCredentials) -> Authentication? {
    let settings = self.proxy
    if settings.usesSecret, let secret = settings.secret {
      guard let token = proxy.token?.lowercased() else { return nil }
      let key = SymmetricKey(data: Array(secret.utf8))
      let name = Array(proxy.name.utf8)
      let candidates = [
        Hex.encode(Array(HMAC<SHA256>.authenticationCode(for: name, using: key))),
        Hex.encode(Array(HMAC<Insecure.SHA1>.authenticationCode(for: name, using: key))),
      ]
      guard
        candidates.contains(where: {
          Password.constantTimeEqual(Array($0.utf8), Array(token.utf8))
        })
      else { return nil }
    }
    let roles = (proxy.roles ?? "").split(separator: ",").map {
      String($0.drop(while: { $0 == " " }).reversed().drop(while: { $0 == " " }).reversed())
    }.filter { !$0.isEmpty }
    return Authentication(context: UserContext(name: proxy.name, roles: roles), method: .proxy)
  }

  /// The signed-in user of an API token; 401 "Invalid API token." otherwise (throttled per
  /// client address).
  public func verifyToken(_ token: String, client: String?) async throws(AuthError)
    -> Authentication
  {
    await wait(throttle.delay(user: nil, client: client))
    let user: User?
    do { user = try tokens.verify(token) } catch { throw Self.internalError(error) }
    guard let user else {
      throttle.recordFailure(user: nil, client: client)
      throw AuthError.unauthorized("Invalid API token.")
    }
    return Authentication(context: user.context, method: .token)
  }

  /// The token of `Token token=...` (`token="..."` too, and other parameters after `,` or `;`),
  /// or of `Token ...` with the token alone.
  static func tokenParameter(_ credentials: String) -> String {
    for part in credentials.split(whereSeparator: { $0 == "," || $0 == ";" }) {
      let pair = trimmedSpaces(part)
      guard pair.hasPrefix("token=") else { continue }
      var value = pair.dropFirst("token=".count)
      if value.count >= 2, value.hasPrefix("\""), value.hasSuffix("\"") {
        value = value.dropFirst().dropLast()
      }
      return String(value)
    }
    return credentials
  }

  /// `text` without the spaces and tabs around it (without Foundation: this runs per request).
  static func trimmedSpaces(_ text: Substring) -> Substring {
    var s = text
    while let first = s.first, first == " " || first == "\t" { s = s.dropFirst() }
    while let last = s.last, last == " " || last == "\t" { s = s.dropLast() }
    return s
  }

  private func wait(_ delay: Duration) async {
    guard delay > .zero else { return }
    try? await Task.sleep(for: delay)
  }

  static func internalError(_ error: any Error) -> AuthError {
    if let store = error as? StoreError {
      return AuthError(status: 500, error: store.error, reason: store.reason)
    }
    return AuthError(status: 500, error: "unknown_error", reason: "\(error)")
  }
}
