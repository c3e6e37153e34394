import CouchAPI
import Formats
import Foundation
import Hummingbird
import JSON
import Log
import Projections
import Wiki

/// What a user watches (pages and wikis, each since the position it was watched at) and the
/// position up to which they have seen the changes, kept as the `_local` document
/// `_local/org.wikilog.watch.<hex name>` of the wiki database: per user, written as an event
/// like every write (so auditable), never replicated, in no changes feed, and not reachable
/// over the API (`_local/org.wikilog.*` is reserved).
struct WatchList: Sendable {
  struct Item: Sendable, Hashable {
    /// A page's id (`wiki:Title`) or a wiki's.
    var id: String
    /// The log position it was watched at: older changes are not news.
    var since: UInt64
  }

  var items: [Item] = []
  /// The changes up to this position were seen ("Mark as seen").
  var seen: UInt64 = 0
  var rev: String? = nil

  static func localID(of user: String) -> String {
    "org.wikilog.watch." + Hex.encode(Array(user.utf8))
  }

  static func load(user: String, _ store: DocumentStore) throws -> WatchList {
    let doc: JSONValue
    do {
      doc = try store.getLocal(localID(of: user))
    } catch let error as StoreError where error.code == .notFound {
      return WatchList()
    }
    var list = WatchList()
    list.rev = doc["_rev"]?.stringValue
    list.seen = UInt64(doc["seen"]?.numberValue?.int64Value ?? 0)
    list.items = (doc["watching"]?.arrayValue ?? []).compactMap { item in
      guard let id = item["id"]?.stringValue else { return nil }
      return Item(id: id, since: UInt64(item["since"]?.numberValue?.int64Value ?? 0))
    }
    return list
  }

  func save(user: String, _ store: DocumentStore) async throws {
    let body = JSONObject([
      "type": .string("watch_list"), "user": .string(user),
      "seen": .number(JSONNumber(Int64(seen))),
      "watching": .array(
        items.map {
          .object(
            JSONObject(["id": .string($0.id), "since": .number(JSONNumber(Int64($0.since)))]))
        }),
    ])
    _ = try await store.putLocalAsync(
      Self.localID(of: user), JSONValue.object(body).serialized(), rev: rev, actor: user)
  }

  func isWatching(_ id: String) -> Bool { items.contains { $0.id == id } }

  /// Whether an edit of document `docID` at `seq` is news: the document or its wiki is
  /// watched since before it, and it is after what was seen.
  func isNews(_ docID: String, seq: UInt64) -> Bool {
    guard seq > seen else { return false }
    let wiki = WikiID.of(docID)
    return items.contains { ($0.id == docID || $0.id == wiki) && seq > $0.since }
  }
}

/// `POST /_wiki/_watch`: watch or stop watching a page or a wiki (`action=watch|unwatch`,
/// `id`), or mark the changes seen so far as seen (`action=seen`), then back to the page
/// (`back`, an address under `/_wiki/`). Only a wiki the user may read can be watched; the
/// changes shown (My wikis) are read through the user's access view, so a wiki they may no
/// longer read shows nothing.
struct WatchController: RoutedController {
  let site: WikiSite

  func routes() -> RouteCollection<CouchRequestContext> {
    let routes = RouteCollection(context: CouchRequestContext.self)
    routes.post("_watch") { request, context in
      try await site.signedIn(request, context) { session, store in
        try await post(
          try await site.form(WatchForm.self, request, session: session), session, store)
      }
    }
    return routes
  }

  struct WatchForm: PostedForm {
    var csrf: String?
    var action: String?
    var id: String?
    var back: String?
  }

