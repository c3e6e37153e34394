import Formats
import Foundation
import JSON
import Log
import Projections
import Query
import RevTree
import StoreTestSupport
import Testing

/// Attachments in the store: inline data, stubs, revision ids, blobs, reads as CouchDB renders
/// them.
@Suite struct AttachmentTests {
  static let allBytes = [UInt8]((0...255).map { UInt8($0) })

  static func doc(_ members: String, _ attachments: [(String, String)]) -> String {
    let atts = attachments.map { "\"\($0.0)\":\($0.1)" }.joined(separator: ",")
    return "{\(members)\(members.isEmpty ? "" : ",")\"_attachments\":{\(atts)}}"
  }

  static func inline(_ bytes: [UInt8], type: String? = nil) -> String {
    let t = type.map { "\"content_type\":\"\($0)\"," } ?? ""
    return "{\(t)\"data\":\"\(Base64.encode(bytes))\"}"
  }

  /// The names of the blob files of `store`.
  static func blobs(_ store: DocumentStore) -> [String] {
    ((try? FileManager.default.contentsOfDirectory(atPath: store.blobs.path)) ?? [])
      .filter { !$0.hasPrefix(".") }.sorted()
  }

  @Test("inline data: binary, empty, names with / and unicode; stubs as CouchDB writes them")
  func inlineAndStubs() throws {
    let t = try TestStore(validation: .couchDB)
    let store = t.store!
    let body = Self.doc(
      #""_id":"d","a":1"#,
      [
        ("bin/all.bin", Self.inline(Self.allBytes, type: "image/png")),
        ("empty", Self.inline([])),
        ("ünï/cødé ✓", Self.inline(Array("x".utf8), type: "application/x-thing")),
      ])
    let result = try store.put(body, actor: "a")
    // The revision id: CouchDB's digest with each attachment's name, type and MD5.
    let expected = RevisionDigest.revision(
      parent: nil, deleted: false, body: json(body),
      attachments: [
        .init(
          name: "bin/all.bin", contentType: .string("image/png"), md5: MD5.hash(Self.allBytes).bytes
        ),
        .init(
          name: "empty", contentType: .string("application/octet-stream"), md5: MD5.hash([]).bytes),
        .init(
          name: "ünï/cødé ✓", contentType: .string("application/x-thing"),
          md5: MD5.hash(Array("x".utf8)).bytes),
      ])
    #expect(result.rev == expected.description)

    let got = try store.get("d")
    let atts = try #require(got["_attachments"]?.objectValue)
    #expect(atts.keys == ["bin/all.bin", "empty", "ünï/cødé ✓"])
    #expect(got.objectValue?.keys == ["_id", "_rev", "a", "_attachments"])
    let stub = try #require(atts["bin/all.bin"])
    #expect(
      stub.serialized()
        == Array(
          #"{"content_type":"image/png","revpos":1,"digest":"md5-\#(Base64.encode(MD5.hash(Self.allBytes).bytes))","length":256,"stub":true}"#
            .utf8))
    #expect(atts["empty"]?["length"] == .number(0))

