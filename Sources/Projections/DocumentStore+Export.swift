import Foundation
public import JSON
public import Log
import RevTree

// Export and import of whole documents: every revision whose body the log still holds, with
// the stored path that places it in the tree, so that importing an export rebuilds the same
// trees (same revisions, statuses, winners and conflicts) and the same bodies.
//
// Worked example. A document edited twice and then given a conflicting branch by replication:
//
//     1-a ── 2-b ─┬─ 3-c          bodies: 1-a @ 10, 2-b @ 11, 3-c @ 12, 3-d @ 20
//                 └─ 3-d
//
// exports as four revisions in log order, each a CouchDB document with its `_revisions`:
//
//     {"_id":"x","_rev":"1-a","_revisions":{"start":1,"ids":["a"]},...}
//     {"_id":"x","_rev":"2-b","_revisions":{"start":2,"ids":["b","a"]},...}
//     {"_id":"x","_rev":"3-c","_revisions":{"start":3,"ids":["c","b","a"]},...}
//     {"_id":"x","_rev":"3-d","_revisions":{"start":3,"ids":["d","b","a"]},...}
//
// Importing them with `new_edits=false` (``DocumentStore/importRevisions(_:actor:origin:)``)
// merges each path: every body becomes an event of its own, and the union of the paths is the
// original tree. Ancestors known only by id (`missing`) come back as ids inside the paths.
// Revisions stemmed out of a tree are not exported: they are no longer part of the document
// (``DocumentStore/history(of:)`` still shows them from the log). Attachments are exported
// inline (`data` in base64) and imported as replicated inline data, which stores the same
// bytes (gzip is deterministic) under the same digests.

extension DocumentStore {
  /// Every revision of `record` whose body the log holds, in the order they were written, each
  /// as a CouchDB document with its full stored `_revisions` (and `_deleted` for tombstones).
  ///
  /// ```swift
  /// let revisions = try store.read { txn in try store.exportedRevisions(of: record, txn: txn) }
  /// ```
  public func exportedRevisions(of record: DocumentRecord, txn: ReadTransaction) throws
    -> [JSONValue]
  {
    var withBodies: [(position: UInt64, revision: RevisionTree.Revision)] = []
    record.tree.forEachRevision { revision, _ in
      if let position = revision.body { withBodies.append((position, revision)) }
    }
    withBodies.sort { $0.position < $1.position }
    return try withBodies.map { position, revision in
      guard let path = record.tree.storedPath(of: revision.rev) else {
        throw StoreError.internalError("a revision vanished from its tree")
      }
      var members: [JSONObject.Member] = [
        .init(key: "_id", value: .string(record.docID)),
        .init(key: "_rev", value: .string(revision.rev.description)),
        .init(key: "_revisions", value: path.revisionsJSON),
      ]
      if revision.status == .deleted { members.append(.init(key: "_deleted", value: .bool(true))) }
      members.append(contentsOf: try body(at: position, txn: txn).members)
      // Attachments inline (base64 of the data, with their revpos), so that an import stores
      // the same bytes and digests.
      let attachments = try attachments(at: position, txn: txn)
      if !attachments.isEmpty {
        var atts: [JSONObject.Member] = []
        for a in attachments {
          atts.append(.init(key: a.name, value: a.json(data: try attachmentData(a))))
        }
        members.append(.init(key: "_attachments", value: .object(JSONObject(atts))))
      }
      return .object(JSONObject(members))
    }
  }

  /// Calls `body` with every document record in id order (deleted documents included), reading
  /// `chunk` records per read transaction, starting after the id `after`.
  ///
  /// ```swift
  /// var conflicted = 0
  /// try store.forEachRecord { record, _ in
  ///   if !record.tree.conflicts.isEmpty { conflicted += 1 }
  ///   return true
  /// }
  /// ```
  /// - Parameter body: gets the record and the chunk's read transaction (valid only during the
  ///   call); returns false to stop.
  public func forEachRecord(
    after: String? = nil, chunk: Int = 4096,
    _ body: (DocumentRecord, ReadTransaction) throws -> Bool
  ) throws {
    var last: [UInt8]? = after.map { DocumentKey.key($0) }
    let chunk = max(1, chunk)
    while true {
      let (count, stopped) = try read { txn -> (Int, Bool) in
        var count = 0
        var stopped = false
        try txn.scan(documentStorage["byId"], from: last) { key, value in
          if key == last { return true }
          count += 1
          last = key
          if try !body(try DocumentRecord(decoding: value), txn) {
            stopped = true
            return false
          }
          return count < chunk
        }
        return (count, stopped)
      }
      if stopped || count < chunk { return }
    }
  }

