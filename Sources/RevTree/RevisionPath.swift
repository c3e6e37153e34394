/// A revision history as CouchDB sends it in `_revisions`: `{"start": N, "ids": [leaf, parent, ...]}`.
///
/// `ids[0]` is the newest revision (generation `start`), each following id its parent. The path
/// may be cut: the oldest id need not have generation 1.
///
/// ```swift
/// // {"start": 3, "ids": ["c", "b", "a"]}  =  1-a -> 2-b -> 3-c
/// let path = try RevisionPath(start: 3, ids: ["c", "b", "a"])
/// path.leaf          // 3-c
/// path.revisions     // [3-c, 2-b, 1-a]
/// ```
public struct RevisionPath: Hashable, Sendable, CustomStringConvertible {
  /// The generation of `ids[0]`.
  public let start: Int
  /// Newest first.
  public let ids: [RevHash]

  /// Creates a path, checking that every generation stays in `1...RevID.maxGeneration`.
  ///
  /// - Throws: ``RevTreeError/emptyPath`` if `ids` is empty,
  ///   ``RevTreeError/invalidPathStart(start:count:)`` if `start - ids.count + 1 < 1` or `start`
  ///   is larger than ``RevID/maxGeneration``.
  public init(start: Int, ids: [RevHash]) throws(RevTreeError) {
    guard !ids.isEmpty else { throw .emptyPath }
    guard start <= RevID.maxGeneration, start >= ids.count else {
      throw .invalidPathStart(start: start, count: ids.count)
    }
    self.start = start
    self.ids = ids
  }

  /// Creates a path from the strings of a `_revisions` object.
  ///
  /// - Throws: ``RevTreeError/invalidRevision(_:)`` for a malformed id, or the errors of
  ///   ``init(start:ids:)``.
  public init(start: Int, ids: [String]) throws(RevTreeError) {
    var hashes: [RevHash] = []
    hashes.reserveCapacity(ids.count)
    for s in ids {
      do { hashes.append(try RevHash(s)) } catch { throw .invalidRevision(error) }
    }
    try self.init(start: start, ids: hashes)
  }

  /// A one-revision path: a document's first revision, or a leaf sent without history.
  public init(_ rev: RevID) {
    start = rev.generation
    ids = [rev.hash]
  }

  /// The newest revision.
  public var leaf: RevID { RevID(unchecked: start, hash: ids[0]) }

  /// The generation of the oldest id.
  public var rootGeneration: Int { start - ids.count + 1 }

  /// Every revision, newest first.
  public var revisions: [RevID] {
    ids.enumerated().map { RevID(unchecked: start - $0.offset, hash: $0.element) }
  }

  /// The same path cut to its newest `limit` ids (what `?revs=true` answers under `_revs_limit`).
  public func prefix(_ limit: Int) -> RevisionPath {
    if limit >= ids.count || limit < 1 { return self }
    return RevisionPath(uncheckedStart: start, ids: Array(ids.prefix(limit)))
  }

  init(uncheckedStart start: Int, ids: [RevHash]) {
    self.start = start
    self.ids = ids
  }

  /// `{start, ids}` in a compact debugging form.
  public var description: String {
    "{start: \(start), ids: [\(ids.map(\.description).joined(separator: ", "))]}"
  }
}
