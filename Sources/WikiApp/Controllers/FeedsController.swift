import Auth
import CouchAPI
import Crypto
import Foundation
import HTTPTypes
import Hummingbird
import Log
import NIOCore
import Projections
import Wiki

/// Atom feeds (``AtomFeed``) for feed readers, which carry no session: `/_wiki/_feed` (the
/// recent changes of every wiki the user may read), `/_wiki/_feed/{wiki}` (one wiki's) and
/// `/_wiki/_feed/{wiki}/{Page Name}` (a page's history), each with `?token=` the user's feed
/// token (``Auth/APITokens/feedScope``: it reads feeds and signs nothing else in, so it cannot
/// write). The feed shows what the token's user may read now; a wrong token is 401 and a wiki
/// the user may not read the same 404 as one that does not exist, both without content.
///
/// The token is an ``Auth/APITokens`` record whose secret is derived from its id under a key of
/// the server's secret (``WikiSite/feedKey``), so the pages can link the feed with it (feed
/// readers find it there: `<link rel="alternate" type="application/atom+xml">`) while `_users`
/// keeps only its hash.
struct FeedsController: RoutedController {
  let site: WikiSite

  func routes() -> RouteCollection<CouchRequestContext> {
    let routes = RouteCollection(context: CouchRequestContext.self)
    routes.get("_feed") { request, context in try await feed(request, context, wiki: nil) }
    routes.get("_feed/:wiki") { request, context in
      try await feed(request, context, wiki: try WikiSite.parameter(context.parameters.get("wiki")))
    }
    routes.get("_feed/:wiki/**") { request, context in
      let wiki = try WikiSite.parameter(context.parameters.get("wiki"))
      let title = try context.parameters.getCatchAll().map { try WikiSite.parameter($0) }
        .joined(separator: "/")
      return try await feed(request, context, wiki: wiki, page: title)
    }
    return routes
  }

  struct FeedQuery: Decodable {
    var token: String?
  }

