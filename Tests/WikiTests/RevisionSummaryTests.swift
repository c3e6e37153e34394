import Foundation
import JSON
import Log
import Projections
import Query
import RevTree
import StoreTestSupport
import Testing
import Wiki

/// A wiki store with `w1` (ann's, bob a member) and `w2` (ann's), and the page w1:Home.
private final class WikiStore {
  let t: TestStore
  var s: DocumentStore { t.store }
  var home = ""

  init(_ name: String = #function) throws {
    t = try TestStore(
      name, projections: [WikiProjection(), DraftProjection()], validation: .touchWiki)
    try s.put(
      #"{"_id":"w1","type":"wiki","title":"One","owner_id":"ann","members":["bob"]}"#,
      actor: "ann")
    try s.put(
      #"{"_id":"w2","type":"wiki","title":"Two","owner_id":"ann","members":[]}"#, actor: "ann")
    home = try s.put(
      #"{"_id":"w1:Home","type":"page","wiki_id":"w1","markdown":"See [[Old]] and [[ Old |it]].\n"}"#,
      actor: "ann"
    ).rev!
  }
}

@Suite struct RevisionSummaryTests {
  @Test("a summary written with a draft is published as edit_summary and shown by history")
  func summaryThroughDrafts() throws {
    let w = try WikiStore()
    let drafts = try Drafts(w.s)
    let saved = try drafts.save(
      user: "ann", page: "w1:Home", baseRev: w.home, markdown: "new\n", autosave: true,
      summary: "  fixed the\nlink  ")
    #expect(saved.summary == "fixed the link")
    // Read back from the projection (format 2 rows).
    #expect(try drafts.draft(of: "ann", page: "w1:Home")?.summary == "fixed the link")
    let published = try drafts.publish(user: "ann", page: "w1:Home")
    let doc = try w.s.get("w1:Home")
    #expect(doc["edit_summary"]?.stringValue == "fixed the link")
    #expect(doc["edit_summary_on"]?.stringValue == w.home)
    let history = try w.s.history(of: "w1:Home")
    #expect(history.map(\.summary) == [nil, "fixed the link"])
    #expect(history.last?.rev == published.rev)
    // The next publish without a summary removes the old one.
    try drafts.save(user: "ann", page: "w1:Home", baseRev: published.rev, markdown: "newer\n")
    try drafts.publish(user: "ann", page: "w1:Home")
    #expect(try w.s.get("w1:Home")["edit_summary"] == nil)
    #expect(try w.s.history(of: "w1:Home").last?.summary == nil)
  }

  @Test("a merged publish carries the draft's summary onto the winner it is merged with")
  func summaryThroughMerge() throws {
    let w = try WikiStore()
    let drafts = try Drafts(w.s)
    try w.s.put(
      #"{"_id":"w1:Home","type":"page","wiki_id":"w1","markdown":"a\nb\nc\nd\ne\n"}"#,
      rev: w.home, actor: "ann")
    let base = try #require(try w.s.get("w1:Home")["_rev"]?.stringValue)
    try drafts.save(
      user: "ann", page: "w1:Home", baseRev: base, markdown: "A\nb\nc\nd\ne\n", summary: "caps")
    var other = try w.s.get("w1:Home").objectValue!
    other["markdown"] = .string("a\nb\nc\nd\nE\n")
    let theirs = try w.s.put(JSONValue.object(other).serialized(), actor: "bob").rev!
    let result = try drafts.publish(user: "ann", page: "w1:Home")
    #expect(result.merged && result.parentRev == theirs)
    let doc = try w.s.get("w1:Home")
    #expect(doc["markdown"]?.stringValue == "A\nb\nc\nd\nE\n")
    #expect(doc["edit_summary"]?.stringValue == "caps")
    #expect(doc["edit_summary_on"]?.stringValue == theirs)
    #expect(try w.s.history(of: "w1:Home").last?.summary == "caps")
  }

  @Test("a summary copied by a client that writes the body back is not the new revision's")
  func copiedSummary() throws {
    let w = try WikiStore()
    var body = try w.s.get("w1:Home").objectValue!
    EditSummary.set("first", on: w.home, in: &body)
    let second = try w.s.put(JSONValue.object(body).serialized(), actor: "ann").rev!
    body = try w.s.get("w1:Home").objectValue!
    body["markdown"] = .string("changed by an old client\n")
    _ = try w.s.put(JSONValue.object(body).serialized(), actor: "bob")
    let history = try w.s.history(of: "w1:Home")
    #expect(history.map(\.summary) == [nil, "first", nil])
    #expect(history[1].rev == second)
  }

  @Test("history describes attachments added, replaced and removed")
  func fileChanges() async throws {
    let w = try WikiStore()
    let a = try w.s.putAttachment(
      "w1:Home", name: "picture.png", data: [1, 2, 3], contentType: "image/png", rev: w.home,
      actor: "ann"
    ).rev!
    let b = try w.s.putAttachment(
      "w1:Home", name: "picture.png", data: [4, 5], contentType: "image/png", rev: a,
      actor: "ann"
    ).rev!
    let c = try w.s.putAttachment(
      "w1:Home", name: "notes.txt", data: [6], contentType: "text/plain", rev: b,
      actor: "ann"
    ).rev!
    _ = try await w.s.deleteAttachmentAsync("w1:Home", name: "picture.png", rev: c, actor: "ann")
    let history = try w.s.history(of: "w1:Home")
    #expect(
      history.map(\.description) == [
        "", "added picture.png", "replaced picture.png", "added notes.txt", "removed picture.png",
      ])
    #expect(FileChange.changes(from: [("a", [1])], to: [("a", [1])]).isEmpty)
  }

