public import JSON

// Local edits (CouchDB `new_edits: true`), as `couch_db` and `couch_db_updater` validate them.
//
// Worked example:
//
//     1-a ── 2-b                 PUT {_rev: "2-b"}        → 3-x under 2-b (2-b is a leaf)
//     1-a ── 2-b ── 3-x          PUT {_rev: "2-b"} again  → 409 conflict (2-b is not a leaf)
//                                PUT without _rev         → 409 conflict (document exists)
//     1-a ── 2-b ── 3-x ── 4-d†  DELETE ?rev=3-x          → 4-d, a tombstone; document deleted
//                                PUT without _rev         → 5-y under 4-d: a deleted document is
//                                                           revived on top of its winning tombstone
//                                PUT {_rev: "4-d"}        → 409 conflict (CouchDB only revives a
//                                                           deleted document without _rev)

extension RevisionTree {
  /// The revision a local edit builds on, checked as CouchDB checks it.
  ///
  /// - A document that does not exist: no `_rev` (returns `nil`: the new revision is
  ///   generation 1); a `_rev` conflicts.
  /// - A deleted document (every leaf deleted): a create without `_rev` that is not itself a
  ///   deletion extends the winning tombstone (returned); anything else conflicts.
  /// - A live document: `_rev` must name a current leaf (live or deleted); no `_rev` conflicts.
  ///
  /// ```swift
  /// let parent = try tree.editParent(for: requestRev, deleted: false)
  /// ```
  /// - Throws: ``RevTreeError/conflict(_:)``.
  public func editParent(for requested: RevID?, deleted: Bool) throws(RevTreeError) -> RevID? {
    if isEmpty {
      if requested != nil { throw .conflict(.documentMissing) }
      return nil
    }
    if let requested {
      guard let i = index(of: requested), nodes[Int(i)].isLeaf else {
        throw .conflict(.parentNotLeaf(requested))
      }
      // A live leaf proves the document is live; otherwise check every leaf.
      if nodes[Int(i)].state != .available && isDeleted { throw .conflict(.documentDeleted) }
      return requested
    }
    guard isDeleted else { throw .conflict(.documentExists) }
    if deleted { throw .conflict(.documentDeleted) }
    return winner?.rev
  }

  /// Applies a local edit whose new revision id the caller computed.
  ///
  /// `parent` must be what ``editParent(for:deleted:)`` returned, and `newRevision` a child
  /// generation of it (generation 1 without parent).
  ///
  /// ```swift
  /// let parent = try tree.editParent(for: rev, deleted: false)
  /// let newRev = RevisionDigest.revision(parent: parent, deleted: false, body: json)
  /// try tree.applyEdit(newRevision: newRev, parent: parent, deleted: false, body: seq, revsLimit: 1000)
  /// ```
  /// - Throws: ``RevTreeError/conflict(_:)`` when the edit is not a new leaf (for example the
  ///   same edit applied twice), ``RevTreeError/invalidRevsLimit(_:)``,
  ///   ``RevTreeError/generationOverflow`` when the generations do not line up.
  @discardableResult
  public mutating func applyEdit(
    newRevision: RevID, parent: RevID?, deleted: Bool, body: BodyReference, revsLimit: Int
  ) throws(RevTreeError) -> MergeOutcome {
    guard revsLimit >= 1 else { throw .invalidRevsLimit(revsLimit) }
    guard newRevision.generation == (parent?.generation ?? 0) + 1 else { throw .generationOverflow }
    let value = PathEntry(
      hash: newRevision.hash, state: deleted ? .deleted : .available, body: body, valueClass: 1)
    var entries: [PathEntry] = []
    if let parent {
      entries.append(PathEntry(hash: parent.hash, state: .missing, body: 0, valueClass: 2))
    }
    entries.append(value)
    let start = parent?.generation ?? 1
    _ = ensureLookup()
    let plan = planMerge(start: start, entries)
    guard plan.result == .newLeaf, plan.k == entries.count - 1 else {
      throw .conflict(.revisionExists(newRevision))
    }
    return mergeEntries(start: start, entries, revsLimit: revsLimit)
  }

  /// Validates and applies a local edit, deriving the new revision id from its content.
  ///
  /// The new id is ``RevisionDigest/revision(parent:deleted:body:)``: the same edit made on two
  /// peers yields the same revision, so replicating it back is a no-op rather than a conflict.
  ///
  /// ```swift
  /// var tree = RevisionTree()
  /// let body = try JSONValue(parsing: #"{"title":"Home"}"#)
  /// let r1 = try tree.edit(parent: nil, deleted: false, content: body, body: 1, revsLimit: 1000)
  /// let r2 = try tree.edit(parent: r1, deleted: false, content: body, body: 2, revsLimit: 1000)
  /// ```
  /// - Parameters:
  ///   - parent: the request's `_rev`, `nil` when absent.
  ///   - deleted: whether the edit deletes the document.
  ///   - content: the document body; top-level `_` fields are ignored by the digest.
  ///   - body: where the new revision's body is stored.
  ///   - revsLimit: the database's `_revs_limit`.
  /// - Returns: the new revision id.
  /// - Throws: ``RevTreeError/conflict(_:)`` as CouchDB answers 409, or
  ///   ``RevTreeError/generationOverflow``.
  @discardableResult
  public mutating func edit(
    parent: RevID?, deleted: Bool, content: JSONValue, body: BodyReference, revsLimit: Int
  ) throws(RevTreeError) -> RevID {
    let base = try editParent(for: parent, deleted: deleted)
    guard (base?.generation ?? 0) < RevID.maxGeneration else { throw .generationOverflow }
    let rev = RevisionDigest.revision(parent: base, deleted: deleted, body: content)
    try applyEdit(
      newRevision: rev, parent: base, deleted: deleted, body: body, revsLimit: revsLimit)
    return rev
  }
}
