import JSON
public import Log
public import Projections

#if canImport(FoundationEssentials)
  public import FoundationEssentials
#else
  public import Foundation
#endif

/// One revision of a page as the history shows it: who wrote it, when, from where, and what
/// changed in its Markdown.
public struct RevisionHistoryEntry: Sendable, Hashable {
  public let seq: LogPosition
  public let timestampMicroseconds: Int64
  public let actor: String
  /// "" for a local edit; the peer for a replicated write.
  public let origin: String
  public let rev: String
  /// The revision it was made on, when known (nil for a first revision or a replicated
  /// revision sent without history).
  public let parentRev: String?
  public let deleted: Bool
  /// The unified line diff of the `markdown` field against the parent's (empty when unchanged).
  public let markdownDiff: String
  public let insertions: Int
  public let deletions: Int

  public var timestamp: Date {
    Date(timeIntervalSince1970: Double(timestampMicroseconds) / 1_000_000)
  }
}

extension DocumentStore {
  /// Every revision ever written to `id`, oldest first, each with its Markdown diff against the
  /// revision it was made on. Revisions stemmed out of the tree still appear: the log keeps them.
  public func history(of id: String) throws -> [RevisionHistoryEntry] {
    var markdownByRev: [String: String] = [:]
    var entries: [RevisionHistoryEntry] = []
    for e in try revisionEvents(of: id) {
      let markdown = (try? JSONValue(parsing: e.body))?.objectValue?["markdown"]?.stringValue ?? ""
      let old = e.parentRev.flatMap { markdownByRev[$0] } ?? ""
      let diff = LineDiff(old: old, new: markdown)
      entries.append(
        RevisionHistoryEntry(
          seq: e.seq, timestampMicroseconds: e.timestampMicroseconds, actor: e.actor,
          origin: e.origin, rev: e.rev, parentRev: e.parentRev, deleted: e.deleted,
          markdownDiff: diff.hasChanges
            ? diff.unified(oldLabel: e.parentRev ?? "/dev/null", newLabel: e.rev) : "",
          insertions: diff.insertions, deletions: diff.deletions))
      markdownByRev[e.rev] = markdown
    }
    return entries
  }
}
