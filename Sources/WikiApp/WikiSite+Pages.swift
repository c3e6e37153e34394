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

extension WikiSite {
  // MARK: Access

  /// The data directory's access rules for the wiki database (``DataDirectory/access(of:)``:
  /// the same rules the API and the write transaction apply), nil when it has none.
  var rules: (any DocumentAccess)? { couch.dataDirectory.access(of: options.database) }

  /// Whether `session`'s user is one of the database's security object's members (who see
  /// every document the rules do not govern).
  func isMember(_ session: Session, _ store: DocumentStore) throws -> Bool {
    try store.security().isMember(session.user)
  }

  /// What `session`'s user may read of the database.
  func view(_ session: Session, _ store: DocumentStore) throws -> (any AccessView)? {
    guard let rules, !session.user.isAdmin else { return nil }
    return try rules.view(for: session.user, isMember: isMember(session, store), in: store)
  }

  /// Wiki `wiki` as `session`'s user may see it, and what they may do with it (its document
  /// and pages); nil when the wiki does not exist or is hidden from them (the same answer).
  /// Read in one snapshot.
  func wiki(_ wiki: String, for session: Session, _ store: DocumentStore) throws
    -> (summary: WikiSummary, rights: DocumentRights)?
  {
    let member = try isMember(session, store)
    let rules = self.rules
    return try store.read { txn in
      guard let summary = try WikiQueries(store).wiki(wiki, using: txn) else { return nil }
      // Without rules of its own, the document is the security object's: its members (and
      // administrators) may do everything.
      let fallback: DocumentRights = member || session.user.isAdmin ? .owner : .none
      let rights =
        try rules?.rights(of: session.user, to: wiki, in: store, txn: txn) ?? fallback
      guard rights >= .member else { return nil }
      return (summary, rights)
    }
  }

  /// Refuses a write the access rules refuse (403), as the API does, before the write (which
  /// checks them again in its transaction: ``WriteAccess``).
  func checkWrite(_ session: Session, id: String, body: JSONObject?, _ store: DocumentStore) throws
  {
    guard let rules else { return }
    let member = try isMember(session, store)
    var batch = AccessBatch()
    try store.read { txn in
      try rules.checkWrite(
        AccessWrite(docID: id, body: body, replicated: false), by: session.user,
        isMember: member, in: store, txn: txn, batch: &batch)
    }
  }