  /// Writes replicated revisions (`new_edits=false`) in one transaction: all of them or, when
  /// one fails, none.
  ///
  /// Each revision is merged with its `_revisions` path as ``bulkDocs(_:newEdits:actor:origin:)``
  /// would, and one that the store already has appends nothing. Import revisions oldest first
  /// so that every body becomes an event; give paths no longer than the database's revs_limit,
  /// or raise it first (``setRevsLimit(_:actor:)``), or they are stemmed.
  ///
  /// ```swift
  /// let inputs = try lines.map { try DocumentInput(json: Array($0.utf8)) }
  /// let appended = try store.importRevisions(inputs, actor: "import", origin: "backup.ndjson")
  /// ```
  /// - Returns: how many events were appended.
  /// - Throws: ``StoreError`` (`bad_request` for a revision without `_id` or `_rev`); nothing
  ///   is written then.
  @discardableResult
  public func importRevisions(_ revisions: [DocumentInput], actor: String, origin: String = "")
    throws -> Int
  {
    try writeDocuments { txn in
      let first = txn.nextPosition
      let context = WriteContext()
      for input in revisions {
        guard let id = input.id else {
          throw StoreError.badRequest("every imported revision needs an _id")
        }
        try replicate(input, id: id, actor: actor, origin: origin, txn: txn, context: context)
      }
      return Int(txn.nextPosition.rawValue - first.rawValue)
    }
  }
}

extension DocumentStore {
  /// Every attachment blob an event of the log names, with its stored length and the first
  /// place that names it.
  func referencedBlobs(skipping: Set<LogPosition> = []) throws -> [[UInt8]: (
    length: Int, where: String
  )] {
    var referenced: [[UInt8]: (length: Int, where: String)] = [:]
    try read { txn in
      try txn.forEachEvent(
        from: .start,
        ofTypes: [DocumentEvent.Kind.edit.eventType, DocumentEvent.Kind.replicated.eventType]
      ) { event in
        if skipping.contains(event.position) { return true }
        let e = try DocumentEvent(decoding: event)
        for a in e.attachments ?? [] where referenced[a.md5] == nil {
          referenced[a.md5] = (
            a.storedLength, "attachment \(a.name) of \(e.docID) \(e.rev) (event \(event.position))"
          )
        }
        return true
      }
    }
    return referenced
  }

  /// Checks every attachment blob that an event of the log references: that it exists, has
  /// the stored length and the MD5 its digest says (read a MiB at a time). Returns one line
  /// per problem.
  public func verifyAttachments(maxProblems: Int = 20) throws -> [String] {
    try checkAttachments(maxProblems: maxProblems).problems
  }

  /// ``verifyAttachments(maxProblems:)`` and, from the same read of the log, the files of the
  /// attachments directory no event names (``BlobStore/unreferenced(keeping:olderThan:)``,
  /// whatever their age).
  public func checkAttachments(maxProblems: Int = 20) throws -> (
    problems: [String], unreferenced: BlobStore.Sweep
  ) {
    let referenced = try referencedBlobs()
    var problems: [String] = []
    for (md5, (length, place)) in referenced.sorted(by: { $0.value.where < $1.value.where }) {
      guard problems.count < maxProblems else { break }
      let hex = BlobStore.hex(md5)
      guard blobs.exists(md5) else {
        problems.append("blob \(hex) is missing: \(place)")
        continue
      }
      let reader = try blobs.open(md5)
      var hash = BulkMD5()
      var count = 0
      while true {
        let piece = try reader.read(upTo: 1 << 20)
        if piece.isEmpty { break }
        hash.update(piece)
        count += piece.count
      }
      if count != length {
        problems.append("blob \(hex) has \(count) bytes, not \(length): \(place)")
      } else if hash.finalize() != md5 {
        problems.append("blob \(hex) does not match its digest: \(place)")
      }
    }
    return (problems, blobs.unreferenced(keeping: Set(referenced.keys), olderThan: 0))
  }

  /// The blobs no event of the log names, and temporary files of uploads that never finished,
  /// unchanged for `age` seconds: what ``sweepBlobs(olderThan:)`` would remove.
  public func unreferencedBlobs(olderThan age: Double = 3600) throws -> BlobStore.Sweep {
    blobs.unreferenced(keeping: Set(try referencedBlobs().keys), olderThan: age)
  }

  /// Removes the blobs no event of the log names and stale temporary files, once unchanged
  /// for `age` seconds (a crash between a blob and its event, or a write refused after its
  /// blobs were written, leaves them). A blob any revision names is never removed.
  @discardableResult
  public func sweepBlobs(olderThan age: Double = 3600) throws -> BlobStore.Sweep {
    try blobs.sweep(keeping: Set(try referencedBlobs().keys), olderThan: age)
  }

  /// Checks, without writing, that `input` can be written with `new_edits=false`: a valid
  /// document id in `_id`, and a `_rev` that is the newest revision of its `_revisions`.
  ///
  /// ```swift
  /// for input in inputs { try DocumentStore.checkImportable(input) }   // before any write
  /// ```
  public static func checkImportable(_ input: DocumentInput) throws(StoreError) {
    guard let id = input.id else { throw .badRequest("a replicated revision needs an _id") }
    try DocumentKey.validate(id)
    guard let revString = input.rev else {
      throw .badRequest("new_edits=false requires _rev on every document")
    }
    let rev: RevID
    do {
      rev = try RevID(revString)
    } catch {
      throw .badRequest("Invalid rev format: \(revString)")
    }
    if let path = input.revisions, path.leaf != rev {
      throw .badRequest("_rev \(revString) is not the first revision of _revisions")
    }
  }
}
