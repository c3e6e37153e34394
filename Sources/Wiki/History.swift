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
  /// The edit summary its author wrote with it (``EditSummary``), nil when none.
  public var summary: String? = nil
  /// How its files differ from the parent's: added, removed, replaced (by name, in order).
  public var fileChanges: [FileChange] = []

  /// What the revision did, in words: its summary, else its files' changes ("added
  /// picture.png"), else "" (the diff says it).
  public var description: String {
    if let summary { return summary }
    return fileChanges.map(\.description).joined(separator: "; ")
  }

  public subscript<T>(dynamicMember field: KeyPath<RevisionEvent, T>) -> T {
    revision[keyPath: field]
  }
}

/// A change to a page's files between a revision and its parent.
public struct FileChange: Sendable, Hashable, CustomStringConvertible {
  public enum Kind: String, Sendable, Hashable {
    case added, removed, replaced
  }
  public let kind: Kind
  public let name: String

  public init(_ kind: Kind, _ name: String) {
    self.kind = kind
    self.name = name
  }

  /// "added picture.png", "removed notes.pdf", "replaced plan.png".
  public var description: String { "\(kind.rawValue) \(name)" }

  /// The changes from `old` to `new` (name to content digest): the removed in `old`'s order,
  /// then the added and replaced in `new`'s.
  public static func changes(from old: [(String, [UInt8])], to new: [(String, [UInt8])])
    -> [FileChange]
  {
    let before = Dictionary(old, uniquingKeysWith: { a, _ in a })
    let after = Dictionary(new, uniquingKeysWith: { a, _ in a })
    var out: [FileChange] = []
    for (name, _) in new {
      if let digest = before[name] {
        if digest != after[name] { out.append(FileChange(.replaced, name)) }
      } else {
        out.append(FileChange(.added, name))
      }
    }
    for (name, _) in old where after[name] == nil { out.append(FileChange(.removed, name)) }
    return out
  }
}

extension DocumentStore {
  /// The Markdown of revision `rev` of page `id` as the log keeps it (a stemmed revision's
  /// too): nil when the page never had that revision, or it is a deletion or redacted.
  public func markdown(of id: String, rev: String) throws -> String? {
    guard let e = try revisionEvents(of: id).first(where: { $0.rev == rev }), !e.deleted,
      e.redaction == nil
    else { return nil }
    return (try? JSONValue(parsing: e.body))?.objectValue?["markdown"]?.stringValue ?? ""
  }

  /// Every revision ever written to `id`, oldest first, each with its Markdown diff against the
  /// revision it was made on. Revisions stemmed out of the tree still appear: the log keeps them.
  /// A deletion (a tombstone) has no diff, and a revision made on one (the page restored) is
  /// compared with the text before the deletion.
  public func history(of id: String) throws -> [RevisionHistoryEntry] {
    var markdownByRev: [String: String] = [:]
    var filesByRev: [String: [(String, [UInt8])]] = [:]
    var entries: [RevisionHistoryEntry] = []
    let events = try revisionEvents(of: id)
    let files: [String: [(String, [UInt8])]] = try read { txn in
      var out: [String: [(String, [UInt8])]] = [:]
      for e in events where !e.deleted && e.redaction == nil {
        out[e.rev] = try attachments(at: e.seq.rawValue, txn: txn).map { ($0.name, $0.md5) }
      }
      return out
    }
    for e in events {
      let old = e.parentRev.flatMap { markdownByRev[$0] } ?? ""
      let oldFiles = e.parentRev.flatMap { filesByRev[$0] } ?? []
      guard e.redaction == nil else {
        // A redacted revision has no text: no diff, and the next one is compared with the
        // text before it.
        entries.append(
          RevisionHistoryEntry(revision: e, markdownDiff: "", insertions: 0, deletions: 0))
        markdownByRev[e.rev] = old
        filesByRev[e.rev] = oldFiles
        continue
      }
      guard !e.deleted else {
        // A deletion has no text of its own: no diff, and a revision made on it (a restore)
        // is compared with the text the page had before it was deleted.
        entries.append(
          RevisionHistoryEntry(revision: e, markdownDiff: "", insertions: 0, deletions: 0))
        markdownByRev[e.rev] = old
        filesByRev[e.rev] = oldFiles
        continue
      }
      let body = (try? JSONValue(parsing: e.body))?.objectValue ?? JSONObject()
      let markdown = body["markdown"]?.stringValue ?? ""
      let diff = LineDiff(old: old, new: markdown)
      let newFiles = files[e.rev] ?? []
      entries.append(
        RevisionHistoryEntry(
          revision: e,
          markdownDiff: diff.hasChanges
            ? diff.unified(oldLabel: e.parentRev ?? "/dev/null", newLabel: e.rev) : "",
          insertions: diff.insertions, deletions: diff.deletions,
          summary: EditSummary.summary(of: body, parentRev: e.parentRev),
          fileChanges: FileChange.changes(from: oldFiles, to: newFiles)))
      markdownByRev[e.rev] = markdown
      filesByRev[e.rev] = newFiles
    }
    return entries
  }
}
