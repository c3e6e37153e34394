import Foundation
import JSON
import Log
import Projections
import Query
import RevTree
import StoreTestSupport
import Testing
import Wiki

/// `writeChangesJSON` writes rows from the stored records: the bytes must be those of
/// `changes()`'s rows for every option it takes.
@Suite struct StoredChangesTests {
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
