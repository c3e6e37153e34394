public import JSON
import Log
import RevTree
import Synchronization

/// A revision about to be written, as an ``UpdateValidator`` sees it: CouchDB's arguments to a
/// design document's `validate_doc_update(newDoc, oldDoc, userCtx, secObj)`.
public struct ProposedUpdate: Sendable {
  /// The new revision: its body with `_id`, `_rev` (when known) and `_deleted`.
  public let newDocument: JSONValue
  /// The revision it replaces (a local edit's parent; a replicated revision's nearest ancestor
  /// the store has), with `_id` and `_rev`; nil for a new document.
  public let oldDocument: JSONValue?
  /// `{"db","name","roles"}` of the writer (a write with no user, an embedded store's or
  /// the CLI's, is an administrator's: `roles` `["_admin"]`).
  public let userContext: JSONValue
  /// The database's security object.
  public let securityObject: JSONValue
  /// Whether the revision is replicated (`new_edits=false`).
  public let replicated: Bool
}

/// Checks a revision against the document it replaces and the user writing it, before the
/// write transaction: CouchDB's `validate_doc_update` functions (the Query module's
/// `DesignFunctions` runs those of a store's design documents). A refusal is a ``StoreError``:
/// `forbidden` (403) or `unauthorized` (401); nothing is written then.
///
/// ```swift
/// struct NoAnonymous: UpdateValidator {
///   func isActive(in store: DocumentStore) -> Bool { true }
///   func validate(_ update: ProposedUpdate, in store: DocumentStore) throws(StoreError) {
///     if update.userContext.objectValue?["name"] == .null {
///       throw StoreError("unauthorized", "sign in first", code: .unauthorized)
///     }
///   }
/// }
/// dataDirectory.useUpdateValidator(NoAnonymous())
/// ```
public protocol UpdateValidator: Sendable {
  /// Whether there is anything to check in `store` now (cheap: asked before every write, so
  /// that a store without validation functions reads no old revision).
  func isActive(in store: DocumentStore) -> Bool
  func validate(_ update: ProposedUpdate, in store: DocumentStore) throws(StoreError)
  /// Checks a design document's functions before it is written (CouchDB compiles its views'
  /// functions: 400 `compilation_error`) in `store`. By default nothing.
  func checkDesignDocument(_ id: String, body: JSONObject, in store: DocumentStore)
    throws(StoreError)
}

extension UpdateValidator {
  public func checkDesignDocument(_ id: String, body: JSONObject, in store: DocumentStore)
    throws(StoreError)
  {}
}

extension DocumentStore {
  /// The store's ``UpdateValidator``, if any.
  public var updateValidator: (any UpdateValidator)? { updateValidation.withLock { $0 } }

  /// Makes `validator` check every revision written to the store (design documents and
  /// `_local` documents excepted, as in CouchDB).
  public func useUpdateValidator(_ validator: (any UpdateValidator)?) {
    updateValidation.withLock { $0 = validator }
  }

  /// Runs the update validator on a revision of document `id` (a local edit replacing
  /// `parent`, or a replicated revision with its `path`). Nil when it passes.
  func updateCheck(
    _ input: DocumentInput, id: String, newRev: String?, parent: RevID?, path: RevisionPath?,
    user: UserContext?
  ) -> StoreError? {
    guard let validator = updateValidator else { return nil }
    if id.hasPrefix("_design/") {
      guard !input.deleted else { return nil }
      do throws(StoreError) {
        try validator.checkDesignDocument(id, body: input.body, in: self)
        return nil
      } catch {
        return error
      }
    }
    guard validator.isActive(in: self) else { return nil }
    do {
      var new = input.body
      new.members.removeAll { $0.key == "_id" || $0.key == "_rev" || $0.key == "_deleted" }
      new.members.insert(.init(key: "_id", value: .string(id)), at: 0)
      if let newRev { new.members.insert(.init(key: "_rev", value: .string(newRev)), at: 1) }
      if input.deleted { new["_deleted"] = .bool(true) }
      var old: JSONValue? = nil
      if let parent {
        old = try? get(id, options: GetOptions(rev: "\(parent)"))
      } else if let path {
        guard let record = try record(id) else {
          return try run(validator, new, nil, user: user, replicated: true)
        }
        // A revision the store has already is not validated again (CouchDB validates new
        // leaves only).
        if record.tree.contains(path.leaf) { return nil }
        for ancestor in path.revisions.dropFirst() where record.tree.contains(ancestor) {
          old = try? get(id, options: GetOptions(rev: "\(ancestor)"))
          if old != nil { break }
        }
      }
      return try run(validator, new, old, user: user, replicated: path != nil)
    } catch {
      return StoreError.from(error)
    }
  }

  private func run(
    _ validator: any UpdateValidator, _ new: JSONObject, _ old: JSONValue?, user: UserContext?,
    replicated: Bool
  ) throws -> StoreError? {
    let security = try read { try securityObject(txn: $0) }
    let name = indexDatabaseName
    let context: JSONValue = .object(
      JSONObject([
        .init(key: "db", value: .string(name)),
        .init(key: "name", value: user?.name.map(JSONValue.string) ?? .null),
        .init(
          key: "roles",
          value: .array((user?.roles ?? [UserContext.adminRole]).map(JSONValue.string))),
      ]))
    do throws(StoreError) {
      try validator.validate(
        ProposedUpdate(
          newDocument: .object(new), oldDocument: old, userContext: context,
          securityObject: security.json, replicated: replicated), in: self)
      return nil
    } catch {
      return error
    }
  }
}
