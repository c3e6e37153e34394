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

/// A page's past: `?action=history` (every revision, who and when, with its diff),
/// `?action=blame` (each line with the revision that wrote it) and `?as_of=` (the page as it
/// was at a seq or a time, read only). Actions of ``PagesController``'s table.
struct HistoryController: WikiController {
  let site: WikiSite

  var actions: [PageAction] {
    [
      PageAction(name: "history", verb: .get) { r in try history(r) },
      PageAction(name: "blame", verb: .get) { r in try blamePage(r) },
      PageAction(name: "as_of", verb: .get) { r in
        .page(
          try await pageAsOf(
            wiki: r.wiki, title: r.title, id: r.id, asOf: r.query.as_of ?? "", r.store,
            base: r.base))
      },
    ]
  }

  func history(_ r: PageRequest) throws -> PageResult {
    let (wiki, title, id, store) = (r.wiki, r.title, r.id, r.store)
    var base = r.base
    let entries = try store.history(of: id)
    guard !entries.isEmpty else { return .page(missing(wiki, title)) }
    base["revisions"] = entries.reversed().map { e -> [String: Any] in
      var row: [String: Any] = [
        "rev": e.rev, "actor": e.actor, "time": Self.time(e.timestampMicroseconds),
        "origin": e.origin.isEmpty ? "" : "from \(e.origin)", "deleted": e.deleted,
        "pageHref": Self.pageHref(wiki, title),
      ]
      if !e.markdownDiff.isEmpty { row["diff"] = e.markdownDiff }
      if let r = e.redaction {
        row["redaction"] = [
          "redactedBy": r.actor, "redactedAt": Self.time(r.timestampMicroseconds),
          "reason": r.reason.isEmpty ? "" : " (\(r.reason))",
        ]
      }
      return row
    }
    return .page(Page(title: "History of \(title)", body: Templates.render("history", base)))
  }

  func blamePage(_ r: PageRequest) throws -> PageResult {
    let (wiki, title, id, store) = (r.wiki, r.title, r.id, r.store)
    var base = r.base
    guard let lines = try blame(id, store) else { return .page(missing(wiki, title)) }
    base["lines"] = lines.map { line -> [String: Any] in
      [
        "rev": line.rev, "shortRev": String(line.rev.prefix(10)), "actor": line.actor,
        "time": Self.time(line.micros), "text": line.text,
        "pageHref": Self.pageHref(wiki, title),
      ]
    }
    return .page(Page(title: "Blame of \(title)", body: Templates.render("blame", base)))
  }

  func pageAsOf(
    wiki: String, title: String, id: String, asOf: String, _ store: DocumentStore,
    base: [String: Any]
  ) async throws -> Page {
    let doc: JSONObject? = try await withAsOf(asOf, store) { view in
      do { return try view.get(id).objectValue } catch { return nil }
    }
    guard let doc, doc["_deleted"] != .bool(true) else {
      var page = notFound("The page “\(title)” did not exist then.")
      page.asOf = asOf
      page.asOfExit = Self.pageHref(wiki, title)
      return page
    }
    var object = base
    // The files the page had then, by that revision.
    let files = self.files(of: doc, id: id, rev: doc["_rev"]?.stringValue)
    object["html"] = try rendered(
      doc["markdown"]?.stringValue ?? "", wiki: wiki, key: nil, store, files: files)
    object["files"] = files.map(\.template)
    object["hasFiles"] = !files.isEmpty
    object["rev"] = doc["_rev"]?.stringValue ?? ""
    let (by, at) = Self.lastChange(doc, id: id, rev: doc["_rev"]?.stringValue ?? "", store)
    object["updatedBy"] = by
    object["updatedAt"] = at
    object["readOnly"] = true
    var page = Page(title: "\(title) (as of \(asOf))", body: Templates.render("page", object))
    page.asOf = asOf
    page.asOfExit = Self.pageHref(wiki, title)
    return page
  }

  /// Each line of the page's current text with the revision that wrote it, walking the
  /// winner's ancestry in the log (stemmed revisions included) and diffing each revision
  /// against its parent.
  func blame(_ id: String, _ store: DocumentStore) throws
    -> [(rev: String, actor: String, micros: Int64, text: String)]?
  {
    let events = try store.revisionEvents(of: id)
    guard let winner = try? store.get(id)["_rev"]?.stringValue else { return nil }
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
