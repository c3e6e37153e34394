import JSON
import RevTree
import Testing

@Suite struct EditTests {
  let body = try! JSONValue(parsing: ##"{"_id":"Home","title":"Home","markdown":"# Hi"}"##)

  @Test("a create on an empty tree is generation 1")
  func create() throws {
    var t = RevisionTree()
    let r = try t.edit(parent: nil, deleted: false, content: body, body: 1, revsLimit: 1000)
    t.checkInvariants()
    #expect(r.generation == 1)
    #expect(r.hash.isDigest)
    #expect(t.winner?.rev == r)
  }

  @Test("the same edit on two peers yields the same revision")
  func deterministic() throws {
    var a = RevisionTree()
    var b = RevisionTree()
    let other = try JSONValue(parsing: ##"{"markdown":"# Hi","title":"Home","_rev":"x"}"##)
    let ra = try a.edit(parent: nil, deleted: false, content: body, body: 1, revsLimit: 1000)
    let rb = try b.edit(parent: nil, deleted: false, content: other, body: 7, revsLimit: 1000)
    #expect(ra == rb)
    let d = try a.edit(
      parent: ra, deleted: true, content: .object(JSONObject()), body: 2, revsLimit: 1000)
    #expect(d != RevisionDigest.revision(parent: ra, deleted: false, body: .object(JSONObject())))
  }

  @Test("an edit on a stale revision is a conflict")
  func staleParent() throws {
    var t = RevisionTree()
    let r1 = try t.edit(parent: nil, deleted: false, content: body, body: 1, revsLimit: 1000)
    _ = try t.edit(parent: r1, deleted: false, content: .string("v2"), body: 2, revsLimit: 1000)
    #expect(throws: RevTreeError.conflict(.parentNotLeaf(r1))) {
      try t.edit(parent: r1, deleted: false, content: .string("v3"), body: 3, revsLimit: 1000)
    }
    #expect(throws: RevTreeError.conflict(.parentNotLeaf(rev(9, "zz")))) {
      try t.edit(
        parent: rev(9, "zz"), deleted: false, content: .string("v3"), body: 3, revsLimit: 1000)
    }
  }

  @Test("a create without _rev on a live document is a conflict")
  func createOnLive() throws {
    var t = RevisionTree()
    _ = try t.edit(parent: nil, deleted: false, content: body, body: 1, revsLimit: 1000)
    #expect(throws: RevTreeError.conflict(.documentExists)) {
      try t.edit(parent: nil, deleted: false, content: .string("x"), body: 2, revsLimit: 1000)
    }
  }

  @Test("a _rev on a missing document is a conflict")
  func revOnMissing() {
    var t = RevisionTree()
    #expect(throws: RevTreeError.conflict(.documentMissing)) {
      try t.edit(parent: rev(1, "a"), deleted: false, content: .null, body: 2, revsLimit: 1000)
    }
  }

  @Test("a create on a deleted document extends the winning tombstone")
  func reviveDeleted() throws {
    var t = RevisionTree()
    let r1 = try t.edit(parent: nil, deleted: false, content: body, body: 1, revsLimit: 1000)
    let r2 = try t.edit(
      parent: r1, deleted: true, content: .object(JSONObject()), body: 2, revsLimit: 1000)
    #expect(t.isDeleted)
    #expect(throws: RevTreeError.conflict(.documentDeleted)) {
      try t.edit(parent: r2, deleted: false, content: body, body: 3, revsLimit: 1000)
    }
    #expect(throws: RevTreeError.conflict(.documentDeleted)) {
      try t.edit(parent: nil, deleted: true, content: body, body: 3, revsLimit: 1000)
    }
    let r3 = try t.edit(parent: nil, deleted: false, content: body, body: 3, revsLimit: 1000)
    t.checkInvariants()
    #expect(r3.generation == 3)
    #expect(t.parent(of: r3)?.rev == r2)
    #expect(!t.isDeleted)
  }

  @Test("a deleted conflict leaf of a live document can be extended")
  func extendDeletedConflict() throws {
    var t = RevisionTree()
    t.add(path(from: 1, "a", "b"))
    t.add(path(from: 1, "a", "c"), deleted: true)
    let r = try t.edit(
      parent: rev(2, "c"), deleted: false, content: .string("back"), body: 5, revsLimit: 1000)
    t.checkInvariants()
    #expect(t.leaves.map(\.rev).contains(r))
  }

  @Test("applying the same edit twice is a conflict")
  func sameEditTwice() throws {
    var t = RevisionTree()
    let r1 = try t.edit(parent: nil, deleted: false, content: body, body: 1, revsLimit: 1000)
    let next = RevisionDigest.revision(parent: r1, deleted: false, body: .string("x"))
    try t.applyEdit(newRevision: next, parent: r1, deleted: false, body: 2, revsLimit: 1000)
    #expect(throws: RevTreeError.self) {
      try t.applyEdit(newRevision: next, parent: r1, deleted: false, body: 2, revsLimit: 1000)
    }
  }

  @Test("the digest input is documented bytes")
  func digestInput() throws {
    let v = try JSONValue(parsing: #"{"_id":"Home","title":"Home","n":1.0}"#)
    let input = RevisionDigest.input(parent: nil, deleted: false, body: v)
    #expect(String(decoding: input, as: UTF8.self) == "\n0\n{\"n\":1,\"title\":\"Home\"}")
    let withParent = RevisionDigest.input(parent: rev(1, "abc"), deleted: true, body: v)
    #expect(String(decoding: withParent, as: UTF8.self) == "1-abc\n1\n{\"n\":1,\"title\":\"Home\"}")
    #expect(RevisionDigest.hash(parent: nil, deleted: false, body: v) == MD5.hash(input))
  }
}
