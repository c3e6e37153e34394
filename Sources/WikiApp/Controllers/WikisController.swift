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

/// The wikis: `/_wiki/` (my wikis, and a new one), `/_wiki/_recent` (recent changes, live), and
/// a wiki's home `/_wiki/{wiki}/` with its settings (`?action=settings`), conflicts
/// (`?action=conflicts`, and resolving one) and the wiki as of a moment (`?as_of=`: its
/// members, pages and recent pages then; `/_wiki/_recent?as_of=` the changes up to then).
struct WikisController: RoutedController {
  let site: WikiSite

  func routes() -> RouteCollection<CouchRequestContext> {
    let routes = RouteCollection(context: CouchRequestContext.self)
    routes.get("") { request, context in
      try await site.signedInPage(request, context) { session, store in
        try myWikis(session, store)
      }
    }
    routes.head("") { request, context in
      try await site.signedInPage(request, context) { session, store in
        try myWikis(session, store)
      }
    }
    routes.post("") { request, context in
      try await site.signedIn(request, context) { session, store in
        try await createWiki(
          try await site.form(CreateForm.self, request, session: session), session, store)
      }
    }
    routes.get("_recent") { request, context in try await recent(request, context) }
    routes.head("_recent") { request, context in try await recent(request, context) }
    routes.get(":wiki") { request, context in try await wikiHome(request, context) }
    routes.head(":wiki") { request, context in try await wikiHome(request, context) }
    routes.post(":wiki") { request, context in try await wikiHome(request, context) }
    return routes
  }

  struct WikiQuery: Decodable {
    var action: String?
    var as_of: String?
    /// `saved=1` after the settings were written: the page says so.
    var saved: String?
  }

  struct CreateForm: PostedForm {
    var csrf: String?
    var title: String?
  }

  struct SettingsForm: PostedForm {
    var csrf: String?
    var rev: String?
    var title: String?
    var members: String?
  }

  struct ResolveForm: PostedForm {
    var csrf: String?
    var page: String?
    var keep: String?
  }

  struct RecentQuery: Decodable {
    var as_of: String?
    /// One wiki's changes (`?wiki=ID`), else those of every wiki the user may read.
    var wiki: String?
  }

  func recent(_ request: Request, _ context: Context) async throws -> Response {
    let query = try site.query(RecentQuery.self, request)
    return try await site.signedInPage(request, context) { session, store in
      var scope: (id: String, title: String)? = nil
      if let wiki = query.wiki {
        guard !wiki.hasPrefix("_"), let (summary, _) = try self.wiki(wiki, for: session, store)
        else { return notFound("There is no wiki here, or it is not yours to see.") }
        scope = (wiki, summary.title.isEmpty ? wiki : summary.title)
      }
      if let asOf = query.as_of {
        return try await recentChanges(
          session, store, asOf: try moment(asOf, store, session), wiki: scope?.id)
      }
      var page = try recentChanges(session, store, wiki: scope)
      page.wiki = scope?.id
      return page
    }
  }

  /// `/_wiki/{wiki}/`; `/_wiki/{wiki}` is sent there (so that relative links work), and a
  /// name beginning with `_` is no wiki's.
  func wikiHome(_ request: Request, _ context: Context) async throws -> Response {
    let wiki = try WikiSite.parameter(context.parameters.get("wiki"))
    if !wiki.hasPrefix("_") && !request.uri.path.hasSuffix("/") && request.method == .get {
      throw Redirect(location: request.uri.path + "/" + (request.uri.query.map { "?" + $0 } ?? ""))
    }
    let query = try site.query(WikiQuery.self, request)
    return try await site.signedInPage(request, context) { session, store in
      guard !wiki.hasPrefix("_") else { return notFound("There is no such page.") }
      guard let (summary, rights) = try self.wiki(wiki, for: session, store) else {
        return notFound("There is no wiki here, or it is not yours to see.")
      }
      if request.method == .post {
        guard query.as_of == nil else {
          throw Failure.readOnlyPast
        }
        switch query.action {
        case "settings":
          try await saveSettings(
            wiki, form: try await site.form(SettingsForm.self, request, session: session), session,
            store)
        case "resolve":
          try await resolve(
            wiki, form: try await site.form(ResolveForm.self, request, session: session), session,
            store)
        default:
          _ = try await site.form(TokenForm.self, request, session: session)
          throw Failure(status: .badRequest, message: "Unknown action.")
        }
      }
      var page = try await wikiPage(wiki, summary, rights, query: query, session, store)
      page.wiki = wiki
      return page
    }
  }

