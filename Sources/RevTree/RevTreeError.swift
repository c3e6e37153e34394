/// Why a revision-tree operation was refused.
///
/// The conflict cases carry names so callers can map them to CouchDB's answers at the HTTP edge
/// (`409 conflict` for ``conflict(_:)``, `400 bad_request` for malformed input).
///
/// ```swift
/// do {
///   _ = try tree.edit(parent: stale, deleted: false, content: body, body: 7, revsLimit: 1000)
/// } catch .conflict {
///   // 409
/// } catch {
///   // 400
/// }
/// ```
public enum RevTreeError: Error, Equatable, Sendable, CustomStringConvertible {
  /// A local edit that CouchDB answers with `409 conflict`.
  case conflict(ConflictReason)
  /// `_revisions.ids` is empty.
  case emptyPath
  /// `_revisions.start` is smaller than the number of ids, or too large.
  case invalidPathStart(start: Int, count: Int)
  /// A revision id inside a path was malformed.
  case invalidRevision(RevIDError)
  /// `revs_limit` must be at least 1.
  case invalidRevsLimit(Int)
  /// An edit would create a generation above ``RevID/maxGeneration``.
  case generationOverflow

  /// Why a local edit conflicts.
  public enum ConflictReason: Equatable, Sendable {
    /// The named parent is not a current leaf (stale or unknown `_rev`).
    case parentNotLeaf(RevID)
    /// A create without `_rev` on a document whose winning revision is live.
    case documentExists
    /// An edit with `_rev` on a document whose every leaf is deleted (CouchDB only lets a
    /// create without `_rev` revive it), or a deletion without `_rev`.
    case documentDeleted
    /// A `_rev` on a document that does not exist.
    case documentMissing
    /// The new revision id already exists in the tree.
    case revisionExists(RevID)
  }

  public var description: String {
    switch self {
    case .conflict(let r): "conflict: \(r)"
    case .emptyPath: "_revisions.ids is empty"
    case .invalidPathStart(let s, let c): "_revisions.start \(s) is invalid for \(c) ids"
    case .invalidRevision(let e): "invalid revision: \(e)"
    case .invalidRevsLimit(let n): "revs_limit must be at least 1, got \(n)"
    case .generationOverflow: "generation would exceed \(RevID.maxGeneration)"
    }
  }
}
