import Foundation
import Log
import RevTree
import Testing

@testable import Projections

/// A projection that refuses one document after the store has appended its event.
final class RefusingProjection: Projection {
  let name = "refusing"
  let databaseNames = ["seen"]
  let refused: String

  init(refusing id: String) { refused = id }

  func apply(_ event: RecordedEvent, to storage: ProjectionStorage, in txn: WriteTransaction) throws
  {
    if event.stream == refused { throw StoreError.forbidden("refused by the projection") }
    try txn.put([1], forKey: Array(event.stream.utf8), in: storage["seen"])
  }
}

/// The shortcuts of the write and read hot paths give the answers of the slow ways.
@Suite struct FastPathTests {
  func docs(_ ids: [String]) -> [JSONValue] {
    ids.map { json(#"{"_id":"\#($0)","v":1}"#) }
  }

  @Test("a bulk write whose document fails after its event was appended keeps only the others")
  func bulkFallsBackToSavepoints() async throws {
    let t = try TestStore(projections: [RefusingProjection(refusing: "boom")])
    let s = t.store!
    let results = try s.bulkDocs(docs(["a", "boom", "b"]), actor: "alice")
    #expect(results.map(\.ok) == [true, false, true])
    #expect(results[1].error?.error == "forbidden")
    #expect(try s.log.committedPosition == 2)
    #expect(try s.log.read(after: .start, limit: 10).map(\.stream) == ["a", "b"])
    #expect(try s.verify("docs").isEmpty)
    #expect(try s.verify("refusing").isEmpty)

    let more = try await s.bulkDocsAsync(docs(["c", "boom", "d"]), actor: "alice")
    #expect(more.map(\.ok) == [true, false, true])
    #expect(try s.log.committedPosition == 4)
    #expect(try s.changes().results.map(\.id) == ["a", "b", "c", "d"])
    #expect(try s.verify("docs").isEmpty)
  }

  @Test("documents refused before writing need no second attempt, and fail alone")
  func bulkRefusalsBeforeWriting() throws {
    let t = try TestStore()
    let s = t.store!
    let first = try s.bulkDocs(docs(["a", "b"]), actor: "alice")
    let results = try s.bulkDocs(
      [
        json(#"{"_id":"a","_rev":"\#(first[0].rev!)","v":2}"#),
        json(#"{"_id":"b","v":2}"#),  // conflict: no _rev
        json(#"{"_id":"_bad","v":2}"#),  // bad id
        json(#"{"_id":"c","v":2}"#),
        json(#"{"_id":"c","v":3}"#),  // conflict with the c just written
      ], actor: "alice")
    #expect(results.map(\.ok) == [true, false, false, true, false])
    #expect(results[1].error == StoreError.conflict)
    #expect(results[4].error == StoreError.conflict)
    #expect(try s.log.committedPosition == 4)
    #expect(try s.verify("docs").isEmpty)
  }

  @Test("pending is the number of rows after last_seq, for every since and limit")
  func pending() throws {
    let t = try TestStore()
    let s = t.store!
    var revs: [String: String] = [:]
    for i in 0..<40 {
      revs["d\(i)"] = try s.put(#"{"_id":"d\#(i)","v":0}"#, actor: "a").rev
    }
    // Updates and deletions move rows to the end and leave gaps in the seqs.
    for i in stride(from: 0, to: 40, by: 3) {
      revs["d\(i)"] = try s.put(#"{"v":1}"#, id: "d\(i)", rev: revs["d\(i)"], actor: "a").rev
    }
    for i in stride(from: 1, to: 40, by: 7) {
      _ = try s.delete("d\(i)", rev: revs["d\(i)"]!, actor: "a")
    }
    let all = try s.changes().results.map(\.seq)
    let last = try s.log.committedPosition
    for since in 0...last.rawValue {
      for limit in [0, 1, 2, 5, 17, nil] as [Int?] {
        var o = ChangesOptions()
        o.since = LogPosition(since)
        o.limit = limit
        let page = try s.changes(o)
        let expected = all.filter { $0 > page.lastSeq }.count
        #expect(page.pending == expected, "since \(since) limit \(String(describing: limit))")
      }
    }
  }

  @Test("ChangeRow.serializeJSON writes the bytes json.serialized() writes")
  func rowJSON() throws {
    let rows = [
      ChangeRow(seq: 0, id: "a", changes: ["1-abc"], deleted: false),
      ChangeRow(
        seq: LogPosition(UInt64(Int64.max)), id: "w1:Quote \" back\\slash é \u{1}\n",
        changes: ["2-x", "2-y"],
        deleted: true, doc: json(#"{"_id":"x","n":[1,2.50,{"k":null}]}"#), actor: "alice",
        timestampMicroseconds: 17, origin: "https://peer/db"),
      ChangeRow(
        seq: 12_345_678_901, id: "", changes: [], deleted: false, actor: "", origin: ""),
    ]
    for row in rows {
      var out: [UInt8] = [7]
      row.serializeJSON(into: &out)
      #expect(out == [7] + row.json.serialized())
    }
    let t = try TestStore()
    let s = t.store!
    let a = try s.put(#"{"_id":"d","v":1}"#, actor: "a")
    _ = try s.delete("d", rev: a.rev!, actor: "a")
    var o = ChangesOptions()
    o.includeDocs = true
    o.style = .allDocs
    for row in try s.changes(o).results + s.changes(ChangesOptions.history()).results {
      var out: [UInt8] = []
      row.serializeJSON(into: &out)
      #expect(out == row.json.serialized())
      #expect(row.changes.allSatisfy { $0.hasPrefix("1-") || $0.hasPrefix("2-") })
    }
  }
}