  func wikiPage(
    _ wiki: String, _ summary: WikiSummary, _ rights: DocumentRights, query: WikiQuery,
    _ session: Session, _ store: DocumentStore
  ) async throws -> Page {
    let title = summary.title.isEmpty ? wiki : summary.title
    if let asOf = query.as_of {
      return try await wikiAsOf(wiki, moment: try moment(asOf, store, session), session, store)
    }
    switch query.action {
    case "settings":
      return Page(
        title: "Settings of \(title)",
        body: Templates.render(
          "settings",
          [
            "title": title, "owner": summary.owner ?? "-",
            "members": summary.members.filter { $0 != summary.owner },
            "membersText": summary.members.filter { $0 != summary.owner }.joined(separator: "\n"),
            "isOwner": rights == .owner, "csrf": session.csrf, "rev": summary.rev,
            "wikiHref": Self.wikiHref(wiki), "saved": query.saved != nil,
          ]))
    case "conflicts":
      return try conflicts(wiki, title: title, session, store)
    default:
      let pages = try WikiQueries(store).pages(in: wiki)
      func row(_ p: WikiPageInfo) -> [String: Any] {
        [
          "href": Self.pageHref(wiki, p.title), "title": p.title,
          "updatedBy": p.updatedBy ?? "", "updatedAt": WikiSite.time(text: p.updatedAt ?? ""),
        ]
      }
      let recent = pages.sorted { ($0.updatedAt ?? "") > ($1.updatedAt ?? "") }.prefix(10)
      let feed = try site.feedURL(for: session, wiki: wiki, page: nil)
      var object: [String: Any] = [
        "title": title, "owner": summary.owner ?? "-",
        "members": summary.members.filter { $0 != summary.owner },
        "pages": pages.map(row), "recent": recent.map(row),
        "newPageAction": Self.wikiHref(wiki) + "_new",
        "maxTitle": Drafts.maxTitleBytes(user: session.user.name ?? "", wiki: wiki),
        "recentHref": "/_wiki/_recent?wiki=" + Self.encode(wiki),
      ]
      object["watch"] = try site.watchButton(for: session, id: wiki, store)
      if let feed { object["feedHref"] = feed }
      var page = Page(title: title, body: Templates.render("wiki", object))
      if let feed { page.feed = (feed, "Recent changes in \(title)") }
      return page
    }
  }

  // MARK: My wikis

  func myWikis(_ session: Session, _ store: DocumentStore) throws -> Page {
    let view = try self.view(session, store)
    let wikis = try WikiQueries(store).wikis().filter { view?.includes($0.id) ?? true }
    let rows: [[String: Any]] = wikis.map { w in
      [
        "href": Self.wikiHref(w.id), "title": w.title.isEmpty ? w.id : w.title,
        "owner": w.owner ?? "-", "members": w.members,
        "pages": WikiSite.count(w.pageCount, "page"),
        "updated": Self.time(w.lastUpdateMicroseconds),
      ]
    }
    return Page(
      title: "My wikis",
      body: Templates.render(
        "wikis",
        [
          "wikis": rows, "csrf": session.csrf,
          "watchChanges": try watchSection(session, store),
        ]))
  }

  func createWiki(_ form: CreateForm, _ session: Session, _ store: DocumentStore) async throws
    -> Response
  {
    let title = (form.title ?? "").trimmingCharacters(in: .whitespacesAndNewlines)
    guard !title.isEmpty else {
      throw Failure(status: .badRequest, message: "A wiki needs a title.")
    }
    guard let owner = session.user.name else {
      throw Failure(status: .forbidden, message: "Sign in as a user to own a wiki.")
    }
    let slug = String(
      title.lowercased().unicodeScalars.map {
        CharacterSet.alphanumerics.contains($0) && $0.isASCII ? Character($0) : "-"
      }
    ).split(separator: "-").joined(separator: "-").prefix(40)
    let id =
      (slug.isEmpty ? "wiki" : String(slug)) + "-"
      + String(UUID().uuidString.prefix(6)).lowercased()
    let now = Timestamp.iso8601()
    let body = JSONObject([
      "type": .string("wiki"), "title": .string(title), "owner_id": .string(owner),
      "members": .array([]), "created_at": .string(now), "updated_at": .string(now),
    ])
    try refuseDuplicate(title: title, except: nil, session, store)
    try checkWrite(session, id: id, body: body, store)
    _ = try await store.putAsync(
      JSONValue.object(body).serialized(), id: id, actor: session.actor, origin: session.origin)
    throw Redirect(location: Self.wikiHref(id))
  }

