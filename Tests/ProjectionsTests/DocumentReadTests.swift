import Foundation
import JSON
import Log
import Projections
import Query
import RevTree
import StoreTestSupport
import Testing
import Wiki

@Suite struct DocumentReadTests {
  /// a: 1 → 2, then a replicated conflict 2-x and a deleted branch 3-del.
  func conflicted(_ s: DocumentStore) throws -> (String, String) {
    let r1 = try s.put(#"{"_id":"a","v":1}"#, actor: "u")
    let r2 = try s.put(#"{"_id":"a","_rev":"\#(r1.rev!)","v":2}"#, actor: "u")
    let h1 = r1.rev!.split(separator: "-")[1]
    _ = try s.bulkDocs(
      [
        json(
          #"{"_id":"a","_rev":"2-ffffffffffffffffffffffffffffffff","_revisions":{"start":2,"ids":["ffffffffffffffffffffffffffffffff","\#(h1)"]},"v":"x"}"#
        ),
        json(
          #"{"_id":"a","_rev":"3-0000000000000000000000000000000d","_deleted":true,"_revisions":{"start":3,"ids":["0000000000000000000000000000000d","0000000000000000000000000000000c","\#(h1)"]}}"#
        ),
      ], newEdits: false, actor: "peer")
    return (r1.rev!, r2.rev!)
  }

  @Test("winner, _conflicts, _deleted_conflicts, _revs_info and _local_seq")
  func getOptions() throws {
    let t = try TestStore()
    let s = t.store!
    let (r1, r2) = try conflicted(s)
    let doc = try s.get(
      "a",
      options: GetOptions(revsInfo: true, conflicts: true, deletedConflicts: true, localSeq: true))
    #expect(doc[path: "_rev"]?.string == "2-ffffffffffffffffffffffffffffffff")
    #expect(doc[path: "_conflicts"] == .array([.string(r2)]))
    #expect(
      doc[path: "_deleted_conflicts"] == .array([.string("3-0000000000000000000000000000000d")]))
    #expect(doc[path: "_revs_info"]?.arrayValue?.count == 2)
    #expect(doc[path: "_local_seq"] == .number(4))
    let old = try s.get("a", options: GetOptions(rev: r1))
    #expect(old[path: "v"] == .number(1))
    #expect(throws: StoreError.notFound("missing")) {
      _ = try s.get("a", options: GetOptions(rev: "2-0000000000000000000000000000000c"))
    }
    #expect(throws: StoreError.notFound("missing")) { _ = try s.get("nope") }
    let latest = try s.get("a", options: GetOptions(rev: r1, latest: true))
    #expect(latest[path: "_rev"]?.string == "2-ffffffffffffffffffffffffffffffff")
  }

  @Test("open_revs: all leaves, named revisions and missing ones")
  func openRevs() throws {
    let t = try TestStore()
    let s = t.store!
    let (r1, _) = try conflicted(s)
    let all = try s.openRevs("a", .all, options: GetOptions(revs: true))
    #expect(all.count == 3)
    #expect(all.allSatisfy { $0[path: "ok"]?[path: "_revisions"] != nil })
    let named = try s.openRevs("a", .revs([r1, "9-abc"]))
    #expect(named[0][path: "ok"]?[path: "v"] == .number(1))
    #expect(named[1] == json(#"{"missing":"9-abc"}"#))
    let latest = try s.openRevs("a", .revs([r1]), options: GetOptions(latest: true))
    #expect(latest.count == 3)
  }

