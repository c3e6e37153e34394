import Formats
import Foundation
import JSON
import Projections
import Testing

@testable import Auth

@Suite struct PasswordTests {
  @Test func pbkdf2SHA256Vectors() {
    // RFC 7914 section 11, and the PBKDF2-HMAC-SHA256 counterparts of RFC 6070's vectors.
    #expect(
      Password.pbkdf2(
        password: Array("passwd".utf8), salt: Array("salt".utf8), iterations: 1, length: 64)
        == hex(
          "55ac046e56e3089fec1691c22544b605f94185216dde0465e68b9d57c20dacbc49ca9cccf179b645991664b39d77ef317c71b845b1e30bd509112041d3a19783"
        ))
    #expect(
      Password.pbkdf2(
        password: Array("Password".utf8), salt: Array("NaCl".utf8), iterations: 80_000, length: 64)
        == hex(
          "4ddcd8f60b98be21830cee5ef22701f9641a4418d04c0414aeff08876b34ab56a1d425a1225833549adb841b51c9b3176a272bdebba1d078478f62b397f33c8d"
        ))
    #expect(
      Password.pbkdf2(password: Array("password".utf8), salt: Array("salt".utf8), iterations: 1)
        == hex("120fb6cffcf8b32c43e7225256c4f837a86548c92ccc35480805987cb70be17b"))
    #expect(
      Password.pbkdf2(password: Array("password".utf8), salt: Array("salt".utf8), iterations: 4096)
        == hex("c5e478d59288c841aa530db6845c4c8d962893a001ce4e11a4963873aa98134a"))
    #expect(Password.pbkdf2(password: [1], salt: [2], iterations: 1, prf: "md5") == nil)
    #expect(Password.iterations >= 600_000)
  }

  @Test func constantTimeEqual() {
    #expect(Password.constantTimeEqual([1, 2, 3], [1, 2, 3]))
    #expect(!Password.constantTimeEqual([1, 2, 3], [1, 2, 4]))
    #expect(!Password.constantTimeEqual([1, 2], [1, 2, 3]))
  }
}

@Suite struct UserStoreTests {
  @Test func aStoredUserVerifies() async throws {
    let t = try TestUsers()
    try t.users.add(name: "ann", password: "correct horse", roles: ["editor"], actor: "admin")
    let doc = try #require(try t.users.store.get("org.couchdb.user:ann").objectValue)
    #expect(doc["type"] == .string("user"))
    #expect(doc["name"] == .string("ann"))
    #expect(doc["roles"] == .array([.string("editor")]))
    #expect(doc["password_scheme"] == .string("pbkdf2"))
    #expect(doc["pbkdf2_prf"] == .string("sha256"))
    #expect(doc["iterations"]?.numberValue?.int64Value == 600_000)
    #expect(doc["password"] == nil)
    let salt = try #require(doc["salt"]?.stringValue)
    #expect(salt.count == 32)
    // The derived key is PBKDF2-SHA256 of the password with the salt's ASCII bytes, as CouchDB
    // computes it.
    let expected = Password.pbkdf2(
      password: Array("correct horse".utf8), salt: Array(salt.utf8), iterations: 600_000)!
    #expect(doc["derived_key"] == .string(Hex.encode(expected)))

    let auth = Authenticator(users: t.users, sessions: SessionCookies(secret: "s"))
    #expect(try auth.checkPassword(name: "ann", password: "correct horse")?.roles == ["editor"])
    #expect(try auth.checkPassword(name: "ann", password: "wrong") == nil)
    #expect(try auth.checkPassword(name: "nobody", password: "correct horse") == nil)
  }

  @Test func aCouchDBDocumentWithSHA1AndFewIterationsVerifies() throws {
    // As an older CouchDB wrote it (no pbkdf2_prf: SHA-1), replicated in without a password.
    let t = try TestUsers()
    try t.users.store.put(
      #"{"_id":"org.couchdb.user:old","name":"old","type":"user","roles":[],"password_scheme":"pbkdf2","salt":"1f7e4b8a2c9d0e3f5a6b7c8d9e0f1a2b","iterations":10,"derived_key":"0d0f83fe57b1026a369043b849398dda5974670e"}"#,
      actor: "replicator")
    let auth = Authenticator(users: t.users, sessions: SessionCookies(secret: "s"))
    #expect(try auth.checkPassword(name: "old", password: "relax")?.name == "old")
    #expect(try auth.checkPassword(name: "old", password: "relax!") == nil)
  }

