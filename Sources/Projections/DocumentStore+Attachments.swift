import JSON
public import Log
public import RevTree

/// An attachment found by ``DocumentStore/attachment(_:name:rev:)``: its metadata and the
/// revision it was read from.
public struct FoundAttachment: Sendable {
  public let attachment: StoredAttachment
  public let rev: RevID
}

extension DocumentStore {
  /// The attachments of the revision whose event is at `position`.
  public func attachments(at position: UInt64, txn: ReadTransaction) throws
    -> [StoredAttachment]
  {
    guard let event = try txn.event(at: LogPosition(position)) else {
      throw StoreError.internalError("the body at \(position) is missing from the log")
    }
    return try DocumentEvent(decoding: event).attachments ?? []
  }

  /// Attachment `name` of document `id` at revision `rev` (the winner when nil), as
  /// `GET /db/doc/att` finds it (`chttpd_db:db_attachment_req`): `not_found` `missing` or
  /// `deleted` for the document, `Document is missing attachment` for the attachment.
  public func attachment(_ id: String, name: String, rev: String? = nil) throws -> FoundAttachment {
    try read { txn in
      let (_, revision) = try openRevision(id, rev: rev, txn: txn)
      guard let position = revision.body,
        let found = try attachments(at: position, txn: txn).first(where: { $0.name == name })
      else { throw StoreError.notFound("Document is missing attachment") }
      return FoundAttachment(attachment: found, rev: revision.rev)
    }
  }

  /// Attachments `names` of document `id` at revision `rev` (the winner when nil), in that
  /// order, read with one decoding of the revision's event (``attachment(_:name:rev:)`` for
  /// each would decode it once per attachment: a multipart answer of N attachments was
  /// O(N²)). Fails as ``attachment(_:name:rev:)`` does when one is missing.
  public func attachments(_ id: String, names: [String], rev: String? = nil) throws
    -> [StoredAttachment]
  {
    try read { txn in
      let (_, revision) = try openRevision(id, rev: rev, txn: txn)
      var byName: [String: StoredAttachment] = [:]
      if let position = revision.body {
        for a in try attachments(at: position, txn: txn) where byName[a.name] == nil {
          byName[a.name] = a
        }
      }
      return try names.map { name in
        guard let a = byName[name] else {
          throw StoreError.notFound("Document is missing attachment")
        }
        return a
      }
    }
  }

  /// The revision `rev` of `id` (the winner when nil) that a read opens.
  func openRevision(_ id: String, rev: String?, txn: ReadTransaction) throws -> (
    DocumentRecord, RevisionTree.Revision
  ) {
    guard let record = try documents.record(id, storage: documentStorage, txn: txn) else {
      throw StoreError.notFound("missing")
    }
    if let rev {
      let parsed: RevID
      do { parsed = try RevID(rev) } catch { throw StoreError.badRequest("Invalid rev format") }
      guard let found = record.tree.revision(parsed), found.status != .missing else {
        throw StoreError.notFound("missing")
      }
      return (record, found)
    }
    guard let winner = record.tree.winner else { throw StoreError.notFound("missing") }
    guard winner.status == .available else { throw StoreError.notFound("deleted") }
    return (record, winner)
  }

