import Foundation
import JSON
import Projections
import Query
import RevTree

/// One-line errors for refused updates (CouchDB's `conflict`) that say how to make the update:
/// the document's current revision and the option or field that names it.
enum Conflicts {
  /// The current state of a document, for a conflict message.
  enum Current {
    /// No such document (or its record cannot be read).
    case none
    /// The winning revision is live.
    case live(String)
    /// The document is deleted; its winning (tombstone) revision.
    case deleted(String)
  }

  static func current(of docID: String, in store: DocumentStore) -> Current {
    guard let winner = (try? store.record(docID))?.tree.winner else { return .none }
    return winner.isDeleted ? .deleted(winner.rev.description) : .live(winner.rev.description)
  }

  /// The error for a refused update of `docID` that named revision `given` (nil: none).
  /// `fix(current)` says how to make the change on the current revision instead, e.g. "to
  /// update it, pass --rev 2-ab"; nil when the change makes no sense on a deleted document.
  static func error(
    docID: String, given: String?, store: DocumentStore, fix: (_ current: String) -> String,
    fixDeleted: ((_ current: String) -> String)? = nil
  ) -> CLIError {
    let what: String
    switch current(of: docID, in: store) {
    case .live(let rev) where given == nil:
      what = "'\(docID)' already exists, at revision \(rev); \(fix(rev))"
    case .live(let rev):
      what = "'\(docID)' is at revision \(rev), not \(given!); \(fix(rev))"
    case .deleted(let rev):
      what = "'\(docID)' was deleted, at revision \(rev); \(fixDeleted?(rev) ?? fix(rev))"
    case .none:
      what =
        "there is no document '\(docID)'\(given.map { " (so no revision \($0))" } ?? ""); leave out the revision to create it"
    }
    return CLIError("conflict: \(what); nothing written")
  }
}
