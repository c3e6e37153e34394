public import Auth
public import CouchAPI
import CouchQuery
import Formats
public import Foundation
public import HTTPTypes
import Hummingbird
public import HummingbirdTesting
import JSON
public import Projections
import Query
import Synchronization
import Testing

/// A data directory with `_users`, served with sign-in: an administrator, alice (owner of the
/// wiki `w1`), bob (a member of `w1`), carol (owner of `w2`, an outsider to `w1`), and
/// anonymous requests. `note` is a document of no wiki (the security object governs it).
public final class AccessFixture: Sendable {
  public let dir: TestDirectory
  public let auth: Authenticator
  public let clock: MovableClock
  public let store: DocumentStore

  public static let people = ["admin", "alice", "bob", "carol"]

  public init(_ name: String = #function, replicator: Bool = false) throws {
    dir = TestDirectory(name, users: true, replicator: replicator)
    clock = MovableClock()
    let users = try UserStore(data: dir.data)
    for name in Self.people {
      try Self.addUser(users, name, roles: name == "admin" ? [UserContext.adminRole] : [])
    }
    var jwt = JWTVerifier()
    jwt.addHMACKey(Array("jwt-secret".utf8))
    let clock = self.clock
    auth = Authenticator(
      users: users, sessions: SessionCookies(secret: "0123456789abcdef0123456789abcdef"),
      jwt: jwt, now: { clock.now })
    store = try dir.data.create("wiki")
    let wiki = { (id: String, owner: String, members: [String]) in
      #"{"type":"wiki","title":"Secret \#(id)","owner_id":"\#(owner)","members":[\#(members.map { "\"\($0)\"" }.joined(separator: ","))]}"#
    }
    try store.put(wiki("w1", "alice", ["bob"]), id: "w1", actor: "alice")
    try store.put(
      #"{"type":"page","wiki_id":"w1","markdown":"Hidden text of w1"}"#, id: "w1:Home",
      actor: "alice")
    try store.put(wiki("w2", "carol", []), id: "w2", actor: "carol")
    try store.put(
      #"{"type":"page","wiki_id":"w2","markdown":"carol's page"}"#, id: "w2:Home", actor: "carol")
    try store.put(#"{"type":"note","text":"a note"}"#, id: "note", actor: "admin")
  }

  /// A user whose password is `pw-NAME`, hashed with few iterations (the tests' speed; the
  /// server reads the count from the document, as CouchDB does).
  public static func addUser(_ users: UserStore, _ name: String, roles: [String]) throws {
    let salt = "5a1f0123456789abcdef0123456789ab"
    let key = Password.pbkdf2(
      password: Array("pw-\(name)".utf8), salt: Array(salt.utf8), iterations: 10)!
    _ = try users.put(
      JSONObject([
        "_id": .string(UserStore.documentID(of: name)), "name": .string(name),
        "roles": .array(roles.map(JSONValue.string)), "type": .string("user"),
        "password_scheme": .string("pbkdf2"), "pbkdf2_prf": .string("sha256"),
        "iterations": .number(JSONNumber(Int64(10))), "salt": .string(salt),
        "derived_key": .string(Hex.encode(key)),
      ]), actor: "test")
  }

  public var options: CouchServerOptions {
    var options = CouchServerOptions.standard
    options.authenticator = auth
    return options
  }

  public static func basic(_ name: String) -> HTTPFields {
    var fields = HTTPFields()
    fields[.authorization] =
      "Basic " + Data("\(name):pw-\(name)".utf8).base64EncodedString()
    return fields
  }

  /// The headers of a request by `who` (nil: anonymous).
  public static func headers(_ who: String?) -> HTTPFields { who.map(basic) ?? [:] }
}

/// A clock the tests move (cookie expiry).
public final class MovableClock: Sendable {
  let time = Mutex(Date())
  public init() {}
  public var now: Date { time.withLock { $0 } }
  public func advance(_ seconds: TimeInterval) { time.withLock { $0 += seconds } }
}

public func withAccessServer(
  name: String = #function,
  _ body: @Sendable (any TestClientProtocol, AccessFixture) async throws -> Void
) async throws {
  let fixture = try AccessFixture(name)
  let app = buildApplication(
    dataDirectory: fixture.dir.data, options: fixture.options,
    configuration: ApplicationConfiguration(address: .hostname("127.0.0.1", port: 0)),
    logger: quietLogger)
  try await app.test(.router) { client in try await body(client, fixture) }
}
