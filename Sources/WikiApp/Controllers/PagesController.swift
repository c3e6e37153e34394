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

/// What one of a page's actions is asked: the page (its wiki, title and id), the signed-in
/// user, the store, the query, and the values every page template takes.
struct PageRequest: Sendable {
  let request: Request
  let wiki: String
  let title: String
  let id: String
  let summary: WikiSummary
  let session: WikiSite.Session
  let store: DocumentStore
  let query: PagesController.PageQuery
  /// The template values of every page of the page (`title`, `wikiTitle`, `wikiHref`,
  /// `pageHref`, `csrf`).
  nonisolated(unsafe) let base: [String: Any]
}

/// What a page's action answers: a page in the layout, or a response of its own (a preview's
/// HTML, an autosave's JSON).
enum PageResult {
  case page(WikiSite.Page)
  case response(Response)
}

/// One of a page's actions, `?action={name}`: what a `GET` (and `HEAD`) shows or a `POST` does.
/// The page controller dispatches by a table of them, which the edit and history controllers
/// fill.
struct PageAction: Sendable {
  enum Verb: Sendable { case get, post }
  let name: String
  let verb: Verb
  let handle: @Sendable (PageRequest) async throws -> PageResult
}

/// A page, `/_wiki/{wiki}/{Page Name}`: its current revision (or `?rev=`), its backlinks, a new
/// page (`_new?title=`), and restoring an old revision; the edit, draft, history, blame and
/// as-of actions are ``EditController``'s and ``HistoryController``'s, dispatched by the
/// table of ``PageAction``s this controller is made with.
struct PagesController: RoutedController {
  let site: WikiSite
  private(set) var table: [String: PageAction]

  init(site: WikiSite, actions: [PageAction]) {
    self.site = site
    self.table = [:]
    var table: [String: PageAction] = [:]
    for action in ownActions + actions { table[Self.key(action.name, action.verb)] = action }
    self.table = table
  }

  static func key(_ name: String, _ verb: PageAction.Verb) -> String {
    (verb == .get ? "GET " : "POST ") + name
  }

  func routes() -> RouteCollection<CouchRequestContext> {
    let routes = RouteCollection(context: CouchRequestContext.self)
    routes.get(":wiki/**") { request, context in try await page(request, context) }
    routes.head(":wiki/**") { request, context in try await page(request, context) }
    routes.post(":wiki/**") { request, context in try await page(request, context) }
    return routes
  }

  struct PageQuery: Decodable, Sendable {
    var action: String?
    var as_of: String?
    var rev: String?
    var title: String?
    /// `no`: a redirect's own page, not where it sends readers.
    var redirect: String?
    /// The page id a redirect came from (its note on this page).
    var redirected_from: String?
  }

  struct RestoreForm: PostedForm {
    var csrf: String?
    var rev: String?
  }

  var ownActions: [PageAction] {
    [
      PageAction(name: "", verb: .get) { r in .page(try site.withWatchAndFeed(try view(r), r)) },
      PageAction(name: "restore", verb: .post) { r in try await restore(r) },
      PageAction(name: "delete", verb: .get) { r in .page(try deleteConfirmation(r)) },
      PageAction(name: "delete", verb: .post) { r in try await delete(r) },
    ]
  }

