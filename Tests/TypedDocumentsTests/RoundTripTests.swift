import Foundation
import JSON
import Projections
import Testing

@testable import TypedDocuments

struct Contact: StoredDocument {
  static let documentType = "contact"
  var id: String
  var revision: String?
  var address: Address
  var scores: [String: [String: Double]]
}

@Suite struct RoundTripTests {
  @Test func awkwardTypesRoundTrip() async throws {
    try await withDatabase { db, _ in
      var value = Awkward(id: "a1", title: "ünïcødé \u{1F600} \"quoted\"\n")
      value.note = "set"
      value.count = 0
      value.matrix = [[1, 2], [], [3]]
      value.scores = ["alice": ["math": 1.5, "art": -2], "bob": [:]]
      value.maybes = ["one": 1, "none": nil]
      value.optionals = ["x", nil, "z"]
      value.address = Address(street: "1 Main St", city: "Zürich", geo: [47.37, 8.54])
      value.addresses = [Address(street: "a", city: "b", geo: nil)]
      value.priority = .high
      value.shape = .rectangle(width: 3, height: 4)
      value.when = millis(1_764_340_000.123)
      value.blob = Data([0, 1, 2, 255])
      value.link = URL(string: "https://example.com/a?b=c")
      let saved = try await db.save(value)
      #expect(saved.revision?.hasPrefix("1-") == true)
      let read = try #require(try db.get(Awkward.self, id: "a1"))
      var expected = value
      expected.revision = saved.revision
      #expect(read == expected)

      // The document as the store (and any CouchDB client) sees it.
      let json = try db.store.get("a1")
      #expect(json["_id"] == .string("a1"))
      #expect(json["type"] == .string("awkward"))
      #expect(json["id"] == nil && json["revision"] == nil)
      #expect(json["when"] == .string("2025-11-28T14:26:40.123Z"))
      #expect(json["blob"] == .string("AAEC/w=="))
      #expect(json["maybes"]?["none"] == .null)
      #expect(json["huge"]?.numberValue?.text == "18446744073709551615")
      #expect(json["big"]?.numberValue?.text == "9223372036854775807")

      // A nil optional is left out, and setting one to nil removes it.
      var cleared = read
      cleared.note = nil
      cleared.address = nil
      let second = try await db.save(cleared)
      let after = try db.store.get("a1")
      #expect(after["note"] == nil && after["address"] == nil)
      #expect(try db.get(Awkward.self, id: "a1") == second)
    }
  }

  @Test func whatSaveReturnsIsWhatGetReads() async throws {
    try await withDatabase { db, _ in
      // A date with fractions finer than the millisecond the document keeps.
      let now = Date(timeIntervalSince1970: 1_764_340_000.123_456_7)
      let saved = try await db.save(Note(id: "t", title: "now", due: now))
      #expect(saved.due == millis(1_764_340_000.123))
      #expect(try db.get(Note.self, id: "t") == saved)
    }
  }

