import Log
public import Projections

extension AsOfView {
  /// ``Projections/DocumentStore/history(of:)`` up to ``position``.
  public func history(of id: String) throws -> [RevisionHistoryEntry] {
    try live.history(of: id).filter { $0.seq <= position }
  }

  /// `user`'s open drafts as of ``position`` (the store must have a ``DraftProjection``).
  public func drafts(of user: String) throws -> [Draft] {
    try Drafts(scratch).drafts(of: user)
  }
}

extension WikiQueries {
  /// Queries the wiki projection of an as-of view.
  ///
  /// - Throws: ``StoreError`` `not_found` when the view's store has no ``WikiProjection``.
  public init(_ view: AsOfView) throws {
    try self.init(view.scratch)
  }
}
