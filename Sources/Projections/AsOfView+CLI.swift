public import JSON
public import Log
import RevTree

// Whole-store reads of an as-of view that export and replay tools need: the same record scan
// and revision export a live store offers (``DocumentStore/forEachRecord(after:chunk:_:)``,
// ``DocumentStore/exportedRevisions(of:txn:)``), answered from the view's own snapshot.

extension AsOfView {
  /// ``DocumentStore/forEachRecord(after:chunk:_:)`` as of ``position``: every document record
  /// in id order (deleted documents included).
  ///
  /// ```swift
  /// let then = try store.asOf(LogPosition(42))
  /// defer { then.close() }
  /// try then.forEachRecord { record, txn in
  ///   let revisions = try then.exportedRevisions(of: record, txn: txn)
  ///   print(record.docID, revisions.count)
  ///   return true
  /// }
  /// ```
  /// - Parameter body: gets the record and the chunk's read transaction (valid only during the
  ///   call, and only for this view); returns false to stop.
  public func forEachRecord(
    after: String? = nil, chunk: Int = 4096,
    _ body: (DocumentRecord, ReadTransaction) throws -> Bool
  ) throws {
    try scratch.forEachRecord(after: after, chunk: chunk, body)
  }

  /// ``DocumentStore/exportedRevisions(of:txn:)`` as of ``position``: every revision of
  /// `record` whose body the log held then, oldest first, each a CouchDB document with its
  /// `_revisions` path. `txn` is one that ``forEachRecord(after:chunk:_:)`` or ``read(_:)``
  /// of this view gave.
  public func exportedRevisions(of record: DocumentRecord, txn: ReadTransaction) throws
    -> [JSONValue]
  {
    try scratch.exportedRevisions(of: record, txn: txn)
  }
}
