import JSON
import Log
public import Projections

/// One revision of a page as the history shows it: the revision event (who wrote it, when, from
/// where, on which parent: ``RevisionEvent``'s fields read through this entry, as
/// `entry.actor`) and what changed in its Markdown.
@dynamicMemberLookup
public struct RevisionHistoryEntry: Sendable, Hashable {
  public let revision: RevisionEvent
  /// The unified line diff of the `markdown` field against the parent's (empty when unchanged).
  public let markdownDiff: String
  public let insertions: Int
  public let deletions: Int

  public subscript<T>(dynamicMember field: KeyPath<RevisionEvent, T>) -> T {
    revision[keyPath: field]
  }
}

extension DocumentStore {
  /// Every revision ever written to `id`, oldest first, each with its Markdown diff against the
  /// revision it was made on. Revisions stemmed out of the tree still appear: the log keeps them.
  /// A deletion (a tombstone) has no diff, and a revision made on one (the page restored) is
  /// compared with the text before the deletion.
  public func history(of id: String) throws -> [RevisionHistoryEntry] {
    var markdownByRev: [String: String] = [:]
    var entries: [RevisionHistoryEntry] = []
    for e in try revisionEvents(of: id) {
      let old = e.parentRev.flatMap { markdownByRev[$0] } ?? ""
      guard e.redaction == nil else {
        // A redacted revision has no text: no diff, and the next one is compared with the
        // text before it.
        entries.append(
          RevisionHistoryEntry(revision: e, markdownDiff: "", insertions: 0, deletions: 0))
        markdownByRev[e.rev] = old
        continue
      }
      guard !e.deleted else {
        // A deletion has no text of its own: no diff, and a revision made on it (a restore)
        // is compared with the text the page had before it was deleted.
        entries.append(
          RevisionHistoryEntry(revision: e, markdownDiff: "", insertions: 0, deletions: 0))
        markdownByRev[e.rev] = old
        continue
      }
      let markdown = (try? JSONValue(parsing: e.body))?.objectValue?["markdown"]?.stringValue ?? ""
      let diff = LineDiff(old: old, new: markdown)
      entries.append(
        RevisionHistoryEntry(
          revision: e,
          markdownDiff: diff.hasChanges
            ? diff.unified(oldLabel: e.parentRev ?? "/dev/null", newLabel: e.rev) : "",
          insertions: diff.insertions, deletions: diff.deletions))
      markdownByRev[e.rev] = markdown
    }
    return entries
  }
}