  @Test("the schema takes edit_summary, redirect_to and renamed_from, and pages without them")
  func validation() throws {
    let w = try WikiStore()
    try w.s.put(
      #"{"_id":"w1:Plain","type":"page","wiki_id":"w1","markdown":"x"}"#, actor: "ann")
    try w.s.put(
      #"{"_id":"w1:S","type":"page","wiki_id":"w1","markdown":"x","edit_summary":"s","edit_summary_on":"","redirect_to":"w1:Plain","renamed_from":"w2:Q"}"#,
      actor: "ann")
    for bad in [
      #""edit_summary":3"#, #""edit_summary_on":false"#, #""redirect_to":"nowiki""#,
      #""renamed_from":":x""#,
    ] {
      #expect(throws: StoreError.self) {
        try w.s.put(
          #"{"_id":"w1:Bad","type":"page","wiki_id":"w1","markdown":"x",\#(bad)}"#, actor: "ann")
      }
    }
  }

  @Test("the words that changed in a line, and a line's tokens joined give it back")
  func wordDiff() {
    let w = WordDiff(old: "The cat sat.\n", new: "The dog sat.\n")
    #expect(
      w.old == [
        .init("The ", changed: false), .init("cat", changed: true), .init(" sat.", changed: false),
      ])
    #expect(
      w.new == [
        .init("The ", changed: false), .init("dog", changed: true), .init(" sat.", changed: false),
      ])
    let crlf = WordDiff(old: "a b\r\n", new: "a c\r\n")
    #expect(crlf.old.map(\.text).joined() == "a b" && crlf.new.last == .init("c", changed: true))
    #expect(WordDiff(old: "", new: "x").new == [.init("x", changed: true)])
  }

  @Test("relinking rewrites [[Old]] and [[Old|label]], not other links or code-free lookalikes")
  func relink() {
    #expect(
      PageMove.relink(
        "See [[Old]] and [[ Old |it]], [[Older]], [[Old\n]] [[[Old]]", from: "Old", to: "New")
        == "See [[New]] and [[New|it]], [[Older]], [[Old\n]] [[[New]]")
    #expect(PageMove.relink("[[Old", from: "Old", to: "New") == "[[Old")
    #expect(PageMove.relink("é [[Old]] é", from: "Old", to: "Neu ü") == "é [[Neu ü]] é")
  }

  @Test(
    "moving a page writes the new page with its files and leaves a redirect; a taken name is refused"
  )
  func move() throws {
    let w = try WikiStore()
    let old = try w.s.put(
      #"{"_id":"w1:Old","type":"page","wiki_id":"w1","markdown":"old text\n"}"#, actor: "ann"
    ).rev!
    let withFile = try w.s.putAttachment(
      "w1:Old", name: "a.txt", data: Array("hi".utf8), contentType: "text/plain", rev: old,
      actor: "ann"
    ).rev!
    let moved = try PageMove.move(w.s, from: "w1:Old", to: "w1:New", user: "ann")
    let new = try w.s.get("w1:New")
    #expect(new["markdown"]?.stringValue == "old text\n")
    #expect(new["renamed_from"]?.stringValue == "w1:Old")
    #expect(new["edit_summary"]?.stringValue == "renamed from Old")
    #expect(try w.s.attachment("w1:New", name: "a.txt").attachment.length == 2)
    let redirect = try w.s.get("w1:Old")
    #expect(redirect["redirect_to"]?.stringValue == "w1:New")
    #expect(redirect["markdown"]?.stringValue == "Moved to [[New]].\n")
    #expect(redirect["_attachments"] == nil)
    #expect(moved.oldRev.hasPrefix("3-") && withFile.hasPrefix("2-"))
    #expect(try w.s.history(of: "w1:Old").last?.summary == "renamed to New")
    #expect(try w.s.history(of: "w1:New").first?.summary == "renamed from Old")
    // Across wikis: the summary names the wiki.
    try PageMove.move(w.s, from: "w1:New", to: "w2:Moved", user: "ann")
    #expect(
      try w.s.get("w1:New")["markdown"]?.stringValue == "Moved to “Moved” in the wiki “w2”.\n")
    #expect(try w.s.get("w2:Moved")["edit_summary"]?.stringValue == "renamed from w1:New")
    // A name that exists, the same name, a missing page: refused, nothing written.
    let before = w.s.position
    #expect(throws: StoreError.self) {
      try PageMove.move(w.s, from: "w1:Home", to: "w2:Moved", user: "ann")
    }
    #expect(throws: StoreError.self) {
      try PageMove.move(w.s, from: "w1:Home", to: "w1:Home", user: "ann")
    }
    #expect(throws: StoreError.self) {
      try PageMove.move(w.s, from: "w1:Nothing", to: "w1:Else", user: "ann")
    }
    #expect(w.s.position == before)
  }

  @Test("updating links edits each chosen page that links to the old name, in one transaction")
  func updateLinks() throws {
    let w = try WikiStore()
    try w.s.put(
      #"{"_id":"w1:Old","type":"page","wiki_id":"w1","markdown":"x\n"}"#, actor: "ann")
    try PageMove.move(w.s, from: "w1:Old", to: "w1:New", user: "ann")
    let changed = try PageMove.updateLinks(
      w.s, in: "w1", pages: ["Home", "Missing"], from: "Old", to: "New", user: "bob")
    #expect(changed == ["Home"])
    #expect(try w.s.get("w1:Home")["markdown"]?.stringValue == "See [[New]] and [[New|it]].\n")
    let last = try #require(try w.s.history(of: "w1:Home").last)
    #expect(last.summary == "link to renamed page" && last.actor == "bob")
    #expect(try WikiQueries(w.s).backlinks(to: "Old", in: "w1").isEmpty)
  }
}
