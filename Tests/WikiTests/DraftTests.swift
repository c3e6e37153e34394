import Foundation
import JSON
import Log
import Projections
import Query
import RevTree
import StoreTestSupport
import Testing
import Wiki

/// A store with the wiki and draft projections, a wiki `w1` owned by ann, and its page Home.
private final class DraftStore {
  let t: TestStore
  let drafts: Drafts
  var s: DocumentStore { t.store }
  /// Home's first revision.
  var home = ""

  init(_ name: String = #function) throws {
    t = try TestStore(
      name, projections: [WikiProjection(), DraftProjection()], validation: .touchWiki)
    drafts = try Drafts(t.store)
    try s.put(
      #"{"_id":"w1","type":"wiki","title":"One","owner_id":"ann","members":["bob"]}"#,
      actor: "ann")
    home = try s.put(
      #"{"_id":"w1:Home","type":"page","wiki_id":"w1","markdown":"a\nb\nc\nd\ne\n","created_at":"2024-01-01T00:00:00Z"}"#,
      actor: "ann"
    ).rev!
  }

  func markdown(_ id: String) throws -> String? { try s.get(id)[path: "markdown"]?.string }

  /// Writes the next revision of Home with `markdown`, as another user would.
  @discardableResult
  func edit(_ id: String, _ markdown: String, by user: String = "bob") throws -> String {
    var doc = try s.get(id).objectValue!
    doc["markdown"] = .string(markdown)
    return try s.put(JSONValue.object(doc).serialized(), actor: user).rev!
  }
}

@Suite struct DraftTests {
  @Test("save, autosave, list, get and discard; a user sees only their own drafts")
  func saveListDiscard() throws {
    let d = try DraftStore()
    let before = d.s.position
    let saved = try d.drafts.save(
      user: "ann", page: "w1:Home", baseRev: d.home, markdown: "a\nB\n", autosave: true)
    #expect(saved.baseRev == d.home && saved.markdown == "a\nB\n" && saved.autosaved)
    #expect(saved.wikiID == "w1" && saved.title == "Home")
    #expect(saved.seq == before.next)
    // An autosave that changes nothing appends nothing.
    let same = try d.drafts.save(
      user: "ann", page: "w1:Home", baseRev: d.home, markdown: "a\nB\n", autosave: true)
    #expect(same == saved && d.s.position == before.next)
    let again = try d.drafts.save(
      user: "ann", page: "w1:Home", baseRev: d.home, markdown: "a\nB\nC\n")
    #expect(!again.autosaved && again.createdMicroseconds == saved.createdMicroseconds)
    #expect(again.updatedMicroseconds >= saved.updatedMicroseconds)
    try d.drafts.save(user: "ann", page: "w1:New page", baseRev: nil, markdown: "new")
    try d.drafts.save(user: "bob", page: "w1:Home", baseRev: d.home, markdown: "bob's")

    #expect(try d.drafts.drafts(of: "ann").map(\.pageID) == ["w1:Home", "w1:New page"])
    #expect(try d.drafts.drafts(of: "bob").map(\.markdown) == ["bob's"])
    #expect(try d.drafts.drafts(of: "cy").isEmpty)
    #expect(try d.drafts.draft(of: "ann", page: "w1:Home")?.markdown == "a\nB\nC\n")
    #expect(try d.drafts.draft(of: "cy", page: "w1:Home") == nil)
    #expect(throws: StoreError.notFound("no draft of 'w1:New page' by 'bob'")) {
      try d.drafts.discard(user: "bob", page: "w1:New page")
    }
    #expect(throws: StoreError.self) { try d.drafts.publish(user: "cy", page: "w1:Home") }

