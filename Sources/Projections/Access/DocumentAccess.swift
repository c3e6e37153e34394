public import JSON
public import Log

/// What a user may do with one document under a ``DocumentAccess``'s rules.
public enum DocumentRights: Int, Sendable, Comparable {
  /// Nothing: to this user the document does not exist.
  case none
  /// Read it, and write revisions that leave its access as it is.
  case member
  /// Everything, changing who may access it included.
  case owner

  public static func < (a: DocumentRights, b: DocumentRights) -> Bool { a.rawValue < b.rawValue }
}

/// One revision a user asks to write, as a ``DocumentAccess`` checks it.
public struct AccessWrite: Sendable {
  public let docID: String
  /// The new revision's body; nil for a deletion.
  public let body: JSONObject?
  /// A replicated revision (`new_edits=false`) rather than a local edit.
  public let replicated: Bool

  public init(docID: String, body: JSONObject?, replicated: Bool) {
    self.docID = docID
    self.body = body
    self.replicated = replicated
  }
}

/// Decisions a ``DocumentAccess`` made earlier in the same request (a `_bulk_docs` that creates
/// a wiki and then its pages): who may access each access group once the earlier writes are in.
public struct AccessBatch: Sendable {
  /// Access group → the names with ``DocumentRights/member`` rights, and the owners.
  public var groups: [String: (members: Set<String>, owners: Set<String>)] = [:]

  public init() {}
}

/// Per-document access rules beyond the database's ``SecurityObject``: which users may read and
/// write which documents of one database, and each user's filtered view of it (their documents,
/// counts and changes feed). Registered with a ``DataDirectory`` (`access:`); the HTTP server
/// asks it on every read and write of a database that has it. The Wiki module's `WikiAccess`
/// (a wiki and its pages belong to the wiki's owner and members) is one.
///
/// Documents the rules do not govern (``rights(of:to:in:txn:)`` answers nil) follow the
/// security object: its members may read and write them.
///
/// Server administrators are not asked about: they may do everything.
public protocol DocumentAccess: Sendable {
  /// What `user` may do with document `docID` now; nil when the rules leave the document to
  /// the database's security object.
  func rights(
    of user: UserContext, to docID: String, in store: DocumentStore, txn: ReadTransaction
  ) throws -> DocumentRights?

  /// Refuses a write `user` may not make, with ``StoreError`` `forbidden` (403); `batch` holds,
  /// and is given, what writes earlier in the same request change. A document the rules do not
  /// govern passes (the security object decides); `isMember` tells whether `user` is one of the
  /// security object's members.
  func checkWrite(
    _ write: AccessWrite, by user: UserContext, isMember: Bool, in store: DocumentStore,
    txn: ReadTransaction, batch: inout AccessBatch
  ) throws(StoreError)

  /// What `user` may read of the store, as of now: the documents the rules grant, and, when
  /// `isMember` (the security object's member check), every document they do not govern.
  func view(for user: UserContext, isMember: Bool, in store: DocumentStore) throws
    -> any AccessView

  /// The group in which a replicated revision of `docID` that these rules refuse is held
  /// until the rules let it in (``HeldRevisionsProjection``), instead of being refused for
  /// good; nil (the default) when such a revision is refused. The refusal's answer is the same
  /// either way.
  func heldGroup(of docID: String) -> String?

  /// The group whose held revisions a write of `docID` may admit (the wiki a wiki document
  /// governs); nil (the default) for most documents.
  func releasedGroup(by docID: String) -> String?
}

extension DocumentAccess {
  public func heldGroup(of docID: String) -> String? { nil }

  public func releasedGroup(by docID: String) -> String? { nil }
}

/// One user's view of a database under a ``DocumentAccess``: the documents they may read, the
/// counts of those, and their changes feed. Made per request (membership can change between
/// two), from one read transaction.
public protocol AccessView: Sendable {
  /// Whether the user may read document `docID`.
  func includes(_ docID: String) -> Bool
  /// The documents the user may read, as a filter (for `_all_docs` and waking live feeds).
  var filter: DocumentFilter { get }
  /// Live and deleted documents the user may read, and the last seq of their feed.
  var docCount: Int { get }
  var deletedDocCount: Int { get }
  var updateSeq: LogPosition { get }
  /// The user's changes feed: the changes of the documents they may read, with `since`,
  /// `limit`, `descending`, the styles and filters of ``ChangesOptions``. Documents the user
  /// gained access to at position G appear at seq G if they changed before (so a replication
  /// checkpointed before G still gets them); rows that share a seq are never split across
  /// pages. `lastSeq` never passes the last row the user may see.
  func changes(_ options: ChangesOptions) throws -> ChangesResult
}