    // attachments=true: the data inline, no length.
    let full = try store.get("d", options: GetOptions(attachments: true))
    let data = try #require(full["_attachments"]?["bin/all.bin"])
    #expect(data.objectValue?.keys == ["content_type", "revpos", "digest", "data"])
    #expect(data["data"]?.stringValue.flatMap(Base64.decode) == Self.allBytes)
    #expect(full["_attachments"]?["empty"]?["data"] == .string(""))
    #expect(Self.blobs(store).count == 3)
  }

  @Test("a stub keeps the parent's attachment and revpos; new data gets the new generation")
  func stubsAndRevpos() throws {
    let t = try TestStore(validation: .couchDB)
    let store = t.store!
    let r1 = try store.put(
      Self.doc(#""_id":"d""#, [("a", Self.inline([1, 2, 3])), ("b", Self.inline([4]))]),
      actor: "a")
    let r2 = try store.put(
      Self.doc(
        #""_id":"d","_rev":"\#(r1.rev!)""#,
        [("a", #"{"stub":true}"#), ("b", Self.inline([5, 6]))]), actor: "a")
    var doc = try store.get("d")
    #expect(doc["_attachments"]?["a"]?["revpos"] == .number(1))
    #expect(doc["_attachments"]?["b"]?["revpos"] == .number(2))
    #expect(doc["_attachments"]?["b"]?["length"] == .number(2))
    // A stub with the right revpos; one attachment left out is dropped.
    let r3 = try store.put(
      Self.doc(#""_id":"d","_rev":"\#(r2.rev!)""#, [("b", #"{"stub":true,"revpos":2}"#)]),
      actor: "a")
    doc = try store.get("d")
    #expect(doc["_attachments"]?.objectValue?.keys == ["b"])
    // A stub with another revpos, or for a name the parent lacks: 412 missing_stub.
    for bad in [#"{"stub":true,"revpos":1}"#, #"{"stub":true}"#] {
      let name = bad.contains("revpos") ? "b" : "zz"
      #expect(
        throws: StoreError(
          "missing_stub", "Invalid attachment stub in d for \(name)", code: .preconditionFailed)
      ) {
        try store.put(Self.doc(#""_id":"d","_rev":"\#(r3.rev!)""#, [(name, bad)]), actor: "a")
      }
    }
    // A stale _rev with stubs is a conflict first, as in CouchDB.
    #expect(throws: StoreError.conflict) {
      try store.put(
        Self.doc(#""_id":"d","_rev":"\#(r1.rev!)""#, [("a", #"{"stub":true}"#)]), actor: "a")
    }
    // Without _attachments the new revision has none.
    _ = try store.put(#"{"_id":"d","_rev":"\#(r3.rev!)","x":1}"#, actor: "a")
    #expect(try store.get("d")["_attachments"] == nil)
    // The old revisions keep theirs, data included.
    let old = try store.get("d", options: GetOptions(rev: r2.rev, attachments: true))
    #expect(old["_attachments"]?["a"]?["data"] == .string(Base64.encode([1, 2, 3])))
    #expect(old["_attachments"]?["b"]?["data"] == .string(Base64.encode([5, 6])))
    let first = try store.get("d", options: GetOptions(rev: r1.rev, attachments: true))
    #expect(first["_attachments"]?["b"]?["data"] == .string(Base64.encode([4])))
  }

  @Test("atts_since sends data only for attachments newer than the revision named")
  func attsSince() throws {
    let t = try TestStore(validation: .couchDB)
    let store = t.store!
    let r1 = try store.put(Self.doc(#""_id":"d""#, [("a", Self.inline([1]))]), actor: "a")
    let r2 = try store.put(
      Self.doc(
        #""_id":"d","_rev":"\#(r1.rev!)""#, [("a", #"{"stub":true}"#), ("b", Self.inline([2]))]),
      actor: "a")
    let doc = try store.get("d", options: GetOptions(attsSince: [r1.rev!]))
    #expect(doc["_attachments"]?["a"]?["stub"] == .bool(true))
    #expect(doc["_attachments"]?["b"]?["data"] == .string(Base64.encode([2])))
    let none = try store.get("d", options: GetOptions(attsSince: [r2.rev!]))
    #expect(none["_attachments"]?["b"]?["stub"] == .bool(true))
    let unknown = try store.get(
      "d", options: GetOptions(attsSince: ["9-" + String(repeating: "a", count: 32)]))
    #expect(unknown["_attachments"]?["a"]?["data"] != nil)
  }

  @Test("a compressible type is stored gzip with CouchDB's digest; read back decoded")
  func gzipStored() throws {
    let t = try TestStore(validation: .couchDB)
    let store = t.store!
    let r = try store.put(
      Self.doc(
        #""_id":"t""#, [("hello.txt", Self.inline(Array("hello".utf8), type: "text/plain"))]),
      actor: "a")
    let gz = AttachmentEncoding.gzip(Array("hello".utf8))
    #expect(MD5.hash(gz).description == "88c6a20bcc2a885943d8d8cb4de9af09")  // Erlang's zlib
    let stub = try #require(try store.get("t")["_attachments"]?["hello.txt"])
    #expect(stub["digest"] == .string("md5-" + Base64.encode(MD5.hash(gz).bytes)))
    #expect(stub["length"] == .number(5))
    #expect(stub["encoding"] == nil)
    let info = try store.get("t", options: GetOptions(attEncodingInfo: true))
    #expect(info["_attachments"]?["hello.txt"]?["encoding"] == .string("gzip"))
    #expect(info["_attachments"]?["hello.txt"]?["encoded_length"] == .number(25))
    let data = try store.get("t", options: GetOptions(attachments: true))
    #expect(
      data["_attachments"]?["hello.txt"]?["data"] == .string(Base64.encode(Array("hello".utf8))))
    #expect(Self.blobs(store) == ["88c6a20bcc2a885943d8d8cb4de9af09"])
    let expected = RevisionDigest.revision(
      parent: nil, deleted: false, body: json(#"{"_id":"t"}"#),
      attachments: [
        .init(name: "hello.txt", contentType: .string("text/plain"), md5: MD5.hash(gz).bytes)
      ])
    #expect(r.rev == expected.description)
  }

  @Test("two documents with the same data share one blob; compaction and reopening keep it")
  func sharedBlob() throws {
    let t = try TestStore(validation: .couchDB)
    _ = try t.store.put(Self.doc(#""_id":"a""#, [("x", Self.inline(Self.allBytes))]), actor: "a")
    _ = try t.store.put(Self.doc(#""_id":"b""#, [("y", Self.inline(Self.allBytes))]), actor: "a")
    #expect(Self.blobs(t.store) == [BlobStore.hex(MD5.hash(Self.allBytes).bytes)])
    try t.reopen()
    let b = try t.store.get("b", options: GetOptions(attachments: true))
    #expect(b["_attachments"]?["y"]?["data"] == .string(Base64.encode(Self.allBytes)))
  }

  @Test("a sweep removes only old blobs no event names and stale temporary files")
  func sweep() throws {
    let t = try TestStore(validation: .couchDB)
    _ = try t.store.put(Self.doc(#""_id":"a""#, [("x", Self.inline(Self.allBytes))]), actor: "a")
    let blobs = t.store.blobs
    let referenced = MD5.hash(Self.allBytes).bytes
    let orphan: [UInt8] = [1, 2, 3]
    let recent: [UInt8] = [4, 5, 6]
    try blobs.write(orphan, md5: MD5.hash(orphan).bytes)
    try blobs.write(recent, md5: MD5.hash(recent).bytes)
    let temporary = blobs.path + "/.tmp-crashed"
    #expect(FileManager.default.createFile(atPath: temporary, contents: Data([9, 9])))
    let old = Date().addingTimeInterval(-7200)
    for file in [blobs.file(referenced), blobs.file(MD5.hash(orphan).bytes), temporary] {
      try FileManager.default.setAttributes([.modificationDate: old], ofItemAtPath: file)
    }
    #expect(try t.store.unreferencedBlobs() == BlobStore.Sweep(files: 2, bytes: 5))
    #expect(try t.store.unreferencedBlobs(olderThan: 0).files == 3)
    #expect(try t.store.sweepBlobs() == BlobStore.Sweep(files: 2, bytes: 5))
    #expect(
      Self.blobs(t.store)
        == [BlobStore.hex(MD5.hash(recent).bytes), BlobStore.hex(referenced)].sorted())
    #expect(!FileManager.default.fileExists(atPath: temporary))
    #expect(try t.store.verifyAttachments() == [])
    // A write that finds its blob there refreshes it, so a sweep spares it until its event.
    try FileManager.default.setAttributes(
      [.modificationDate: old], ofItemAtPath: blobs.file(MD5.hash(recent).bytes))
    _ = try t.store.put(Self.doc(#""_id":"b""#, [("y", Self.inline(recent))]), actor: "a")
    let touched =
      try FileManager.default.attributesOfItem(
        atPath: blobs.file(MD5.hash(recent).bytes))[.modificationDate] as? Date
    #expect(touched.map { $0 > old.addingTimeInterval(3600) } == true)
    #expect(try t.store.sweepBlobs().files == 0)
    #expect(
      try t.store.get("b", options: GetOptions(attachments: true))["_attachments"]?["y"]?["data"]
        == .string(Base64.encode(recent)))
  }

  @Test("replicated writes: inline data keeps its revpos; stubs resolve against the ancestor")
  func replicated() throws {
    let t = try TestStore(validation: .couchDB)
    let store = t.store!
    let h1 = String(repeating: "1", count: 32)
    let h2 = String(repeating: "2", count: 32)
    let h3 = String(repeating: "3", count: 32)
    let failures = try store.bulkDocs(
      [
        json(
          Self.doc(
            #""_id":"r","_rev":"1-\#(h1)""#,
            [("a", #"{"content_type":"image/png","revpos":1,"data":"AAEC"}"#)]))
      ], newEdits: false, actor: "a")
    #expect(failures.isEmpty)
    let f2 = try store.bulkDocs(
      [
        json(
          Self.doc(
            #""_id":"r","_rev":"2-\#(h2)","_revisions":{"start":2,"ids":["\#(h2)","\#(h1)"]}"#,
            [("a", #"{"stub":true,"revpos":1}"#), ("b", #"{"data":"AQ==","revpos":2}"#)]))
      ], newEdits: false, actor: "a")
    #expect(f2.isEmpty)
    let doc = try store.get("r", options: GetOptions(attachments: true))
    #expect(doc["_rev"] == .string("2-\(h2)"))
    #expect(doc["_attachments"]?["a"]?["data"] == .string("AAEC"))
    #expect(doc["_attachments"]?["a"]?["content_type"] == .string("image/png"))
    #expect(doc["_attachments"]?["b"]?["revpos"] == .number(2))
    // A stub whose ancestors the store lacks: missing_stub, nothing written.
    let f3 = try store.bulkDocs(
      [
        json(
          Self.doc(
            #""_id":"q","_rev":"3-\#(h3)","_revisions":{"start":3,"ids":["\#(h3)","\#(h2)"]}"#,
            [("a", #"{"stub":true}"#)]))
      ], newEdits: false, actor: "a")
    #expect(f3.first?.error?.error == "missing_stub")
    #expect(try store.record("q") == nil)
  }

  @Test("_bulk_docs with stubs, inline and on the helper thread, resolve against each _rev")
  func bulkStubs() throws {
    let t = try TestStore(validation: .couchDB)
    let store = t.store!
    var docs: [JSONValue] = []
    for i in 0..<20 {
      docs.append(json(Self.doc(#""_id":"b\#(i)""#, [("f", Self.inline([UInt8(i)]))])))
    }
    let first = try store.bulkDocs(docs, actor: "a")
    #expect(first.allSatisfy { $0.ok })
    for count in [2, 20] {  // inline, then through the helper thread
      var edits: [JSONValue] = []
      for r in first.prefix(count) {
        let doc = try store.get(r.id)
        var object = try #require(doc.objectValue)
        object["n"] = .number(JSONNumber(Int64(count)))
        edits.append(.object(object))  // its _attachments are stubs
      }
      let results = try store.bulkDocs(edits, actor: "a")
      #expect(results.allSatisfy { $0.ok }, "\(results)")
      for (i, r) in results.enumerated() {
        let doc = try store.get(r.id, options: GetOptions(attachments: true))
        #expect(doc["_attachments"]?["f"]?["data"] == .string(Base64.encode([UInt8(i)])))
        #expect(doc["_attachments"]?["f"]?["revpos"] == .number(1))
      }
    }
  }

  @Test("events: without attachments the payload is the format of before; with them it round-trips")
  func eventFormat() throws {
    let path = try RevisionPath(start: 1, ids: [String(repeating: "a", count: 32)])
    let plain = DocumentEvent(
      kind: .edit, docID: "d", rev: "1-" + String(repeating: "a", count: 32), path: path,
      body: Array(#"{"x":1}"#.utf8))
    let bytes = plain.encoded()
    #expect(Array(bytes.prefix(3)) == [1, 1, 0])  // format, kind, flags: no attachment bit
    var with = plain
    with.deleted = true
    with.attachments = [
      StoredAttachment(
        name: "ü/x", contentType: .string("text/plain"), length: 5, storedLength: 25,
        encoding: "gzip", md5: Array(0..<16), revpos: 3),
      StoredAttachment(
        name: "e", contentType: .number(7), length: 0, storedLength: 0, encoding: nil,
        md5: MD5.hash([]).bytes, revpos: 1),
    ]
    let t = try TestStore(validation: .couchDB)
    let recorded = try t.store.log.append([
      NewEvent(type: "doc.edit", stream: "d", actor: "a", payload: bytes),
      NewEvent(type: "doc.edit", stream: "d", actor: "a", payload: with.encoded()),
    ])
    #expect(try DocumentEvent(decoding: recorded[0]) == plain)
    #expect(try DocumentEvent(decoding: recorded[1]) == with)
  }
}
