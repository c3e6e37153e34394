import Crypto
import Formats
import Foundation
import JSON
import Projections
import Testing
import _CryptoExtras

@testable import Auth

@Suite struct SessionTests {
  func setUp() throws -> (TestUsers, TestClock, Authenticator) {
    let t = try TestUsers()
    try t.users.add(name: "ann", password: "pw", roles: ["editor"], actor: "admin")
    let clock = TestClock()
    let auth = Authenticator(
      users: t.users, sessions: SessionCookies(secret: "0123456789abcdef0123456789abcdef"),
      now: { clock.now })
    return (t, clock, auth)
  }

  func value(_ setCookie: String) -> String {
    String(setCookie.split(separator: ";")[0].dropFirst("AuthSession=".count))
  }

  @Test func cookieFormatRoundTripExpiryAndRefresh() async throws {
    let (t, clock, auth) = try setUp()
    let (body, setCookie) = try await auth.signIn(name: "ann", password: "pw", client: "1.2.3.4")
    #expect(
      body
        == .object(
          JSONObject([
            "ok": .bool(true), "name": .string("ann"), "roles": .array([.string("editor")]),
          ])))
    #expect(
      setCookie.wholeMatch(
        of:
          /AuthSession=[A-Za-z0-9_-]+; Version=1; Expires=[A-Z][a-z]{2}, \d\d [A-Z][a-z]{2} \d{4} \d\d:\d\d:\d\d GMT; Max-Age=600; Path=\/; HttpOnly/
      ) != nil, "\(setCookie)")
    #expect(setCookie.contains("Expires=Fri, 15 Jan 2027 08:10:00 GMT"))  // 1_800_000_000 + 600
    // The value: base64url of NAME:HEXTIME:HMAC-SHA256(secret ++ salt, NAME:HEXTIME).
    let raw = try #require(Base64.decodeURL(value(setCookie)))
    let prefix = "ann:" + String(1_800_000_000, radix: 16, uppercase: true) + ":"
    #expect(Array(raw.prefix(prefix.utf8.count)) == Array(prefix.utf8))
    let salt = try #require(try t.users.store.get("org.couchdb.user:ann")["salt"]?.stringValue)
    let mac = HMAC<SHA256>.authenticationCode(
      for: Array(prefix.dropLast().utf8),
      using: SymmetricKey(data: Array(("0123456789abcdef0123456789abcdef" + salt).utf8)))
    #expect(Array(raw.dropFirst(prefix.utf8.count)) == Array(mac))

    let cookieHeader = "other=1; AuthSession=\(value(setCookie))"
    func who() async -> Result<Authentication, AuthError> {
      await auth.authenticate(authorization: nil, cookie: cookieHeader, client: nil)
    }
    var signedIn = try await who().get()
    #expect(signedIn.context == UserContext(name: "ann", roles: ["editor"]))
    #expect(signedIn.method == .cookie)
    #expect(signedIn.setCookie == nil)
    clock.advance(60)  // 540 s left: not less than 90% of 600
    #expect(try await who().get().setCookie == nil)
    clock.advance(1)  // 539 s left: a fresh cookie
    signedIn = try await who().get()
    let fresh = try #require(signedIn.setCookie)
    #expect(value(fresh) != value(setCookie))
    clock.advance(538)  // 1 s left: still valid
    #expect(try await who().get().context.name == "ann")
    clock.advance(1)  // expired: anonymous, as CouchDB ignores it
    #expect(try await who().get().context == .anonymous)
    // The refreshed cookie lives on.
    #expect(
      try await auth.authenticate(
        authorization: nil, cookie: "AuthSession=\(value(fresh))", client: nil
      )
      .get().context.name == "ann")

    // GET /_session's shape.
    let info = auth.sessionInfo(signedIn)
    #expect(
      info["userCtx"]
        == .object(JSONObject(["name": .string("ann"), "roles": .array([.string("editor")])])))
    #expect(info["info"]?["authenticated"] == .string("cookie"))
    #expect(auth.signOutCookie().hasPrefix("AuthSession=; Version=1; Expires="))
  }

  @Test func tamperedOrMalformedCookies() async throws {
    let (t, _, auth) = try setUp()
    let value = value(try await auth.signIn(name: "ann", password: "pw", client: nil).setCookie)
    var raw = try #require(Base64.decodeURL(value))
    raw[raw.count - 1] ^= 1
    let tampered = Base64.encodeURL(raw)
    #expect(
      try await auth.authenticate(
        authorization: nil, cookie: "AuthSession=\(tampered)", client: nil
      )
      .get().context == .anonymous)
    // A later issue time with the old MAC.
    let forged = Base64.encodeURL(
      Array(("ann:" + String(1_900_000_000, radix: 16, uppercase: true)).utf8)
        + raw.drop(while: { $0 != UInt8(ascii: ":") }).dropFirst().drop(while: {
          $0 != UInt8(ascii: ":")
        }))
    #expect(
      try await auth.authenticate(authorization: nil, cookie: "AuthSession=\(forged)", client: nil)
        .get().context == .anonymous)
    let malformed = await auth.authenticate(
      authorization: nil, cookie: "AuthSession=\(Base64.encodeURL(Array("nocolons".utf8)))",
      client: nil)
    #expect(
      throws: AuthError.badRequest("Malformed AuthSession cookie. Please clear your cookies.")
    ) {
      try malformed.get()
    }
    // A password change ends the session (the salt is part of the key).
    try t.users.setPassword(of: "ann", to: "new", actor: "admin")
    #expect(
      try await auth.authenticate(authorization: nil, cookie: "AuthSession=\(value)", client: nil)
        .get().context == .anonymous)
  }

  @Test func serverSecretIsMadeOnceWithMode0600() throws {
    let t = try TestUsers()
    let first = try ServerSecret.load(directory: t.path)
    #expect(first.count == 32)
    #expect(try ServerSecret.load(directory: t.path) == first)
    let attributes = try FileManager.default.attributesOfItem(atPath: t.path + "/session.secret")
    #expect((attributes[.posixPermissions] as? NSNumber)?.intValue == 0o600)
    #expect(!t.data.databaseNames().contains("session.secret"))
    #expect(
      try FileManager.default.contentsOfDirectory(atPath: t.path).filter { $0.hasPrefix(".") }
        .isEmpty)
  }
}

