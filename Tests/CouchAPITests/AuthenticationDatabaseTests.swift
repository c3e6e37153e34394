import CouchTestSupport
import Crypto
import Foundation
import HTTPTypes
import JSON
import Testing

/// `chttpd_auth/authentication_db`: any database made the users database at run time, as
/// CouchDB's `reader_acl_test` and `security_validation_test` make one; and `_design/_auth`.
@Suite struct AuthenticationDatabaseTests {
  static func basic(_ name: String, _ password: String) -> HTTPFields {
    var fields = HTTPFields()
    fields[.authorization] = "Basic " + Data("\(name):\(password)".utf8).base64EncodedString()
    return fields
  }

  @Test("users sign in from the database authentication_db names, with _users' rules there")
  func switched() async throws {
    try await withAccessServer { client, _ in
      let admin = AccessFixture.headers("admin")
      let setting = "/_node/_local/_config/chttpd_auth/authentication_db"
      #expect(try await client.call(.put, "/custom", headers: admin).code == 201)
      let set = try await client.call(.put, setting, #""custom""#, headers: admin)
      #expect(set.code == 200 && set.json == .string("_users"))
      #expect(
        try await client.call(
          .get, "/_node/_local/_config/couch_httpd_auth/authentication_db", headers: admin
        ).json == .string("custom"))
      // The database has `_users`' design document and rules now.
      let auth = try await client.call(.get, "/custom/_design/_auth", headers: admin)
      #expect(auth.code == 200, "\(auth.text)")
      #expect(auth.code == 200 && auth["validate_doc_update"]?.stringValue != nil)
      let jerry =
        #"{"_id":"org.couchdb.user:jerry","name":"jerry","type":"user","roles":[],"password":"mouse"}"#
      #expect(try await client.call(.post, "/custom", jerry, headers: admin).code == 201)
      let stored = try await client.call(.get, "/custom/org.couchdb.user:jerry", headers: admin)
      #expect(stored["password"] == nil && stored["derived_key"]?.stringValue != nil)
      let shapeless = #"{"_id":"org.couchdb.user:tom","name":"tom","roles":[]}"#
      let refused = try await client.call(.post, "/custom", shapeless, headers: admin)
      #expect(refused.code == 403 && refused.error == "forbidden")

      let session = try await client.call(.get, "/_session", headers: Self.basic("jerry", "mouse"))
      #expect(session["userCtx"]?["name"] == .string("jerry"))
      #expect(session["info"]?["authentication_db"] == .string("custom"))
      // `_users`' people no longer sign in (server administrators named at start do).
      let bob = try await client.call(.get, "/_session", headers: AccessFixture.headers("bob"))
      #expect(bob.code == 401)
      // jerry reads his own document only, and none of the database's listings.
      let other = try await client.call(
        .get, "/custom/org.couchdb.user:tom", headers: Self.basic("jerry", "mouse"))
      #expect(other.code == 404)
      let listing = try await client.call(
        .get, "/custom/_all_docs", headers: Self.basic("jerry", "mouse"))
      #expect(listing.code == 403)

      #expect(try await client.call(.delete, setting, headers: admin).code == 200)
      #expect(
        try await client.call(.get, "/_session", headers: AccessFixture.headers("bob"))[
          "userCtx"]?["name"] == .string("bob"))
      #expect(
        try await client.call(.get, "/_session", headers: Self.basic("jerry", "mouse")).code
          == 401)
      // An ordinary database again (its `_design/_auth` stays, as in CouchDB): nothing is
      // hashed.
      let plain =
        #"{"_id":"org.couchdb.user:spike","name":"spike","type":"user","roles":[],"password":"dog"}"#
      #expect(try await client.call(.post, "/custom", plain, headers: admin).code == 201)
      let kept = try await client.call(.get, "/custom/org.couchdb.user:spike", headers: admin)
      #expect(kept["password"] == .string("dog"))
      #expect(try await client.call(.put, setting, #""no such/../db""#, headers: admin).code == 400)
    }
  }

  @Test("_users is made with _design/_auth, whose function the query server runs")
  func designAuth() async throws {
    try await withAccessServer { client, _ in
      let admin = AccessFixture.headers("admin")
      let first = try await client.call(.get, "/_users/_design/_auth", headers: admin)
      #expect(first.code == 200 && first["validate_doc_update"]?.stringValue != nil)
      // Its function refuses what the rules refuse, as the query server runs it.
      let bad = #"{"_id":"org.couchdb.user:x","name":"x","type":"user","roles":[1]}"#
      #expect(
        try await client.call(.put, "/_users/org.couchdb.user:x", bad, headers: admin).code == 403)
      let feed = try await client.call(.get, "/_users/_changes?filter=_design", headers: admin)
      #expect(feed["results"]?.arrayValue?.map { $0["id"] } == [.string("_design/_auth")])
    }
  }

  @Test("proxy authentication: off unless named; with a secret, only the name's HMAC signs in")
  func proxy() async throws {
    try await withAccessServer { client, _ in
      let admin = AccessFixture.headers("admin")
      var proxied = HTTPFields()
      proxied[HTTPField.Name("X-Auth-CouchDB-UserName")!] = "pat"
      proxied[HTTPField.Name("X-Auth-CouchDB-Roles")!] = "editor, reviewer"
      func session(_ headers: HTTPFields) async throws -> JSONValue? {
        try await client.call(.get, "/_session", headers: headers)["userCtx"]?["name"]
      }
      // Not among the handlers by default: the headers mean nothing.
      #expect(try await session(proxied) == .null)
      let handlers = "/_node/_local/_config/chttpd/authentication_handlers"
      let all =
        #""{chttpd_auth, proxy_authentication_handler}, {chttpd_auth, cookie_authentication_handler}, {chttpd_auth, default_authentication_handler}""#
      #expect(try await client.call(.put, handlers, all, headers: admin).code == 200)
      let signedIn = try await client.call(.get, "/_session", headers: proxied)
      #expect(signedIn["userCtx"]?["name"] == .string("pat"))
      #expect(signedIn["userCtx"]?["roles"] == json(#"["editor","reviewer"]"#))
      #expect(signedIn["info"]?["authenticated"] == .string("proxy"))

      let config = "/_node/_local/_config/chttpd_auth/"
      #expect(
        try await client.call(.put, config + "proxy_use_secret", #""true""#, headers: admin).code
          == 200)
      #expect(
        try await client.call(.put, config + "secret", #""s3cret""#, headers: admin).code == 200)
      #expect(try await session(proxied) == .null)
      var wrong = proxied
      wrong[HTTPField.Name("X-Auth-CouchDB-Token")!] = String(repeating: "0", count: 40)
      #expect(try await session(wrong) == .null)
      var signed = proxied
      let mac = HMAC<Insecure.SHA1>.authenticationCode(
        for: Array("pat".utf8), using: SymmetricKey(data: Array("s3cret".utf8)))
      signed[HTTPField.Name("X-Auth-CouchDB-Token")!] = mac.map { String(format: "%02x", $0) }
        .joined()
      #expect(try await session(signed) == .string("pat"))
      // Basic sign-in goes on beside it.
      #expect(try await session(AccessFixture.headers("bob")) == .string("bob"))
    }
  }
}
