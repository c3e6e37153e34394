import Auth
import CouchAPI
import CouchQuery
import CouchTestSupport
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import JSON
import Projections
import Synchronization
import Testing

/// A module's own endpoints on the server (``CouchFeature``): matched under a database after it
/// is opened and the caller's access decided, with the endpoint's role and methods checked
/// before its handler; and a server without CouchQuery's feature, which serves no query.
@Suite struct FeatureEndpointTests {
  final class Calls: Sendable { let count = Mutex(0) }

  /// A feature with `GET /{db}/_fields/{docid}` (the names of a document's fields, for a
  /// database administrator) and the `_changes` filter `fields/has?field=` (documents with
  /// that field); `calls` counts the handler's runs.
  static func feature(calls: Calls) -> CouchFeature {
    CouchFeature(
      name: "fields",
      databaseEndpoints: [
        DatabaseEndpoint(
          ["_fields", .parameter("id")], methods: [.get], role: .databaseAdmin
        ) { r in
          calls.count.withLock { $0 += 1 }
          let id = r.parameters["id"]!
          let doc = try r.store.get(id)
          let names = (doc.objectValue?.members ?? []).map(\.key).filter { !$0.hasPrefix("_") }
          return CouchResponse.json(
            .object(
              JSONObject([
                "db": .string(r.database), "id": .string(id),
                "fields": .array(names.map(JSONValue.string)), "rest": .int(r.rest.count),
              ])))
        }
      ],
      changesFilter: { asked in
        guard asked.name == "fields/has", let field = asked.value("field") else { return nil }
        return DocumentBodyFilter(name: "fields/has \(field)") { doc in doc[field] != nil }
      })
  }

  @Test("a feature's endpoint: parameters, methods (405 with Allow), a missing database first")
  func endpoint() async throws {
    let calls = Calls()
    var options = CouchServerOptions()
    options.features = [Self.feature(calls: calls)]
    try await withServer(options: options) { client, _ in
      #expect(try await client.call(.put, "/db").code == 201)
      #expect(try await client.call(.put, "/db/a", #"{"x":1,"y":2}"#).code == 201)
      let answer = try await client.call(.get, "/db/_fields/a")
      #expect(answer.code == 200)
      #expect(answer["fields"]?.strings == ["x", "y"])
      #expect(answer["db"]?.stringValue == "db")
      let post = try await client.call(.post, "/db/_fields/a", "{}")
      #expect(post.code == 405)
      #expect(post.headers[.allow] == "GET")
      // The database is opened before the endpoint runs: 404, and the handler never runs.
      let before = calls.count.withLock { $0 }
      let missing = try await client.call(.get, "/nodb/_fields/a")
      #expect(missing.code == 404)
      #expect(missing.error == "not_found")
      #expect(calls.count.withLock { $0 } == before)
      // A path the pattern does not match is not the feature's.
      #expect(try await client.call(.get, "/db/_fields/a/b").code != 200)
    }
  }

  @Test("a feature's endpoint sees only callers its role lets in; its changes filter filters")
  func roleAndFilter() async throws {
    let calls = Calls()
    let fixture = try AccessFixture()
    var options = fixture.options
    options.features = [Self.feature(calls: calls)]
    let app = buildApplication(
      dataDirectory: fixture.dir.data, options: options,
      configuration: ApplicationConfiguration(address: .hostname("127.0.0.1", port: 0)),
      logger: quietLogger)
    try await app.test(.router) { client in
      let alice = try await client.call(
        .get, "/wiki/_fields/w1", headers: AccessFixture.basic("alice"))
      #expect(alice.code == 403)
      #expect(alice["reason"]?.stringValue == "You are not a db or server admin.")
      let anonymous = try await client.call(.get, "/wiki/_fields/w1")
      #expect(anonymous.code == 401)
      #expect(calls.count.withLock { $0 } == 0)
      let admin = try await client.call(
        .get, "/wiki/_fields/w1", headers: AccessFixture.basic("admin"))
      #expect(admin.code == 200)
      #expect(calls.count.withLock { $0 } == 1)
      let changes = try await client.call(
        .get, "/wiki/_changes?filter=fields/has&field=text",
        headers: AccessFixture.basic("admin"))
      #expect(changes.code == 200)
      #expect(changes["results"]?.arrayValue?.compactMap { $0["id"]?.stringValue } == ["note"])
      // A design filter no feature knows.
      let unknown = try await client.call(
        .get, "/wiki/_changes?filter=other/name", headers: AccessFixture.basic("admin"))
      #expect(unknown.code == 501)
    }
  }

  @Test("without CouchQuery's feature: views and design functions 501, _find is no endpoint")
  func noQuery() async throws {
    try await withServer(options: CouchServerOptions()) { client, _ in
      #expect(try await client.call(.put, "/db").code == 201)
      #expect(
        try await client.call(
          .put, "/db/_design/d", #"{"views":{"v":{"map":"function(doc){emit(doc._id,1)}"}}}"#
        ).code == 201)
      let view = try await client.call(.get, "/db/_design/d/_view/v")
      #expect(view.code == 501)
      #expect(view.error == "not_implemented")
      let find = try await client.call(.post, "/db/_find", #"{"selector":{}}"#)
      #expect(find.code >= 400 && find.code < 500)
      // With it (as `wikilog serve` has it), the same view answers.
    }
    try await withServer(options: CouchServerOptions.standard) { client, _ async throws in
      #expect(try await client.call(.put, "/db").code == 201)
      #expect(
        try await client.call(
          .put, "/db/_design/d", #"{"views":{"v":{"map":"function(doc){emit(doc._id,1)}"}}}"#
        ).code == 201)
      #expect(try await client.call(.get, "/db/_design/d/_view/v").code == 200)
    }
  }
}