@Suite struct TokenTests {
  @Test func createVerifyRevokeStoredHashed() async throws {
    let t = try TestUsers()
    try t.users.add(name: "ann", password: "pw", roles: ["editor"], actor: "admin")
    let clock = TestClock()
    let auth = Authenticator(
      users: t.users, sessions: SessionCookies(secret: "s"), tokenLastUsedGranularity: 60,
      now: { clock.now })
    let (token, record) = try auth.tokens.create(user: "ann", label: "laptop", actor: "admin")
    #expect(token.hasPrefix("wlt_" + record.id + "_"))
    #expect(try auth.tokens.list().map(\.id) == [record.id])
    #expect(try auth.tokens.list(user: "bob").isEmpty)
    #expect(try auth.tokens.list()[0].lastUsedAt == nil)
    #expect(throws: StoreError.self) { try auth.tokens.create(user: "nobody", actor: "admin") }

    let signedIn = try await auth.authenticate(
      authorization: "Token token=\"\(token)\"", cookie: nil, client: "1.2.3.4"
    ).get()
    #expect(signedIn.context == UserContext(name: "ann", roles: ["editor"]))
    #expect(signedIn.method == .token)
    #expect(
      try auth.tokens.list()[0].lastUsedAt == clock.now.addingTimeInterval(0).roundedToSeconds)
    clock.advance(30)
    _ = try await auth.authenticate(authorization: "Token token=\(token)", cookie: nil, client: nil)
      .get()
    #expect(
      try auth.tokens.list()[0].lastUsedAt == clock.now.addingTimeInterval(-30).roundedToSeconds)

    var wrong = Array(token)
    wrong[wrong.count - 1] = wrong[wrong.count - 1] == "0" ? "1" : "0"
    let refused = await auth.authenticate(
      authorization: "Token token=\(String(wrong))", cookie: nil, client: nil)
    #expect(throws: AuthError.unauthorized("Invalid API token.")) { try refused.get() }

    try auth.tokens.revoke(id: record.id, actor: "admin")
    #expect(try auth.tokens.list().isEmpty)
    #expect(try auth.tokens.verify(token) == nil)
    #expect(throws: StoreError.self) { try auth.tokens.revoke(id: record.id, actor: "admin") }

    // A token of a removed user signs nobody in.
    let (second, _) = try auth.tokens.create(user: "ann", actor: "admin")
    #expect(try auth.tokens.verify(second)?.name == "ann")
    try t.users.remove(name: "ann", actor: "admin")
    #expect(try auth.tokens.verify(second) == nil)

    t.data.closeAll()
    let bytes = try t.logBytes()
    #expect(contains(bytes, record.id))
    #expect(contains(bytes, APITokens.digest(token)))
    #expect(!contains(bytes, String(token.suffix(64))))
    #expect(!contains(bytes, String(second.suffix(64))))
  }
}