  func page(_ request: Request, _ context: Context) async throws -> Response {
    let wiki = try WikiSite.parameter(context.parameters.get("wiki"))
    let title = try context.parameters.getCatchAll().map { try WikiSite.parameter($0) }
      .joined(separator: "/")
    let query = try site.query(PageQuery.self, request)
    return try await site.signedIn(request, context) { session, store in
      guard !wiki.hasPrefix("_"),
        let (summary, _) = try self.wiki(wiki, for: session, store)
      else {
        return html(
          notFound("There is no wiki here, or it is not yours to see."), session: session,
          head: request.method == .head)
      }
      if title == "_new" {
        let name = (query.title ?? "").trimmingCharacters(in: .whitespacesAndNewlines)
        guard !name.isEmpty else { throw Redirect(location: Self.wikiHref(wiki)) }
        throw Redirect(location: Self.pageHref(wiki, name) + "?action=edit")
      }
      // No page has a longer id (TouchWiki validation refuses it): say so in the frame rather
      // than look for it. Editing needs room for the user's draft too.
      let editing = request.method == .post || query.action == "edit"
      let longest = max(0, WikiID.maxIDBytes - wiki.utf8.count - 1)
      let limit =
        editing
        ? min(longest, Drafts.maxTitleBytes(user: session.user.name ?? "", wiki: wiki)) : longest
      if title.utf8.count > limit {
        throw Failure(
          status: .badRequest,
          message:
            "This title is \(title.utf8.count) bytes long; page titles in this wiki may be at most \(limit) bytes (about \(limit) letters, fewer with accents or other scripts)\(editing ? "" : ", so no page has it"). Choose a shorter title.",
          heading: "Title too long")
      }
      let wikiTitle = summary.title.isEmpty ? wiki : summary.title
      let r = PageRequest(
        request: request, wiki: wiki, title: title, id: wiki + ":" + title, summary: summary,
        session: session, store: store, query: query,
        base: [
          "title": title, "wikiTitle": wikiTitle, "wikiHref": Self.wikiHref(wiki),
          "pageHref": Self.pageHref(wiki, title), "csrf": session.csrf,
        ])
      let action: PageAction
      if request.method == .post {
        guard session.user.name != nil else {
          throw Failure(
            status: .forbidden, message: "Sign in as a user to edit: drafts are a user's own.")
        }
        guard query.as_of == nil else {
          throw Failure.readOnlyPast
        }
        guard let found = table[Self.key(query.action ?? "", .post)] else {
          _ = try await site.form(TokenForm.self, request, session: session)
          throw Failure(status: .badRequest, message: "Unknown action.")
        }
        action = found
      } else {
        // `?as_of=` shows the page as it was (its history and blame as of then too); an action
        // this table does not know, the page.
        let asOfActions: Set<String> = ["history", "blame"]
        let name =
          query.as_of == nil
          ? query.action ?? ""
          : asOfActions.contains(query.action ?? "") ? query.action! : "as_of"
        action = table[Self.key(name, .get)] ?? table[Self.key("", .get)]!
      }
      switch try await action.handle(r) {
      case .page(var page):
        page.wiki = wiki
        return html(page, session: session, head: request.method == .head)
      case .response(let response): return response
      }
    }
  }

  /// The page now (or `?rev=`): its current revision; a deleted page says who deleted it and
  /// when, and offers to restore it; a page that is only the user's draft says so.
  func view(_ r: PageRequest) throws -> Page {
    if r.query.rev == nil {
      let winner = try r.store.record(r.id)?.tree.winner
      if winner == nil || winner?.isDeleted == true {
        let draft = try r.session.user.name.flatMap {
          try Drafts(r.store).draft(of: $0, page: r.id)
        }
        if let winner { return try deletedPage(r, tombstone: winner.rev.description, draft: draft) }
        if let draft {
          var object = r.base
          object["draftSaved"] = Self.time(draft.updatedMicroseconds)
          return Page(
            status: .notFound, title: "\(r.title) (not published)",
            body: Templates.render("page-unpublished", object))
        }
      }
    }
    if r.query.rev == nil, r.query.redirect != "no", let target = try redirectTarget(r) {
      throw Redirect(
        location: Self.pageHref(target.wiki, target.title) + "?redirected_from="
          + Self.encode(r.id))
    }
    var page = try viewPage(
      wiki: r.wiki, title: r.title, id: r.id, rev: r.query.rev,
      version: r.summary.lastUpdate.rawValue, r.store, base: r.base)
    if let from = r.query.redirected_from, let note = try redirectNote(r, from: from) {
      page.body = note + page.body
    }
    return page
  }

  /// Where the page's current revision redirects to (`redirect_to`, left by a rename), when the
  /// reader may see that wiki; nil otherwise (the redirect's own page is shown).
  func redirectTarget(_ r: PageRequest) throws -> (wiki: String, title: String)? {
    guard let winner = try r.store.record(r.id)?.tree.winner, !winner.isDeleted,
      let doc = try? r.store.get(r.id).objectValue,
      let to = doc["redirect_to"]?.stringValue, to != r.id,
      let (wiki, title) = WikiID.split(to), !wiki.isEmpty, !title.isEmpty,
      try self.wiki(wiki, for: r.session, r.store) != nil
    else { return nil }
    return (wiki, title)
  }