  /// The feed's answer: the Atom document, or a refusal without content.
  func feed(_ request: Request, _ context: Context, wiki: String?, page: String? = nil)
    async throws -> Response
  {
    let token = (try? site.query(FeedQuery.self, request))?.token ?? ""
    guard let user = try site.feedUser(token: token) else {
      return WikiSite.plainError(401, "This feed needs a valid feed token (see Settings).")
    }
    let session = Session(
      user: user, actor: user.name ?? "", origin: "", csrf: "", setCookie: nil)
    let store = try await site.openStore()
    let base = site.baseURL(request)
    let feedToken = "?token=" + token
    var feed: AtomFeed
    if let wiki {
      guard !wiki.hasPrefix("_"), let (summary, _) = try self.wiki(wiki, for: session, store)
      else { return WikiSite.plainError(404, "There is no such feed.") }
      let wikiTitle = summary.title.isEmpty ? wiki : summary.title
      if let page {
        let id = wiki + ":" + page
        guard try store.record(id) != nil else {
          return WikiSite.plainError(404, "There is no such feed.")
        }
        feed = AtomFeed(
          id: AtomFeed.urn("\(options.database)/\(id)/history"),
          title: "History of \(page) (\(wikiTitle))", updatedMicroseconds: 0,
          selfLink: base + "/_wiki/_feed/" + Self.encode(wiki) + "/" + Self.encode(page)
            + feedToken,
          alternateLink: base + Self.pageHref(wiki, page) + "?action=history")
        let history = try store.history(of: id).suffix(50).reversed()
        for entry in history {
          let edit = RecentEdit(
            seq: entry.seq, docID: id, wiki: wiki, page: page, rev: entry.rev, actor: entry.actor,
            timestampMicroseconds: entry.timestampMicroseconds, deleted: entry.deleted)
          feed.entries.append(
            self.entry(edit, wikiTitle: wikiTitle, diff: entry.markdownDiff, base: base))
        }
      } else {
        feed = AtomFeed(
          id: AtomFeed.urn("\(options.database)/\(wiki)/recent"),
          title: "Recent changes in \(wikiTitle)", updatedMicroseconds: 0,
          selfLink: base + "/_wiki/_feed/" + Self.encode(wiki) + feedToken,
          alternateLink: base + "/_wiki/_recent?wiki=" + Self.encode(wiki))
        let edits = try recentEdits(session, store, includes: { WikiID.of($0) == wiki })
        feed.entries = try entries(edits, wikiTitles: [wiki: wikiTitle], store, base: base)
      }
    } else {
      feed = AtomFeed(
        id: AtomFeed.urn("\(options.database)/recent/\(user.name ?? "")"),
        title: "Recent changes in my wikis", updatedMicroseconds: 0,
        selfLink: base + "/_wiki/_feed" + feedToken, alternateLink: base + "/_wiki/_recent")
      let edits = try recentEdits(session, store)
      feed.entries = try entries(edits, wikiTitles: try wikiTitles(edits, store), store, base: base)
    }
    // The newest entry's time; a feed without entries, the time of the log's last event.
    let last = try store.read { txn in try txn.lastPosition }
    let lastEvent: RecordedEvent? = (try? store.log.event(at: last)) ?? nil
    feed.updatedMicroseconds =
      feed.entries.map(\.updatedMicroseconds).max() ?? lastEvent?.timestampMicroseconds ?? 0
    var headers = HTTPFields()
    headers[.contentType] = AtomFeed.contentType
    headers[.cacheControl] = "private, no-cache"
    headers[HTTPField.Name("X-Content-Type-Options")!] = "nosniff"
    return Response(
      status: .ok, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(string: feed.xml)))
  }

  /// Entries of `edits`, each with its Markdown diff (read from the page's history).
  func entries(
    _ edits: [RecentEdit], wikiTitles: [String: String], _ store: DocumentStore, base: String
  ) throws -> [AtomFeed.Entry] {
    var diffs: [String: [String: String]] = [:]
    return try edits.map { edit in
      if edit.page != nil && diffs[edit.docID] == nil {
        diffs[edit.docID] = Dictionary(
          try store.history(of: edit.docID).map { ($0.rev, $0.markdownDiff) },
          uniquingKeysWith: { a, _ in a })
      }
      return entry(
        edit, wikiTitle: wikiTitles[edit.wiki] ?? edit.wiki,
        diff: diffs[edit.docID]?[edit.rev] ?? "",
        base: base)
    }
  }

  /// An edit's entry: its title says what happened, its link goes to the revision (the page's
  /// history for a deletion, the wiki for its settings), its content is the diff.
  func entry(_ edit: RecentEdit, wikiTitle: String, diff: String, base: String) -> AtomFeed.Entry {
    let what: String
    let html: String
    if let page = edit.page {
      if edit.deleted {
        what = "\(page) deleted by \(edit.actor)"
        html = "<p>\(WikiSite.escape(edit.actor)) deleted the page “\(WikiSite.escape(page))”.</p>"
      } else {
        let verb = edit.rev.hasPrefix("1-") ? "created" : "changed"
        what = "\(page) \(verb) by \(edit.actor)"
        html =
          "<p>\(WikiSite.escape(edit.actor)) \(verb) “\(WikiSite.escape(page))” in \(WikiSite.escape(wikiTitle)) (revision \(WikiSite.escape(edit.rev))).</p>"
          + (diff.isEmpty ? "" : "<pre>\(WikiSite.escape(diff))</pre>")
      }
    } else if edit.rev.hasPrefix("1-") {
      what = "\(wikiTitle) created by \(edit.actor)"
      html = "<p>\(WikiSite.escape(edit.actor)) created the wiki.</p>"
    } else {
      what = "\(wikiTitle): settings changed by \(edit.actor)"
      html = "<p>\(WikiSite.escape(edit.actor)) changed the wiki’s settings.</p>"
    }
    return AtomFeed.Entry(
      id: AtomFeed.urn("\(options.database)/\(edit.docID)@\(edit.rev)"), title: what,
      updatedMicroseconds: edit.timestampMicroseconds, author: edit.actor,
      link: base + (edit.revisionHref ?? edit.diffHref ?? edit.href), contentHTML: html)
  }
}

extension WikiSite {
  /// The key feed tokens' secrets are derived under (from the server's secret).
  var feedKey: [UInt8] {
    Array(
      HMAC<SHA256>.authenticationCode(
        for: Array("wikilog-feed-token".utf8), using: SymmetricKey(data: csrfKey)))
  }

  /// The user of feed token `token`, or nil. Without an authenticator (every request is an
  /// administrator's) any token reads as an administrator.
  func feedUser(token: String) throws -> UserContext? {
    guard let auth = couch.options.authenticator else {
      return UserContext(name: nil, roles: [UserContext.adminRole])
    }
    return try auth.tokens.verify(token, scope: APITokens.feedScope)?.context
  }

  /// The feed token of `session`'s user and its record, nil when they have none.
  func feedToken(for session: Session) throws -> (token: String, record: APIToken)? {
    guard let auth = couch.options.authenticator, let name = session.user.name,
      let record = try auth.tokens.list(user: name).filter({ $0.scope == APITokens.feedScope })
        .max(by: { $0.createdAt < $1.createdAt })
    else { return nil }
    return (APITokens.derivedToken(id: record.id, key: feedKey), record)
  }

  /// The address (from the root, with the user's feed token) of the feed of every wiki
  /// (`wiki` nil), a wiki or a page; nil when the user has no feed token.
  func feedURL(for session: Session, wiki: String?, page: String?) throws -> String? {
    guard let (token, _) = try feedToken(for: session) else { return nil }
    var path = "/_wiki/_feed"
    if let wiki { path += "/" + Self.encode(wiki) }
    if let page { path += "/" + Self.encode(page) }
    return path + "?token=" + token
  }

  /// `http(s)://host` of a request, for the absolute links of a feed.
  func baseURL(_ request: Request) -> String {
    (couch.options.secure ? "https://" : "http://") + (request.head.authority ?? "localhost")
  }
}
