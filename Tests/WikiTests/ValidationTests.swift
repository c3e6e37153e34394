import Foundation
import JSON
import Log
import Query
import RevTree
import StoreTestSupport
import Testing

@testable import Projections
@testable import Wiki

private let wiki = #"{"_id":"w1","type":"wiki","title":"One","owner_id":"ann","members":["bob"]}"#

/// `fields` spliced into a JSON object after `_id`.
private func doc(_ id: String, _ fields: String) -> String { #"{"_id":"\#(id)",\#(fields)}"# }

@Suite struct ValidationTests {
  @Test(
    "wiki documents with a wrong or missing field are forbidden",
    arguments: [
      #""type":"wiki","owner_id":"ann","members":[]"#,  // no title
      #""type":"wiki","title":1,"owner_id":"ann","members":[]"#,
      #""type":"wiki","title":"T","members":[]"#,  // no owner
      #""type":"wiki","title":"T","owner_id":"","members":[]"#,
      #""type":"wiki","title":"T","owner_id":["ann"],"members":[]"#,
      #""type":"wiki","title":"T","owner_id":"ann""#,  // no members
      #""type":"wiki","title":"T","owner_id":"ann","members":"bob""#,
      #""type":"wiki","title":"T","owner_id":"ann","members":["bob",7]"#,
      #""type":"wiki","title":"T","owner_id":"ann","members":[],"markdown":5"#,
      #""type":"wiki","title":"T","owner_id":"ann","members":[],"created_at":"yesterday""#,
      #""type":"wiki","title":"T","owner_id":"ann","members":[],"updated_at":1714557600"#,
    ])
  func badWikis(_ fields: String) throws {
    let t = try TestStore(validation: .touchWiki)
    let error = #expect(throws: StoreError.self) { try t.store.put(doc("w", fields), actor: "a") }
    #expect(error?.code == .forbidden && error?.error == "forbidden")
    #expect(t.store.position == .start)
  }

  @Test(
    "page documents with a wrong or missing field, or no wiki, are forbidden",
    arguments: [
      ("w1:P", #""type":"page","markdown":"x""#),  // no wiki_id
      ("w1:P", #""type":"page","wiki_id":"w2","markdown":"x""#),
      ("w1:P", #""type":"page","wiki_id":1,"markdown":"x""#),
      ("w1:P", #""type":"page","wiki_id":"w1""#),  // no markdown
      ("w1:P", #""type":"page","wiki_id":"w1","markdown":["x"]"#),
      ("w1:P", #""type":"page","wiki_id":"w1","markdown":"x","updated_by":false"#),
      ("w1:P", #""type":"page","wiki_id":"w1","markdown":"x","created_at":"2024-02-30T00:00:00Z""#),
      ("w2:P", #""type":"page","wiki_id":"w2","markdown":"x""#),  // no such wiki
      ("note:P", #""type":"page","wiki_id":"note","markdown":"x""#),  // not a wiki
      ("w3", #""type":"page","wiki_id":"w3","markdown":"x""#),  // not a page id
      ("w1:", #""type":"page","wiki_id":"w1","markdown":"x""#),
      (":P", #""type":"page","wiki_id":"","markdown":"x""#),
      ("w1:x", #""type":"wiki","title":"T","owner_id":"ann","members":[]"#),  // a wiki id has no colon
    ])
  func badPages(_ id: String, _ fields: String) throws {
    let t = try TestStore(validation: .touchWiki)
    try t.store.put(wiki, actor: "ann")
    try t.store.put(#"{"_id":"note","type":"note"}"#, actor: "ann")
    let before = t.store.position
    let error = #expect(throws: StoreError.self) { try t.store.put(doc(id, fields), actor: "a") }
    #expect(error?.code == .forbidden && error?.error == "forbidden")
    #expect(t.store.position == before)
  }

  @Test("valid wikis and pages are written; a deleted wiki takes no new pages, deletions pass")
  func validDocuments() throws {
    let t = try TestStore(validation: .touchWiki)
    let s = t.store!
    let w = try s.put(
      doc(
        "w1",
        #""type":"wiki","title":"One","owner_id":"ann","members":[],"markdown":"about","created_at":"2024-05-01T10:00:00.123Z","updated_at":"2024-05-01T12:00:00+02:00""#
      ), actor: "ann")
    let p = try s.put(
      doc(
        "w1:Home",
        #""type":"page","wiki_id":"w1","markdown":"Home","updated_by":"ann","updated_at":"2024-05-01T10:00:00Z","extra":{"free":true}"#
      ), actor: "ann")
    // Other documents are plain CouchDB documents.
    try s.put(#"{"_id":"x:y","type":"note","markdown":7}"#, actor: "ann")
    try s.put(#"{"_id":"plain","title":1}"#, actor: "ann")
    // Deleting the wiki: its pages can still be deleted, not created or edited.
    try s.delete("w1", rev: w.rev!, actor: "ann")
    #expect(throws: StoreError.self) {
      try s.put(doc("w1:New", #""type":"page","wiki_id":"w1","markdown":"x""#), actor: "ann")
    }
    #expect(throws: StoreError.self) {
      try s.put(
        doc("w1:Home", #""_rev":"\#(p.rev!)","type":"page","wiki_id":"w1","markdown":"y""#),
        actor: "ann")
    }
    try s.delete("w1:Home", rev: p.rev!, actor: "ann")
    // A "wiki" whose winner is not of type wiki does not count.
    try s.put(#"{"_id":"w2","type":"note"}"#, actor: "ann")
    #expect(throws: StoreError.self) {
      try s.put(doc("w2:P", #""type":"page","wiki_id":"w2","markdown":"x""#), actor: "ann")
    }
  }

  @Test("within one _bulk_docs call, a page sees the wiki as the documents before it left it")
  func wikiChangesInsideOneBulkCall() throws {
    let t = try TestStore(validation: .touchWiki)
    let s = t.store!
    let page = { (id: String) in
      json(doc("w1:\(id)", #""type":"page","wiki_id":"w1","markdown":"x""#))
    }
    // No wiki yet; then the wiki; then pages of it; then the wiki deleted and a page refused.
    let first = try s.bulkDocs([page("A"), json(wiki), page("B"), page("C")], actor: "ann")
    #expect(first.map { $0.error?.code } == [.forbidden, nil, nil, nil])
    let wikiRev = try #require(first[1].rev)
    let second = try s.bulkDocs(
      [
        page("D"), json(#"{"_id":"w1","_rev":"\#(wikiRev)","_deleted":true}"#), page("E"),
        json(
          #"{"_id":"w1","type":"wiki","title":"Again","owner_id":"ann","members":[],"_rev":"2-x"}"#
        ),
      ], actor: "ann")
    #expect(second.map { $0.error?.code } == [nil, nil, .forbidden, .conflict])
    #expect(try s.info.docCount == 3 && s.info.deletedDocCount == 1)
    #expect(try s.verify("docs").isEmpty)
  }

  @Test("replicated pages need no wiki, but field types and JSON objects are still checked")
  func replicatedWrites() throws {
    let t = try TestStore(validation: .touchWiki)
    let s = t.store!
    let results = try s.bulkDocs(
      [
        json(
          #"{"_id":"w9:P","_rev":"1-a","type":"page","wiki_id":"w9","markdown":"early page"}"#),
        json(#"{"_id":"w9:Q","_rev":"1-b","type":"page","wiki_id":"w9","markdown":3}"#),
        json(#"{"_id":"w9","_rev":"1-c","type":"wiki","title":"T","owner_id":"ann"}"#),
        json(#"["not","an","object"]"#),
        json(
          #"{"_id":"w9:R","_rev":"2-d","_deleted":true,"_revisions":{"start":2,"ids":["d","c"]}}"#),
      ], newEdits: false, actor: "peer")
    #expect(results.map(\.id) == ["w9:Q", "w9", ""])
    #expect(results.map { $0.error?.code } == [.forbidden, .forbidden, .badRequest])
    #expect(try s.get("w9:P")[path: "markdown"]?.string == "early page")
    #expect(try s.info.docCount == 1 && s.info.deletedDocCount == 1)
  }

  @Test("a store with CouchDB's rules only takes any shape")
  func couchDBOnly() throws {
    let t = try TestStore(validation: .couchDB)
    try t.store.put(doc("w1:P", #""type":"page","markdown":1"#), actor: "a")
    try t.store.put(doc("w", #""type":"wiki""#), actor: "a")
    #expect(try t.store.info.docCount == 2)
  }

  @Test("document ids: reserved prefixes, the key-length limit, _local ids, body sizes")
  func idsAndSizes() throws {
    let t = try TestStore(validation: .touchWiki)
    let s = t.store!
    let ok = String(repeating: "i", count: 16_384)
    try s.put("{}", id: ok, actor: "a")
    #expect(try s.get(ok)[path: "_id"]?.string == ok)
    let tooLong = #expect(throws: StoreError.self) {
      try s.put("{}", id: ok + "i", actor: "a")
    }
    #expect(tooLong?.reason.contains("up to 16384 bytes") == true)
    // 4-byte characters: 4,097 of them are 16,388 bytes.
    #expect(throws: StoreError.self) {
      try s.put("{}", id: String(repeating: "🙂", count: 4_097), actor: "a")
    }
    let local = #expect(throws: StoreError.self) {
      try s.put(#"{"_id":"_local/x"}"#, actor: "a")
    }
    #expect(local?.reason.contains("PUT /{db}/_local/{id}") == true)
    #expect(throws: StoreError.self) { try s.put(#"{"_id":"_design/"}"#, actor: "a") }
    #expect(throws: StoreError.self) { try s.put(#"{"_id":"_users"}"#, actor: "a") }
    #expect(throws: StoreError.self) {
      try s.putLocal(String(repeating: "l", count: 500), Array("{}".utf8), actor: "a")
    }
    #expect(throws: StoreError.self) { try s.putLocal("", Array("{}".utf8), actor: "a") }
    try s.put(#"{"_id":"_design/app"}"#, actor: "a")

    // A body that arrives parsed (bulk docs) is measured too.
    let big = JSONValue.object(
      JSONObject([
        .init(key: "_id", value: .string("big")),
        .init(key: "x", value: .string(String(repeating: "a", count: DocumentInput.maxBytes))),
      ]))
    let before = s.position
    let results = try s.bulkDocs([big], actor: "a")
    #expect(results.first?.error?.code == .tooLarge && results.first?.error?.error == "too_large")
    let replicated = try s.bulkDocs(
      [
        .object(
          JSONObject(
            big.objectValue!.members + [.init(key: "_rev", value: .string("1-a"))]))
      ], newEdits: false, actor: "peer")
    #expect(replicated.first?.error?.code == .tooLarge)
    #expect(s.position == before)
  }

  @Test(
    "ISO-8601 date-times",
    arguments: [
      ("2024-05-01T10:00:00Z", true), ("2024-05-01T10:00:00.123456Z", true),
      ("2024-05-01t10:00:00z", true), ("2024-05-01 10:00:00+02:00", true),
      ("2024-02-29T23:59:60-11:30", true), ("2023-02-29T00:00:00Z", false),
      ("2024-13-01T00:00:00Z", false), ("2024-05-01T24:00:00Z", false),
      ("2024-05-01T10:00Z", false), ("2024-05-01T10:00:00", false), ("2024-05-01", false),
      ("2024-05-01T10:00:00.Z", false), ("2024-05-01T10:00:00+0200", false), ("", false),
      ("2024-05-01T10:00:00Z ", false), ("２０２４-05-01T10:00:00Z", false),
    ])
  func iso8601(_ text: String, _ valid: Bool) {
    #expect(Timestamp.isISO8601(text) == valid)
  }

  @Test("the current time formatted as TouchWiki writes it")
  func formatting() {
    #expect(Timestamp.iso8601(Date(timeIntervalSince1970: 0)) == "1970-01-01T00:00:00.000Z")
    #expect(
      Timestamp.iso8601(Date(timeIntervalSince1970: 1_709_251_199.999))
        == "2024-02-29T23:59:59.999Z")
    #expect(Timestamp.iso8601(Date(timeIntervalSince1970: -1)) == "1969-12-31T23:59:59.000Z")
    #expect(Timestamp.isISO8601(Timestamp.iso8601()))
  }
}

/// CouchDB's checks of design documents (`couch_mrview:validate`), with its messages.
@Suite struct DesignDocumentCheckTests {
  @Test(
    "design documents CouchDB refuses are 400 invalid_design_doc, local or replicated",
    arguments: [
      (#""views":"x""#, "`views` field must have object type"),
      (#""views":{"v":"function(doc){}"}"#, "`views.v` field must have object type"),
      (
        #""views":{"v":{"map":{"fields":{"a":"asc"}}}}"#,
        "`views.v.map` field must have string type"
      ),
      (
        #""language":"query","views":{"v":{"map":"function(doc){}"}}"#,
        "`views.v.map` field must have object type"
      ),
      (#""views":{"v":{"map":"f","reduce":7}}"#, "`views.v.reduce` field must have string type"),
      (#""views":{"lib":"x"}"#, "`views.lib` field must have object type"),
      (#""views":{"v":{"reduce":"_count"}}"#, "View `v` must contain map function"),
      (
        #""views":{"v":{"map":"function(doc){emit(doc._id)}","reduce":"_max"}}"#,
        "`_max` is not a supported reduce function."
      ),
      (
        #""language":"JavaScript","views":{"v":{"map":"function(doc){}","reduce":"_min"}}"#,
        "`_min` is not a supported reduce function."
      ),
      (#""filters":{"f":7}"#, "`filters.f` field must have string or object type"),
      (#""shows":[]"#, "`shows` field must have object type"),
      (#""rewrites":{}"#, "`rewrites` field must have array or string type"),
      (#""options":{"local_seq":"yes"}"#, "`options.local_seq` field must have boolean type"),
      (#""validate_doc_update":{}"#, "`validate_doc_update` field must have string type"),
      (#""language":1"#, "`language` field must have string type"),
      (
        #""options":{"partitioned":true}"#,
        "partitioned option cannot be true in a non-partitioned database."
      ),
    ])
  func refused(_ fields: String, _ reason: String) throws {
    let t = try TestStore(validation: .couchDB)
    let error = #expect(throws: StoreError.self) {
      try t.store.put(doc("_design/d", fields), actor: "a")
    }
    #expect(error?.error == "invalid_design_doc" && error?.code == .badRequest)
    #expect(error?.reason == reason)
    let replicated = try t.store.bulkDocs(
      [
        try JSONValue(
          parsing: Array(
            doc("_design/d", #""_rev":"1-a","_revisions":{"start":1,"ids":["a"]},"# + fields).utf8))
      ], newEdits: false, actor: "a")
    #expect(replicated.first?.error?.error == "invalid_design_doc")
    #expect(t.store.position == .start)
  }

  @Test(
    "a replicated revision the store has is passed over, whatever its body (CouchDB validates new leaves)"
  )
  func heldRevisionsAreNotChecked() throws {
    let t = try TestStore(validation: .couchDB)
    func send(_ fields: String, rev: String = #""_rev":"1-a","_revisions":{"start":1,"ids":["a"]}"#)
      throws -> StoreError?
    {
      // Replicated writes answer only the refused documents, as CouchDB's do.
      let doc = doc("_design/d", rev + "," + fields)
      return try t.store.bulkDocs(
        [try JSONValue(parsing: Array(doc.utf8))], newEdits: false, actor: "a"
      ).first?.error
    }
    #expect(try send(#""views":{"v":{"map":"function(doc){}"}}"#) == nil)
    let position = t.store.position
    #expect(try send(#""views":"x""#) == nil)
    #expect(t.store.position == position)
    // A new leaf with that body is refused.
    let child = #""_rev":"2-b","_revisions":{"start":2,"ids":["b","a"]}"#
    #expect(try send(#""views":"x""#, rev: child)?.error == "invalid_design_doc")
    #expect(t.store.position == position)
  }

  @Test("design documents CouchDB takes are stored")
  func accepted() throws {
    let t = try TestStore(validation: .couchDB)
    for (n, fields) in [
      #""views":{"v":{"map":"function(doc){emit(doc._id)}","reduce":"_sum"},"lib":{"x":"1"}}"#,
      #""language":"query","views":{"i":{"map":{"fields":{"a":"asc"}},"reduce":"_count"}}"#,
      #""language":"erlang","views":{"v":{"map":"fun(_) -> ok end.","reduce":"_max"}}"#,
      #""filters":{"f":"function(){}"},"options":{"include_design":true},"rewrites":[]"#,
      #""validate_doc_update":"function(){}","updates":{"u":"function(){}"}"#,
    ].enumerated() {
      let id = "_design/d\(n)"
      let written = try t.store.put(doc(id, fields), actor: "a")
      // Stored as given: read back, each field the same as the body's.
      let stored = try t.store.get(id)
      #expect(stored["_rev"]?.stringValue == written.rev)
      let given = try JSONValue(parsing: doc(id, fields))
      for member in given.objectValue?.members ?? [] where member.key != "_id" {
        #expect(stored[member.key] == member.value, "\(id) \(member.key)")
      }
    }
  }
}