  /// "Redirected from Old": when page `from` (which the reader may see) redirects here.
  func redirectNote(_ r: PageRequest, from: String) throws -> String? {
    guard let (wiki, title) = WikiID.split(from), !title.isEmpty,
      try self.wiki(wiki, for: r.session, r.store) != nil,
      (try? r.store.get(from))?["redirect_to"]?.stringValue == r.id
    else { return nil }
    let href = Self.pageHref(wiki, title)
    let name = wiki == r.wiki ? title : from
    return
      "<p id=\"redirected-from\" class=\"bar\">Redirected from <a id=\"redirect-source\" href=\"\(WikiSite.escape(href))?redirect=no\">\(WikiSite.escape(name))</a> (<a id=\"redirect-history\" href=\"\(WikiSite.escape(href))?action=history\">its history</a>).</p>"
  }

  /// A page whose winning revision is `tombstone`, a deletion: who deleted it and when (from
  /// the log), its history, and Restore (the last revision before the deletion, written again).
  func deletedPage(_ r: PageRequest, tombstone: String, draft: Draft?) throws -> Page {
    let events = try r.store.revisionEvents(of: r.id)
    let byRev = Dictionary(events.map { ($0.rev, $0) }, uniquingKeysWith: { a, _ in a })
    let deletion = byRev[tombstone]
    var object = r.base
    object["deletedBy"] = deletion?.actor ?? "someone"
    object["deletedAt"] =
      deletion.map { WikiSite.exactTime($0.timestampMicroseconds) } ?? "a time the log does not say"
    if let last = Self.lastLive(before: tombstone, byRev) {
      object["lastRev"] = last.rev
      object["canRestore"] = r.session.user.name != nil
    }
    if let draft { object["draftSaved"] = Self.time(draft.updatedMicroseconds) }
    return Page(
      status: .notFound, title: "\(r.title) (deleted)",
      body: Templates.render("page-deleted", object))
  }

  /// The revision a deletion was made on, up its ancestry past other deletions and redacted
  /// revisions (which have no text to restore); nil when there is none.
  static func lastLive(before tombstone: String, _ byRev: [String: RevisionEvent])
    -> RevisionEvent?
  {
    var next = byRev[tombstone]?.parentRev
    var seen: Set<String> = []
    while let rev = next, let e = byRev[rev], seen.insert(rev).inserted {
      if !e.deleted && e.redaction == nil { return e }
      next = e.parentRev
    }
    return nil
  }

  /// `?action=delete`: asks first, in the app's frame, what deleting does and does not do.
  func deleteConfirmation(_ r: PageRequest) throws -> Page {
    let (wiki, title, id, store) = (r.wiki, r.title, r.id, r.store)
    guard r.session.user.name != nil else {
      throw Failure(status: .forbidden, message: "Sign in as a user to delete pages.")
    }
    guard let record = try store.record(id), let winner = record.tree.winner, !winner.isDeleted
    else { return try view(r) }
    try Self.refuseConflicted(record, action: "delete")
    var object = r.base
    object["rev"] = winner.rev.description
    let backlinks = try WikiQueries(store).backlinks(to: title, in: wiki)
    if !backlinks.isEmpty {
      object["backlinkCount"] = backlinks.count
      object["backlinkText"] =
        "the " + (backlinks.count == 1 ? "page that links" : "\(backlinks.count) pages that link")
    }
    return Page(title: "Delete \(title)?", body: Templates.render("page-delete", object))
  }

  /// A page with conflicting live revisions is not deleted or renamed: acting on the winner
  /// would leave another one as the page.
  static func refuseConflicted(_ record: DocumentRecord, action: String) throws {
    guard record.tree.leaves.filter({ !$0.isDeleted }).count > 1 else { return }
    throw Failure(
      status: .conflict,
      message:
        "This page has conflicting revisions: to \(action) the current one would leave another as the page. Keep one on the wiki’s Conflicts page first, then \(action) it.",
      heading: "Resolve the conflict first")
  }

