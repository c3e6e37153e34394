/// What one write body (a `_bulk_docs` call, an import, one group-commit member) learns while it
/// runs, kept so that the documents after the first need not look it up again.
///
/// It only ever remembers what it *read* from the transaction, and forgets a document's entry
/// whenever that document is appended to, so it can never answer with a state the transaction
/// does not hold: a savepoint that is rolled back leaves at worst a forgotten entry, which is
/// read again. It lives for one body on the writer's thread and is never shared.
final class WriteContext {
  /// Whether a validator's requirement holds, for local edits (see
  /// ``DocumentStore/require(_:txn:context:)``): by the document required, then by the type
  /// required of it. (The refusal text is not part of what is remembered.)
  private var requirements: [String: [String: Bool]] = [:]

  /// The database's revs_limit, once read. A write body never changes it (``DocumentStore/setRevsLimit(_:actor:)``
  /// runs a transaction of its own).
  var revsLimit: Int?

  /// The security object, once read (``DocumentStore/checkAccess(_:user:txn:context:)``).
  var security: SecurityObject?
  /// What the access rules decided for earlier documents of the body.
  var accessBatch = AccessBatch()
  /// Whether a partition was found full (``DocumentStore/checkPartitionSize(_:newBytes:record:txn:context:)``),
  /// by partition, read once per transaction.
  var fullPartitions: [String: Bool] = [:]

  init() {}

  func requirement(_ r: DocumentRequirement) -> Bool? { requirements[r.documentID]?[r.type] }

  func remember(_ r: DocumentRequirement, holds: Bool) {
    requirements[r.documentID, default: [:]][r.type] = holds
  }

  /// Called for every document event appended in the body.
  func appended(_ docID: String) {
    if !requirements.isEmpty { requirements[docID] = nil }
  }
}
