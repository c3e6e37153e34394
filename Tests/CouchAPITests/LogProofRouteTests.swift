import CouchAPI
import CouchTestSupport
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import JSON
import Log
import Projections
import Query
import Replication
import Testing

/// `GET /{db}/_log/head` and `GET /{db}/_log/proof`: signed tree heads and proofs, for
/// database and server administrators.
@Suite struct LogProofRouteTests {
  @Test("only administrators read the log's head and proofs")
  func adminsOnly() async throws {
    try await withAccessServer { client, _ in
      for path in ["/wiki/_log/head", "/wiki/_log/proof?seq=1"] {
        let anonymous = try await client.call(.get, path)
        #expect(anonymous.code == 401)
        for who in ["alice", "bob"] {
          let member = try await client.call(.get, path, headers: AccessFixture.basic(who))
          #expect(member.code == 403, "\(who) \(path)")
          #expect(member.error == "forbidden")
        }
        let admin = try await client.call(.get, path, headers: AccessFixture.basic("admin"))
        #expect(admin.code == 200, "\(path): \(admin.text)")
      }
    }
  }

  @Test("the head is signed with the database's key, and its proofs check with nothing else")
  func headAndProofs() async throws {
    try await withAccessServer { client, fixture in
      let admin = AccessFixture.basic("admin")
      let key = try fixture.store.log.publicKey().key
      let head = try #require(try await client.call(.get, "/wiki/_log/head", headers: admin).json)
      let size = try #require(head["size"]?.int)
      #expect(size == Int(try fixture.store.log.committedPosition.rawValue))
      #expect(head["public_key"]?.stringValue == Data(key).base64EncodedString())
      #expect(try LogProofs.head(head).isSigned(by: key))

      let inclusion = try #require(
        try await client.call(.get, "/wiki/_log/proof?seq=2", headers: admin).json)
      let signed = try #require(inclusion["head"])
      let checked = LogProofs.check(head: signed, proof: inclusion, publicKey: key)
      #expect(checked.holds, "\(checked.lines)")
      #expect(inclusion["event"]?["seq"]?.seq == 2)

      // In an older head the client holds.
      let older = try #require(
        try await client.call(.get, "/wiki/_log/proof?seq=2&tree_size=\(size)", headers: admin)
          .json)
      #expect(older["head"] == nil)
      #expect(LogProofs.check(head: head, proof: older, publicKey: key).holds)

      try fixture.store.put(#"{"type":"note","text":"later"}"#, id: "later", actor: "admin")
      let consistency = try #require(
        try await client.call(.get, "/wiki/_log/proof?old_size=\(size)", headers: admin).json)
      #expect(consistency["new_size"]?.int == size + 1)
      #expect(consistency["old_root"] == head["root"])
      let newHead = try #require(consistency["head"])
      #expect(LogProofs.check(head: newHead, proof: consistency, publicKey: key).holds)

      // A changed hash in the proof, or another key, and it no longer holds.
      var members = try #require(inclusion.objectValue?.members)
      let index = try #require(members.firstIndex { $0.key == "path" })
      var path = try #require(members[index].value.arrayValue)
      let first = try #require(path[0].stringValue)
      path[0] = .string((first.first == "0" ? "1" : "0") + first.dropFirst())
      members[index].value = .array(path)
      #expect(
        !LogProofs.check(head: signed, proof: .object(JSONObject(members)), publicKey: key).holds)
      #expect(
        !LogProofs.check(
          head: signed, proof: inclusion, publicKey: [UInt8](repeating: 7, count: 32)
        ).holds)
    }
  }

  @Test("bad requests get CouchDB-style errors")
  func badRequests() async throws {
    try await withAccessServer { client, _ in
      let admin = AccessFixture.basic("admin")
      for (path, code, error) in [
        ("/wiki/_log/proof?seq=abc", 400, "bad_request"),
        ("/wiki/_log/proof?seq=999", 404, "not_found"),
        ("/wiki/_log/proof?seq=0", 404, "not_found"),
        ("/wiki/_log/proof", 400, "bad_request"),
        ("/wiki/_log/proof?seq=1&old_size=1", 400, "bad_request"),
        ("/wiki/_log/proof?seq=1&tree_size=999", 404, "not_found"),
        ("/wiki/_log/other", 404, "not_found"),
        ("/nodb/_log/head", 404, "not_found"),
      ] {
        let r = try await client.call(.get, path, headers: admin)
        #expect(r.code == code, "\(path): \(r.text)")
        #expect(r.error == error, "\(path): \(r.text)")
      }
      let post = try await client.call(.post, "/wiki/_log/head", "{}", headers: admin)
      #expect(post.code == 405)
    }
  }
}