  /// What Delete and Rename act on: the page's live, unconflicted current revision, which must
  /// be `rev`, the one their form showed (`changed` otherwise). Each refusal writes nothing.
  static func checkCurrentRevision(
    of id: String, title: String, in store: DocumentStore, rev: String?, action: String,
    changed: Failure
  ) throws {
    guard let record = try store.record(id), let winner = record.tree.winner, !winner.isDeleted
    else {
      throw Failure(
        status: .conflict,
        message: "The page “\(title)” is not there to \(action): nothing was written.",
        heading: "Nothing to \(action)")
    }
    try refuseConflicted(record, action: action)
    guard winner.rev.description == rev else { throw changed }
  }

  /// The posted Delete: a CouchDB deletion (a tombstone on the revision the confirmation
  /// showed, naming who deleted it), through the checked write path (the access rules before,
  /// and again in the write transaction, as the signed-in user).
  func delete(_ r: PageRequest) async throws -> PageResult {
    let (wiki, title, id, session, store) = (r.wiki, r.title, r.id, r.session, r.store)
    let form = try await site.form(RestoreForm.self, r.request, session: session)
    guard let rev = form.rev, !rev.isEmpty else {
      throw Failure(status: .badRequest, message: "Which revision? Delete the page from its page.")
    }
    let changed = Failure(
      status: .conflict,
      message:
        "The page changed since you asked to delete it: nothing was written. Read its latest text, then delete it again if you still mean to.",
      heading: "The page changed")
    try Self.checkCurrentRevision(
      of: id, title: title, in: store, rev: rev, action: "delete", changed: changed)
    let tombstone = JSONObject([
      "_deleted": .bool(true), "type": .string("page"), "wiki_id": .string(wiki),
      "updated_by": .string(session.user.name ?? ""), "updated_at": .string(Timestamp.iso8601()),
    ])
    try checkWrite(session, id: id, body: nil, store)
    do {
      _ = try await store.putAsync(
        JSONValue.object(tombstone).serialized(), id: id, rev: rev, actor: session.actor,
        origin: session.origin)
    } catch let error as StoreError where error.code == .conflict {
      throw changed
    }
    throw Redirect(location: Self.pageHref(wiki, title))
  }

  /// When revision `rev` of `id` was written, from the log (0 when it does not say).
  static func revisionTime(_ rev: String, _ id: String, _ store: DocumentStore) -> Int64 {
    ((try? store.revisionEvents(of: id)) ?? []).first { $0.rev == rev }?.timestampMicroseconds
      ?? 0
  }

  /// `version`: the wiki's last update, which changes whenever a page of it is created,
  /// changed or deleted (and with it which links are to missing pages, and the backlinks).
  func viewPage(
    wiki: String, title: String, id: String, rev: String?, version: UInt64,
    _ store: DocumentStore, base: [String: Any]
  ) throws -> Page {
    // The current revision's page is the same for everyone who may see it until the page or
    // its wiki changes: it is kept whole, keyed by both (the tree alone says which revision
    // wins and whether it has conflicts; no body is read).
    var wholeKey: String? = nil
    if rev == nil {
      guard let record = try store.record(id), let winner = record.tree.winner,
        !winner.isDeleted
      else { return missing(wiki, title) }
      let live = record.tree.leaves.filter { !$0.isDeleted }.count
      let key = "page:\(id)@\(winner.rev.description)@\(version)@\(live)"
      if let body = cache.get(key) {
        return Page(title: title, body: body)
      }
      wholeKey = key
    }
    let doc: JSONObject
    do {
      doc =
        try store.get(id, options: GetOptions(rev: rev, conflicts: true)).objectValue
        ?? JSONObject()
    } catch let error as StoreError where error.code == .notFound {
      if error.reason == "redacted" {
        return notFound(
          "This revision of “\(title)” was redacted: its text is erased. The page’s history says who redacted it, and when."
        )
      }
      return missing(wiki, title)
    }
    if doc["_deleted"] == .bool(true) { return missing(wiki, title) }
    let currentRev = doc["_rev"]?.stringValue ?? ""
    let markdown = doc["markdown"]?.stringValue ?? ""
    var object = base
    let files = self.files(of: doc, id: id, rev: rev)
    let headings = PageHeadings.arranged(
      try rendered(
        markdown, wiki: wiki, key: "\(id)@\(currentRev)@\(version)", store, files: files))
    object["html"] = headings.html
    object["titleHeading"] = headings.titleHeading
    object["files"] = files.map(\.template)
    object["hasFiles"] = !files.isEmpty
    object["uploadURL"] =
      "/" + PercentDecoding.encode(options.database) + "/" + PercentDecoding.encode(id)
    object["rev"] = currentRev
    let (by, at) = Self.lastChange(doc, id: id, rev: currentRev, store)
    object["updatedBy"] = by
    object["updatedAt"] = at
    object["conflicted"] = !(doc["_conflicts"]?.arrayValue?.isEmpty ?? true)
    if let rev, let winner = try store.record(id)?.tree.winner, winner.rev.description != rev {
      object["oldRev"] = rev
    }
    object["backlinks"] = try WikiQueries(store).backlinks(to: title, in: wiki).map {
      ["href": Self.pageHref(wiki, $0), "title": $0]
    }
    let body = Templates.render("page", object)
    if let wholeKey { cache.put(wholeKey, body) }
    return Page(title: title, body: body)
  }

