import CouchAPI
import CouchQuery
import CouchTestSupport
import Formats
import Foundation
import Hummingbird
import HummingbirdTesting
import JSON
import Log
import Projections
import Query
import Replication
import RevTree
import Testing
import Wiki

/// Two live `wikilog serve` instances on two data directories, and the replication protocol
/// between them over HTTP.
@Suite struct ReplicationEndToEndTests {
  static let documentCount = 10_000

  /// 10,000 documents: every 20th with a history of 25 revisions, every 7th with a conflicting
  /// branch, every 13th deleted.
  static func seed(_ store: DocumentStore) throws {
    var revs: [String: String] = [:]
    for start in stride(from: 0, to: documentCount, by: 1000) {
      let docs: [JSONValue] = (start..<min(start + 1000, documentCount)).map { i in
        json(#"{"_id":"doc-\#(i)","type":"note","wiki_id":"w\#(i % 10)","markdown":"Page \#(i)"}"#)
      }
      for result in try store.bulkDocs(docs, actor: "alice") { revs[result.id] = result.rev }
    }
    let long = stride(from: 0, to: documentCount, by: 20).map { "doc-\($0)" }
    for round in 2...25 {
      let docs = long.map { id in
        json(
          #"{"_id":"\#(id)","_rev":"\#(revs[id] ?? "missing")","type":"note","markdown":"v\#(round)"}"#
        )
      }
      for result in try store.bulkDocs(docs, actor: round % 2 == 0 ? "bob" : "carol") {
        revs[result.id] = result.rev
      }
    }
    var branches: [JSONValue] = []
    for i in stride(from: 3, to: documentCount, by: 7) {
      let id = "doc-\(i)"
      branches.append(try sibling(of: try RevID(revs[id]!), in: store, id: id, hash: "c0ffee\(i)"))
    }
    #expect(try store.bulkDocs(branches, newEdits: false, actor: "dave", origin: "test").isEmpty)
    let deletions = stride(from: 5, to: documentCount, by: 13).map { i in
      json(#"{"_id":"doc-\#(i)","_rev":"\#(revs["doc-\(i)"]!)","_deleted":true}"#)
    }
    #expect(try store.bulkDocs(deletions, actor: "alice").allSatisfy(\.ok))
  }

  /// A replicated revision beside `rev` (same parent, or a second root), making a conflict.
  static func sibling(of rev: RevID, in store: DocumentStore, id: String, hash: String) throws
    -> JSONValue
  {
    let parent = try #require(try store.record(id)).tree.parent(of: rev)
    let ids = [hash] + (parent.map { [$0.rev.hash.description] } ?? [])
    return json(
      #"{"_id":"\#(id)","_rev":"\#(rev.generation)-\#(hash)","_revisions":{"start":\#(rev.generation),"ids":[\#(ids.map { "\"\($0)\"" }.joined(separator: ","))]},"markdown":"branch \#(hash)"}"#
    )
  }

  /// Edits on the second server before replicating back: updates, new conflicts, deletions and
  /// new documents.
  static func change(_ store: DocumentStore) throws {
    var edits: [JSONValue] = []
    var branches: [JSONValue] = []
    for i in stride(from: 1, to: documentCount, by: 9) {
      guard let record = try store.record("doc-\(i)"), let winner = record.tree.winner,
        winner.status == .available
      else { continue }
      if i % 2 == 0 {
        edits.append(json(#"{"_id":"doc-\#(i)","_rev":"\#(winner.rev)","markdown":"edited on b"}"#))
      } else if i % 5 == 0 {
        edits.append(json(#"{"_id":"doc-\#(i)","_rev":"\#(winner.rev)","_deleted":true}"#))
      } else if i % 3 == 0 {
        branches.append(try sibling(of: winner.rev, in: store, id: "doc-\(i)", hash: "beef\(i)"))
      }
    }
    for i in 0..<500 { edits.append(json(#"{"_id":"new-\#(i)","type":"note","markdown":"new"}"#)) }
    #expect(try store.bulkDocs(edits, actor: "erin").allSatisfy(\.ok))
    #expect(try store.bulkDocs(branches, newEdits: false, actor: "erin", origin: "test").isEmpty)
  }

  /// Every document's revision tree (revisions, edges, leaves and their deleted flags), winner,
  /// conflicts and leaf bodies, compared between the two stores.
  static func expectIdentical(_ a: DocumentStore, _ b: DocumentStore) throws {
    let idsA = try a.changes().results.map(\.id).sorted()
    let idsB = try b.changes().results.map(\.id).sorted()
    #expect(idsA == idsB)
    var differences = 0
    for id in idsA {
      let ra = try #require(try a.record(id))
      let rb = try #require(try b.record(id))
      let bodiesA = try a.openRevs(id, .all)
      let bodiesB = try b.openRevs(id, .all)
      let same =
        shape(ra.tree) == shape(rb.tree) && ra.tree.winner?.rev == rb.tree.winner?.rev
        && ra.tree.winner?.isDeleted == rb.tree.winner?.isDeleted
        && ra.tree.conflicts == rb.tree.conflicts
        && ra.tree.deletedConflicts == rb.tree.deletedConflicts
        && bodiesA == bodiesB
      if !same {
        differences += 1
        if differences <= 5 { Issue.record("\(id) differs: \(ra.tree) vs \(rb.tree)") }
      }
    }
    #expect(differences == 0)
    #expect(try a.info.docCount == b.info.docCount)
    #expect(try a.info.deletedDocCount == b.info.deletedDocCount)
  }

  /// The tree as a set of `rev<-parent` edges and `leaf rev deleted` lines.
  static func shape(_ tree: RevisionTree) -> Set<String> {
    var lines = Set<String>()
    tree.forEachRevision { revision, _ in
      lines.insert("\(revision.rev)<-\(tree.parent(of: revision.rev)?.rev.description ?? "")")
    }
    for leaf in tree.leaves { lines.insert("leaf \(leaf.rev) \(leaf.isDeleted)") }
    return lines
  }

  @Test(
    "10,000 documents with conflicts, deletions and long histories: pushed to another server and back"
  )
  func pushAndBack() async throws {
    let a = TestDirectory("replication-a")
    let b = TestDirectory("replication-b")
    let storeA = try a.data.create("wiki")
    let storeB = try b.data.create("wiki")
    try Self.seed(storeA)
    let appA = buildApplication(
      dataDirectory: a.data, options: .standard,
      configuration: ApplicationConfiguration(address: .hostname("127.0.0.1", port: 0)),
      logger: quietLogger)
    let appB = buildApplication(
      dataDirectory: b.data, options: .standard,
      configuration: ApplicationConfiguration(address: .hostname("127.0.0.1", port: 0)),
      logger: quietLogger)
    try await appA.test(.live) { clientA in
      try await appB.test(.live) { clientB in
        let portA = try #require(clientA.port)
        let portB = try #require(clientB.port)
        let wikiA = CouchEndpoint(
          transport: HTTPClientTransport(baseURL: "http://127.0.0.1:\(portA)"), database: "wiki",
          identity: "a/wiki")
        let wikiB = CouchEndpoint(
          transport: HTTPClientTransport(baseURL: "http://127.0.0.1:\(portB)"), database: "wiki",
          identity: "b/wiki")

        let push = try await Replicator(source: wikiA, target: wikiB).replicate()
        #expect(push.docWriteFailures == 0)
        #expect(push.docsRead == Self.documentCount)
        #expect(push.docsWritten == push.missingFound)
        #expect(push.docsWritten > Self.documentCount)  // the conflicts' second leaves too
        try Self.expectIdentical(storeA, storeB)

        // Both sides hold the checkpoint; a second run starts from it and finds nothing.
        let replicationID = Replicator(source: wikiA, target: wikiB).replicationID
        let checkpointA = try storeA.getLocal(replicationID)
        let checkpointB = try storeB.getLocal(replicationID)
        #expect(checkpointA["session_id"] == checkpointB["session_id"])
        #expect(checkpointA["source_last_seq"] == push.endSeq)
        let again = try await Replicator(source: wikiA, target: wikiB).replicate()
        #expect(again.startSeq == push.endSeq)
        #expect(again.docsRead == 0 && again.docsWritten == 0)

        try Self.change(storeB)
        let back = try await Replicator(source: wikiB, target: wikiA).replicate()
        #expect(back.docWriteFailures == 0)
        #expect(back.docsWritten > 500)
        try Self.expectIdentical(storeA, storeB)

        // Pushing again moves only what A has that B lacks: nothing.
        let last = try await Replicator(source: wikiA, target: wikiB).replicate()
        #expect(last.startSeq == push.endSeq)
        #expect(last.docsWritten == 0 && last.docWriteFailures == 0)
        try Self.expectIdentical(storeA, storeB)
      }
    }
  }

  @Test("attachments replicate: data once, stubs for what the target has, the same revisions")
  func attachmentsReplicate() async throws {
    let a = TestDirectory("replication-att-a")
    let b = TestDirectory("replication-att-b")
    let storeA = try a.data.create("wiki")
    let storeB = try b.data.create("wiki")
    let bytes = [UInt8]((0...255).map { UInt8($0) })
    let r1 = try storeA.putAttachment(
      "doc", name: "bin/all.bin", data: bytes, contentType: "image/png", rev: nil, actor: "a")
    _ = try storeA.putAttachment(
      "doc", name: "notes.txt", data: Array("some text".utf8), contentType: "text/plain",
      rev: r1.rev, actor: "a")
    let appA = buildApplication(
      dataDirectory: a.data, options: .standard,
      configuration: ApplicationConfiguration(address: .hostname("127.0.0.1", port: 0)),
      logger: quietLogger)
    let appB = buildApplication(
      dataDirectory: b.data, options: .standard,
      configuration: ApplicationConfiguration(address: .hostname("127.0.0.1", port: 0)),
      logger: quietLogger)
    try await appA.test(.live) { clientA in
      try await appB.test(.live) { clientB in
        let wikiA = CouchEndpoint(
          transport: HTTPClientTransport(baseURL: "http://127.0.0.1:\(try #require(clientA.port))"),
          database: "wiki", identity: "a/wiki")
        let wikiB = CouchEndpoint(
          transport: HTTPClientTransport(baseURL: "http://127.0.0.1:\(try #require(clientB.port))"),
          database: "wiki", identity: "b/wiki")
        let push = try await Replicator(source: wikiA, target: wikiB).replicate()
        #expect(push.docWriteFailures == 0 && push.docsWritten == 1)
        #expect(try storeB.get("doc") == storeA.get("doc"))
        // An edit that keeps one attachment as a stub reaches B as a stub of B's ancestor.
        let current = try storeA.get("doc")
        var object = try #require(current.objectValue)
        object["edited"] = .bool(true)
        _ = try storeA.put(JSONValue.object(object).serialized(), actor: "a")
        let again = try await Replicator(source: wikiA, target: wikiB).replicate()
        #expect(again.docWriteFailures == 0 && again.docsWritten == 1)
        let docB = try storeB.get("doc", options: GetOptions(attachments: true))
        #expect(docB == (try storeA.get("doc", options: GetOptions(attachments: true))))
        #expect(docB["_attachments"]?["bin/all.bin"]?["data"] == .string(Base64.encode(bytes)))
        #expect(try storeB.verifyAttachments().isEmpty)
      }
    }
  }
}