  @Test func theClearPasswordNeverReachesTheLog() throws {
    let t = try TestUsers()
    try t.users.add(name: "ann", password: "Tr0ub4dor&3-first", actor: "admin")
    try t.users.setPassword(of: "ann", to: "Tr0ub4dor&3-second", actor: "admin")
    var doc = JSONObject([
      "_id": .string("org.couchdb.user:bob"), "name": .string("bob"), "type": .string("user"),
      "roles": .array([]), "password": .string("Tr0ub4dor&3-third"),
    ])
    try t.users.put(doc, actor: "admin")
    doc["_id"] = .string("org.couchdb.user:cat")
    doc["name"] = .string("cat")
    doc["password"] = .string("Tr0ub4dor&3-fourth")
    #expect(throws: StoreError.self) {
      try t.users.store.put(JSONValue.object(doc).serialized(), actor: "x")
    }
    t.data.closeAll()
    let bytes = try t.logBytes()
    #expect(contains(bytes, "org.couchdb.user:bob"))  // the search works
    for secret in [
      "Tr0ub4dor&3-first", "Tr0ub4dor&3-second", "Tr0ub4dor&3-third", "Tr0ub4dor&3-fourth",
    ] {
      #expect(!contains(bytes, secret), "\(secret) is in the log")
    }
  }

  @Test func passwordChangeAndRolesAndRemoval() throws {
    let t = try TestUsers()
    try t.users.add(name: "ann", password: "one", actor: "admin")
    let auth = Authenticator(users: t.users, sessions: SessionCookies(secret: "s"))
    #expect(try auth.checkPassword(name: "ann", password: "one") != nil)
    #expect(auth.cache.count == 1)
    try t.users.setPassword(of: "ann", to: "two", actor: "admin")
    #expect(try auth.checkPassword(name: "ann", password: "one") == nil)  // the cache misses
    #expect(try auth.checkPassword(name: "ann", password: "two") != nil)
    try t.users.setRoles(of: "ann", to: ["_admin"], actor: "admin")
    #expect(try t.users.user(named: "ann")?.isAdmin == true)
    #expect(throws: StoreError.self) { try t.users.add(name: "ann", password: "x", actor: "admin") }
    try t.users.remove(name: "ann", actor: "admin")
    #expect(try t.users.user(named: "ann") == nil)
    #expect(try t.users.users().isEmpty)
    #expect(try auth.checkPassword(name: "ann", password: "two") == nil)
  }

  @Test func theCacheIsBounded() throws {
    let cache = CredentialCache(capacity: 2)
    let c = StoredCredentials(
      JSONObject([
        "password_scheme": .string("pbkdf2"), "salt": .string("s"), "iterations": .number(1),
        "derived_key": .string("00"),
      ]))!
    cache.insert("a", c, password: "p")
    cache.insert("b", c, password: "p")
    #expect(cache.contains("a", c, password: "p"))  // a is now the most recently used
    cache.insert("c", c, password: "p")
    #expect(cache.count == 2)
    #expect(!cache.contains("b", c, password: "p"))
    #expect(cache.contains("a", c, password: "p"))
    #expect(!cache.contains("a", c, password: "q"))
  }
}

@Suite struct UsersValidationTests {
  func refuses(_ json: String, _ reason: String, sourceLocation: SourceLocation = #_sourceLocation)
    throws
  {
    let t = try TestUsers()
    do {
      try t.users.store.put(json, actor: "x")
      Issue.record("accepted: \(json)", sourceLocation: sourceLocation)
    } catch let error as StoreError {
      #expect(error.code == .forbidden, sourceLocation: sourceLocation)
      #expect(error.reason.contains(reason), "\(error.reason)", sourceLocation: sourceLocation)
    }
    // Nothing but the design document `_users` is made with.
    #expect(try t.users.store.info.docCount == 1, sourceLocation: sourceLocation)
  }

  @Test func refusals() throws {
    try refuses(
      #"{"_id":"org.couchdb.user:ann","name":"ann","type":"user","roles":[],"password":"x"}"#,
      "clear password")
    try refuses(
      #"{"_id":"org.couchdb.user:ann","_deleted":true,"password":"x"}"#, "clear password")
    try refuses(
      #"{"_id":"org.couchdb.user:ann","name":"bob","type":"user","roles":[]}"#,
      "org.couchdb.user:name")
    try refuses(#"{"_id":"ann","name":"ann","type":"user","roles":[]}"#, "org.couchdb.user:name")
    try refuses(#"{"_id":"org.couchdb.user:ann","name":"ann","roles":[]}"#, "doc.type must be user")
    // A design document is not a user (CouchDB checks it as a design document).
    #expect(
      try UsersValidator().validate(
        "_design/i", body: try JSONValue(parsing: #"{"language":"query","views":{}}"#).objectValue!,
        deleted: false)
        == nil)
    try refuses(
      #"{"_id":"org.couchdb.user:ann","name":"ann","type":"user"}"#, "doc.roles must exist")
    try refuses(
      #"{"_id":"org.couchdb.user:ann","name":"ann","type":"user","roles":[1]}"#,
      "only contain strings")
    try refuses(
      #"{"_id":"org.couchdb.user:ann","name":"ann","type":"user","roles":["_reader"]}"#,
      "system roles")
    try refuses(
      #"{"_id":"org.couchdb.user:_ann","name":"_ann","type":"user","roles":[]}"#, "underscore")
    try refuses(
      #"{"_id":"org.couchdb.user:ann","name":"ann","type":"user","roles":[],"password_scheme":"pbkdf2","salt":"s","iterations":"many","derived_key":"00"}"#,
      "iterations")
    try refuses(
      #"{"_id":"org.couchdb.user:ann","name":"ann","type":"user","roles":[],"password_scheme":"simple","password_sha":"00","salt":"s"}"#,
      "not supported")
    try refuses(
      #"{"_id":"org.couchdb.user:ann","name":"ann","type":"user","roles":[],"derived_key":"00","salt":"s"}"#,
      "password_scheme is required")
  }

  @Test func usersExistsOnlyWhereRegistered() throws {
    let t = try TestUsers()
    try t.users.add(name: "ann", password: "pw", actor: "admin")
    t.data.closeAll()
    let plain = DataDirectory(path: t.path)
    #expect(throws: StoreError.self) { try plain.open("_users") }
    #expect(!plain.databaseNames().contains("_users"))
    #expect(t.data.databaseNames() == ["_users"])
    #expect(throws: StoreError.self) { try DataDirectory.validate(name: "_users") }
    #expect(throws: StoreError.self) { try t.data.check(name: "_replicator") }
    #expect(throws: StoreError.self) { try UserStore(data: plain) }
  }
}