  /// The write of `PUT /db/doc/att` (`data` with `contentType`) or, when `data` is nil,
  /// `DELETE /db/doc/att`, as `chttpd_db:db_attachment_req` builds it: without `rev` a new
  /// document holding only the attachment (a conflict when the document exists); with `rev`
  /// that revision's body and attachments, the new attachment first, the one of that name
  /// replaced (or, for a delete, removed: `not_found` when it has none).
  func attachmentEdit(
    _ id: String, name: String, data: [UInt8]?, stored: StoredAttachment? = nil,
    contentType: String, rev: String?
  ) throws -> (DocumentInput, String?) {
    let removing = data == nil && stored == nil
    guard !name.hasPrefix("_") else {
      throw StoreError.badRequest("Attachment name '\(name)' starts with prohibited character '_'")
    }
    var members: [JSONObject.Member] = []
    var others: [AttachmentInput] = []
    if let rev {
      try read { txn in
        let (_, revision) = try openRevisionForEdit(id, rev: rev, txn: txn)
        if let position = revision.body {
          members = try body(at: position, txn: txn).members
          let existing = try attachments(at: position, txn: txn)
          if removing, !existing.contains(where: { $0.name == name }) {
            throw StoreError.notFound("Document is missing attachment")
          }
          others = existing.filter { $0.name != name }.map {
            .stub(name: $0.name, revpos: $0.revpos)
          }
        }
      }
    } else if removing {
      // CouchDB checks that the document and the attachment exist, then writes a new document
      // (which conflicts with the existing one).
      _ = try attachment(id, name: name)
    }
    var input = try DocumentInput(.object(JSONObject(members)))
    let new: [AttachmentInput] =
      data.map { [.data(name: name, contentType: .string(contentType), bytes: $0, revpos: 0)] }
      ?? stored.map { [.stored($0)] } ?? []
    let all = new + others
    input.attachments = all.isEmpty ? nil : all
    return (input, rev)
  }

  /// Revision `rev` of `id` for an attachment edit: a missing one is CouchDB's
  /// `{{not_found, missing}, Rev}`, answered `409 not_found missing_rev`.
  func openRevisionForEdit(_ id: String, rev: String, txn: ReadTransaction) throws -> (
    DocumentRecord, RevisionTree.Revision
  ) {
    let parsed: RevID
    do { parsed = try RevID(rev) } catch { throw StoreError.badRequest("Invalid rev format") }
    guard let record = try documents.record(id, storage: documentStorage, txn: txn),
      let found = record.tree.revision(parsed), found.status != .missing
    else { throw StoreError("not_found", "missing_rev", code: .conflict) }
    return (record, found)
  }

  /// `PUT /db/doc/att?rev=`: a new revision with attachment `name` holding `data`.
  @discardableResult
  public func putAttachment(
    _ id: String, name: String, data: [UInt8], contentType: String, rev: String?, actor: String
  ) throws -> DocumentWriteResult {
    let (input, rev) = try attachmentEdit(
      id, name: name, data: data, contentType: contentType, rev: rev)
    let prepared = prepareEdit(input, id: id, rev: rev, readParent: true)
    return try writeDocuments { txn in
      DocumentWriteResult(id: id, rev: try edit(prepared, actor: actor, txn: txn))
    }
  }

  /// `PUT /db/doc/att?rev=` of an attachment streamed into the blob store already
  /// (``BlobStore/upload(gzip:)``): a new revision with attachment `name` of `contentType`
  /// whose bytes are `blob`, stored gzip when `gzipped` (compressed by the upload, or sent
  /// `Content-Encoding: gzip`; `length` is then the decoded length when known, else the
  /// stored one, as CouchDB shows it). Through the writer queue.
  @discardableResult
  public func putStoredAttachmentAsync(
    _ id: String, name: String, blob: BlobUpload.Result, length: Int, gzipped: Bool,
    contentType: String, rev: String?, actor: String
  ) async throws -> DocumentWriteResult {
    let prepared = try storedAttachmentEdit(
      id, name: name, blob: blob, length: length, gzipped: gzipped, contentType: contentType,
      rev: rev)
    return try await writeDocumentsQueued { txn in
      DocumentWriteResult(id: id, rev: try self.edit(prepared, actor: actor, txn: txn))
    }
  }

  /// ``putStoredAttachmentAsync(_:name:blob:length:gzipped:contentType:rev:actor:)`` on the
  /// caller's thread (the command line's `wikilog attach`, which streams a file into the blob
  /// store first).
  @discardableResult
  public func putStoredAttachment(
    _ id: String, name: String, blob: BlobUpload.Result, length: Int, gzipped: Bool,
    contentType: String, rev: String?, actor: String
  ) throws -> DocumentWriteResult {
    let prepared = try storedAttachmentEdit(
      id, name: name, blob: blob, length: length, gzipped: gzipped, contentType: contentType,
      rev: rev)
    return try writeDocuments { txn in
      DocumentWriteResult(id: id, rev: try edit(prepared, actor: actor, txn: txn))
    }
  }

