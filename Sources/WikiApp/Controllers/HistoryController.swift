import Auth
import CouchAPI
import Formats
import Foundation
import HTTPTypes
import Hummingbird
import JSON
import Log
import NIOCore
import NIOPosix
import Projections
import Query
import Replication
import RevTree
import Wiki
import WikiMarkdown

/// A page's past: `?action=history` (every revision, who and when, with its diff, a deletion
/// among them, and a way into the wiki as of each), `?action=blame` (each line with the
/// revision that wrote it) and `?as_of=` (the page as it was at a seq or a time, read only,
/// every link keeping the moment; history and blame take it too). Actions of
/// ``PagesController``'s table.
struct HistoryController: WikiController {
  let site: WikiSite

  var actions: [PageAction] {
    [
      PageAction(name: "history", verb: .get) { r in try history(r) },
      PageAction(name: "blame", verb: .get) { r in try await blamePage(r) },
      PageAction(name: "as_of", verb: .get) { r in .page(try await pageAsOf(r)) },
      PageAction(name: "compare", verb: .get) { r in .page(try compare(r)) },
    ]
  }

  /// `?action=history` (with `as_of`: the revisions written up to that moment).
  func history(_ r: PageRequest) throws -> PageResult {
    let (wiki, title, id, store) = (r.wiki, r.title, r.id, r.store)
    var base = r.base
    let moment = try r.query.as_of.map { try self.moment($0, store, r.session) }
    var entries = try store.history(of: id)
    if let moment { entries = entries.filter { $0.seq <= moment.position } }
    guard !entries.isEmpty else {
      var page = missing(wiki, title)
      if let moment {
        page = notFound("The page “\(title)” had no revisions then.")
        page.asOf = moment
        page.asOfExit = Self.pageHref(wiki, title) + "?action=history"
      }
      return .page(page)
    }
    let viewable = entries.filter { !$0.deleted && $0.redaction == nil }.map(\.rev)
    let to = viewable.last
    let from = viewable.count > 1 ? viewable[viewable.count - 2] : nil
    let readable = Set(viewable)
    let canCompare = moment == nil && viewable.count > 1
    base["canCompare"] = canCompare
    base["revisions"] = entries.reversed().map { e -> [String: Any] in
      var row: [String: Any] = [
        "rev": e.rev, "shortRev": Self.shortRev(e.rev), "actor": e.actor,
        "time": Self.time(e.timestampMicroseconds),
        "plainTime": WikiSite.plainTime(e.timestampMicroseconds),
        "origin": e.origin.isEmpty ? "" : "from \(e.origin)", "deleted": e.deleted,
        "viewable": !e.deleted && e.redaction == nil, "seq": String(e.seq.rawValue),
        "pageHref": Self.pageHref(wiki, title),
        "fromChecked": e.rev == from, "toChecked": e.rev == to, "canCompare": canCompare,
      ]
      if !e.markdownDiff.isEmpty { row["diff"] = e.markdownDiff }
      // (An empty string is a true section in Mustache: only a description that says something.)
      if !e.description.isEmpty { row["description"] = e.description }
      if moment == nil, let parent = e.parentRev, readable.contains(parent),
        readable.contains(e.rev), !e.markdownDiff.isEmpty
      {
        row["diffHref"] =
          Self.pageHref(wiki, title) + "?action=compare&from=" + Self.encode(parent) + "&to="
          + Self.encode(e.rev)
      }
      if let r = e.redaction {
        row["redaction"] = [
          "redactedBy": r.actor, "redactedAt": Self.time(r.timestampMicroseconds),
          "reason": r.reason.isEmpty ? "" : " (\(r.reason))",
        ]
      }
      return row
    }
    if moment == nil, let current = try? store.get(id).objectValue {
      Self.moveLinks(current, wiki: wiki, into: &base)
    }
    if base["renamedFrom"] == nil, let first = entries.first(where: { !$0.deleted }),
      let body = (try? JSONValue(parsing: first.body))?.objectValue
    {
      Self.moveLinks(body, wiki: wiki, into: &base, redirect: false)
    }
    var page = Page(title: "History of \(title)", body: "")
    if let moment {
      base["asOf"] = moment.parameter
      base["asOfQuery"] = moment.query
      page.asOf = moment
      page.asOfExit = Self.pageHref(wiki, title) + "?action=history"
    }
    page.body = Templates.render("history", base)
    return .page(page)
  }

  /// The links of a renamed page's history: to the page it was renamed from (`renamed_from`),
  /// or, for a redirect, to the page it moved to (`redirect_to`).
  static func moveLinks(
    _ body: JSONObject, wiki: String, into base: inout [String: Any], redirect: Bool = true
  ) {
    if let from = body["renamed_from"]?.stringValue, let (w, t) = WikiID.split(from) {
      base["renamedFrom"] = from
      base["renamedFromHref"] = pageHref(w, t)
      base["renamedFromName"] = w == wiki ? t : from
    }
    if redirect, let to = body["redirect_to"]?.stringValue, let (w, t) = WikiID.split(to) {
      base["redirectTo"] = to
      base["redirectToHref"] = pageHref(w, t) + "?action=history"
      base["redirectToName"] = w == wiki ? t : to
    }
  }