  /// Refuses (400, nothing written) a title another wiki the user may read already has
  /// (letter case and spaces around aside): two wikis of one name cannot be told apart in
  /// My wikis, search or recent changes. Wikis the user may not read are not compared, so the
  /// answer tells nothing about them.
  func refuseDuplicate(
    title: String, except wiki: String?, _ session: Session, _ store: DocumentStore
  ) throws {
    let view = try self.view(session, store)
    let wanted = title.lowercased()
    let taken = try WikiQueries(store).wikis().contains { w in
      w.id != wiki && (view?.includes(w.id) ?? true)
        && w.title.trimmingCharacters(in: .whitespacesAndNewlines).lowercased() == wanted
    }
    if taken {
      throw Failure(
        status: .badRequest,
        message:
          "A wiki called “\(title)” is already in your wikis: choose another title. Nothing was written.",
        heading: "That title is taken")
    }
  }

  /// Refuses (400, nothing written) member names that are no user of this server's.
  func refuseUnknownMembers(_ names: [String]) throws {
    guard let users = couch.options.authenticator?.users else { return }
    let unknown = try names.filter { try users.user(named: $0) == nil }
    guard unknown.isEmpty else {
      throw Failure(
        status: .badRequest,
        message:
          "\(unknown.count == 1 ? "There is no user" : "There are no users") called \(unknown.map { "“\($0)”" }.joined(separator: ", ")) on this server: check the spelling, or ask an administrator to invite them. Nothing was saved.",
        heading: "Unknown member")
    }
  }

  // MARK: Settings and conflicts

  func saveSettings(_ wiki: String, form: SettingsForm, _ session: Session, _ store: DocumentStore)
    async throws
  {
    guard var body = try store.get(wiki).objectValue else { return }
    let rev = form.rev ?? body["_rev"]?.stringValue ?? ""
    body.members.removeAll { $0.key == "_id" || $0.key == "_rev" }
    let title = (form.title ?? "").trimmingCharacters(in: .whitespacesAndNewlines)
    guard !title.isEmpty else {
      throw Failure(status: .badRequest, message: "A wiki needs a title. Nothing was saved.")
    }
    if title != body["title"]?.stringValue {
      try refuseDuplicate(title: title, except: wiki, session, store)
    }
    body["title"] = .string(title)
    let owner = body["owner_id"]?.stringValue
    let members = (form.members ?? "").split(whereSeparator: \.isNewline)
      .map { $0.trimmingCharacters(in: .whitespaces) }
      .filter { !$0.isEmpty && $0 != owner }
    var unique: [String] = []
    for m in members where !unique.contains(m) { unique.append(m) }
    try refuseUnknownMembers(unique)
    body["members"] = .array(unique.map(JSONValue.string))
    body["updated_at"] = .string(Timestamp.iso8601())
    try checkWrite(session, id: wiki, body: body, store)
    _ = try await store.putAsync(
      JSONValue.object(body).serialized(), id: wiki, rev: rev, actor: session.actor,
      origin: session.origin)
    throw Redirect(location: Self.wikiHref(wiki) + "?action=settings&saved=1")
  }

  func conflicts(_ wiki: String, title: String, _ session: Session, _ store: DocumentStore) throws
    -> Page
  {
    var pages: [[String: Any]] = []
    let ids = [wiki] + (try WikiQueries(store).pages(in: wiki).map(\.id))
    for id in ids {
      let leaves = try store.openRevs(id, .all).compactMap { $0["ok"]?.objectValue }
        .filter { $0["_deleted"] != .bool(true) }
      guard leaves.count > 1 else { continue }
      let winner = try store.get(id)["_rev"]?.stringValue
      let events = Dictionary(
        (try store.revisionEvents(of: id)).map { ($0.rev, $0.actor) },
        uniquingKeysWith: { a, _ in a })
      let pageTitle = WikiID.split(id)?.title ?? id
      pages.append([
        "id": id, "title": pageTitle,
        "href": id == wiki ? Self.wikiHref(wiki) : Self.pageHref(wiki, pageTitle),
        "csrf": session.csrf,
        "leaves": leaves.map { leaf -> [String: Any] in
          let rev = leaf["_rev"]?.stringValue ?? ""
          return [
            "rev": rev, "actor": events[rev] ?? "?", "winner": rev == winner,
            "markdown": leaf["markdown"]?.stringValue ?? leaf["title"]?.stringValue ?? "",
          ]
        },
      ])
    }
    return Page(
      title: "Conflicts",
      body: Templates.render(
        "conflicts", ["wikiTitle": title, "wikiHref": Self.wikiHref(wiki), "pages": pages]))
  }

