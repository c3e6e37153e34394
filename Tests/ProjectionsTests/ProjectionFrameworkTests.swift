import Foundation
import JSON
import Log
import Query
import RevTree
import StoreTestSupport
import TestSupport
import Testing

@testable import Projections
@testable import Wiki

/// Counts events per type: a tiny inline projection for the framework tests.
final class TypeCounter: Projection {
  let name = "typecount"
  let databaseNames = ["counts"]

  func apply(_ event: RecordedEvent, to storage: ProjectionStorage, in txn: WriteTransaction) throws
  {
    let key = Array(event.type.utf8)
    let n = try txn.get(key, in: storage["counts"]).flatMap { UInt64(bigEndianBytes: $0) } ?? 0
    try txn.put((n + 1).bigEndianBytes, forKey: key, in: storage["counts"])
  }
}

@Suite struct ProjectionFrameworkTests {
  @Test(
    "a random workload of 10,000 operations: rebuild by replay equals the live state, verify passes"
  )
  func randomWorkloadRebuild() throws {
    let t = try TestStore(projections: [TypeCounter()])
    let s = t.store!
    var rng = SplitMix64(seed: 42)
    var revs: [String: String] = [:]
    for i in 0..<10_000 {
      let id = "doc\(rng.next() % 300)"
      switch rng.next() % 10 {
      case 0..<6:
        if let r = try? s.put(#"{"_id":"\#(id)","i":\#(i)}"#, rev: revs[id], actor: "u\(i % 7)") {
          revs[id] = r.rev
        }
      case 6:
        if let rev = revs[id], let r = try? s.delete(id, rev: rev, actor: "u") { revs[id] = r.rev }
      case 7, 8:
        let gen = 1 + Int(rng.next() % 5)
        let hashes = (0..<gen).map { _ in String(format: "%032x", rng.next() % 4) }
        _ = try s.bulkDocs(
          [
            json(
              #"{"_id":"\#(id)","_rev":"\#(gen)-\#(hashes[0])","_revisions":{"start":\#(gen),"ids":[\#(hashes.map { "\"\($0)\"" }.joined(separator: ","))]},"r":\#(i)}"#
            )
          ],
          newEdits: false, actor: "peer")
        revs[id] = nil
      default:
        if i % 50 == 0 { try s.setRevsLimit(1 + Int(rng.next() % 20), actor: "admin") }
        try s.putLocal("cp\(i % 3)", Array(#"{"i":\#(i)}"#.utf8), actor: "r")
      }
    }
    #expect(try s.verify("docs").isEmpty)
    #expect(try s.verify("typecount").isEmpty)
    let before = try s.changes(ChangesOptions())
    let allBefore = try s.allDocs()
    try s.rebuild("docs")
    try s.rebuild("typecount")
    #expect(try s.changes(ChangesOptions()) == before)
    #expect(try s.allDocs() == allBefore)
    try s.rebuildAll()
    #expect(try s.changes(ChangesOptions()) == before)
    #expect(try s.allDocs() == allBefore)
    #expect(try s.verify("docs").isEmpty && s.verify("typecount").isEmpty)
    #expect(try s.log.verify().isValid)
  }

  @Test("verify notices a projection that drifted from the log")
  func verifyFindsDrift() throws {
    let t = try TestStore(projections: [TypeCounter()])
    let s = t.store!
    try s.put(#"{"_id":"a"}"#, actor: "u")
    let counts = try s.log.database(named: "typecount.counts")
    try s.log.write { txn in
      try txn.put(UInt64(99).bigEndianBytes, forKey: Array("doc.edit".utf8), in: counts)
    }
    #expect(try s.verify("typecount").count == 1)
    try s.rebuild("typecount")
    #expect(try s.verify("typecount").isEmpty)
  }

  @Test(
    "a store written by an earlier layout (doc_count, wiki.trees, wiki.revsLimits, wiki.links, mango.docs, mango.rows, inline search.*) is refused with one line naming export and import"
  )
  func earlierLayoutsAreRefused() throws {
    for marker in [
      "doc_count", "wiki.trees", "wiki.revsLimits", "wiki.links", "mango.docs", "mango.rows",
      "search.terms", "search.postings",
    ] {
      let t = try TestStore(marker, projections: [WikiProjection(), MangoProjection()])
      try t.store.put(
        #"{"_id":"w1","type":"wiki","title":"T","owner_id":"ann","members":[]}"#, actor: "ann")
      if marker == "doc_count" {
        // What an earlier documents projection kept beside doc_del_count: the live count.
        let meta = try t.store.log.database(named: "docs.meta")
        try t.store.log.write { txn in
          try txn.put(UInt64(1).bigEndianBytes, forKey: Array("doc_count".utf8), in: meta)
        }
      } else {
        let db = try t.store.log.database(named: marker)
        try t.store.log.write { txn in try txn.put([1], forKey: Array("w1".utf8), in: db) }
      }
      let position = t.store.position
      t.store.close()
      for readOnly in [false, true] {
        var options = EventLog.Options()
        options.readOnly = readOnly
        let error = #expect(throws: StoreError.self) {
          _ = try DocumentStore(
            directory: t.path, options: options,
            projections: [WikiProjection(), MangoProjection()],
            indexes: [TextSearchProjection(schema: TextSearchSchema { _, _ in nil })],
            validation: .touchWiki)
        }
        #expect(error?.error == "unsupported_layout", "\(marker)")
        let reason = error?.reason ?? ""
        #expect(
          reason.contains("wikilog export") && reason.contains("wikilog import")
            && !reason.contains("\n"), "\(reason)")
      }
      // Nothing was written to it.
      let log = try EventLog(directory: t.path)
      #expect(try log.committedPosition == position)
      log.close()
    }
  }

  @Test("a projection applied on its own, outside a store, says what it needs")
  func wikiProjectionOutsideAStore() throws {
    let t = try TestStore(projections: [WikiProjection()])
    try t.store.put(
      #"{"_id":"w1","type":"wiki","title":"T","owner_id":"ann","members":[]}"#, actor: "ann")
    let wiki = WikiProjection()
    let storage = try ProjectionStorage.open(for: wiki, in: t.store.log)
    let event = try #require(try t.store.log.read(from: 1).first)
    #expect(throws: StoreError.self) {
      try t.store.log.write { txn in try wiki.apply(event, to: storage, in: txn) }
    }
  }

  @Test("read-only, a store opens without a projection that was never built there")
  func readOnlyWithoutAProjection() throws {
    let t = try TestStore(projections: [WikiProjection()])
    try t.store.put(
      #"{"_id":"w1","type":"wiki","title":"T","owner_id":"ann","members":[]}"#, actor: "ann")
    t.store.close()
    var options = EventLog.Options()
    options.readOnly = true
    let store = try DocumentStore(
      directory: t.path, options: options, projections: [WikiProjection(), DraftProjection()],
      validation: .touchWiki)
    defer { store.close() }
    #expect(store.projectionNames == ["docs", "wiki"])
    #expect(try store.changes(ChangesOptions()).results.count == 1)
    #expect(try WikiQueries(store).wikis().count == 1)
    #expect(throws: StoreError.self) { try Drafts(store) }
  }

  @Test("a projection added later catches up from the log when the store opens")
  func lateProjectionCatchesUp() throws {
    let t = try TestStore()
    for i in 0..<25 { try t.store.put(#"{"_id":"d\#(i)"}"#, actor: "u") }
    try t.reopen(projections: [TypeCounter()])
    let counts = try t.store.log.database(named: "typecount.counts")
    let n = try t.store.read { try $0.get(Array("doc.edit".utf8), in: counts) }
    #expect(n == UInt64(25).bigEndianBytes)
    try t.store.put(#"{"_id":"more"}"#, actor: "u")
    #expect(try t.store.verify("typecount").isEmpty)
  }
}
