import CouchTestSupport
import Formats
import Foundation
import HummingbirdTesting
import JSON
import Projections
import TestSupport
import Testing

@testable import Replication

/// CouchDB's own replicator against wikilog: a real CouchDB (3.4.3 was used) named by
/// `WIKILOG_COUCHDB_URL` (`http://admin:pw@127.0.0.1:15984`, an administrator's URL); the
/// suite is skipped without one (`make test` has none: CouchDB is not a dependency).
@Suite(
  .enabled(
    if: ProcessInfo.processInfo.environment["WIKILOG_COUCHDB_URL"] != nil,
    "needs a CouchDB: WIKILOG_COUCHDB_URL=http://admin:pw@host:port"))
struct CouchDBReplicatorTests {
  /// CouchDB's base URL, credentials and all, and a transport to it.
  static func couch() throws -> (url: String, transport: HTTPTransport) {
    let text = try #require(ProcessInfo.processInfo.environment["WIKILOG_COUCHDB_URL"])
    let url = try #require(CouchURL(text.hasSuffix("/") ? text + "x" : text + "/x"))
    let credentials = url.user.map {
      HTTPTransport.Credentials.basic(user: $0, password: url.password ?? "")
    }
    return (
      text.hasSuffix("/") ? String(text.dropLast()) : text,
      HTTPTransport(baseURL: url.baseURL, credentials: credentials)
    )
  }

  @discardableResult
  static func call(
    _ transport: HTTPTransport, _ method: String, _ path: String, _ body: String? = nil
  ) async throws -> (status: Int, json: JSONValue) {
    let response = try await transport.send(method, path, body: body.map { Array($0.utf8) })
    return (response.status, (try? JSONValue(parsing: response.body)) ?? .null)
  }

  @Test(
    "CouchDB's replicator pushes two wikis edited after their pages into wikilog as their owner, twice: every page arrives, a page of a wiki that does not let her in stays out; then pulls it all back"
  )
  func pushAndPull() async throws {
    let (base, couch) = try Self.couch()
    let source = "wikilog_test_" + UUID().uuidString.lowercased().prefix(8)
    let back = source + "_back"
    // One shard: the feed is in the order of the writes.
    let made = try await Self.call(couch, "PUT", "/\(source)?q=1")
    #expect(made.status == 201, "\(made.json)")
    var ids: [String] = []
    for wiki in ["cw1", "cw2"] {
      let created = try await Self.call(
        couch, "PUT", "/\(source)/\(wiki)",
        #"{"type":"wiki","title":"\#(wiki)","owner_id":"alice","members":[]}"#)
      ids.append(wiki)
      for n in 1...(wiki == "cw1" ? 3 : 10) {
        let id = "\(wiki):Page \(n)"
        try await Self.call(
          couch, "PUT", "/\(source)/" + PercentDecoding.encode(id),
          #"{"type":"page","wiki_id":"\#(wiki)","markdown":"page \#(n)"}"#)
        ids.append(id)
      }
      // The wiki edited after its pages: the feed gives the pages first.
      let rev = try #require(created.json["rev"]?.stringValue)
      let edited = try await Self.call(
        couch, "PUT", "/\(source)/\(wiki)?rev=\(rev)",
        #"{"type":"wiki","title":"\#(wiki), renamed","owner_id":"alice","members":[]}"#)
      #expect(edited.status == 201)
    }
    // carol's wiki on wikilog: alice's page for it must stay out.
    try await Self.call(
      couch, "PUT", "/\(source)/" + PercentDecoding.encode("cx9:Q"),
      #"{"type":"page","wiki_id":"cx9","markdown":"q"}"#)
    let written = ids
    let fixture = try AccessFixture("couchdbReplicator")
    try fixture.store.put(
      #"{"type":"wiki","title":"Carol's","owner_id":"carol","members":[]}"#, id: "cx9",
      actor: "carol")
    defer {
      Task {
        _ = try? await Self.call(couch, "DELETE", "/\(source)")
        _ = try? await Self.call(couch, "DELETE", "/\(back)")
      }
    }
    try await ReplicationRobustnessTests.live(fixture.dir, options: fixture.options).test(.live) {
      client in
      let port = try #require(client.port)
      let target = "http://alice:pw-alice@127.0.0.1:\(port)/wiki"
      for run in 1...2 {
        let answer = try await Self.call(
          couch, "POST", "/_replicate",
          #"{"source":"\#(base)/\#(source)","target":"\#(target)"}"#)
        #expect(answer.status == 200, "run \(run): \(answer.json)")
        #expect(answer.json["ok"] == .bool(true), "run \(run): \(answer.json)")
      }
      for id in written {
        #expect((try? fixture.store.get(id)) != nil, "\(id) did not arrive")
        if let doc = try? fixture.store.get(id) {
          let there = try await Self.call(
            couch, "GET", "/\(source)/" + PercentDecoding.encode(id))
          #expect(doc["_rev"] == there.json["_rev"], "\(id)")
        }
      }
      #expect((try? fixture.store.get("cx9:Q")) == nil)
      #expect(try fixture.store.get("cx9")["owner_id"] == .string("carol"))
      // Pulled back by CouchDB as alice into a new database: what she may read of wikilog's.
      let pulled = try await Self.call(
        couch, "POST", "/_replicate",
        #"{"source":"http://alice:pw-alice@127.0.0.1:\#(port)/wiki","target":"\#(base)/\#(back)","create_target":true}"#
      )
      #expect(pulled.status == 200 && pulled.json["ok"] == .bool(true), "\(pulled.json)")
      #expect(pulled.json["history"]?[0]?["doc_write_failures"]?.int == 0)
      for id in written {
        let there = try await Self.call(couch, "GET", "/\(back)/" + PercentDecoding.encode(id))
        #expect(there.status == 200, "\(id) not pulled back")
      }
      let carols = try await Self.call(couch, "GET", "/\(back)/cx9")
      #expect(carols.status == 404)
    }
  }
}
