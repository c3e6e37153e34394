import Foundation
import JSON
import Log
import Projections
import Query
import RevTree
import StoreTestSupport
import Synchronization
import Testing
import Wiki

/// A projection written outside the library, on the store's fast path: document ids by the
/// `type` of their winning revision (`byType`: type · 0x00 · id), with each document's current
/// type in `byDoc`. Its share of a revision is the body's `type`, worked out off the writer.
final class TypeIndex: DocumentChangeProjection {
  let name = "types"
  let databaseNames = ["byType", "byDoc"]
  /// Changes applied with a share worked out ahead, and without one.
  let withShare = Atomic<Int>(0)
  let withoutShare = Atomic<Int>(0)

  func prepare(_ docID: String, rev: RevID, body: JSONValue?) -> String? {
    body?["type"]?.stringValue ?? ""
  }

  func apply(
    _ change: DocumentChange, share: String?, to storage: ProjectionStorage,
    in txn: WriteTransaction
  ) throws {
    if share == nil {
      withoutShare.add(1, ordering: .relaxed)
    } else {
      withShare.add(1, ordering: .relaxed)
    }
    guard change.winnerChanged else { return }
    let id = Array(change.docID.utf8)
    if let old = try txn.get(id, in: storage["byDoc"]) {
      try txn.delete(old + [0] + id, in: storage["byType"])
      try txn.delete(id, in: storage["byDoc"])
    }
    guard let winner = change.tree.winner, !winner.isDeleted else { return }
    // The share is the type of the event's own revision; an older winner is read from the log.
    let type: String
    if let share, winner.body == change.event.position.rawValue {
      type = share
    } else {
      type = try change.winnerBody(in: txn)?["type"]?.stringValue ?? ""
    }
    try txn.put(Array(type.utf8), forKey: id, in: storage["byDoc"])
    try txn.put([], forKey: Array(type.utf8) + [0] + id, in: storage["byType"])
  }

  func apply(_ event: RecordedEvent, to storage: ProjectionStorage, in txn: WriteTransaction) {}

  /// The index as (type, id) pairs, in key order.
  static func contents(_ store: DocumentStore) throws -> [String] {
    let storage = try #require(store.storage(of: "types"))
    return try store.read { txn in
      var rows: [String] = []
      try txn.scan(storage["byType"]) { key, _ in
        rows.append(String(decoding: key, as: UTF8.self).replacingOccurrences(of: "\0", with: "/"))
        return true
      }
      return rows
    }
  }
}

/// Refuses notes without a title, and needs a note's `folder` document to exist.
struct NoteRules: DocumentValidator {
  func validate(_ docID: String, body: JSONObject, deleted: Bool) throws(StoreError)
    -> DocumentRequirement?
  {
    guard !deleted, body["type"]?.stringValue == "note" else { return nil }
    guard body["title"]?.stringValue != nil else { throw .validation("a note needs a title") }
    guard let folder = body["folder"]?.stringValue else { return nil }
    return DocumentRequirement(
      documentID: folder, type: "folder", refusal: "the folder '\(folder)' does not exist")
  }
}

@Suite struct ChangeProjectionTests {
  @Test("a projection defined outside the library runs on the fast path, is rebuilt and verified")
  func testDefinedProjection() throws {
    let index = TypeIndex()
    let t = try TestStore(projections: [index], validation: .couchDB)
    let store = t.store!
    try store.put(#"{"_id":"a","type":"note"}"#, actor: "ann")
    let b = try store.put(#"{"_id":"b","type":"note"}"#, actor: "ann")
    try store.put(#"{"_id":"b","_rev":"\#(b.rev!)","type":"task"}"#, actor: "ann")
    // Enough documents for the bulk call to prepare them on its helper thread.
    let bulk = (0..<40).map { i in json(#"{"_id":"c\#(i)","type":"\#(i % 2 == 0 ? "x" : "y")"}"#) }
    _ = try store.bulkDocs(bulk, actor: "ann")
    // A conflict whose loser changes nothing, and a deletion.
    _ = try store.bulkDocs(
      [json(#"{"_id":"a","_rev":"1-00000000000000000000000000000000","type":"loser"}"#)],
      newEdits: false, actor: "peer")
    let c0 = try store.get("c0")["_rev"]!.stringValue!
    try store.delete("c0", rev: c0, actor: "ann")

    var expected = ["note/a", "task/b"]
    for i in 1..<40 { expected.append("\(i % 2 == 0 ? "x" : "y")/c\(i)") }
    expected.sort()
    #expect(try TypeIndex.contents(store) == expected)
    // All 45 edits (the deletion too, with a nil body) came with their share, worked out
    // ahead of the writer.
    #expect(index.withShare.load(ordering: .relaxed) == 45)
    #expect(index.withoutShare.load(ordering: .relaxed) == 0)
    #expect(store.projectionNames == ["docs", "types"])
    #expect(try store.verify("types") == [])

    try store.rebuild("types")
    #expect(try TypeIndex.contents(store) == expected)
    try store.rebuildAll()
    #expect(try TypeIndex.contents(store) == expected)
    #expect(try store.verify("types") == [])

    // Added to a store that has no such projection yet: it catches up by replay at open.
    try t.reopen(projections: [])
    try t.store.put(#"{"_id":"d","type":"note"}"#, actor: "ann")
    try t.reopen(projections: [TypeIndex()])
    #expect(try TypeIndex.contents(t.store) == (expected + ["note/d"]).sorted())
    #expect(try t.store.verify("types") == [])
  }

  @Test("a validator refuses revisions and requires documents, for local edits only")
  func testDefinedValidator() throws {
    let t = try TestStore(validation: DocumentValidation([NoteRules()]))
    let store = t.store!
    #expect(throws: StoreError.self) {
      try store.put(#"{"_id":"n1","type":"note"}"#, actor: "ann")
    }
    do {
      try store.put(#"{"_id":"n1","type":"note","title":"T","folder":"f"}"#, actor: "ann")
      Issue.record("a note in a missing folder was accepted")
    } catch let error as StoreError {
      #expect(error.code == .forbidden)
      #expect(error.reason == "the folder 'f' does not exist")
    }
    try store.put(#"{"_id":"f","type":"folder"}"#, actor: "ann")
    try store.put(#"{"_id":"n1","type":"note","title":"T","folder":"f"}"#, actor: "ann")
    // In one bulk call: the folder is created before the note that needs it.
    let results = try store.bulkDocs(
      [
        json(#"{"_id":"n2","type":"note","title":"T","folder":"g"}"#),
        json(#"{"_id":"g","type":"folder"}"#),
        json(#"{"_id":"n3","type":"note","title":"T","folder":"g"}"#),
      ], actor: "ann")
    #expect(results.map { $0.error?.code } == [.forbidden, nil, nil])
    // Replicated revisions are checked for their fields but need nothing of the store.
    let replicated = try store.bulkDocs(
      [
        json(
          #"{"_id":"n4","_rev":"1-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa","type":"note","title":"T","folder":"h"}"#
        ),
        json(#"{"_id":"n5","_rev":"1-bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb","type":"note"}"#),
      ], newEdits: false, actor: "peer")
    #expect(replicated.map(\.id) == ["n5"])
    #expect(try store.get("n4")["folder"]?.stringValue == "h")
  }
}
