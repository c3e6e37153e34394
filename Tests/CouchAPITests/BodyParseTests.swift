import CouchAPI
import CouchQuery
import CouchReplicator
import CouchTestSupport
import Foundation
import JSON
import Projections
import Replication
import Testing

/// A request's JSON body is parsed once: the access checks, `_users`' password hashing and
/// role check, `_replicator`'s owner and the store share the value.
@Suite struct BodyParseTests {
  /// The JSON texts parsed while the server answers one request, in process.
  static func parses(
    _ transport: LocalTransport, _ method: String, _ path: String, _ body: String
  ) async throws -> (status: Int, parses: Int) {
    let counter = JSONParseCounter()
    let response = try await JSONParseCounter.$current.withValue(counter) {
      try await transport.send(method, path, body: Array(body.utf8))
    }
    return (response.status, counter.parses)
  }

  @Test("PUT and POST of a document parse its body once, in a wiki database and in _users")
  func onceEach() async throws {
    let dir = TestDirectory(users: true)
    let transport = LocalTransport(
      server: CouchServer(dataDirectory: dir.data, options: .standard))
    _ = try await transport.send("PUT", "/db", body: nil)
    _ = try await transport.send("PUT", "/_users", body: nil)
    // (The query server started, as a first user's write would find it.)
    _ = try await Self.parses(
      transport, "PUT", "/_users/org.couchdb.user:warm",
      #"{"name":"warm","type":"user","roles":[],"password":"secret"}"#)
    let put = try await Self.parses(transport, "PUT", "/db/a", #"{"n":1}"#)
    #expect(put.status == 201 && put.parses == 1, "\(put)")
    let post = try await Self.parses(transport, "POST", "/db", #"{"_id":"b","n":2}"#)
    #expect(post.status == 201 && post.parses == 1, "\(post)")
    let replicated = try await Self.parses(
      transport, "PUT", "/db/c?new_edits=false", #"{"_rev":"1-abc","n":3}"#)
    #expect(replicated.status == 201 && replicated.parses == 1, "\(replicated)")
    let page = try await Self.parses(
      transport, "PUT", "/db/w1",
      #"{"type":"wiki","title":"W","owner_id":"admin","members":[]}"#)
    #expect(page.status == 201 && page.parses == 1, "\(page)")
    let user = try await Self.parses(
      transport, "PUT", "/_users/org.couchdb.user:ann",
      #"{"name":"ann","type":"user","roles":[],"password":"secret"}"#)
    // `_users` runs its `_design/_auth` function too: as many parses as a database with one
    // validate function.
    _ = try await transport.send("PUT", "/checked", body: nil)
    _ = try await transport.send(
      "PUT", "/checked/_design/v",
      body: Array(
        #"{"validate_doc_update":"function(doc) { if (!doc.name) throw({forbidden: 'name'}) }"}"#
          .utf8))
    _ = try await Self.parses(transport, "PUT", "/checked/warm", #"{"name":"w"}"#)
    let checked = try await Self.parses(transport, "PUT", "/checked/x", #"{"name":"x"}"#)
    #expect(checked.status == 201, "\(checked)")
    #expect(user.status == 201 && user.parses == checked.parses, "\(user) \(checked)")
    // Still what was asked: the password hashed, the documents there.
    let stored = try dir.data.open("_users").get("org.couchdb.user:ann")
    #expect(stored["password"] == nil && stored["derived_key"] != nil)
    #expect(try dir.data.open("db").get("c")["n"] == .int(3))
  }
}
