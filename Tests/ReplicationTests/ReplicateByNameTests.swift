import CouchAPI
import CouchTestSupport
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import JSON
import Projections
import Query
import Replication
import TestSupport
import Testing

/// `POST /_replicate` with plain names: this server's databases, reached with the caller's
/// credentials (moved from the server's answers tests).
@Suite struct ReplicateByNameTests {
  @Test("_replicate with plain database names copies between this server's databases")
  func replicateByName() async throws {
    try await withServer(.live) { client, dir in
      let source = try dir.data.create("ra")
      try ReplicationRobustnessTests.seed(source, count: 50)
      let once = try await client.call(
        .post, "/_replicate", #"{"source":"ra","target":"rb","create_target":true}"#)
      #expect(once.code == 200, "\(once.text)")
      #expect(once["ok"] == .bool(true))
      let target = try dir.data.open("rb")
      try ReplicationEndToEndTests.expectIdentical(source, target)
      // Continuous: 202, and a new write flows; cancelled by the same names.
      let body = #"{"source":"ra","target":"rb","continuous":true}"#
      let started = try await client.call(.post, "/_replicate", body)
      #expect(started.code == 202, "\(started.text)")
      _ = try source.put(#"{"_id":"later"}"#, actor: "test")
      #expect(try await eventually { (try? target.get("later")) != nil })
      let cancel = #"{"source":"ra","target":"rb","continuous":true,"cancel":true}"#
      #expect(try await client.call(.post, "/_replicate", cancel).code == 200)
      // A missing source is CouchDB's 404 db_not_found.
      let missing = try await client.call(.post, "/_replicate", #"{"source":"nope","target":"rb"}"#)
      #expect(missing.code == 404 && missing.error == "db_not_found")
    }
  }
}