  @Test(
    "open_revs as bytes (what _bulk_get sends) are byte for byte the JSON of open_revs, for every option"
  )
  func openRevsBytes() throws {
    let t = try TestStore()
    let s = t.store!
    let (r1, _) = try conflicted(s)
    _ = try s.put(#"{"_id":"e"}"#, actor: "u")
    _ = try s.put(
      #"{"_id":"u","t":"caf\u00e9 \"q\" \n ☃ 😀","n":[1.5e3,-0,12345678901234567890],"o":{"_x":null}}"#,
      actor: "u")
    let d = try s.put(#"{"_id":"gone","v":1}"#, actor: "u")
    _ = try s.delete("gone", rev: d.rev!, actor: "u")
    let a1 = try s.putAttachment(
      "att", name: "f.txt", data: Array("hello".utf8), contentType: "text/plain", rev: nil,
      actor: "u")
    _ = try s.putAttachment(
      "att", name: "g.bin", data: [0, 1, 2], contentType: "application/octet-stream",
      rev: a1.rev, actor: "u")
    let options: [GetOptions] = [
      GetOptions(),
      GetOptions(revs: true, latest: true),
      GetOptions(
        revs: true, revsInfo: true, conflicts: true, deletedConflicts: true, localSeq: true),
      GetOptions(revs: true, latest: true, attachments: true),
      GetOptions(revs: true, attsSince: [a1.rev!]),
    ]
    let asked: [(String, OpenRevs)] = [
      ("a", .all), ("a", .revs([r1, "9-abc"])), ("e", .all), ("u", .all), ("gone", .all),
      ("att", .all), ("att", .revs([a1.rev!])), ("nope", .revs(["1-abc"])),
    ]
    for option in options {
      for (id, which) in asked {
        let values = try s.openRevs(id, which, options: option)
        let bytes = try s.read { try s.openRevsJSON(id, which, options: option, txn: $0) }
        #expect(values.count == bytes.count)
        for (value, entry) in zip(values, bytes) {
          switch entry {
          case .ok(let doc):
            #expect(value[path: "ok"].map { $0.serialized() } == doc, "\(id) \(option)")
          case .missing(let rev):
            #expect(value == .object(JSONObject([.init(key: "missing", value: .string(rev))])))
          }
        }
      }
    }
  }

  @Test("bodies of old revisions stay readable after stemming")
  func bodiesOutliveStemming() throws {
    let t = try TestStore()
    let s = t.store!
    try s.setRevsLimit(2, actor: "admin")
    var revs: [String] = []
    var rev: String?
    for i in 1...5 {
      let r = try s.put(#"{"_id":"d","v":\#(i)}"#, rev: rev, actor: "u")
      rev = r.rev
      revs.append(r.rev!)
    }
    let doc = try s.get("d", options: GetOptions(revs: true))
    #expect(doc[path: "_revisions"]?[path: "ids"]?.arrayValue?.count == 2)
    #expect(throws: StoreError.notFound("missing")) {
      _ = try s.get("d", options: GetOptions(rev: revs[0]))
    }
    let history = try s.changes(ChangesOptions.history())
    #expect(history.results.map { $0.changes[0] } == revs)
    var o = ChangesOptions.history()
    o.includeDocs = true
    #expect(try s.changes(o).results.first?.doc?[path: "v"] == .number(1))
  }

  @Test("revs_diff reports missing revisions and possible ancestors")
  func revsDiff() throws {
    let t = try TestStore()
    let s = t.store!
    let (r1, r2) = try conflicted(s)
    let diff = try s.revsDiff([("a", [r1, "3-abc", "5-def"]), ("b", ["1-x"]), ("c", [])])
    #expect(diff.count == 2)
    #expect(diff[0].id == "a")
    #expect(diff[0].diff.missing.map(\.description) == ["3-abc", "5-def"])
    #expect(diff[0].diff.possibleAncestors.map(\.description).contains(r2))
    #expect(diff[1].diff.missing.map(\.description) == ["1-x"])
    #expect(throws: StoreError.self) { _ = try s.revsDiff([("a", ["junk"])]) }
  }

  @Test("_all_docs: ranges, descending, limit, skip, keys and include_docs")
  func allDocs() throws {
    let t = try TestStore()
    let s = t.store!
    for id in ["d", "b", "a", "c", "e"] { try s.put(#"{"_id":"\#(id)","v":"\#(id)"}"#, actor: "u") }
    let c = try s.get("c")
    try s.delete("c", rev: c[path: "_rev"]!.string!, actor: "u")
    var o = AllDocsOptions()
    #expect(try s.allDocs(o).rows.map { $0[path: "id"]!.string! } == ["a", "b", "d", "e"])
    #expect(try s.allDocs(o).totalRows == 4)
    o.startKey = "b"
    o.endKey = "d"
    #expect(try s.allDocs(o).rows.map { $0[path: "id"]!.string! } == ["b", "d"])
    #expect(try s.allDocs(o).offset == 1)
    o.inclusiveEnd = false
    #expect(try s.allDocs(o).rows.map { $0[path: "id"]!.string! } == ["b"])
    o = AllDocsOptions()
    o.descending = true
    o.limit = 2
    o.skip = 1
    #expect(try s.allDocs(o).rows.map { $0[path: "id"]!.string! } == ["d", "b"])
    o = AllDocsOptions()
    o.keys = ["e", "c", "zz"]
    o.includeDocs = true
    let rows = try s.allDocs(o).rows
    #expect(rows[0][path: "doc"]?[path: "v"]?.string == "e")
    #expect(rows[1][path: "value"]?[path: "deleted"] == .bool(true))
    #expect(rows[1][path: "doc"] == .null)
    #expect(rows[2] == json(#"{"key":"zz","error":"not_found"}"#))
  }
}
