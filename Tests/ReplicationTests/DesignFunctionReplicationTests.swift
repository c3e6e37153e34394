import CouchAPI
import CouchQuery
import CouchReplicator
import CouchTestSupport
import Foundation
import JSON
import Projections
import Replication
import Testing

/// Design functions on the replicated path: `validate_doc_update` refusing replicated
/// revisions, and a JavaScript filter choosing what a replication carries.
@Suite struct DesignFunctionReplicationTests {
  /// Database `db` of `a` and of `b`, each through an in-process server.
  static func endpoints(_ a: TestDirectory, _ b: TestDirectory) -> (CouchEndpoint, CouchEndpoint) {
    func endpoint(_ dir: TestDirectory, _ name: String) -> CouchEndpoint {
      CouchEndpoint(
        transport: LocalTransport(
          server: CouchServer(dataDirectory: dir.data, options: .standard, logger: quietLogger)),
        database: "db", identity: "\(name)/db")
    }
    return (endpoint(a, "a"), endpoint(b, "b"))
  }

  @Test("validate_doc_update on the target refuses replicated revisions: counted, not written")
  func validationRefusesReplicatedRevisions() async throws {
    let a = TestDirectory("vdu-a")
    let b = TestDirectory("vdu-b")
    let source = try a.data.create("db")
    let target = try b.data.create("db")
    try target.put(
      #"{"validate_doc_update":"function(doc) { if (doc.secret) throw({forbidden: 'no secrets here'}) }"}"#,
      id: "_design/guard", actor: "admin")
    try source.put(#"{"_id":"ok1","v":1}"#, actor: "ann")
    try source.put(#"{"_id":"bad","secret":true}"#, actor: "ann")
    try source.put(#"{"_id":"ok2","v":2}"#, actor: "ann")
    let (from, to) = Self.endpoints(a, b)
    let report = try await Replicator(source: from, target: to).replicate()
    #expect(report.docWriteFailures == 1)
    #expect(try target.get("ok1")["v"] == .int(1))
    #expect(try target.get("ok2")["v"] == .int(2))
    #expect(throws: StoreError.self) { try target.get("bad") }
  }

  @Test("a replication filtered by a design document's JavaScript filter")
  func javaScriptFilter() async throws {
    let a = TestDirectory("jsfilter-a")
    let b = TestDirectory("jsfilter-b")
    let source = try a.data.create("db")
    let target = try b.data.create("db")
    try source.put(
      #"{"filters":{"mine":"function(doc, req) { return doc.owner === req.query.owner }"}}"#,
      id: "_design/app", actor: "admin")
    for (id, owner) in [("a1", "ann"), ("b1", "bob"), ("a2", "ann")] {
      try source.put(#"{"_id":"\#(id)","owner":"\#(owner)"}"#, actor: owner)
    }
    let (from, to) = Self.endpoints(a, b)
    var options = ReplicationOptions()
    options.filter = "app/mine"
    options.filterParameters = ["owner": "ann"]
    _ = try await Replicator(source: from, target: to, options: options).replicate()
    #expect(try target.get("a1")["owner"] == .string("ann"))
    #expect(try target.get("a2")["owner"] == .string("ann"))
    #expect(throws: StoreError.self) { try target.get("b1") }
  }
}
