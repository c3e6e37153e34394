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
}