  /// A revision id short enough to sit beside its time: `5-2cdff9fe`.
  static func shortRev(_ rev: String) -> String {
    guard let dash = rev.firstIndex(of: "-") else { return rev }
    return String(rev[...dash]) + String(rev[rev.index(after: dash)...].prefix(8))
  }

  struct CompareQuery: Decodable {
    var from: String?
    var to: String?
    var view: String?
  }

  /// `?action=compare&from=A&to=B` (`&view=side` side by side): the two revisions' Markdown
  /// compared line by line, the words that changed in a changed line marked.
  func compare(_ r: PageRequest) throws -> Page {
    let (wiki, title, id, store) = (r.wiki, r.title, r.id, r.store)
    let q = try site.query(CompareQuery.self, r.request)
    guard let from = q.from, let to = q.to, !from.isEmpty, !to.isEmpty else {
      throw Failure(
        status: .badRequest,
        message: "Choose two revisions to compare in the page’s history.",
        heading: "Which revisions?")
    }
    let entries = try store.history(of: id)
    guard let old = entries.first(where: { $0.rev == from }),
      let new = entries.first(where: { $0.rev == to })
    else {
      throw Failure(
        status: .notFound,
        message: "The page “\(title)” has no such revision: choose two in its history.",
        heading: "No such revision")
    }
    guard let oldText = try store.markdown(of: id, rev: from),
      let newText = try store.markdown(of: id, rev: to)
    else {
      throw Failure(
        status: .badRequest,
        message:
          "One of the two revisions is a deletion or was redacted: it has no text to compare.",
        heading: "No text to compare")
    }
    let diff = DiffHTML(old: oldText, new: newText)
    let inline = q.view != "side"
    var object = r.base
    let page = Self.pageHref(wiki, title)
    let query = "?action=compare&from=" + Self.encode(from) + "&to=" + Self.encode(to)
    object["inline"] = inline
    object["inlineHref"] = page + query
    object["sideHref"] = page + query + "&view=side"
    object["same"] = !diff.diff.hasChanges
    object["table"] = inline ? diff.inline : diff.sideBySide
    object["stats"] =
      "\(WikiSite.count(diff.diff.insertions, "line")) added, \(WikiSite.count(diff.diff.deletions, "line")) removed"
    for (key, e) in [("from", old), ("to", new)] {
      object[key + "Rev"] = e.rev
      object[key + "Short"] = Self.shortRev(e.rev)
      object[key + "Time"] = Self.time(e.timestampMicroseconds)
      object[key + "Actor"] = e.actor
      if !e.description.isEmpty { object[key + "Summary"] = e.description }
    }
    return Page(title: "Changes to \(title)", body: Templates.render("compare", object))
  }

  /// `?action=blame` (with `as_of`: the page's text then, each line with the revision that
  /// wrote it).
  func blamePage(_ r: PageRequest) async throws -> PageResult {
    let (wiki, title, id, store) = (r.wiki, r.title, r.id, r.store)
    var base = r.base
    let moment = try r.query.as_of.map { try self.moment($0, store, r.session) }
    var winner: String? = nil
    if let moment {
      winner = try await withAsOf(moment, store) { view in
        try? view.get(id)["_rev"]?.stringValue
      }
    }
    guard moment == nil || winner != nil, let lines = try blame(id, store, winner: winner) else {
      var page = missing(wiki, title)
      if let moment {
        page = notFound("The page “\(title)” did not exist then.")
        page.asOf = moment
        page.asOfExit = Self.pageHref(wiki, title) + "?action=blame"
      } else if try store.record(id)?.tree.winner?.isDeleted == true {
        page = notFound(
          "The page “\(title)” was deleted: it has no text to blame. Its history says who deleted it, and when."
        )
      }
      return .page(page)
    }
    let described = Dictionary(
      try store.history(of: id).map { ($0.rev, $0.description) }, uniquingKeysWith: { a, _ in a })
    var shown: Set<String> = []
    base["lines"] = lines.map { line -> [String: Any] in
      // The summary beside the first line of each revision: the rest repeat it.
      let first = shown.insert(line.rev).inserted
      var row: [String: Any] = [
        "rev": line.rev, "shortRev": Self.shortRev(line.rev), "actor": line.actor,
        "time": Self.time(line.micros), "text": line.text,
        "pageHref": Self.pageHref(wiki, title),
      ]
      if first, let summary = described[line.rev], !summary.isEmpty { row["summary"] = summary }
      return row
    }
    var page = Page(title: "Blame of \(title)", body: "")
    if let moment {
      base["asOfQuery"] = moment.query
      page.asOf = moment
      page.asOfExit = Self.pageHref(wiki, title) + "?action=blame"
    }
    page.body = Templates.render("blame", base)
    return .page(page)
  }

