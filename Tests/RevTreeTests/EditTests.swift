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

  @Test("the same edit on two peers yields the same revision; key order counts, as in CouchDB")
  func deterministic() throws {
    var a = RevisionTree()
    var b = RevisionTree()
    var c = RevisionTree()
    let same = try JSONValue(parsing: ##"{"title":"Home","_rev":"x","markdown":"# Hi"}"##)
    let reordered = try JSONValue(parsing: ##"{"markdown":"# Hi","title":"Home"}"##)
    let ra = try a.edit(parent: nil, deleted: false, content: body, body: 1, revsLimit: 1000)
    let rb = try b.edit(parent: nil, deleted: false, content: same, body: 7, revsLimit: 1000)
    let rc = try c.edit(parent: nil, deleted: false, content: reordered, body: 7, revsLimit: 1000)
    #expect(ra == rb)
    #expect(ra != rc)
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

  @Test("the digest input is CouchDB's revision term in Erlang's external term format")
  func digestInput() throws {
    let v = try JSONValue(parsing: #"{"_id":"Home","t":"H","n":1.0}"#)
    let input = RevisionDigest.input(parent: nil, deleted: false, body: v)
    // [false, 0, 0, {[{<<"t">>,<<"H">>},{<<"n">>,1.0}]}, []]
    let expected: [UInt8] =
      [131, 108, 0, 0, 0, 5, 100, 0, 5] + Array("false".utf8) + [
        97, 0, 97, 0, 104, 1, 108, 0, 0, 0, 2,
      ]
      + [104, 2, 109, 0, 0, 0, 1, 116, 109, 0, 0, 0, 1, 72]
      + [104, 2, 109, 0, 0, 0, 1, 110, 70, 0x3F, 0xF0, 0, 0, 0, 0, 0, 0, 106, 106, 106]
    #expect(input == expected)
    // A parent: its generation and its 16 digest bytes (or a text signature's bytes).
    let withParent = RevisionDigest.input(parent: rev(1, "abc"), deleted: true, body: v)
    #expect(Array(withParent[6..<13]) == [100, 0, 4] + Array("true".utf8))
    #expect(Array(withParent[13..<23]) == [97, 1, 109, 0, 0, 0, 3] + Array("abc".utf8))
    #expect(RevisionDigest.hash(parent: nil, deleted: false, body: v) == MD5.hash(input))
  }
}