  /// Keeps one leaf of a conflicted page: every other live leaf is deleted, in one write.
  func resolve(_ wiki: String, form: ResolveForm, _ session: Session, _ store: DocumentStore)
    async throws
  {
    guard let id = form.page, let keep = form.keep, WikiID.of(id) == wiki else {
      throw Failure(status: .badRequest, message: "Choose the revision to keep.")
    }
    let leaves = try store.openRevs(id, .all).compactMap { $0["ok"]?.objectValue }
      .filter { $0["_deleted"] != .bool(true) }.compactMap { $0["_rev"]?.stringValue }
    guard leaves.contains(keep) else {
      throw Failure(status: .conflict, message: "That revision is no longer a leaf of the page.")
    }
    let deletions: [JSONValue] = leaves.filter { $0 != keep }.map {
      .object(JSONObject(["_id": .string(id), "_rev": .string($0), "_deleted": .bool(true)]))
    }
    for _ in deletions { try checkWrite(session, id: id, body: nil, store) }
    let results = try await store.bulkDocsAsync(
      deletions, actor: session.actor, origin: session.origin)
    if let failure = results.first(where: { $0.error != nil })?.error { throw failure }
    let title = WikiID.split(id)?.title
    throw Redirect(location: title.map { Self.pageHref(wiki, $0) } ?? Self.wikiHref(wiki))
  }

  // MARK: Time travel and recent changes

  /// The view the wiki's time travel lists pages with: live pages by `[wiki, title]`.
  /// Defined here, not stored in the database.
  static let pagesByWiki: DesignViews = {
    let map = """
      function (doc) {
        if (doc.type !== 'page' || typeof doc._id !== 'string') return;
        var colon = doc._id.indexOf(':');
        if (colon < 1) return;
        emit([doc._id.slice(0, colon), doc._id.slice(colon + 1)], null);
      }
      """
    let body = JSONValue.object(
      JSONObject([
        .init(
          key: "views",
          value: .object(
            JSONObject([
              .init(
                key: "by_wiki", value: .object(JSONObject([.init(key: "map", value: .string(map))]))
              )
            ])))
      ]))
    return try! DesignViews(id: "_design/wikilog-time-travel", rev: "1", body: body)
  }()

  /// What the wiki's page as of a moment shows, read from the view of that moment.
  struct WikiThen: Sendable {
    var summary: WikiSummary?
    var pages: [WikiPageInfo] = []
  }

  /// `?as_of=` on a wiki: its title, owner and members, pages and recently changed pages as
  /// they were then, every link keeping the moment, and no form.
  func wikiAsOf(
    _ wiki: String, moment: AsOfMoment, _ session: Session, _ store: DocumentStore
  ) async throws -> Page {
    let then: WikiThen = try await withAsOf(moment, store) { view in
      // The wiki's pages as they were: a view as of the moment (the Query module's views,
      // replayed from the log), keyed by wiki and title.
      var query = ViewQuery()
      query.startKey = .array([.string(wiki)])
      query.endKey = .array([.string(wiki), .object(JSONObject())])
      let rows = try view.queryView(Self.pagesByWiki, view: "by_wiki", query: query).rows
      let queries = try WikiQueries(view)
      let pages = try rows.compactMap { row -> WikiPageInfo? in
        guard let key = row["key"]?.arrayValue, key.count == 2, let title = key[1].stringValue
        else { return nil }
        return try queries.page(title, in: wiki)
      }
      return WikiThen(summary: try queries.wiki(wiki), pages: pages)
    }
    func row(_ p: WikiPageInfo) -> [String: Any] {
      [
        "href": Self.pageHref(wiki, p.title) + moment.query, "title": p.title,
        "updatedBy": p.updatedBy ?? "", "updatedAt": WikiSite.time(text: p.updatedAt ?? ""),
      ]
    }
    guard let summary = then.summary else {
      var page = notFound("The wiki did not exist then.")
      page.asOf = moment
      page.asOfExit = Self.wikiHref(wiki)
      return page
    }
    let title = summary.title.isEmpty ? wiki : summary.title
    let recent = then.pages.sorted { ($0.updatedAt ?? "") > ($1.updatedAt ?? "") }.prefix(10)
    var page = Page(
      title: title + " (as of event \(moment.parameter))",
      body: Templates.render(
        "wiki",
        [
          "title": title, "owner": summary.owner ?? "-",
          "members": summary.members.filter { $0 != summary.owner },
          "pages": then.pages.map(row), "recent": recent.map(row), "readOnly": true,
          "asOfQuery": moment.query,
          "recentHref": "/_wiki/_recent?wiki=" + Self.encode(wiki) + "&as_of="
            + moment.parameter,
        ]
      ))
    page.asOf = moment
    page.asOfExit = Self.wikiHref(wiki)
    return page
  }

