import CouchAPI
import JSON
import Log
import Projections
import Wiki

/// One edit of a wiki or one of its pages: a revision event of the log, as recent changes, the
/// Atom feeds and the watch list show it (one per edit, not one per page).
struct RecentEdit: Sendable {
  let seq: LogPosition
  let docID: String
  let wiki: String
  /// The page's title; nil for the wiki's own document (its settings).
  let page: String?
  let rev: String
  let actor: String
  let timestampMicroseconds: Int64
  let deleted: Bool
  /// The edit's own summary (``EditSummary``), if it has one.
  var summary: String? = nil

  /// The page's address (the wiki's for its settings).
  var href: String {
    page.map { WikiSite.pageHref(wiki, $0) } ?? WikiSite.wikiHref(wiki)
  }

  /// The revision this edit wrote, as a page shows it (`?rev=`); nil for a deletion, which has
  /// no text to show, and for the wiki's settings.
  var revisionHref: String? {
    guard let page, !deleted else { return nil }
    return WikiSite.pageHref(wiki, page) + "?rev=" + rev
  }

  /// Where the edit's diff is: the page's history, which gives every revision's diff.
  var diffHref: String? {
    page.map { WikiSite.pageHref(wiki, $0) + "?action=history" }
  }
}

extension WikiController {
  /// The edits `session`'s user may read, newest first: at most `limit` (the first `limit`
  /// after `since` when given, else the last `limit`), of the documents `includes` passes (the wiki documents and pages of every wiki the
  /// user may read when nil). Read from the log (the changes feed's history mode: every
  /// revision event, not one row per document), through the user's access view, so a wiki they
  /// may not read now gives nothing.
  func recentEdits(
    _ session: Session, _ store: DocumentStore, limit: Int = 50, since: LogPosition? = nil,
    includes: (@Sendable (String) -> Bool)? = nil
  ) throws -> [RecentEdit] {
    var options = ChangesOptions()
    options.history = true
    options.limit = limit
    if let since {
      // The first `limit` edits after `since`, read forward from it (the log before it is not
      // read at all), shown newest first.
      options.since = since
    } else {
      options.descending = true
    }
    options.filter = DocumentFilter(
      name: "wikilog-recent", parameters: [:], wakeKeys: [], keys: { _ in [] },
      includes: { id in !id.hasPrefix("_") && (includes?(id) ?? true) })
    let result: ChangesResult
    if let view = try view(session, store) {
      result = try view.changes(options)
    } else {
      result = try store.changes(options)
    }
    return edits(since == nil ? result.results : result.results.reversed(), store)
  }

  /// The edits of history rows (``ChangesOptions/history``), in their order; summaries read
  /// from `store` (a revision's body never changes, so the live store answers for any moment).
  func edits(_ rows: [ChangeRow], _ store: DocumentStore) -> [RecentEdit] {
    var edits: [RecentEdit] = []
    for row in rows {
      let split = WikiID.split(row.id)
      var edit = RecentEdit(
        seq: row.seq, docID: row.id, wiki: split?.wiki ?? row.id, page: split?.title,
        rev: row.changes.first ?? "", actor: row.actor ?? "",
        timestampMicroseconds: row.timestampMicroseconds ?? 0, deleted: row.deleted)
      if split != nil && !row.deleted { edit.summary = Self.summary(of: edit, store) }
      edits.append(edit)
    }
    return edits
  }

  /// The summary the edit wrote itself (not one its body carried over from an earlier edit:
  /// ``EditSummary/summary(of:parentRev:)`` checks it names the revision's parent).
  static func summary(of edit: RecentEdit, _ store: DocumentStore) -> String? {
    var options = GetOptions()
    options.rev = edit.rev
    options.revs = true
    guard let doc = (try? store.get(edit.docID, options: options))?.objectValue else {
      return nil
    }
    var parent: String? = nil
    if let revisions = doc["_revisions"]?.objectValue,
      let start = revisions["start"]?.numberValue?.int64Value,
      let ids = revisions["ids"]?.arrayValue, ids.count > 1, let id = ids[1].stringValue
    {
      parent = "\(start - 1)-\(id)"
    }
    let summary = EditSummary.summary(of: doc, parentRev: parent)
    return summary?.isEmpty == false ? summary : nil
  }

  /// The titles of the wikis of `edits` (their ids when untitled), read once each.
  func wikiTitles(_ edits: [RecentEdit], _ store: DocumentStore) throws -> [String: String] {
    try wikiTitles(edits, WikiQueries(store))
  }

  /// The titles of the wikis of `edits` as `queries` reads them (a store as of a moment too).
  func wikiTitles(_ edits: [RecentEdit], _ queries: WikiQueries) throws -> [String: String] {
    var titles: [String: String] = [:]
    for edit in edits where titles[edit.wiki] == nil {
      let title = try queries.wiki(edit.wiki)?.title ?? ""
      titles[edit.wiki] = title.isEmpty ? edit.wiki : title
    }
    return titles
  }

  /// The template values of an edit's row (recent changes, the watch list); as of `moment`,
  /// the page's and its history's links keep it (a revision's link needs none: it never
  /// changes).
  func editRow(_ edit: RecentEdit, wikiTitle: String, asOf moment: AsOfMoment? = nil)
    -> [String: Any]
  {
    var row: [String: Any] = [
      "href": edit.href + (moment?.query ?? ""), "title": edit.page ?? wikiTitle,
      "wikiTitle": wikiTitle,
      "wikiHref": WikiSite.wikiHref(edit.wiki), "actor": edit.actor,
      "time": WikiSite.time(edit.timestampMicroseconds), "deleted": edit.deleted,
      "settings": edit.page == nil, "created": edit.rev.hasPrefix("1-"), "rev": edit.rev,
      "shortRev": String(edit.rev.prefix(while: { $0 != "-" })) + "-"
        + String(edit.rev.drop(while: { $0 != "-" }).dropFirst().prefix(7)),
    ]
    if let href = edit.revisionHref { row["revisionHref"] = href }
    if let summary = edit.summary { row["summary"] = summary }
    if let href = edit.diffHref {
      row["diffHref"] = href + (moment.map { "&as_of=\($0.position.rawValue)" } ?? "")
    }
    return row
  }
}