  /// The posted Restore: revision `rev`'s text written as the page's next revision (on the
  /// current one; on a deleted page, on its deletion, which brings the page back with that
  /// revision's fields).
  func restore(_ r: PageRequest) async throws -> PageResult {
    let (wiki, title, id, session, store) = (r.wiki, r.title, r.id, r.session, r.store)
    let user = session.user.name ?? ""
    let form = try await site.form(RestoreForm.self, r.request, session: session)
    guard let rev = form.rev, !rev.isEmpty else {
      throw Failure(status: .badRequest, message: "Which revision? Restore one from the history.")
    }
    let old: JSONObject
    do {
      old = try store.get(id, options: GetOptions(rev: rev)).objectValue ?? JSONObject()
    } catch let error as StoreError where error.code == .notFound {
      throw Failure(
        status: .notFound,
        message: "That revision’s text is not kept (or never was): nothing was written.",
        heading: "No such revision")
    }
    guard old["_deleted"] != .bool(true) else {
      throw Failure(
        status: .badRequest,
        message: "That revision is a deletion: restore one from before it. Nothing was written.")
    }
    guard let record = try store.record(id), let winner = record.tree.winner else {
      return .page(missing(wiki, title))
    }
    var body: JSONObject
    if winner.isDeleted {
      body = old
    } else {
      body = try store.get(id).objectValue ?? JSONObject()
      body["markdown"] = old["markdown"] ?? .string("")
    }
    // A live page keeps the files it has now (their stubs: the store keeps them from the
    // current revision); only the text goes back. A deleted page comes back with its text.
    body.members.removeAll {
      $0.key.hasPrefix("_") && !($0.key == "_attachments" && !winner.isDeleted)
    }
    body["updated_by"] = .string(user)
    body["updated_at"] = .string(Timestamp.iso8601())
    EditSummary.set(
      "restored the revision of \(WikiSite.plainTime(Self.revisionTime(rev, id, store)))",
      on: winner.rev.description, in: &body)
    try checkWrite(session, id: id, body: body, store)
    do {
      // A deleted page is written again without a `_rev`, as CouchDB recreates a deleted
      // document: the new revision extends the deletion's branch (and is a conflict if the
      // page came back meanwhile).
      _ = try await store.putAsync(
        JSONValue.object(body).serialized(), id: id,
        rev: winner.isDeleted ? nil : winner.rev.description, actor: session.actor,
        origin: session.origin)
    } catch let error as StoreError where error.code == .conflict {
      throw Failure(
        status: .conflict,
        message: "The page changed meanwhile: nothing was written. Look at it again, then restore.",
        heading: "The page changed")
    }
    throw Redirect(location: Self.pageHref(wiki, title))
  }
}