extension Date {
  /// ISO 8601 with whole seconds, as token times are kept.
  var roundedToSeconds: Date { Date(timeIntervalSince1970: timeIntervalSince1970.rounded(.down)) }
}

@Suite struct JWTTests {
  func token(
    _ claims: [String: Any], header: [String: Any] = ["alg": "HS256", "typ": "JWT"],
    sign: ([UInt8]) throws -> [UInt8]
  ) throws -> String {
    let h = Base64.encodeURL(Array(try JSONSerialization.data(withJSONObject: header)))
    let c = Base64.encodeURL(Array(try JSONSerialization.data(withJSONObject: claims)))
    return h + "." + c + "." + Base64.encodeURL(try sign(Array((h + "." + c).utf8)))
  }

  func hs256(_ key: String) -> ([UInt8]) -> [UInt8] {
    { Array(HMAC<SHA256>.authenticationCode(for: $0, using: SymmetricKey(data: Array(key.utf8)))) }
  }

  let now = Date().timeIntervalSince1970

  @Test func hs256() throws {
    var verifier = JWTVerifier()
    verifier.addHMACKey(Array("secret".utf8))
    verifier.addHMACKey(Array("other".utf8), kid: "k2")
    let claims: [String: Any] = [
      "sub": "ann", "exp": now + 60, "_couchdb.roles": ["editor", "_admin"],
    ]
    let context = try verifier.verify(try token(claims, sign: hs256("secret")))
    #expect(context == UserContext(name: "ann", roles: ["editor", "_admin"]))
    #expect(context.isAdmin)
    // kid selects the key.
    let withKid = try token(claims, header: ["alg": "HS256", "kid": "k2"], sign: hs256("other"))
    #expect(try verifier.verify(withKid).name == "ann")
    #expect(throws: AuthError.badRequest("Bad HMAC")) {
      try verifier.verify(
        try token(claims, header: ["alg": "HS256", "kid": "k2"], sign: hs256("secret")))
    }
    #expect(throws: AuthError.badRequest("Unknown kid")) {
      try verifier.verify(
        try token(claims, header: ["alg": "HS256", "kid": "k3"], sign: hs256("secret")))
    }
    // Wrong signature, expired, not yet valid, no exp, no sub, roles as a string.
    #expect(throws: AuthError.badRequest("Bad HMAC")) {
      try verifier.verify(try token(claims, sign: hs256("guess")))
    }
    #expect(throws: AuthError.unauthorized("exp not in future")) {
      try verifier.verify(try token(["sub": "ann", "exp": now - 1], sign: hs256("secret")))
    }
    #expect(throws: AuthError.unauthorized("nbf not in past")) {
      try verifier.verify(
        try token(["sub": "ann", "exp": now + 60, "nbf": now + 30], sign: hs256("secret")))
    }
    #expect(throws: AuthError.badRequest("Missing exp claim")) {
      try verifier.verify(try token(["sub": "ann"], sign: hs256("secret")))
    }
    #expect(throws: AuthError.unauthorized("Token missing sub claim.")) {
      try verifier.verify(try token(["exp": now + 60], sign: hs256("secret")))
    }
    #expect(
      try verifier.verify(
        try token(["sub": "bo", "exp": now + 60, "_couchdb.roles": "a, b"], sign: hs256("secret"))
      )
      .roles == ["a", "b"])
    #expect(throws: AuthError.badRequest("Malformed token")) { try verifier.verify("a.b") }
    // alg none is refused.
    #expect(throws: AuthError.badRequest("Invalid alg header parameter")) {
      try verifier.verify(try token(claims, header: ["alg": "none"], sign: { _ in [] }))
    }
  }

  @Test func es256AndRS256WithGeneratedKeys() throws {
    let ec = P256.Signing.PrivateKey()
    let rsa = try _RSA.Signing.PrivateKey(keySize: .bits2048)
    var verifier = JWTVerifier()
    try verifier.addECKey(pem: ec.publicKey.pemRepresentation, kid: "ec1")
    try verifier.addRSAKey(pem: rsa.publicKey.pemRepresentation, kid: "rsa1")
    let claims: [String: Any] = ["sub": "ann", "exp": now + 60, "_couchdb.roles": ["r"]]
    let es = try token(claims, header: ["alg": "ES256", "kid": "ec1"]) {
      Array(try ec.signature(for: $0).rawRepresentation)
    }
    #expect(try verifier.verify(es) == UserContext(name: "ann", roles: ["r"]))
    let rs = try token(claims, header: ["alg": "RS256", "kid": "rsa1"]) {
      Array(
        try rsa.signature(for: SHA256.hash(data: $0), padding: .insecurePKCS1v1_5).rawRepresentation
      )
    }
    #expect(try verifier.verify(rs).name == "ann")
    let otherKey = P256.Signing.PrivateKey()
    let forged = try token(claims, header: ["alg": "ES256", "kid": "ec1"]) {
      Array(try otherKey.signature(for: $0).rawRepresentation)
    }
    #expect(throws: AuthError.badRequest("Bad signature")) { try verifier.verify(forged) }
    let expired = try token(
      ["sub": "ann", "exp": now - 10], header: ["alg": "ES256", "kid": "ec1"]
    ) {
      Array(try ec.signature(for: $0).rawRepresentation)
    }
    #expect(throws: AuthError.unauthorized("exp not in future")) { try verifier.verify(expired) }
    // ES384, ES512 and RS512 once allowed; jwtf writes an ES384 signature of a P-256 key with
    // 48-byte numbers, an ES512 one with 64-byte numbers.
    verifier.allowedAlgorithms = JWTVerifier.algorithms
    for (alg, width) in [("ES384", 48), ("ES512", 64)] {
      let wide = try token(claims, header: ["alg": alg, "kid": "ec1"]) { message in
        let raw = Array(
          try alg == "ES384"
            ? ec.signature(for: SHA384.hash(data: message)).rawRepresentation
            : ec.signature(for: SHA512.hash(data: message)).rawRepresentation)
        let pad = [UInt8](repeating: 0, count: width - 32)
        return pad + raw[..<32] + pad + raw[32...]
      }
      #expect(try verifier.verify(wide).name == "ann", "\(alg)")
    }
    let rs512 = try token(claims, header: ["alg": "RS512", "kid": "rsa1"]) {
      Array(
        try rsa.signature(for: SHA512.hash(data: $0), padding: .insecurePKCS1v1_5).rawRepresentation
      )
    }
    #expect(try verifier.verify(rs512).name == "ann")
  }

  @Test func bearerThroughTheEntryPoint() async throws {
    let t = try TestUsers()
    var verifier = JWTVerifier()
    verifier.addHMACKey(Array("secret".utf8))
    let auth = Authenticator(users: t.users, sessions: SessionCookies(secret: "s"), jwt: verifier)
    let good = try token(["sub": "jay", "exp": now + 60], sign: hs256("secret"))
    let who = try await auth.authenticate(authorization: "Bearer \(good)", cookie: nil, client: nil)
      .get()
    #expect(who.context.name == "jay")
    #expect(who.method == .jwt)
    let bad = try token(["sub": "jay", "exp": now + 60], sign: hs256("nope"))
    let refused = await auth.authenticate(authorization: "Bearer \(bad)", cookie: nil, client: nil)
    #expect(throws: AuthError.self) { try refused.get() }
  }
}

