import Testing

@testable import RevTree

/// `removeLeaves`, CouchDB's `couch_key_tree:remove_leafs`.
@Suite struct RemoveLeavesTests {
  func rev(_ s: String) -> RevID { try! RevID(s) }

  /// 1-a ── 2-b ─┬─ 3-c
  ///             └─ 3-d        and a second root path 1-a ── 2-x
  func tree() throws -> RevisionTree {
    var t = RevisionTree()
    let a = rev("1-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa")
    let b = rev("2-bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb")
    try t.applyEdit(newRevision: a, parent: nil, deleted: false, body: 1, revsLimit: 1000)
    try t.applyEdit(newRevision: b, parent: a, deleted: false, body: 2, revsLimit: 1000)
    try t.applyEdit(
      newRevision: rev("3-cccccccccccccccccccccccccccccccc"), parent: b, deleted: false, body: 3,
      revsLimit: 1000)
    _ = try t.merge(
      RevisionPath(
        start: 3,
        ids: [rev("3-dddddddddddddddddddddddddddddddd").hash, b.hash, a.hash]),
      deleted: false, body: 4, revsLimit: 1000)
    _ = try t.merge(
      RevisionPath(start: 2, ids: [rev("2-eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee").hash, a.hash]),
      deleted: true, body: 5, revsLimit: 1000)
    return t
  }

  func names(_ t: RevisionTree) -> [String] {
    t.allRevisions.map { String($0.rev.description.prefix(3)) }
  }

  @Test func aLeafGoesAndWhatOnlyItHeld() throws {
    var t = try tree()
    #expect(t.removeLeaves([rev("3-cccccccccccccccccccccccccccccccc")]).count == 1)
    #expect(names(t) == ["1-a", "2-b", "3-d", "2-e"])
    // Bodies and statuses are kept.
    #expect(t.revision(rev("3-dddddddddddddddddddddddddddddddd"))?.body == 4)
    #expect(t.revision(rev("2-eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee"))?.status == .deleted)
    #expect(t.revision(rev("1-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"))?.body == 1)
    #expect(t.leaves.count == 2)
  }

  @Test func theLastLeavesTakeTheirBranches() throws {
    var t = try tree()
    _ = t.removeLeaves([
      rev("3-cccccccccccccccccccccccccccccccc"), rev("3-dddddddddddddddddddddddddddddddd"),
    ])
    #expect(names(t) == ["1-a", "2-e"])
    _ = t.removeLeaves([rev("2-eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee")])
    #expect(t.isEmpty)
  }

  @Test func aRevisionThatIsNotALeafIsNotPurged() throws {
    var t = try tree()
    let before = names(t)
    #expect(
      t.removeLeaves([
        rev("2-bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"), rev("9-ffffffffffffffffffffffffffffffff"),
      ]).isEmpty)
    #expect(names(t) == before)
  }
}
