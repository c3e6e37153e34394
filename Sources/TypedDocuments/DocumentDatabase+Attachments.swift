public import Foundation
import JSON
import Projections

/// An attachment of a typed document: its name, type and size (the bytes are read with
/// ``DocumentDatabase/attachment(named:of:)`` or ``DocumentDatabase/copyAttachment(named:of:to:)``).
public struct AttachmentInfo: Sendable, Hashable {
  public var name: String
  public var contentType: String
  /// The length of its bytes.
  public var length: Int
  /// CouchDB's digest (`md5-` and the Base64 MD5 of what is stored).
  public var digest: String
}

/// Files on typed documents (PingPong's uploads): each attachment is a new revision of its
/// document, its bytes in the database's blob store (gzip for compressible types, as CouchDB
/// stores them), replicated with the document.
extension DocumentDatabase {
  /// Attaches `data` to `doc` as `name` (replacing an attachment of that name), returning
  /// `doc` at the new revision.
  ///
  /// - Throws: ``DocumentConflict`` when `doc.revision` is not current.
  @discardableResult
  public func attach<D: StoredDocument>(
    _ data: Data, named name: String, contentType: String, to doc: D
  ) async throws -> D {
    try await attach(named: name, contentType: contentType, to: doc) { upload in
      try upload.write(Array(data))
    }
  }

  /// Attaches the file at `file` to `doc` as `name`, read a MiB at a time (memory stays
  /// bounded whatever the file's size); returns `doc` at the new revision.
  @discardableResult
  public func attach<D: StoredDocument>(
    contentsOf file: URL, named name: String, contentType: String, to doc: D
  ) async throws -> D {
    guard let handle = try? FileHandle(forReadingFrom: file) else {
      throw StoreError.badRequest("cannot read \(file.path)")
    }
    defer { try? handle.close() }
    return try await attach(named: name, contentType: contentType, to: doc) { upload in
      while let piece = try handle.read(upToCount: 1 << 20), !piece.isEmpty {
        try upload.write(Array(piece))
      }
    }
  }

  func attach<D: StoredDocument>(
    named name: String, contentType: String, to doc: D, fill: (BlobUpload) throws -> Void
  ) async throws -> D {
    let compress = AttachmentEncoding.isCompressible(contentType)
    let upload = try store.blobs.upload(gzip: compress)
    let blob: BlobUpload.Result
    do {
      try fill(upload)
      blob = try upload.finish()
    } catch {
      upload.discard()
      throw error
    }
    do {
      let result = try await store.putStoredAttachmentAsync(
        doc.id, name: name, blob: blob, length: blob.receivedLength, gzipped: compress,
        contentType: contentType, rev: doc.revision, actor: actor)
      var saved = doc
      saved.revision = result.rev
      return saved
    } catch let error as StoreError where error.code == .conflict {
      throw conflict(doc)
    }
  }

  /// The attachments of `doc` at its revision (the current one when it has none).
  public func attachments<D: StoredDocument>(of doc: D) throws -> [AttachmentInfo] {
    let body = try store.get(doc.id, options: GetOptions(rev: doc.revision))
    guard let attachments = body["_attachments"]?.objectValue else { return [] }
    return attachments.members.map { member in
      AttachmentInfo(
        name: member.key, contentType: member.value["content_type"]?.stringValue ?? "",
        length: Int(member.value["length"]?.numberValue?.int64Value ?? 0),
        digest: member.value["digest"]?.stringValue ?? "")
    }
  }

  /// The bytes of attachment `name` of `doc` at its revision.
  ///
  /// - Throws: ``TypedDocumentError/noAttachment(id:name:)`` when it has none of that name.
  public func attachment<D: StoredDocument>(named name: String, of doc: D) throws -> Data {
    var data = Data()
    try forEachChunk(named: name, of: doc) { data.append(contentsOf: $0) }
    return data
  }

  /// Writes attachment `name` of `doc` to `file` (replaced), a MiB at a time.
  public func copyAttachment<D: StoredDocument>(named name: String, of doc: D, to file: URL) throws
  {
    guard FileManager.default.createFile(atPath: file.path, contents: nil),
      let handle = try? FileHandle(forWritingTo: file)
    else { throw StoreError.badRequest("cannot write \(file.path)") }
    defer { try? handle.close() }
    try forEachChunk(named: name, of: doc) { try handle.write(contentsOf: $0) }
  }

  func forEachChunk<D: StoredDocument>(
    named name: String, of doc: D, _ body: ([UInt8]) throws -> Void
  ) throws {
    let found: FoundAttachment
    do {
      found = try store.attachment(doc.id, name: name, rev: doc.revision)
    } catch let error as StoreError where error.code == .notFound {
      throw TypedDocumentError.noAttachment(id: doc.id, name: name)
    }
    try store.forEachAttachmentChunk(found.attachment, body)
  }

  /// Removes attachment `name` from `doc`, returning `doc` at the new revision.
  @discardableResult
  public func removeAttachment<D: StoredDocument>(named name: String, from doc: D) async throws
    -> D
  {
    do {
      let result = try await store.deleteAttachmentAsync(
        doc.id, name: name, rev: doc.revision, actor: actor)
      var saved = doc
      saved.revision = result.rev
      return saved
    } catch let error as StoreError where error.code == .conflict {
      throw conflict(doc)
    }
  }
}