  func post(_ form: WatchForm, _ session: Session, _ store: DocumentStore) async throws
    -> Response
  {
    guard let user = session.user.name else {
      throw Failure(status: .forbidden, message: "Sign in as a user to watch pages.")
    }
    var back = form.back ?? "/_wiki/"
    if !back.hasPrefix("/_wiki/") || back.hasPrefix("//") { back = "/_wiki/" }
    var list = try WatchList.load(user: user, store)
    let last = try store.read { txn in try txn.lastPosition }.rawValue
    switch form.action {
    case "watch", "unwatch":
      let id = (form.id ?? "").trimmingCharacters(in: .whitespaces)
      let wiki = WikiID.of(id)
      guard !id.isEmpty, !wiki.hasPrefix("_"), try self.wiki(wiki, for: session, store) != nil
      else {
        throw Failure(
          status: .notFound, message: "There is no wiki here, or it is not yours to see.")
      }
      if form.action == "watch" {
        if !list.isWatching(id) { list.items.append(.init(id: id, since: last)) }
      } else {
        list.items.removeAll { $0.id == id }
      }
    case "seen":
      list.seen = last
    default:
      throw Failure(status: .badRequest, message: "Unknown action.")
    }
    try await list.save(user: user, store)
    throw Redirect(location: back)
  }
}

extension WikiSite {
  /// The Watch (or Stop watching) button of page or wiki `id` for `session`'s user, as HTML;
  /// "" for an administrator without a name.
  func watchButton(for session: Session, id: String, _ store: DocumentStore) throws -> String {
    guard let user = session.user.name else { return "" }
    let watching = try WatchList.load(user: user, store).isWatching(id)
    let split = WikiID.split(id)
    let back = split.map { Self.pageHref($0.wiki, $0.title) } ?? Self.wikiHref(id)
    return Templates.render(
      "watch-button",
      [
        "csrf": session.csrf, "id": id, "back": back, "watching": watching,
        "what": split == nil ? "wiki" : "page",
      ])
  }
}

extension WikiController {
  /// The "changes since you last looked" of My wikis: the edits of what `session`'s user
  /// watches, after they marked them seen (and after each was watched), newest first, with
  /// who, when and links to the revision and its diff; and what they watch.
  func watchSection(_ session: Session, _ store: DocumentStore) throws -> String {
    guard let user = session.user.name else { return "" }
    let list = try WatchList.load(user: user, store)
    let watched = Set(list.items.map(\.id))
    let lower = max(list.seen, list.items.map(\.since).min() ?? list.seen)
    let edits =
      watched.isEmpty
      ? []
      : try recentEdits(
        session, store, limit: 200, since: LogPosition(lower),
        includes: { watched.contains($0) || watched.contains(WikiID.of($0)) }
      ).filter { list.isNews($0.docID, seq: $0.seq.rawValue) }
    let titles = try wikiTitles(edits, store)
    let queries = try WikiQueries(store)
    var items: [[String: Any]] = []
    for item in list.items {
      let wiki = WikiID.of(item.id)
      // Only what the user may read now.
      guard let summary = try self.wiki(wiki, for: session, store)?.summary else { continue }
      let wikiTitle = summary.title.isEmpty ? wiki : summary.title
      let page = WikiID.split(item.id)?.title
      _ = queries
      items.append([
        "id": item.id, "title": page ?? wikiTitle, "isWiki": page == nil,
        "href": page.map { Self.pageHref(wiki, $0) } ?? Self.wikiHref(wiki),
        "wikiTitle": wikiTitle, "csrf": session.csrf,
      ])
    }
    return Templates.render(
      "watch-changes",
      [
        "changes": edits.map { editRow($0, wikiTitle: titles[$0.wiki] ?? $0.wiki) },
        "hasChanges": !edits.isEmpty, "watching": items, "hasWatching": !items.isEmpty,
        "csrf": session.csrf,
      ])
  }
}

extension WikiSite {
  /// A page's view with the user's Watch button in its actions (the view itself is the same
  /// for everyone, and cached: the button goes in its place afterwards) and its history's feed
  /// advertised, when the page exists and the user has a feed token.
  func withWatchAndFeed(_ page: Page, _ r: PageRequest) throws -> Page {
    var page = page
    guard page.status == .ok, page.body.contains("<!--watch-->") else { return page }
    page.body = page.body.replacingOccurrences(
      of: "<!--watch-->", with: try watchButton(for: r.session, id: r.id, r.store))
    if let href = try feedURL(for: r.session, wiki: r.wiki, page: r.title) {
      page.feed = (href, "History of \(r.title)")
    }
    return page
  }
}
