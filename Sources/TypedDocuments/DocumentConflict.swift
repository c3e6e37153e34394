/// A save that lost a race: the document's current revision is not the one the saved value
/// was read at (or the document exists already when a new one was saved).
///
/// It carries the value that was to be saved and the current one, and ``merged(_:)`` makes
/// the value to save next from them, on the current revision:
///
/// ```swift
/// do {
///   note = try await db.save(note)
/// } catch let conflict as DocumentConflict<Note> {
///   note = try await db.save(conflict.merged { current, mine in
///     var merged = current
///     merged.tags = Array(Set(current.tags + mine.tags)).sorted()
///     return merged
///   })
/// }
/// ```
public struct DocumentConflict<Document: StoredDocument>: Error, CustomStringConvertible {
  /// The value whose save was refused.
  public let attempted: Document
  /// The document as it is now; nil when it is deleted (or not of this type).
  public let current: Document?
  /// The current winning revision (of a deleted document too); nil when there is none.
  public let currentRevision: String?

  public init(attempted: Document, current: Document?, currentRevision: String?) {
    self.attempted = attempted
    self.current = current
    self.currentRevision = currentRevision
  }

  /// What `merge` makes of the current value and the attempted one, on the current revision
  /// (ready to save). When the document was deleted meanwhile, the attempted value is saved
  /// again on top of the deletion.
  public func merged(_ merge: (_ current: Document, _ mine: Document) throws -> Document) rethrows
    -> Document
  {
    guard let current else {
      var again = attempted
      again.revision = currentRevision
      return again
    }
    var result = try merge(current, attempted)
    result.id = attempted.id
    result.revision = currentRevision
    return result
  }

  public var description: String {
    "conflict saving \(Document.documentType) \"\(attempted.id)\" at revision "
      + "\(attempted.revision ?? "none"): the current revision is \(currentRevision ?? "none")"
  }
}

/// Why a typed operation failed, besides the store's own errors and ``DocumentConflict``.
public enum TypedDocumentError: Error, Sendable, Hashable, CustomStringConvertible {
  /// The document is of another type (its type field says `found`).
  case wrongType(id: String, expected: String, found: String?)
  /// The document or revision is not there (or is deleted).
  case notFound(id: String)
  /// The document has no attachment of that name.
  case noAttachment(id: String, name: String)

  public var description: String {
    switch self {
    case .wrongType(let id, let expected, let found):
      "\"\(id)\" is a \(found.map { "\"\($0)\"" } ?? "document without a type"), not a \"\(expected)\""
    case .notFound(let id): "\"\(id)\" is not found"
    case .noAttachment(let id, let name): "\"\(id)\" has no attachment \"\(name)\""
    }
  }
}
