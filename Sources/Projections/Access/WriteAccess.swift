import JSON
public import Log
import Synchronization

/// The signed-in user whose writes a store checks against its access rules, inside the write
/// transaction.
///
/// A front end sets it around the writes it makes for a user (`wikilog serve` for each
/// request, with the caller); the store captures it when a write is prepared, and the writer
/// runs the database's ``DocumentAccess`` rules on each document in the transaction that
/// commits it, against that transaction's snapshot: a member removed from a wiki by a commit
/// before has no write of theirs committed after it. Unset (nil, the default), or an
/// administrator, and nothing is checked: an embedded store, an administrator's tool.
///
/// ```swift
/// try await WriteAccess.$user.withValue(UserContext(name: "bob", roles: [])) {
///   try await store.putAsync(#"{"_id":"w1:Page","type":"page","wiki_id":"w1"}"#, actor: "bob")
/// }
/// ```
public enum WriteAccess {
  @TaskLocal public static var user: UserContext?

  /// `body`, made to run with the calling task's ``user`` on a thread that has no task (a
  /// thread pool's).
  public static func carrying<T>(_ body: @escaping @Sendable () throws -> T)
    -> @Sendable () throws -> T
  {
    let user = self.user
    return { try $user.withValue(user) { try body() } }
  }
}

extension DocumentStore {
  /// The per-document access rules checked in the write transaction for
  /// ``WriteAccess/user`` (a data directory gives its rules to each store it opens).
  public var accessRules: (any DocumentAccess)? { rules.withLock { $0 } }

  /// Makes `rules` the store's per-document access rules.
  public func useAccessRules(_ rules: (any DocumentAccess)?) {
    self.rules.withLock { $0 = rules }
  }

  /// Refuses, with `forbidden`, `write` when ``WriteAccess/user`` may not make it as of `txn`
  /// (the check the store's own document writes make): for a projection's events that stand
  /// for a document write, such as the Wiki module's drafts of a page. Nothing is checked
  /// without a user.
  public func checkWriteAccess(_ write: AccessWrite, txn: WriteTransaction) throws {
    guard let user = WriteAccess.user else { return }
    try checkAccess(write, user: user, txn: txn, context: nil)
  }

  /// Refuses, with `forbidden`, a write of `user`'s that the rules or the security object do
  /// not allow as of `txn`: a design document needs one of the security object's admins; the
  /// rules decide the rest. `context` keeps what earlier writes of the same body decided.
  func checkAccess(
    _ write: AccessWrite, user: UserContext, txn: WriteTransaction, context: WriteContext?
  ) throws {
    if user.isAdmin { return }
    let context = context ?? WriteContext()
    let security = try context.security ?? securityObject(txn: txn)
    context.security = security
    try security.checkDesignWrite(write.docID, by: user)
    guard let rules = accessRules else { return }
    try rules.checkWrite(
      write, by: user, isMember: security.isMember(user), in: self, txn: txn,
      batch: &context.accessBatch)
  }

  /// The security object as `txn` holds it.
  func securityObject(txn: ReadTransaction) throws -> SecurityObject {
    guard let (_, body) = try localDocument(SecurityObject.localID, txn: txn) else {
      return .adminOnly
    }
    var object = (try? JSONValue(parsing: body))?.objectValue ?? JSONObject()
    object.members.removeAll { $0.key == "_id" || $0.key == "_rev" }
    return try SecurityObject(json: .object(object))
  }
}