@Suite struct EntryPointTests {
  @Test func basicAnonymousAndErrors() async throws {
    let t = try TestUsers()
    try t.users.add(name: "ann", password: "pw:with:colons", roles: ["_admin"], actor: "admin")
    let auth = Authenticator(users: t.users, sessions: SessionCookies(secret: "s"))
    func basic(_ s: String) -> String { "Basic " + Data(s.utf8).base64EncodedString() }
    let ok = try await auth.authenticate(
      authorization: basic("ann:pw:with:colons"), cookie: nil, client: nil
    ).get()
    #expect(ok.context == UserContext(name: "ann", roles: ["_admin"]))
    #expect(ok.context.isAdmin)
    #expect(ok.method == .basic)
    #expect(
      try await auth.authenticate(authorization: nil, cookie: nil, client: nil).get()
        == Authentication(context: .anonymous, method: nil))
    #expect(
      try await auth.authenticate(authorization: basic("_:_"), cookie: nil, client: nil).get()
        .context == .anonymous)
    // A wrong password and an unknown user get the same answer.
    let wrong = await auth.authenticate(authorization: basic("ann:nope"), cookie: nil, client: nil)
    let unknown = await auth.authenticate(
      authorization: basic("zed:nope"), cookie: nil, client: nil)
    #expect(throws: AuthError.incorrectCredentials) { try wrong.get() }
    #expect(throws: AuthError.incorrectCredentials) { try unknown.get() }
    #expect(AuthError.incorrectCredentials.status == 401)
    #expect(
      AuthError.incorrectCredentials.json
        == .object(
          JSONObject([
            "error": .string("unauthorized"), "reason": .string("Name or password is incorrect."),
          ])))
    let garbled = await auth.authenticate(authorization: "Basic %%%", cookie: nil, client: nil)
    #expect(throws: AuthError.badRequest("Authorization header has invalid base64 value")) {
      try garbled.get()
    }
    #expect(Authenticator.tokenParameter(#"token="abc", other=1"#) == "abc")
    #expect(Authenticator.tokenParameter("abc") == "abc")
  }
}

