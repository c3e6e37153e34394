import Foundation
import JSON
import Log
import Projections
import Query
import RevTree
import StoreTestSupport
import Testing
import Wiki

/// `forEachStoredChange` hands over records that the consumer decodes: the rows must be those
/// of `changes()` for every option it takes.
@Suite struct StoredChangesTests {
  func rows(_ s: DocumentStore, _ o: ChangesOptions, chunk: Int = 8192) throws -> [ChangeRow] {
    var rows: [ChangeRow] = []
    try s.forEachStoredChange(o, chunk: chunk) { change in
      if let row = try change.row() { rows.append(row) }
      return true
    }
    return rows
  }

  @Test("stored rows decode to the feed's rows: styles, since, limit, filters, chunks")
  func sameRows() throws {
    let t = try TestStore(validation: .couchDB)
    let s = t.store!
    var revs: [String: String] = [:]
    for i in 0..<40 {
      // Wiki documents written again and again (their rows move), pages once each.
      let id = i % 3 == 0 ? "w\(i % 4)" : "w\(i % 4):P\(i)"
      let rev = revs[id].map { #","_rev":"\#($0)""# } ?? ""
      revs[id] = try s.put(#"{"_id":"\#(id)"\#(rev),"n":\#(i)}"#, actor: "a").rev
    }
    // A conflict and a deletion.
    _ = try s.bulkDocs(
      [json(#"{"_id":"w1:P1","_rev":"1-ffffffffffffffffffffffffffffffff","n":-1}"#)],
      newEdits: false, actor: "peer")
    try s.delete("w2:P2", rev: revs["w2:P2"]!, actor: "a")

    var options: [ChangesOptions] = []
    var o = ChangesOptions()
    options.append(o)
    o.style = .allDocs
    options.append(o)
    o = ChangesOptions()
    o.since = 17
    o.limit = 5
    options.append(o)
    o = ChangesOptions()
    o.filter = .wiki("w1")
    options.append(o)
    o = ChangesOptions()
    o.docIDs = ["w2:P2", "w1:P1", "nothing"]
    options.append(o)
    for o in options {
      let expected = try s.changes(o).results
      #expect(try rows(s, o) == expected, "\(o)")
      #expect(try rows(s, o, chunk: 3) == expected, "\(o)")
    }
    // Options that need the store are refused, not answered differently.
    var docs = ChangesOptions()
    docs.includeDocs = true
    #expect(throws: StoreError.self) { try rows(s, docs) }
  }

  @Test("rows written from stored records are the bytes of the feed's rows, for every option")
  func writtenRows() throws {
    let t = try TestStore()
    let s = t.store!
    var revs: [String: String] = [:]
    let ids = [
      "w1", "w1:Home", #"quote"and\back"#, "tab\there", "é:Ünïcode",
      String(repeating: "x", count: 600),
      String(repeating: "x", count: 600) + "y", "plain",
    ]
    for round in 0..<3 {
      for (i, id) in ids.enumerated() where (i + round) % 2 == 0 || round == 0 {
        let body = try JSONValue(parsing: #"{"n":\#(i * 10 + round)}"#).objectValue!
        var doc = JSONObject([.init(key: "_id", value: .string(id))])
        if let rev = revs[id] { doc["_rev"] = .string(rev) }
        for m in body.members { doc[m.key] = m.value }
        revs[id] = try s.put(JSONValue.object(doc).serialized(), actor: "a").rev
      }
    }
    // A conflict, a text revision id, a deleted document, and one revision on two branches
    // (which the one-pass winner leaves to the decoder).
    _ = try s.bulkDocs(
      [
        json(#"{"_id":"w1:Home","_rev":"9-ffffffffffffffffffffffffffffffff","n":-1}"#),
        json(#"{"_id":"textrev","_rev":"1-abc","n":1}"#),
        json(#"{"_id":"tie","_rev":"2-x","_revisions":{"start":2,"ids":["x","a"]}}"#),
        json(#"{"_id":"tie","_rev":"2-x","_revisions":{"start":2,"ids":["x","b"]}}"#),
      ],
      newEdits: false, actor: "peer")
    try s.delete("plain", rev: revs["plain"]!, actor: "a")

    var options: [ChangesOptions] = [ChangesOptions()]
    var o = ChangesOptions()
    o.style = .allDocs
    options.append(o)
    for since in [0, 5, 17, 1000] as [UInt64] {
      for limit in [nil, 0, 1, 4] as [Int?] {
        for descending in [false, true] {
          o = ChangesOptions()
          o.since = LogPosition(since)
          o.limit = limit
          o.descending = descending
          options.append(o)
        }
      }
    }
    o = ChangesOptions()
    o.filter = .wiki("w1")
    options.append(o)
    o = ChangesOptions()
    o.docIDs = ["plain", "tie", String(repeating: "x", count: 600), "nothing"]
    options.append(o)
    let separator = Array(",\n".utf8)
    for o in options {
      let result = try s.changes(o)
      var expected: [UInt8] = []
      for (i, row) in result.results.enumerated() {
        if i > 0 { expected.append(contentsOf: separator) }
        row.serializeJSON(into: &expected)
      }
      var out: [UInt8] = []
      let written = try #require(try s.writeChangesJSON(o, into: &out, separator: separator))
      #expect(
        String(decoding: out, as: UTF8.self) == String(decoding: expected, as: UTF8.self), "\(o)")
      #expect(written.rows == result.results.count, "\(o)")
      #expect(written.lastSeq == result.lastSeq, "\(o)")
      #expect(written.pending == result.pending, "\(o)")
    }
    // Feeds that need documents are not written this way.
    o = ChangesOptions()
    o.includeDocs = true
    var out: [UInt8] = []
    #expect(try s.writeChangesJSON(o, into: &out, separator: separator) == nil)
    #expect(out.isEmpty)
  }
}
