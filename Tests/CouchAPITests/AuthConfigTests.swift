import CouchTestSupport
import Crypto
import Foundation
import HTTPTypes
import JSON
import Testing

/// Sign-in settings changed at run time through `_config` (JWT keys and claims, the
/// authentication handlers, the lockout mode, password iterations), as
/// CouchDB's `jwtauth_test` and `jwt_roles_claim_test` change them.
@Suite struct AuthConfigTests {
  static func b64(_ bytes: [UInt8]) -> String {
    Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-")
      .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
  }

  /// A token signed with `secret` by `alg` (HS256, HS384 or HS512), `kid` in its header when
  /// given.
  static func token(_ claims: String, secret: String, alg: String = "HS256", kid: String? = nil)
    -> String
  {
    let kidMember = kid.map { #","kid":"\#($0)""# } ?? ""
    let header = b64(Array(#"{"alg":"\#(alg)","typ":"JWT"\#(kidMember)}"#.utf8))
    let body = b64(Array(claims.utf8))
    let message = Array((header + "." + body).utf8)
    let key = SymmetricKey(data: Array(secret.utf8))
    let mac: [UInt8] =
      switch alg {
      case "HS384": Array(HMAC<SHA384>.authenticationCode(for: message, using: key))
      case "HS512": Array(HMAC<SHA512>.authenticationCode(for: message, using: key))
      default: Array(HMAC<SHA256>.authenticationCode(for: message, using: key))
      }
    return header + "." + body + "." + b64(mac)
  }

  static func bearer(_ token: String) -> HTTPFields {
    var h = HTTPFields()
    h[.authorization] = "Bearer " + token
    return h
  }

  @Test(
    "jwt_keys, jwt_auth and authentication_handlers set in _config apply at once and go back on DELETE"
  )
  func runtimeSettings() async throws {
    try await withAccessServer { client, _ in
      let admin = AccessFixture.basic("admin")
      func put(_ path: String, _ value: String) async throws -> Int {
        try await client.call(
          .put, "/_node/_local/_config/" + path, JSONValue.string(value).serialized().string,
          headers: admin
        ).code
      }
      // The lockout mode (SignInTests.lockout checks what it does).
      #expect(try await put("chttpd_auth_lockout/mode", "enforce") == 200)
      #expect(
        try await client.call(
          .get, "/_node/_local/_config/chttpd_auth_lockout/mode", headers: admin
        ).json == .string("enforce"))
      #expect(
        try await client.call(
          .delete, "/_node/_local/_config/chttpd_auth_lockout/mode", headers: admin
        ).json == .string("enforce"))
      #expect(
        try await client.call(
          .get, "/_node/_local/_config/chttpd_auth_lockout/mode", headers: admin
        ).json == .string("off"))
      let secret = "zxczxc12zxczxc12"
      let exp = Int(Date().timeIntervalSince1970) + 60
      let claims = #"{"sub":"couch@apache.org","exp":\#(exp),"_couchdb.roles":["testing"]}"#
      // HS384 is not allowed until allowed_algorithms says so; the key comes from jwt_keys.
      #expect(
        try await put("jwt_keys/hmac:myjwttestkey", Data(secret.utf8).base64EncodedString()) == 200)
      let hs384 = Self.token(claims, secret: secret, alg: "HS384", kid: "myjwttestkey")
      #expect(try await client.call(.get, "/_session", headers: Self.bearer(hs384)).code == 400)
      #expect(try await put("jwt_auth/allowed_algorithms", "HS256, HS384, HS512") == 200)
      for alg in ["HS256", "HS384", "HS512"] {
        let session = try await client.call(
          .get, "/_session",
          headers: Self.bearer(Self.token(claims, secret: secret, alg: alg, kid: "myjwttestkey")))
        #expect(session.code == 200, "\(alg)")
        #expect(session["userCtx"]?["name"] == .string("couch@apache.org"), "\(alg)")
        #expect(session["userCtx"]?["roles"] == .array([.string("testing")]))
        #expect(session["info"]?["authenticated"] == .string("jwt"))
      }
      #expect(
        try await client.call(.get, "/_node/_local/_config/jwt_keys", headers: admin)[
          "hmac:myjwttestkey"] == .string(Data(secret.utf8).base64EncodedString()))
      // required_claims with a value: iss must be "hello" (and exp is no longer required).
      #expect(try await put("jwt_auth/required_claims", #"{iss, "hello"}"#) == 200)
      let good = Self.token(
        #"{"iss":"hello","sub":"couch@apache.org"}"#, secret: secret, kid: "myjwttestkey")
      #expect(
        try await client.call(.get, "/_session", headers: Self.bearer(good))["info"]?[
          "authenticated"] == .string("jwt"))
      let bad = Self.token(
        #"{"iss":"goodbye","sub":"couch@apache.org"}"#, secret: secret, kid: "myjwttestkey")
      #expect(try await client.call(.get, "/_session", headers: Self.bearer(bad)).code == 400)
      #expect(try await put("jwt_auth/required_claims", "{iss, hello") == 400)
      // Roles from a nested claim; a token without the path is 404, as in CouchDB.
      #expect(try await put("jwt_auth/roles_claim_path", #"foo.bar\.zonk.roles"#) == 200)
      let nested = Self.token(
        #"{"iss":"hello","sub":"u1","foo":{"bar.zonk":{"roles":"r1, r2"}}}"#, secret: secret,
        kid: "myjwttestkey")
      #expect(
        try await client.call(.get, "/_session", headers: Self.bearer(nested))["userCtx"]?[
          "roles"] == .array([.string("r1"), .string("r2")]))
      #expect(try await client.call(.get, "/_session", headers: Self.bearer(good)).code == 404)
      // Authentication handlers: one wikilog does not have is refused; without `default`,
      // Basic signs no one in (an administrator's own Basic included).
      #expect(
        try await put(
          "chttpd/authentication_handlers", "{chttpd_auth, nonesuch_authentication_handler}")
          == 400)
      #expect(
        try await put(
          "chttpd/authentication_handlers",
          "{chttpd_auth, jwt_authentication_handler}, {chttpd_auth, cookie_authentication_handler}"
        ) == 200)
      let basic = try await client.call(.get, "/_session", headers: AccessFixture.basic("bob"))
      #expect(basic["userCtx"]?["name"] == .null)
      #expect(
        basic["info"]?["authentication_handlers"]?.arrayValue?.contains(.string("default")) == false
      )
      // Everything back as the server started (admin's Basic works again first).
      for path in [
        "chttpd/authentication_handlers", "jwt_auth/required_claims", "jwt_auth/roles_claim_path",
        "jwt_auth/allowed_algorithms", "jwt_keys/hmac:myjwttestkey",
      ] {
        var headers = admin
        if path == "chttpd/authentication_handlers" {
          // Basic is off: the admin signs in with a token of the fixture's own key.
          // (iss and the nested roles as the settings still ask for them).
          headers = Self.bearer(
            Self.token(
              #"{"sub":"admin","iss":"hello","foo":{"bar.zonk":{"roles":["_admin"]}}}"#,
              secret: "jwt-secret"))
        }
        let deleted = try await client.call(
          .delete, "/_node/_local/_config/" + path, headers: headers)
        #expect(deleted.code == 200, "\(path): \(deleted.json ?? .null)")
      }
      #expect(try await client.call(.get, "/_session", headers: Self.bearer(hs384)).code == 400)
      #expect(
        try await client.call(.get, "/_session", headers: AccessFixture.basic("bob"))["userCtx"]?[
          "name"] == .string("bob"))
    }
  }

  @Test(
    "chttpd_auth/iterations: passwords written after a change are hashed with that many rounds and sign in; couch_httpd_auth/authentication_db reads _users"
  )
  func passwordIterations() async throws {
    try await withAccessServer { client, _ in
      let admin = AccessFixture.basic("admin")
      #expect(
        try await client.call(
          .get, "/_node/_local/_config/chttpd_auth/iterations", headers: admin
        ).json == .string("600000"))
      #expect(
        try await client.call(
          .put, "/_node/_local/_config/chttpd_auth/iterations", #""1""#, headers: admin
        ).code == 200)
      #expect(
        try await client.call(
          .put, "/_node/_local/_config/chttpd_auth/iterations", #""none""#, headers: admin
        ).code == 400)
      let made = try await client.call(
        .put, "/_users/org.couchdb.user:fay",
        #"{"name":"fay","type":"user","roles":[],"password":"pw-fay"}"#, headers: admin)
      #expect(made.code == 201)
      let doc = try await client.call(.get, "/_users/org.couchdb.user:fay", headers: admin)
      #expect(doc["iterations"]?.int == 1)
      #expect(
        try await client.call(.get, "/_session", headers: AccessFixture.basic("fay"))["userCtx"]?[
          "name"] == .string("fay"))
      #expect(
        try await client.call(
          .delete, "/_node/_local/_config/chttpd_auth/iterations", headers: admin
        ).code == 200)
      #expect(
        try await client.call(
          .get, "/_node/_local/_config/couch_httpd_auth/authentication_db", headers: admin
        ).json == .string("_users"))
    }
  }
}