@Suite struct ThrottleTests {
  @Test func delaysGrowPerUserAndPerClient() {
    let throttle = SignInThrottle(
      policy: .init(
        freeFailures: 2, baseDelay: .milliseconds(100), maxDelay: .milliseconds(350),
        forgetAfter: .seconds(60)))
    let t0 = ContinuousClock.now
    #expect(throttle.delay(user: "ann", client: "a", now: t0) == .zero)
    throttle.recordFailure(user: "ann", client: "a", now: t0)
    throttle.recordFailure(user: "ann", client: "b", now: t0)
    #expect(throttle.delay(user: "ann", client: "c", now: t0) == .zero)
    throttle.recordFailure(user: "ann", client: "c", now: t0)
    #expect(throttle.delay(user: "ann", client: "z", now: t0) == .milliseconds(100))  // per user
    #expect(throttle.delay(user: "bob", client: "z", now: t0) == .zero)
    for name in ["u1", "u2", "u3"] { throttle.recordFailure(user: name, client: "x", now: t0) }
    #expect(throttle.delay(user: "u9", client: "x", now: t0) == .milliseconds(100))  // per client
    throttle.recordFailure(user: "ann", client: "c", now: t0)
    #expect(throttle.delay(user: "ann", client: nil, now: t0) == .milliseconds(200))
    throttle.recordFailure(user: "ann", client: "c", now: t0)
    #expect(throttle.delay(user: "ann", client: nil, now: t0) == .milliseconds(350))  // capped
    #expect(throttle.delay(user: "ann", client: nil, now: t0 + .seconds(61)) == .zero)  // forgotten
    throttle.recordSuccess(user: "ann", client: "c")
    #expect(throttle.delay(user: "ann", client: "c", now: t0) == .zero)
  }