  /// What an as-of page needs from the view of its moment, read before the view closes.
  struct PageThen: Sendable {
    var doc: JSONObject? = nil
    var deleted = false
    var html = ""
    var files: [PageFile] = []
    var backlinks: [String] = []
  }

  /// `?as_of=`: the page as it was at a moment, read only: its text (its links to the pages
  /// as they were then, keeping the moment), its files then, what linked to it then.
  func pageAsOf(_ r: PageRequest) async throws -> Page {
    let (wiki, title, id, store) = (r.wiki, r.title, r.id, r.store)
    let moment = try self.moment(r.query.as_of ?? "", store, r.session)
    let then: PageThen = try await withAsOf(moment, store) { view in
      var then = PageThen()
      guard let doc = try? view.get(id).objectValue, doc["_deleted"] != .bool(true) else {
        then.deleted = (try? view.record(id))?.tree.winner?.isDeleted ?? false
        return then
      }
      let queries = try WikiQueries(view)
      then.doc = doc
      then.files = self.files(of: doc, id: id, rev: doc["_rev"]?.stringValue)
      then.html = try self.rendered(
        doc["markdown"]?.stringValue ?? "", wiki: wiki, key: nil, store, files: then.files,
        asOf: (moment, queries))
      then.backlinks = try queries.backlinks(to: title, in: wiki)
      return then
    }
    guard let doc = then.doc else {
      var page = notFound(
        then.deleted
          ? "The page “\(title)” had been deleted by then: its history says who deleted it, and when."
          : "The page “\(title)” did not exist then.")
      page.asOf = moment
      page.asOfExit = Self.pageHref(wiki, title)
      return page
    }
    var object = r.base
    let headings = PageHeadings.arranged(then.html)
    object["html"] = headings.html
    object["titleHeading"] = headings.titleHeading
    object["files"] = then.files.map(\.template)
    object["hasFiles"] = !then.files.isEmpty
    object["rev"] = doc["_rev"]?.stringValue ?? ""
    let (by, at) = Self.lastChange(doc, id: id, rev: doc["_rev"]?.stringValue ?? "", store)
    object["updatedBy"] = by
    object["updatedAt"] = at
    object["readOnly"] = true
    object["asOf"] = moment.parameter
    object["asOfQuery"] = moment.query
    object["backlinks"] = then.backlinks.map {
      ["href": Self.pageHref(wiki, $0) + moment.query, "title": $0]
    }
    var page = Page(title: "\(title) (as of event \(moment.parameter))", body: "")
    page.body = Templates.render("page", object)
    page.asOf = moment
    page.asOfExit = Self.pageHref(wiki, title)
    return page
  }

  /// Each line of the page's current text with the revision that wrote it, walking the
  /// winner's ancestry in the log (stemmed revisions included) and diffing each revision
  /// against its parent.
  ///
  /// `winner`: the revision to start from (the winner as of a moment); the current winner by
  /// default.
  func blame(_ id: String, _ store: DocumentStore, winner: String? = nil) throws
    -> [(rev: String, actor: String, micros: Int64, text: String)]?
  {
    let events = try store.revisionEvents(of: id)
    guard let winner = winner ?? (try? store.get(id)["_rev"]?.stringValue) else { return nil }
    let byRev = Dictionary(events.map { ($0.rev, $0) }, uniquingKeysWith: { a, _ in a })
    var chain: [RevisionEvent] = []
    var next: String? = winner
    while let rev = next, let e = byRev[rev] {
      chain.append(e)
      next = e.parentRev
    }
    var lines: [(rev: String, actor: String, micros: Int64, text: String)] = []
    var text = ""
    // A redacted revision has no text: its lines are the next revision's that has them.
    for e in chain.reversed() where e.redaction == nil {
      let markdown =
        (try? JSONValue(parsing: e.body))?.objectValue?["markdown"]?.stringValue ?? ""
      var updated: [(rev: String, actor: String, micros: Int64, text: String)] = []
      for edit in LineDiff(old: text, new: markdown).edits {
        switch edit.operation {
        case .equal: updated.append(contentsOf: lines[edit.oldRange])
        case .insert:
          for line in edit.lines {
            updated.append((e.rev, e.actor, e.timestampMicroseconds, line))
          }
        case .delete: break
        }
      }
      lines = updated
      text = markdown
    }
    return lines.map { ($0.rev, $0.actor, $0.micros, String($0.text.trimmingSuffix("\n"))) }
  }
}

extension String {
  func trimmingSuffix(_ suffix: String) -> Substring {
    hasSuffix(suffix) ? dropLast(suffix.count) : self[...]
  }
}
