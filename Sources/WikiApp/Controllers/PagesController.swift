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
  }

  struct RestoreForm: PostedForm {
    var csrf: String?
    var rev: String?
  }

  var ownActions: [PageAction] {
    [
      PageAction(name: "", verb: .get) { r in .page(try view(r)) },
      PageAction(name: "restore", verb: .post) { r in try await restore(r) },
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
        guard let found = table[Self.key(query.action ?? "", .post)] else {
          _ = try await site.form(TokenForm.self, request, session: session)
          throw Failure(status: .badRequest, message: "Unknown action.")
        }
        action = found
      } else {
        // `?as_of=` shows the page as it was; an action this table does not know, the page.
        let name = query.as_of != nil ? "as_of" : query.action ?? ""
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

  func view(_ r: PageRequest) throws -> Page {
    try viewPage(
      wiki: r.wiki, title: r.title, id: r.id, rev: r.query.rev,
      version: r.summary.lastUpdate.rawValue, r.store, base: r.base)
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
    object["html"] = try rendered(
      markdown, wiki: wiki, key: "\(id)@\(currentRev)@\(version)", store, files: files)
    object["files"] = files.map(\.template)
    object["hasFiles"] = !files.isEmpty
    object["rev"] = currentRev
    let (by, at) = Self.lastChange(doc, id: id, rev: currentRev, store)
    object["updatedBy"] = by
    object["updatedAt"] = at
    object["conflicted"] = !(doc["_conflicts"]?.arrayValue?.isEmpty ?? true)
    if let rev, let winner = try? store.get(id)["_rev"]?.stringValue, winner != rev {
      object["oldRev"] = rev
    }
    object["backlinks"] = try WikiQueries(store).backlinks(to: title, in: wiki).map {
      ["href": Self.pageHref(wiki, $0), "title": $0]
    }
    let body = Templates.render("page", object)
    if let wholeKey { cache.put(wholeKey, body) }
    return Page(title: title, body: body)
  }

  func restore(_ r: PageRequest) async throws -> PageResult {
    let (wiki, title, id, session, store) = (r.wiki, r.title, r.id, r.session, r.store)
    let user = session.user.name ?? ""
    let form = try await site.form(RestoreForm.self, r.request, session: session)
    guard let rev = form.rev else {
      throw Failure(status: .badRequest, message: "Which revision?")
    }
    let old = try store.get(id, options: GetOptions(rev: rev)).objectValue ?? JSONObject()
    var current = try store.get(id).objectValue ?? JSONObject()
    let currentRev = current["_rev"]?.stringValue
    current.members.removeAll { $0.key == "_id" || $0.key == "_rev" || $0.key == "_attachments" }
    current["markdown"] = old["markdown"] ?? .string("")
    current["updated_by"] = .string(user)
    current["updated_at"] = .string(Timestamp.iso8601())
    try checkWrite(session, id: id, body: current, store)
    _ = try await store.putAsync(
      JSONValue.object(current).serialized(), id: id, rev: currentRev, actor: session.actor,
      origin: session.origin)
    throw Redirect(location: Self.pageHref(wiki, title))
  }
}