  @Test func failedSignInsAreSlowed() async throws {
    let t = try TestUsers()
    try t.users.add(name: "ann", password: "pw", actor: "admin")
    let auth = Authenticator(
      users: t.users, sessions: SessionCookies(secret: "s"),
      throttle: SignInThrottle(policy: .init(freeFailures: 2, baseDelay: .milliseconds(700))))
    func attempt(_ password: String) async -> (Duration, Bool) {
      let clock = ContinuousClock()
      var ok = false
      let elapsed = await clock.measure {
        ok =
          (try? await auth.verifyPassword(name: "ann", password: password, client: "10.0.0.1"))
          != nil
      }
      return (elapsed, ok)
    }
    #expect(try auth.checkPassword(name: "ann", password: "pw") != nil)  // cached: no PBKDF2 below
    var (elapsed, ok) = await attempt("pw")
    let fast = elapsed
    #expect(ok)
    for _ in 0..<2 { _ = await attempt("x") }
    #expect(auth.throttle.delay(user: "ann", client: "10.0.0.1") == .zero)
    _ = await attempt("x")  // the third failure
    #expect(auth.throttle.delay(user: "ann", client: "10.0.0.1") == .milliseconds(700))
    (elapsed, ok) = await attempt("pw")  // even the right password waits
    #expect(ok)
    #expect(elapsed >= .milliseconds(700))
    #expect(elapsed > fast + .milliseconds(500))
    (elapsed, ok) = await attempt("pw")  // the success cleared the count
    #expect(elapsed < .milliseconds(700))
  }

  @Test(
    "chttpd_auth_lockout: enforce refuses a client after 5 failures for a name, whatever the password, other clients and names unaffected; warn and off only count"
  )
  func lockout() async throws {
    let t = try TestUsers()
    try t.users.add(name: "ann", password: "pw", actor: "admin")
    try t.users.add(name: "bea", password: "pw", actor: "admin")
    let auth = Authenticator(
      users: t.users, sessions: SessionCookies(secret: "s"),
      throttle: SignInThrottle(policy: .init(freeFailures: 100)))
    func attempt(_ name: String, _ password: String, from client: String) async -> Int {
      do {
        _ = try await auth.verifyPassword(name: name, password: password, client: client)
        return 200
      } catch {
        return error.status
      }
    }
    #expect(auth.throttle.lockoutMode == .off)
    for _ in 0..<6 { #expect(await attempt("ann", "x", from: "10.0.0.1") == 401) }
    #expect(await attempt("ann", "pw", from: "10.0.0.1") == 200)  // off: nothing counted
    auth.throttle.lockoutMode = .enforce
    for _ in 0..<5 { #expect(await attempt("ann", "x", from: "10.0.0.1") == 401) }
    do {
      _ = try await auth.verifyPassword(name: "ann", password: "pw", client: "10.0.0.1")
      Issue.record("a locked-out client signed in")
    } catch {
      #expect(error == SignInThrottle.lockedOut)
      #expect(
        error.reason == "Account is temporarily locked due to multiple authentication failures")
    }
    #expect(await attempt("ann", "pw", from: "10.0.0.2") == 200)
    #expect(await attempt("bea", "pw", from: "10.0.0.1") == 200)
    auth.throttle.lockoutMode = .warn
    #expect(await attempt("ann", "x", from: "10.0.0.1") == 401)
    #expect(await attempt("ann", "pw", from: "10.0.0.1") == 200)
  }
}

@Suite struct SessionCookieTests {
  @Test("the AuthSession value in a Cookie header: spaces, quotes, other cookies, absent")
  func cookieHeader() {
    #expect(SessionCookies.cookieValue(inHeader: "AuthSession=abc") == "abc")
    #expect(SessionCookies.cookieValue(inHeader: "a=1;  AuthSession = \"x y\" ; b=2") == "x y")
    #expect(SessionCookies.cookieValue(inHeader: "a=1; b=2") == nil)
    #expect(SessionCookies.cookieValue(inHeader: "AuthSessionX=1; AuthSession=") == "")
    #expect(SessionCookies.cookieValue(inHeader: "") == nil)
  }
}