  /// The edit that gives `id` attachment `name` whose bytes are the uploaded `blob`.
  func storedAttachmentEdit(
    _ id: String, name: String, blob: BlobUpload.Result, length: Int, gzipped: Bool,
    contentType: String, rev: String?
  ) throws -> PreparedWrite {
    let stored = StoredAttachment(
      name: name, contentType: .string(contentType), length: length,
      storedLength: blob.storedLength, encoding: gzipped ? "gzip" : nil, md5: blob.md5, revpos: 0)
    let (input, rev) = try attachmentEdit(
      id, name: name, data: nil, stored: stored, contentType: contentType, rev: rev)
    return prepareEdit(input, id: id, rev: rev, readParent: true)
  }

  /// Hands attachment `a`'s bytes to `body` a chunk at a time (at most `chunk` bytes each),
  /// decoded when it is stored gzip, read from its blob as they go: memory stays bounded
  /// whatever the attachment's size.
  public func forEachAttachmentChunk(
    _ a: StoredAttachment, chunk: Int = 1 << 20, _ body: ([UInt8]) throws -> Void
  ) throws {
    let reader = try blobs.open(a.md5)
    guard a.encoding == "gzip" else {
      while true {
        let piece = try reader.read(upTo: chunk)
        if piece.isEmpty { return }
        try body(piece)
      }
    }
    let decoder = GunzipStream()
    while true {
      guard let out = decoder.pull(upTo: chunk) else {
        throw StoreError.internalError("attachment blob \(BlobStore.hex(a.md5)) is not gzip")
      }
      if !out.isEmpty {
        try body(out)
        continue
      }
      if decoder.isFinished { return }
      let input = try reader.read(upTo: chunk)
      if input.isEmpty {
        throw StoreError.internalError("attachment blob \(BlobStore.hex(a.md5)) ends early")
      }
      decoder.push(input)
    }
  }

  /// `DELETE /db/doc/att?rev=`: a new revision without attachment `name`.
  @discardableResult
  public func deleteAttachmentAsync(_ id: String, name: String, rev: String?, actor: String)
    async throws -> DocumentWriteResult
  {
    let (input, rev) = try attachmentEdit(id, name: name, data: nil, contentType: "", rev: rev)
    let prepared = prepareEdit(input, id: id, rev: rev, readParent: true)
    return try await writeDocumentsQueued { txn in
      DocumentWriteResult(id: id, rev: try self.edit(prepared, actor: actor, txn: txn))
    }
  }

  /// Writes a document already split into a ``DocumentInput`` (a `multipart/related` body
  /// whose attachments have their data, ``DocumentInput/attachFollowing(_:)``), under `id`:
  /// a local edit of `rev` (`_rev` when nil), or with `newEdits: false` the replicated revision
  /// with its `_revisions`. Through the writer queue.
  @discardableResult
  public func writeAsync(
    _ input: DocumentInput, id: String, rev: String?, newEdits: Bool, origin: String = "",
    actor: String
  ) async throws -> DocumentWriteResult {
    var input = input
    input.id = id
    if newEdits {
      if let rev, let bodyRev = input.rev, bodyRev != rev {
        throw StoreError.badRequest(
          "Document rev from request body and query string have different values")
      }
      let prepared = prepareEdit(
        input, id: id, rev: rev ?? input.rev, readParent: true, origin: origin)
      return try await writeDocumentsQueued { txn in
        DocumentWriteResult(id: id, rev: try self.edit(prepared, actor: actor, txn: txn))
      }
    }
    guard let revision = input.rev else {
      throw StoreError.badRequest("new_edits=false requires _rev")
    }
    let prepared = prepareReplicated(input, id: id, origin: origin)
    let held = try await writeDocumentsQueued { txn in
      try self.replicate(prepared, actor: actor, txn: txn)
    }
    if let held { throw held }
    return DocumentWriteResult(id: id, rev: revision)
  }
}