  func blocking<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    // The caller's ``WriteAccess/user`` goes along: the pool's threads have no task.
    try await NIOThreadPool.singleton.runIfActive(WriteAccess.carrying(body))
  }

  // MARK: My wikis

  func myWikis(_ session: Session, _ store: DocumentStore) throws -> Page {
    let view = try self.view(session, store)
    let wikis = try WikiQueries(store).wikis().filter { view?.includes($0.id) ?? true }
    let rows: [[String: Any]] = wikis.map { w in
      [
        "href": Self.wikiHref(w.id), "title": w.title.isEmpty ? w.id : w.title,
        "owner": w.owner ?? "-", "members": w.members, "pages": w.pageCount,
        "updated": Self.time(w.lastUpdateMicroseconds),
      ]
    }
    return Page(
      title: "My wikis", body: Templates.render("wikis", ["wikis": rows, "csrf": session.csrf]))
  }

  func createWiki(_ form: Query, _ session: Session, _ store: DocumentStore) async throws
    -> Response
  {
    let title = (form["title"] ?? "").trimmingCharacters(in: .whitespacesAndNewlines)
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
    try checkWrite(session, id: id, body: body, store)
    _ = try await store.putAsync(
      JSONValue.object(body).serialized(), id: id, actor: session.actor, origin: session.origin)
    throw Redirect(location: Self.wikiHref(id))
  }

  // MARK: A wiki

  func wikiRequest(
    _ wiki: String, query: Query, form: Query?, _ session: Session, _ store: DocumentStore
  ) async throws -> Page {
    guard let (summary, rights) = try self.wiki(wiki, for: session, store) else {
      return notFound("There is no wiki here, or it is not yours to see.")
    }
    let title = summary.title.isEmpty ? wiki : summary.title
    if let form {
      switch query["action"] {
      case "settings": try await saveSettings(wiki, form: form, session, store)
      case "resolve": try await resolve(wiki, form: form, session, store)
      default: throw Failure(status: .badRequest, message: "Unknown action.")
      }
    }
    if let asOf = query["as_of"] {
      return try await wikiAsOf(wiki, asOf: asOf, title: title, session, store)
    }
    switch query["action"] {
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
            "wikiHref": Self.wikiHref(wiki),
          ]))
    case "conflicts":
      return try conflicts(wiki, title: title, session, store)
    default:
      let pages = try WikiQueries(store).pages(in: wiki)
      func row(_ p: WikiPageInfo) -> [String: Any] {
        [
          "href": Self.pageHref(wiki, p.title), "title": p.title,
          "updatedBy": p.updatedBy ?? "", "updatedAt": p.updatedAt ?? "",
        ]
      }
      let recent = pages.sorted { ($0.updatedAt ?? "") > ($1.updatedAt ?? "") }.prefix(10)
      return Page(
        title: title,
        body: Templates.render(
          "wiki",
          [
            "title": title, "owner": summary.owner ?? "-",
            "members": summary.members.filter { $0 != summary.owner },
            "pages": pages.map(row), "recent": recent.map(row),
            "newPageAction": Self.wikiHref(wiki) + "_new",
          ]))
    }
  }

  func saveSettings(_ wiki: String, form: Query, _ session: Session, _ store: DocumentStore)
    async throws
  {
    guard var body = try store.get(wiki).objectValue else { return }
    let rev = form["rev"] ?? body["_rev"]?.stringValue ?? ""
    body.members.removeAll { $0.key == "_id" || $0.key == "_rev" }
    let title = (form["title"] ?? "").trimmingCharacters(in: .whitespacesAndNewlines)
    if !title.isEmpty { body["title"] = .string(title) }
    let owner = body["owner_id"]?.stringValue
    let members = (form["members"] ?? "").split(whereSeparator: \.isNewline)
      .map { $0.trimmingCharacters(in: .whitespaces) }
      .filter { !$0.isEmpty && $0 != owner }
    var unique: [String] = []
    for m in members where !unique.contains(m) { unique.append(m) }
    body["members"] = .array(unique.map(JSONValue.string))
    body["updated_at"] = .string(Timestamp.iso8601())
    try checkWrite(session, id: wiki, body: body, store)
    _ = try await store.putAsync(
      JSONValue.object(body).serialized(), id: wiki, rev: rev, actor: session.actor,
      origin: session.origin)
    throw Redirect(location: Self.wikiHref(wiki) + "?action=settings")
  }

  // MARK: Conflicts

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
  func resolve(_ wiki: String, form: Query, _ session: Session, _ store: DocumentStore)
    async throws
  {
    guard let id = form["page"], let keep = form["keep"], WikiID.of(id) == wiki else {
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

  // MARK: Time travel

  /// The position `asOf` names: a seq, or an ISO-8601 time.
  func position(_ asOf: String) throws -> (LogPosition?, Date?) {
    if let seq = UInt64(asOf) { return (LogPosition(seq), nil) }
    if let date = ISO8601.parse(asOf) { return (nil, date) }
    throw Failure(status: .badRequest, message: "as_of must be a seq or an ISO-8601 time.")
  }

  func withAsOf<T: Sendable>(
    _ asOf: String, _ store: DocumentStore, _ body: @escaping @Sendable (AsOfView) throws -> T
  ) async throws -> T {
    let (seq, date) = try position(asOf)
    return try await blocking {
      let view = try seq.map { try store.asOf($0) } ?? (try store.asOf(date!))
      defer { view.close() }
      return try body(view)
    }
  }

  func wikiAsOf(
    _ wiki: String, asOf: String, title: String, _ session: Session, _ store: DocumentStore
  ) async throws -> Page {
    let pages: [[String: String]] = try await withAsOf(asOf, store) { view in
      let queries = try WikiQueries(view)
      return try queries.pages(in: wiki).map { p -> [String: String] in
        [
          "href": Self.pageHref(wiki, p.title) + "?as_of=" + Self.encode(asOf), "title": p.title,
          "updatedBy": p.updatedBy ?? "", "updatedAt": p.updatedAt ?? "",
        ]
      }
    }
    var page = Page(
      title: title + " (as of \(asOf))",
      body: Templates.render(
        "wiki",
        [
          "title": title, "pages": pages, "recent": [],
          "newPageAction": Self.wikiHref(wiki) + "_new",
        ]
      ))
    page.asOf = asOf
    page.asOfExit = Self.wikiHref(wiki)
    return page
  }

  // MARK: Recent changes

  func recentChanges(_ session: Session, _ store: DocumentStore) throws -> Page {
    var options = ChangesOptions()
    options.descending = true
    options.limit = 50
    let result: ChangesResult
    if let view = try view(session, store) {
      result = try view.changes(options)
    } else {
      result = try store.changes(options)
    }
    let queries = try WikiQueries(store)
    var titles: [String: String] = [:]
    let rows: [[String: Any]] = try result.results.map { row in
      let wiki = WikiID.of(row.id)
      if titles[wiki] == nil { titles[wiki] = try queries.wiki(wiki)?.title ?? wiki }
      let page = WikiID.split(row.id)?.title
      let last = try store.revisionEvents(of: row.id).last
      return [
        "href": page.map { Self.pageHref(wiki, $0) } ?? Self.wikiHref(wiki),
        "title": page ?? titles[wiki]!, "wikiTitle": titles[wiki]!,
        "actor": last?.actor ?? "", "time": last.map { Self.time($0.timestampMicroseconds) } ?? "",
      ]
    }
    return Page(
      title: "Recent changes",
      body: Templates.render(
        "recent",
        [
          "changes": rows,
          "feed": "/" + Self.encode(self.options.database) + "/_changes?feed=eventsource&since=now",
        ]))
  }
}
