public import JSON
import Log
import RevTree

/// Checks documents before they are written, besides CouchDB's own rules (ids, special
/// fields, JSON objects, the size limit), which always apply: the store's `validate_doc_update`.
///
/// A validator looks at one revision at a time, short of the store, off the writer thread (it
/// must be a pure function of its arguments). It refuses a revision by throwing a
/// ``StoreError`` (``StoreError/validation(_:)`` is CouchDB's 403 `forbidden`); nothing is
/// written then. What it cannot decide from the revision alone it returns as a
/// ``DocumentRequirement``, which the store checks inside the write transaction for local edits
/// (`new_edits=true`) — replicated revisions arrive in changes-feed order, so what they refer
/// to may come later. Deletions are passed too (`deleted` true, with their body, if any).
///
/// ```swift
/// struct NoEmptyTitles: DocumentValidator {
///   func validate(_ docID: String, body: JSONObject, deleted: Bool) throws(StoreError)
///     -> DocumentRequirement?
///   {
///     if !deleted, body["title"]?.stringValue == "" { throw .validation("empty title") }
///     return nil
///   }
/// }
/// let store = try DocumentStore(directory: path, validation: DocumentValidation([NoEmptyTitles()]))
/// ```
public protocol DocumentValidator: Sendable {
  func validate(_ docID: String, body: JSONObject, deleted: Bool) throws(StoreError)
    -> DocumentRequirement?
}

/// Something a revision needs of the store: the winning revision of document ``documentID``
/// is live and its `type` field is ``type``. Checked in the write transaction of a local edit;
/// when it does not hold, the edit is refused with 403 `forbidden` and ``refusal``.
public struct DocumentRequirement: Sendable, Hashable {
  public var documentID: String
  public var type: String
  public var refusal: String

  public init(documentID: String, type: String, refusal: String) {
    self.documentID = documentID
    self.type = type
    self.refusal = refusal
  }
}

/// The validators a ``DocumentStore`` runs, in order (the first refusal wins; the
/// requirements of all are checked).
///
/// ``couchDB`` has none: CouchDB's own rules only. Modules add their rule sets as static
/// members (the wiki's TouchWiki schema is ``touchWiki``).
public struct DocumentValidation: Sendable {
  public var validators: [any DocumentValidator]

  public init(_ validators: [any DocumentValidator]) {
    self.validators = validators
  }

  /// CouchDB's rules only.
  public static var couchDB: DocumentValidation { DocumentValidation([]) }

  /// Whether any validator is set.
  var isEmpty: Bool { validators.isEmpty }

  /// Runs every validator on one revision; the requirements they return.
  func validate(_ docID: String, body: JSONObject, deleted: Bool) throws(StoreError)
    -> [DocumentRequirement]
  {
    var requirements: [DocumentRequirement] = []
    for validator in validators {
      if let r = try validator.validate(docID, body: body, deleted: deleted) {
        requirements.append(r)
      }
    }
    return requirements
  }
}

extension DocumentStore {
  /// Checks a revision about to be written against CouchDB's checks of design documents
  /// (``DesignDocumentCheck``) and the store's ``DocumentValidation``, as far as the revision
  /// alone tells. Returns what a local edit then checks in its transaction
  /// (``require(_:txn:context:)``); a replicated revision does not need it.
  func schemaCheck(_ input: DocumentInput, id: String) -> Result<[DocumentRequirement], StoreError>
  {
    if id.hasPrefix("_design/") {
      do throws(StoreError) {
        try DesignDocumentCheck.check(input.body, partitioned: isPartitioned)
      } catch {
        return .failure(error)
      }
    }
    guard !validation.isEmpty else { return .success([]) }
    return Result { () throws(StoreError) in
      try validation.validate(id, body: input.body, deleted: input.deleted)
    }
  }

  /// Refuses a local edit whose requirement does not hold. `context` remembers, for the rest
  /// of a bulk write, which requirements were found to hold.
  func require(
    _ requirement: DocumentRequirement, txn: ReadTransaction, context: WriteContext? = nil
  ) throws {
    let holds: Bool
    if let known = context?.requirement(requirement) {
      holds = known
    } else {
      holds = try winner(of: requirement.documentID, hasType: requirement.type, txn: txn)
      context?.remember(requirement, holds: holds)
    }
    guard holds else { throw StoreError.validation(requirement.refusal) }
  }

  /// Whether the winning revision of document `id` is live and its `type` is `type`.
  func winner(of id: String, hasType type: String, txn: ReadTransaction) throws -> Bool {
    guard let record = try documents.record(id, storage: documentStorage, txn: txn),
      let winner = record.tree.winner, winner.status == .available, let at = winner.body
    else { return false }
    return try body(at: at, txn: txn)["type"]?.stringValue == type
  }
}