    try d.drafts.discard(user: "ann", page: "w1:Home")
    #expect(try d.drafts.draft(of: "ann", page: "w1:Home") == nil)
    #expect(try d.drafts.draft(of: "bob", page: "w1:Home")?.markdown == "bob's")
    #expect(try d.markdown("w1:Home") == "a\nb\nc\nd\ne\n")
    let types = try d.s.log.read(from: before.next).map(\.type)
    #expect(
      types == ["draft.autosave", "draft.save", "draft.save", "draft.save", "draft.discard"])
    #expect(try d.s.verify("drafts").isEmpty)
  }

  @Test("publishing on a base that is still a leaf writes one revision on it and closes the draft")
  func publishOnLeaf() throws {
    let d = try DraftStore()
    try d.drafts.save(user: "bob", page: "w1:Home", baseRev: d.home, markdown: "a\nB\n")
    let before = d.s.position
    let result = try d.drafts.publish(user: "bob", page: "w1:Home")
    #expect(result.parentRev == d.home && !result.merged && result.rev.hasPrefix("2-"))
    let doc = try d.s.get("w1:Home")
    #expect(doc[path: "_rev"]?.string == result.rev)
    #expect(doc[path: "markdown"]?.string == "a\nB\n")
    #expect(doc[path: "updated_by"]?.string == "bob")
    #expect(doc[path: "created_at"]?.string == "2024-01-01T00:00:00Z")
    #expect(doc[path: "type"]?.string == "page" && doc[path: "wiki_id"]?.string == "w1")
    let updated = try #require(doc[path: "updated_at"]?.string)
    #expect(updated.hasSuffix("Z") && updated.count == 24)
    let events = try d.s.log.read(from: before.next)
    #expect(events.map(\.type) == ["doc.edit", "draft.publish"])
    #expect(events.map(\.actor) == ["bob", "bob"])
    #expect(try d.drafts.draft(of: "bob", page: "w1:Home") == nil)
    #expect(try d.s.history(of: "w1:Home").map(\.actor) == ["ann", "bob"])
    #expect(throws: StoreError.self) { try d.drafts.publish(user: "bob", page: "w1:Home") }
  }

  @Test("a page edited since the base: edits that do not overlap are merged on the winner")
  func publishMerges() throws {
    let d = try DraftStore()
    try d.drafts.save(user: "bob", page: "w1:Home", baseRev: d.home, markdown: "A\nb\nc\nd\ne\n")
    let theirs = try d.edit("w1:Home", "a\nb\nc\nd\nE\n", by: "ann")
    let result = try d.drafts.publish(user: "bob", page: "w1:Home")
    #expect(result.merged && result.parentRev == theirs && result.rev.hasPrefix("3-"))
    #expect(result.markdown == "A\nb\nc\nd\nE\n")
    #expect(try d.markdown("w1:Home") == "A\nb\nc\nd\nE\n")
    #expect(try d.s.get("w1:Home", options: GetOptions(conflicts: true))[path: "_conflicts"] == nil)
    #expect(try d.drafts.draft(of: "bob", page: "w1:Home") == nil)
  }

  @Test(
    "overlapping edits are refused with a 409 carrying base, draft and current; nothing written")
  func publishConflict() throws {
    let d = try DraftStore()
    try d.drafts.save(user: "bob", page: "w1:Home", baseRev: d.home, markdown: "a\nBOB\nc\nd\ne\n")
    let theirs = try d.edit("w1:Home", "a\nANN\nc\nd\ne\n", by: "ann")
    let before = d.s.position
    let error = #expect(throws: StoreError.self) {
      try d.drafts.publish(user: "bob", page: "w1:Home")
    }
    #expect(error?.code == .conflict && error?.error == "conflict")
    let conflict = try #require(error?.draftConflict)
    #expect(conflict.base == "a\nb\nc\nd\ne\n" && conflict.baseRev == d.home)
    #expect(conflict.draft == "a\nBOB\nc\nd\ne\n")
    #expect(conflict.current == "a\nANN\nc\nd\ne\n" && conflict.currentRev == theirs)
    #expect(!conflict.currentDeleted)
    #expect(conflict.markedText?.contains("<<<<<<< draft\nBOB\n") == true)
    #expect(conflict.json[path: "current_rev"]?.string == theirs)
    #expect(d.s.position == before)
    #expect(try d.drafts.draft(of: "bob", page: "w1:Home") != nil)

    // Resolving: save the draft on the current revision, then publish.
    try d.drafts.save(user: "bob", page: "w1:Home", baseRev: theirs, markdown: "a\nBOTH\nc\nd\ne\n")
    let result = try d.drafts.publish(user: "bob", page: "w1:Home")
    #expect(result.parentRev == theirs && !result.merged)
    #expect(try d.markdown("w1:Home") == "a\nBOTH\nc\nd\ne\n")
  }

  @Test("a page deleted since the base is a conflict")
  func publishOnDeletedPage() throws {
    let d = try DraftStore()
    try d.drafts.save(user: "bob", page: "w1:Home", baseRev: d.home, markdown: "x\n")
    try d.s.delete("w1:Home", rev: d.home, actor: "ann")
    let error = #expect(throws: StoreError.self) {
      try d.drafts.publish(user: "bob", page: "w1:Home")
    }
    #expect(error?.draftConflict?.currentDeleted == true)
    #expect(error?.draftConflict?.markedText == nil)
  }

  @Test("a draft of a new page creates it; one created meanwhile is merged against the empty text")
  func publishNewPage() throws {
    let d = try DraftStore()
    try d.drafts.save(user: "ann", page: "w1:Fresh", baseRev: nil, markdown: "fresh [[Home]]\n")
    let result = try d.drafts.publish(user: "ann", page: "w1:Fresh")
    #expect(result.parentRev == nil && result.rev.hasPrefix("1-") && !result.merged)
    let doc = try d.s.get("w1:Fresh")
    #expect(doc[path: "type"]?.string == "page" && doc[path: "wiki_id"]?.string == "w1")
    #expect(doc[path: "created_at"]?.string == doc[path: "updated_at"]?.string)
    #expect(try WikiQueries(d.s).backlinks(to: "Home", in: "w1") == ["Fresh"])

    try d.drafts.save(user: "ann", page: "w1:Race", baseRev: nil, markdown: "mine\n")
    try d.drafts.save(user: "bob", page: "w1:Race", baseRev: nil, markdown: "his\n")
    try d.drafts.publish(user: "bob", page: "w1:Race")
    let error = #expect(throws: StoreError.self) {
      try d.drafts.publish(user: "ann", page: "w1:Race")
    }
    #expect(error?.draftConflict?.base == "" && error?.draftConflict?.current == "his\n")

    // A page deleted and drafted anew is created again on its tombstone.
    let race = try d.s.get("w1:Race")[path: "_rev"]!.string!
    try d.s.delete("w1:Race", rev: race, actor: "bob")
    try d.drafts.discard(user: "ann", page: "w1:Race")
    try d.drafts.save(user: "ann", page: "w1:Race", baseRev: nil, markdown: "again\n")
    #expect(try d.drafts.publish(user: "ann", page: "w1:Race").rev.hasPrefix("3-"))
  }

  @Test("the base's text comes from the log even after it is stemmed out of the tree")
  func baseStemmed() throws {
    let d = try DraftStore()
    try d.drafts.save(user: "bob", page: "w1:Home", baseRev: d.home, markdown: "a\nb\nc\nd\nE\n")
    try d.s.setRevsLimit(1, actor: "admin")
    try d.edit("w1:Home", "A\nb\nc\nd\ne\n", by: "ann")
    try d.edit("w1:Home", "A\nb\nC\nd\ne\n", by: "ann")
    #expect(try d.s.record("w1:Home")?.tree.revision(RevID(d.home)) == nil)
    let result = try d.drafts.publish(user: "bob", page: "w1:Home")
    #expect(result.merged && result.markdown == "A\nb\nC\nd\nE\n")
  }

  @Test("drafts stay out of documents, changes, history and replication, but are in the audit")
  func draftsAreInvisible() throws {
    let d = try DraftStore()
    let changes = try d.s.changes()
    let history = try d.s.changes(ChangesOptions.history())
    let info = try d.s.info
    let all = try d.s.allDocs()
    try d.drafts.save(user: "bob", page: "w1:Home", baseRev: d.home, markdown: "x", autosave: true)
    try d.drafts.save(user: "bob", page: "w1:Other", baseRev: nil, markdown: "y")
    try d.drafts.discard(user: "bob", page: "w1:Other")
    #expect(try d.s.changes().results == changes.results)
    #expect(try d.s.changes(ChangesOptions.history()).results == history.results)
    #expect(try d.s.info.docCount == info.docCount)
    #expect(try d.s.allDocs() == all)
    #expect(try d.s.history(of: "w1:Home").count == 1)
    #expect(try d.s.history(of: "w1:Other").isEmpty)
    #expect(throws: StoreError.notFound("missing")) { _ = try d.s.get("w1:Other") }
    let diff = try d.s.revsDiff([("w1:Home", [d.home])])
    #expect(diff.isEmpty)

    let audit = try d.s.audit(AuditQuery(actor: "bob"))
    #expect(audit.map(\.type) == ["draft.autosave", "draft.save", "draft.discard"])
    #expect(audit.map(\.docID) == ["w1:Home", "w1:Other", "w1:Other"])
    #expect(audit[0].rev == d.home)
    #expect(try d.s.audit(AuditQuery(filter: .wiki("w1"))).count == 5)

    // The draft projection replays to the same state.
    #expect(try d.s.verify("drafts").isEmpty)
    try d.s.rebuild("drafts")
    #expect(try d.drafts.drafts(of: "bob").map(\.markdown) == ["x"])
    #expect(try d.s.verify("docs").isEmpty && d.s.verify("wiki").isEmpty)
  }

  @Test("the live changes feed skips draft events")
  func liveFeedSkipsDrafts() async throws {
    let d = try DraftStore()
    try d.drafts.save(user: "bob", page: "w1:Home", baseRev: d.home, markdown: "x")
    let edit = try d.edit("w1:Home", "y", by: "ann")
    var iterator = d.s.liveChanges().makeAsyncIterator()
    var revs: [String] = []
    while let item = try await iterator.next() {
      if case .change(let row) = item { revs += row.changes } else { break }
    }
    #expect(revs.contains(edit) && revs.count == 2)
  }

  @Test("bad drafts are refused clearly and write nothing")
  func badInput() throws {
    let d = try DraftStore()
    let before = d.s.position
    for page in ["Home", ":Home", "w1:", ""] {
      #expect(throws: StoreError.self) {
        try d.drafts.save(user: "ann", page: page, baseRev: nil, markdown: "")
      }
    }
    #expect(throws: StoreError.self) {
      try d.drafts.save(user: "", page: "w1:Home", baseRev: nil, markdown: "")
    }
    #expect(throws: StoreError.self) {
      try d.drafts.save(user: "ann", page: "w1:Home", baseRev: "bogus", markdown: "")
    }
    #expect(throws: StoreError.self) {
      try d.drafts.save(user: "ann", page: "w1:Home", baseRev: "9-abc", markdown: "")
    }
    #expect(throws: StoreError.self) {
      try d.drafts.save(
        user: String(repeating: "u", count: 300), page: "w1:" + String(repeating: "p", count: 300),
        baseRev: nil, markdown: "")
    }
    #expect(d.s.position == before)
    let plain = try TestStore(validation: .touchWiki)
    #expect(throws: StoreError.self) { try Drafts(plain.store) }
  }

  @Test("publishing keeps the page's attachments, merged or not")
  func publishKeepsAttachments() throws {
    let d = try DraftStore()
    let withFile = try d.s.putAttachment(
      "w1:Home", name: "logo.png", data: [0, 1, 2, 255], contentType: "image/png", rev: d.home,
      actor: "ann")
    try d.drafts.save(user: "bob", page: "w1:Home", baseRev: withFile.rev, markdown: "a\nB\n")
    _ = try d.drafts.publish(user: "bob", page: "w1:Home")
    #expect(try d.s.get("w1:Home")[path: "_attachments"]?["logo.png"]?["revpos"] == .number(2))
    // A draft on an older base, merged with an edit made since (which kept the stub).
    try d.drafts.save(
      user: "bob", page: "w1:Home", baseRev: withFile.rev, markdown: "a\nb\nc\nd\nE\n")
    try d.edit("w1:Home", "a\nB\nc\nd\ne\n", by: "ann")
    let merged = try d.drafts.publish(user: "bob", page: "w1:Home")
    #expect(merged.merged)
    let found = try d.s.attachment("w1:Home", name: "logo.png")
    #expect(try d.s.attachmentData(found.attachment) == [0, 1, 2, 255])
  }
}
