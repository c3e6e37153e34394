import Foundation
import JSON
import Log
import RevTree
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

  @Test("the doc_count row of stores written by earlier versions is removed when they open")
  func legacyDocCountRow() throws {
    let t = try TestStore()
    let s = t.store!
    let a = try s.put(#"{"_id":"a"}"#, actor: "u")
    try s.put(#"{"_id":"b"}"#, actor: "u")
    try s.delete("a", rev: a.rev!, actor: "u")
    // What the earlier projection kept beside doc_del_count: the live count.
    let meta = try s.log.database(named: "docs.meta")
    try s.log.write { txn in
      try txn.put(UInt64(1).bigEndianBytes, forKey: Array("doc_count".utf8), in: meta)
    }
    #expect(try !s.verify("docs").isEmpty)
    try t.reopen()
    #expect(try t.store.verify("docs").isEmpty)
    #expect(try t.store.info.docCount == 1 && t.store.info.deletedDocCount == 1)
  }

  @Test(
    "the wiki projection's retired databases (wiki.trees, wiki.revsLimits) are removed when a store opens"
  )
  func retiredWikiDatabases() throws {
    let t = try TestStore(projections: [WikiProjection()])
    try t.store.put(
      #"{"_id":"w1","type":"wiki","title":"T","owner_id":"ann","members":[]}"#, actor: "ann")
    // What an earlier version kept: a copy of each tree, and the revs_limit history.
    for name in WikiProjection.retiredDatabaseNames {
      let db = try t.store.log.database(named: name)
      try t.store.log.write { txn in try txn.put([1], forKey: Array("w1".utf8), in: db) }
    }
    try t.reopen(projections: [WikiProjection()])
    for name in WikiProjection.retiredDatabaseNames {
      #expect(try !t.store.log.removeDatabase(named: name), "\(name) is still there")
    }
    #expect(try t.store.verify("wiki").isEmpty)
    #expect(try WikiQueries(t.store).wikis().map(\.id) == ["w1"])
    // A projection applied on its own, outside a store, says what it needs.
    let wiki = WikiProjection()
    let storage = try ProjectionStorage.open(for: wiki, in: t.store.log)
    let event = try #require(try t.store.log.read(from: 1).first)
    #expect(throws: StoreError.self) {
      try t.store.log.write { txn in try wiki.apply(event, to: storage, in: txn) }
    }
  }

  @Test(
    "a store whose page links are in wiki.links (format-1 pages rows) reads them read-only, and opened writable moves them into the rows"
  )
  func legacyLinksDatabase() throws {
    let t = try TestStore(projections: [WikiProjection()])
    try t.store.put(
      #"{"_id":"w1","type":"wiki","title":"T","owner_id":"ann","members":[]}"#, actor: "ann")
    try t.store.put(
      #"{"_id":"w1:Home","type":"page","wiki_id":"w1","markdown":"[[Tea]] and [[Soup]]"}"#,
      actor: "ann")
    try t.store.put(
      #"{"_id":"w1:Soup","type":"page","wiki_id":"w1","markdown":"back [[Home]]"}"#, actor: "ann")
    try t.store.put(
      #"{"_id":"w1:Plain","type":"page","wiki_id":"w1","markdown":"no links"}"#, actor: "ann")
    // What an earlier version wrote: rows without their links, and the links beside them.
    let pages = try t.store.log.database(named: "wiki.pages")
    let legacy = try t.store.log.database(named: WikiProjection.legacyLinksDatabase)
    let links = ["Home": ["Soup", "Tea"], "Soup": ["Home"]]
    try t.store.log.write { txn in
      for title in ["Home", "Soup", "Plain"] {
        let key = WikiProjection.pageKey("w1", title)
        let row = try #require(try txn.get(key, in: pages))
        #expect(try PageRow.links(in: row) == (links[title] ?? []).map { Array($0.utf8) })
        let fields = try PageRow(decoding: row).encoded(links: [])
        try txn.put(
          [PageRow.legacyFormat] + fields.dropFirst().dropLast(), forKey: key, in: pages)
        if let targets = links[title] {
          var w = ByteWriter()
          w.strings(targets)
          try txn.put(w.bytes, forKey: key, in: legacy)
        }
      }
    }
    t.store.close()

    var options = EventLog.Options()
    options.readOnly = true
    let readOnly = try DocumentStore(
      directory: t.path, options: options, projections: [WikiProjection()],
      validation: .touchWiki)
    let old = try WikiQueries(readOnly)
    #expect(try old.links(from: "Home", in: "w1") == ["Soup", "Tea"])
    #expect(try old.links(from: "Plain", in: "w1") == [])
    #expect(try old.pages(in: "w1").map(\.title) == ["Home", "Plain", "Soup"])
    readOnly.close()

    try t.reopen(projections: [WikiProjection()])
    #expect(try !t.store.log.hasDatabase(named: WikiProjection.legacyLinksDatabase))
    let wiki = try WikiQueries(t.store)
    #expect(try wiki.links(from: "Home", in: "w1") == ["Soup", "Tea"])
    #expect(try wiki.links(from: "Soup", in: "w1") == ["Home"])
    #expect(try wiki.backlinks(to: "Home", in: "w1") == ["Soup"])
    let rows = try t.store.log.database(named: "wiki.pages")
    try t.store.read { txn in
      let row = try #require(try txn.get(WikiProjection.pageKey("w1", "Home"), in: rows))
      #expect(row.first == PageRow.format)
    }
    #expect(try t.store.verify("wiki").isEmpty)
    // An edit after the move diffs its links against the row's.
    let home = try #require(try t.store.get("w1:Home")["_rev"]?.stringValue)
    try t.store.put(
      #"{"_id":"w1:Home","_rev":"\#(home)","type":"page","wiki_id":"w1","markdown":"only [[Soup]]"}"#,
      actor: "ann")
    #expect(try wiki.backlinks(to: "Tea", in: "w1") == [])
    #expect(try wiki.backlinks(to: "Soup", in: "w1") == ["Home"])
    #expect(try t.store.verify("wiki").isEmpty)
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