  /// Recent changes as of a moment: one row per edit up to then (of the wikis the user may
  /// read now, or of one), newest first, their links kept at that moment; no live feed.
  func recentChanges(
    _ session: Session, _ store: DocumentStore, asOf moment: AsOfMoment, wiki: String? = nil
  )
    async throws -> Page
  {
    let access = try view(session, store)?.filter
    let filter: DocumentFilter? =
      wiki.map { wiki in
        DocumentFilter(
          name: "wikilog-wiki", parameters: ["wiki": wiki], wakeKeys: [], keys: { _ in [] },
          includes: { id in WikiID.of(id) == wiki && (access?.includes(id) ?? true) })
      } ?? access
    let (edits, titles) = try await withAsOf(moment, store) { view in
      // Every edit up to the moment, newest first (the log's history, with its own times).
      var options = ChangesOptions()
      options.history = true
      options.descending = true
      options.limit = 100
      options.filter = DocumentFilter(
        name: "wikilog-recent", parameters: [:], wakeKeys: [], keys: { _ in [] },
        includes: { id in !id.hasPrefix("_") && (filter?.includes(id) ?? true) })
      let edits = self.edits(try view.changes(options).results, store)
      return (edits, try self.wikiTitles(edits, WikiQueries(view)))
    }
    let rows = edits.map { editRow($0, wikiTitle: titles[$0.wiki] ?? $0.wiki, asOf: moment) }
    var page = Page(
      title: "Recent changes (as of event \(moment.parameter))",
      body: Templates.render(
        "recent",
        [
          "changes": rows, "asOf": moment.parameter, "heading": "Recent changes",
        ]))
    page.asOf = moment
    page.asOfExit = "/_wiki/_recent" + (wiki.map { "?wiki=" + Self.encode($0) } ?? "")
    return page
  }

  /// Recent changes, one row per edit (who, when, the revision and its diff), of every wiki
  /// the user may read or of one (`wiki`), live through the changes feed (every wiki's list).
  func recentChanges(
    _ session: Session, _ store: DocumentStore, wiki: (id: String, title: String)?
  ) throws -> Page {
    var includes: (@Sendable (String) -> Bool)? = nil
    if let id = wiki?.id { includes = { WikiID.of($0) == id } }
    let edits = try recentEdits(session, store, limit: 100, includes: includes)
    let titles = try wikiTitles(edits, store)
    var object: [String: Any] = [
      "changes": edits.map { editRow($0, wikiTitle: titles[$0.wiki] ?? $0.wiki) },
      "heading": wiki.map { "Recent changes in \($0.title)" } ?? "Recent changes",
    ]
    // Live from the changes feed, through the user's access view; a wiki's own list keeps
    // its wiki's rows (`data-wiki`).
    object["feed"] =
      "/" + Self.encode(self.options.database) + "/_changes?feed=eventsource&since=now"
    if let wiki {
      object["wikiHref"] = Self.wikiHref(wiki.id)
      object["wikiTitle"] = wiki.title
      object["wikiID"] = wiki.id
      object["feedHref"] = try site.feedURL(for: session, wiki: wiki.id, page: nil)
    }
    var page = Page(
      title: wiki.map { "Recent changes in \($0.title)" } ?? "Recent changes",
      body: Templates.render("recent", object))
    if let wiki, let href = try site.feedURL(for: session, wiki: wiki.id, page: nil) {
      page.feed = (href, "Recent changes in \(wiki.title)")
    }
    return page
  }
}
