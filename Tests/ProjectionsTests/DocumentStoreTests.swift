import Foundation
import JSON
import Log
import Projections
import Query
import RevTree
import StoreTestSupport
import Testing
import Wiki

@Suite struct DocumentWriteTests {
  @Test("create, read, update with the current rev, and conflict on a stale or missing rev")
  func createUpdateConflict() throws {
    let t = try TestStore()
    let s = t.store!
    let r1 = try s.put(#"{"_id":"w1:Home","type":"note","markdown":"Home text"}"#, actor: "alice")
    #expect(r1.rev?.hasPrefix("1-") == true)
    let doc = try s.get("w1:Home")
    #expect(doc[path: "_id"]?.string == "w1:Home")
    #expect(doc[path: "_rev"]?.string == r1.rev)
    #expect(doc[path: "markdown"]?.string == "Home text")
    #expect(doc.objectValue?.keys == ["_id", "_rev", "type", "markdown"])

    let r2 = try s.put(
      #"{"_id":"w1:Home","_rev":"\#(r1.rev!)","markdown":"Home v2"}"#, actor: "bob")
    #expect(r2.rev?.hasPrefix("2-") == true)
    #expect(throws: StoreError.conflict) {
      try s.put(#"{"_id":"w1:Home","_rev":"\#(r1.rev!)","x":1}"#, actor: "bob")
    }
    #expect(throws: StoreError.conflict) { try s.put(#"{"_id":"w1:Home","x":1}"#, actor: "bob") }
    #expect(throws: StoreError.conflict) {
      try s.put(#"{"_id":"new","_rev":"1-abc"}"#, actor: "bob")
    }
    #expect(try s.get("w1:Home")[path: "markdown"]?.string == "Home v2")
    #expect(try s.info.docCount == 1)
  }

  @Test("the same edit on two peers gets the same revision id, as CouchDB gives it")
  func deterministicRevisions() throws {
    let a = try TestStore("a")
    let b = try TestStore("b")
    let body = #"{"_id":"d","b":[1,2.50,{"z":null,"a":true}],"a":"x"}"#
    let ra = try a.store.put(body, actor: "alice")
    // The same members and values: `_id` elsewhere, another spelling of 2.5. CouchDB hashes
    // the body as decoded, in its order (so a reordered body is another revision).
    let rb = try b.store.put(#"{"b":[1,2.5,{"z":null,"a":true}],"_id":"d","a":"x"}"#, actor: "bob")
    #expect(ra.rev == rb.rev)
    let c = try TestStore("c")
    let reordered = try c.store.put(
      #"{"a":"x","_id":"d","b":[1,2.5,{"z":null,"a":true}]}"#, actor: "carol")
    #expect(reordered.rev != ra.rev)
    let ra2 = try a.store.delete("d", rev: ra.rev!, actor: "alice")
    let rb2 = try b.store.delete("d", rev: rb.rev!, actor: "bob")
    #expect(ra2.rev == rb2.rev)
  }

  @Test("delete makes a tombstone; a new put on a deleted document extends it")
  func deleteAndRecreate() throws {
    let t = try TestStore()
    let s = t.store!
    let r1 = try s.put(#"{"_id":"d","v":1}"#, actor: "a")
    let r2 = try s.delete("d", rev: r1.rev!, actor: "a")
    #expect(r2.rev?.hasPrefix("2-") == true)
    #expect(throws: StoreError.notFound("deleted")) { _ = try s.get("d") }
    let tomb = try s.get("d", options: GetOptions(rev: r2.rev))
    #expect(tomb[path: "_deleted"] == .bool(true))
    #expect(try s.info.docCount == 0 && s.info.deletedDocCount == 1)
    let r3 = try s.put(#"{"_id":"d","v":3}"#, actor: "a")
    #expect(r3.rev?.hasPrefix("3-") == true)
    #expect(try s.get("d")[path: "v"] == .number(3))
    #expect(try s.info.docCount == 1 && s.info.deletedDocCount == 0)
  }

  @Test("bad input is refused clearly and writes nothing")
  func badInput() throws {
    let t = try TestStore()
    let s = t.store!
    let before = s.position
    #expect(throws: StoreError.self) { try s.put("[1,2]", id: "x", actor: "a") }
    #expect(throws: StoreError.self) { try s.put("{not json", id: "x", actor: "a") }
    #expect(throws: StoreError.invalidDocument("Bad special document member: _foo")) {
      try s.put(#"{"_id":"x","_foo":1}"#, actor: "a")
    }
    #expect(
      throws: StoreError.illegalDocID("Only reserved document ids may start with underscore.")
    ) {
      try s.put(#"{"_id":"_x"}"#, actor: "a")
    }
    #expect(throws: StoreError.self) { try s.put(#"{"_id":"x","_rev":"bogus"}"#, actor: "a") }
    #expect(throws: StoreError.self) {
      try s.put("{}", id: String(repeating: "i", count: 16_385), actor: "a")
    }
    #expect(throws: StoreError.self) { try s.put("{}", id: "", actor: "a") }
    #expect(throws: StoreError.self) { try s.put(#"{"_id":"a"}"#, id: "b", actor: "a") }
    #expect(s.position == before)
    let big = "{\"x\":\"" + String(repeating: "a", count: DocumentInput.maxBytes) + "\"}"
    #expect(throws: StoreError.self) { try s.put(big, id: "big", actor: "a") }
    try s.put(#"{"_id":"_design/app","views":{}}"#, actor: "a")
  }

  @Test("replicated writes merge histories; a write the store has appends nothing")
  func replicatedWrites() throws {
    let t = try TestStore()
    let s = t.store!
    let docs = [
      json(#"{"_id":"d","_rev":"3-c","_revisions":{"start":3,"ids":["c","b","a"]},"v":"c"}"#),
      json(#"{"_id":"d","_rev":"3-d","_revisions":{"start":3,"ids":["d","b","a"]},"v":"d"}"#),
    ]
    let failures = try s.bulkDocs(
      docs, newEdits: false, actor: "replicator", origin: "http://peer/db")
    #expect(failures.filter { !$0.ok }.isEmpty)
    let doc = try s.get("d", options: GetOptions(revs: true, conflicts: true))
    #expect(doc[path: "_rev"]?.string == "3-d")
    #expect(doc[path: "_conflicts"] == .array([.string("3-c")]))
    #expect(doc[path: "_revisions"] == json(#"{"start":3,"ids":["d","b","a"]}"#))
    let position = s.position
    _ = try s.bulkDocs([docs[0]], newEdits: false, actor: "replicator")
    #expect(s.position == position)
    let history = try s.changes(ChangesOptions.history())
    #expect(history.results.map(\.origin) == ["http://peer/db", "http://peer/db"])
    let bad = try s.bulkDocs([json(#"{"_id":"e","v":1}"#)], newEdits: false, actor: "r")
    #expect(bad.count == 1 && bad[0].error?.error == "bad_request")
  }

  @Test("bulk docs: each document on its own, results in order")
  func bulkDocs() throws {
    let t = try TestStore()
    let s = t.store!
    let r = try s.put(#"{"_id":"a","v":1}"#, actor: "u")
    let before = s.position
    let results = try s.bulkDocs(
      [
        json(#"{"_id":"a","v":2}"#), json(#"{"_id":"b"}"#),
        json(#"{"_id":"a","_rev":"\#(r.rev!)","v":3}"#), json("7"), json(#"{"v":"no id"}"#),
      ],
      actor: "u")
    #expect(results.map(\.ok) == [false, true, true, false, true])
    #expect(results[0].error == .conflict)
    #expect(results[4].id.count == 32)
    #expect(s.position.rawValue == before.rawValue + 3)
    #expect(try s.get("a")[path: "v"] == .number(3))
    #expect(results[2].json[path: "ok"] == .bool(true))
  }

  @Test("_local documents: versions 0-N, not in the changes feed, still events")
  func localDocuments() throws {
    let t = try TestStore()
    let s = t.store!
    let r1 = try s.putLocal("checkpoint", Array(#"{"last_seq":5}"#.utf8), actor: "replicator")
    #expect(r1.rev == "0-1" && r1.id == "_local/checkpoint")
    let r2 = try s.putLocal(
      "checkpoint", Array(#"{"_rev":"0-1","last_seq":9}"#.utf8), actor: "replicator")
    #expect(r2.rev == "0-2")
    let doc = try s.getLocal("checkpoint")
    #expect(doc == json(#"{"_id":"_local/checkpoint","_rev":"0-2","last_seq":9}"#))
    #expect(try s.changes().results.isEmpty)
    #expect(try s.log.read(from: 1).map(\.type) == ["local.put", "local.put"])
    // CouchDB 3: the last write wins; the new revision is the named one plus one.
    let r3 = try s.putLocal(
      "checkpoint", Array(#"{"_rev":"0-1","_revisions":{"start":0,"ids":["1"]}}"#.utf8), actor: "r")
    #expect(r3.rev == "0-2")
    #expect(throws: StoreError.badRequest("Invalid rev format")) {
      try s.putLocal("checkpoint", Array(#"{"_rev":"2-abc"}"#.utf8), actor: "r")
    }
    try s.deleteLocal("checkpoint", rev: "0-2", actor: "r")
    #expect(throws: StoreError.notFound("missing")) { _ = try s.getLocal("checkpoint") }
  }
}

@Suite struct AsyncWriteTests {
  @Test("async writes under group commit: concurrent puts share commits, refusals fail alone")
  func groupCommit() async throws {
    let t = try TestStore(durability: .groupCommit)
    let s = t.store!
    let created = try await s.putAsync(Array(#"{"_id":"a","v":0}"#.utf8), actor: "u")
    let results = try await withThrowingTaskGroup(of: DocumentWriteResult?.self) { group in
      for i in 0..<40 {
        group.addTask {
          if i % 10 == 0 {
            // A stale write: refused with the store's own error, without failing the others.
            do {
              _ = try await s.putAsync(Array(#"{"_id":"a","v":\#(i)}"#.utf8), actor: "u")
              Issue.record("a put without _rev on an existing document succeeded")
            } catch let error as StoreError {
              #expect(error == .conflict)
            }
            return nil
          }
          return try await s.putAsync(Array(#"{"_id":"d\#(i)","v":\#(i)}"#.utf8), actor: "u")
        }
      }
      var out: [DocumentWriteResult] = []
      for try await r in group { if let r { out.append(r) } }
      return out
    }
    #expect(results.count == 36 && results.allSatisfy(\.ok))
    #expect(try s.info.docCount == 37)
    let bulk = try await s.bulkDocsAsync(
      [json(#"{"_id":"b1"}"#), json(#"{"_id":"a","v":9}"#)], actor: "u")
    #expect(bulk.map(\.ok) == [true, false])
    try await s.deleteAsync("a", rev: created.rev!, actor: "u")
    #expect(throws: StoreError.notFound("deleted")) { _ = try s.get("a") }
    let stats = s.log.statistics
    #expect(stats.commits < stats.appendedEvents)  // some commits carried several writes
    #expect(try s.verify("docs").isEmpty)
  }
}