  @Test func unknownFieldsSurviveASave() async throws {
    try await withDatabase { db, _ in
      // Another client wrote fields the Swift type does not know, at the top and nested.
      let written = try db.store.put(
        #"""
        {"_id":"n1","type":"note","title":"Hi","tags":["a"],"done":false,"color":"red",
         "meta":{"by":"pouchdb"},"due":"2026-01-02T03:04:05.678Z"}
        """#, actor: "other")
      var note = try #require(try db.get(Note.self, id: "n1"))
      #expect(note.revision == written.rev)
      #expect(note.due == millis(1_767_323_045.678))
      note.title = "Hello"
      note.due = nil
      note.tags.append("b")
      try await db.save(note)
      let json = try db.store.get("n1")
      #expect(json["title"] == .string("Hello"))
      #expect(json["color"] == .string("red"))
      #expect(json["meta"]?["by"] == .string("pouchdb"))
      // A field the type knows and left out is removed, not kept from before.
      #expect(json["due"] == nil)
      #expect(json["tags"] == .array([.string("a"), .string("b")]))
    }
  }

  @Test func nestedUnknownFieldsAndDictionaries() async throws {
    try await withDatabase { db, _ in
      try db.store.put(
        #"""
        {"_id":"a2","type":"contact","address":{"street":"s","city":"c","zip":"8000"},
         "scores":{"alice":{"math":1},"bob":{"art":2}},"phone":"+41"}
        """#, actor: "other")
      var value = try #require(try db.get(Contact.self, id: "a2"))
      value.address.city = "C"
      // A dictionary is the type's own: a key taken out is gone.
      value.scores["bob"] = nil
      try await db.save(value)
      let json = try db.store.get("a2")
      #expect(json["address"]?["zip"] == .string("8000"))
      #expect(json["address"]?["city"] == .string("C"))
      #expect(json["scores"]?["bob"] == nil)
      #expect(json["scores"]?["alice"]?["math"] != nil)
      #expect(json["phone"] == .string("+41"))
      // A field the type needs and the document lacks is an error naming it (a synthesized
      // `Codable` does not fall back to the property's default value).
      try db.store.put(#"{"_id":"a3","type":"contact","scores":{}}"#, actor: "other")
      #expect(throws: DecodingError.self) { _ = try db.get(Contact.self, id: "a3") }
    }
  }

  @Test func typesAreToldApart() async throws {
    try await withDatabase { db, _ in
      try await db.save(Note(id: "x", title: "a note"))
      #expect(try db.get(Note.self, id: "missing") == nil)
      #expect(throws: TypedDocumentError.wrongType(id: "x", expected: "awkward", found: "note")) {
        _ = try db.get(Awkward.self, id: "x")
      }
      // A type with a discriminator field of its own.
      let task = try await db.save(Task_(id: "t", name: "do it"))
      #expect(try db.store.get("t")["docType"] == .string("task"))
      #expect(try db.get(Task_.self, id: "t") == task)
      #expect(try db.all(Task_.self) == [task])
      #expect(try db.all(Note.self).map(\.id) == ["x"])
    }
  }

  @Test func valuesJSONCannotHoldAreRefusedAndNothingIsWritten() async throws {
    try await withDatabase { db, _ in
      var value = Awkward(id: "nan", title: "t")
      value.ratio = .nan
      await #expect(throws: EncodingError.self) { try await db.save(value) }
      #expect(try db.store.info.docCount == 0)
      // A stored value that does not fit the type is a decoding error naming the field.
      try db.store.put(#"{"_id":"bad","type":"awkward","title":7}"#, actor: "other")
      #expect(throws: DecodingError.self) { _ = try db.get(Awkward.self, id: "bad") }
      try db.store.put(#"{"_id":"bad2","type":"awkward","title":"t","small":300}"#, actor: "o")
      #expect(throws: DecodingError.self) { _ = try db.get(Awkward.self, id: "bad2") }
    }
  }

  @Test func deletingKeepsTheTypeAndOldRevisionsStayReadable() async throws {
    try await withDatabase { db, _ in
      let first = try await db.save(Note(id: "d", title: "v1"))
      var second = first
      second.title = "v2"
      second = try await db.save(second)
      try await db.delete(second)
      #expect(try db.get(Note.self, id: "d") == nil)
      #expect(try db.get(Note.self, id: "d", revision: first.revision!) == first)
      #expect(try db.get(Note.self, id: "d", revision: second.revision!) == second)
      // Saving a deleted document's id again starts a new revision on top of the deletion.
      let again = try await db.save(Note(id: "d", title: "v3"))
      #expect(again.revision?.hasPrefix("4-") == true)
    }
  }

  @Test func attachmentsAsDataAndFiles() async throws {
    try await withDatabase { db, dir in
      var note = try await db.save(Note(id: "f", title: "with files"))
      let bytes = Data((0..<300_000).map { UInt8(truncatingIfNeeded: $0 &* 31) })
      note = try await db.attach(
        bytes, named: "raw.bin", contentType: "application/octet-stream", to: note)
      let file = URL(fileURLWithPath: dir.path + "/text.txt")
      try Data(String(repeating: "compressible text ", count: 10_000).utf8).write(to: file)
      note = try await db.attach(
        contentsOf: file, named: "text.txt", contentType: "text/plain", to: note)
      #expect(try db.attachment(named: "raw.bin", of: note) == bytes)
      #expect(try db.attachment(named: "text.txt", of: note) == Data(contentsOf: file))
      let infos = try db.attachments(of: note)
      #expect(infos.map(\.name).sorted() == ["raw.bin", "text.txt"])
      #expect(infos.first { $0.name == "text.txt" }?.length == 180_000)

      // A save of the typed value keeps its attachments.
      note.title = "renamed"
      note = try await db.save(note)
      #expect(try db.attachments(of: note).count == 2)
      let out = URL(fileURLWithPath: dir.path + "/out.bin")
      try db.copyAttachment(named: "raw.bin", of: note, to: out)
      #expect(try Data(contentsOf: out) == bytes)

      note = try await db.removeAttachment(named: "raw.bin", from: note)
      #expect(try db.attachments(of: note).map(\.name) == ["text.txt"])
      #expect(throws: TypedDocumentError.noAttachment(id: "f", name: "raw.bin")) {
        _ = try db.attachment(named: "raw.bin", of: note)
      }
    }
  }

  @Test func encoderAndDecoderStandAlone() throws {
    let value = try DocumentEncoder().encode(["b": [1, 2], "a": [3]])
    #expect(
      try DocumentDecoder().decode([String: [Int]].self, from: value) == ["b": [1, 2], "a": [3]])
    #expect(try DocumentEncoder().encode(Optional<Int>.none) == .null)
    #expect(try DocumentDecoder().decode(Int?.self, from: .null) == nil)
    #expect(try DocumentDecoder().decode(Double.self, from: .number(JSONNumber(3))) == 3)
    #expect(throws: DecodingError.self) {
      _ = try DocumentDecoder().decode(Int.self, from: .number(JSONNumber(text: "1.5")!))
    }
  }
}
