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

/// A part of the wiki's UI and its pages. What the controllers share (the site's sessions,
/// forms and layout, the access rules, rendering, time travel) is here and on ``WikiSite``.
protocol WikiController: Sendable {
  var site: WikiSite { get }
}

/// A controller with addresses of its own: its routes, a Hummingbird `RouteCollection` added
/// under `/_wiki` (``WikiServer``). (The edit and history controllers answer at a page's
/// address, through ``PagesController``'s table of ``PageAction``s.)
protocol RoutedController: WikiController {
  /// The controller's routes, relative to `/_wiki`.
  func routes() -> RouteCollection<CouchRequestContext>
}

/// A file attached to a page's revision, as the pages show it.
struct PageFile: Sendable {
  let name: String
  let type: String
  let size: String
  let href: String
  let isImage: Bool

  var template: [String: Any] {
    [
      "name": name, "type": type, "size": size, "href": href, "isImage": isImage,
      "encodedName": WikiSite.encode(name),
    ]
  }
}

/// A form a signed-in user posts: it carries the CSRF token of their session.
protocol PostedForm: Decodable {
  var csrf: String? { get }
}

/// A form with nothing but its token (sign out, discard).
struct TokenForm: PostedForm {
  var csrf: String?
}

extension WikiController {
  typealias Context = CouchRequestContext
  typealias Page = WikiSite.Page
  typealias Session = WikiSite.Session
  typealias Redirect = WikiSite.Redirect
  typealias Failure = WikiSite.Failure

  var couch: CouchServer { site.couch }
  var options: WikiAppOptions { site.options }
  var renderer: MarkdownRenderer { site.renderer }
  var cache: RenderCache { site.cache }

  func html(_ page: Page, session: Session?, head: Bool = false) -> Response {
    site.html(page, session: session, head: head)
  }

  func notFound(_ message: String, create: (href: String, title: String)? = nil) -> Page {
    site.notFound(message, create: create)
  }

  static func encode(_ text: String) -> String { WikiSite.encode(text) }
  static func wikiHref(_ wiki: String) -> String { WikiSite.wikiHref(wiki) }
  static func pageHref(_ wiki: String, _ title: String) -> String {
    WikiSite.pageHref(wiki, title)
  }
  static func time(_ micros: Int64) -> String { WikiSite.time(micros) }

  // MARK: Access

  /// The data directory's access rules for the wiki database (``DataDirectory/access(of:)``:
  /// the same rules the API and the write transaction apply), nil when it has none.
  var rules: (any DocumentAccess)? { couch.dataDirectory.access(of: options.database) }

  /// Whether `session`'s user is one of the database's security object's members (who see
  /// every document the rules do not govern).
  func isMember(_ session: Session, _ store: DocumentStore) throws -> Bool {
    try store.security().isMember(session.user)
  }

  /// What `session`'s user may read of the database: nil for all of it. Without rules the
  /// security object decides, as the API's does: its members (and administrators) read
  /// everything, anyone else nothing (403).
  func view(_ session: Session, _ store: DocumentStore) throws -> (any AccessView)? {
    if session.user.isAdmin { return nil }
    let member = try isMember(session, store)
    guard let rules else {
      guard member else {
        throw Failure(
          status: .forbidden, message: "You are not a member of this server's wiki database.")
      }
      return nil
    }
    return try rules.view(for: session.user, isMember: member, in: store)
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

  // MARK: Reading

  func missing(_ wiki: String, _ title: String) -> Page {
    notFound(
      "The page “\(title)” does not exist yet.",
      create: (Self.pageHref(wiki, title) + "?action=edit", title))
  }

  /// The HTML of a revision's Markdown, rendered once per revision and state of its wiki
  /// (`key` names both: a page created or deleted changes the wiki's last update, and with it
  /// which links are to missing pages).
  ///
  /// `files` (a revision's attachments, name to URL: ``files(of:id:rev:)``) resolves Markdown
  /// links and images that name one: `![plan](plan.png)`, `[minutes](2026-11.pdf)`.
  ///
  /// `asOf`: the page is shown as of a moment, whose wiki `queries` answer (an as-of view's):
  /// a link goes to the page as of then (`?as_of=`), and is to a missing page when the page
  /// did not exist then.
  func rendered(
    _ markdown: String, wiki: String, key: String?, _ store: DocumentStore,
    files: [PageFile] = [], asOf: (moment: AsOfMoment, queries: WikiQueries)? = nil
  ) throws -> String {
    if let key, let html = cache.get(key) { return html }
    let queries = try asOf?.queries ?? WikiQueries(store)
    func exists(_ title: String) -> Bool {
      (try? queries.page(title, in: wiki)) != nil
    }
    let byName = Dictionary(files.map { ($0.name, $0.href) }, uniquingKeysWith: { a, _ in a })
    let resource: ((String, Bool) -> String?)? =
      byName.isEmpty
      ? nil
      : { url, _ in
        // A name, not an address: no scheme, no path from the root, no fragment alone.
        guard !url.isEmpty, !url.contains(":"), !url.hasPrefix("/"), !url.hasPrefix("#") else {
          return nil
        }
        return byName[url.removingPercentEncoding ?? url]
      }
    let html = renderer.render(
      markdown,
      link: { target in
        let found = exists(target)
        if let asOf {
          return WikiLinkTarget(
            href: Self.pageHref(wiki, target) + asOf.moment.query, exists: found)
        }
        return WikiLinkTarget(
          href: Self.pageHref(wiki, target) + (found ? "" : "?action=edit"), exists: found)
      }, resource: resource)
    if let key { cache.put(key, html) }
    return html
  }

  /// The attachments of revision `rev` (nil: the current one) of page `id`, whose body is
  /// `doc`, with the API's URL of each (`/{db}/{docid}/{name}`, `?rev=` for an old revision).
  func files(of doc: JSONObject, id: String, rev: String?) -> [PageFile] {
    guard case .object(let attachments)? = doc["_attachments"] else { return [] }
    let base =
      "/" + PercentDecoding.encode(options.database) + "/" + PercentDecoding.encode(id) + "/"
    return attachments.members.map { member in
      let type = member.value["content_type"]?.stringValue ?? "application/octet-stream"
      let length = Int(member.value["length"]?.numberValue?.int64Value ?? 0)
      return PageFile(
        name: member.key, type: type, size: Self.size(length),
        href: base + PercentDecoding.encode(member.key) + (rev.map { "?rev=" + $0 } ?? ""),
        isImage: type.hasPrefix("image/"))
    }
  }

  /// A size for people: "512 bytes", "12 KB", "3.4 MB".
  static func size(_ bytes: Int) -> String {
    if bytes < 1024 { return WikiSite.count(bytes, "byte") }
    if bytes < 1024 * 1024 { return "\((bytes + 512) / 1024) KB" }
    let tenths = (bytes * 10 + 512 * 1024) / (1024 * 1024)
    return "\(tenths / 10).\(tenths % 10) MB"
  }

  /// Who made revision `rev` of page `id`, and when, as the log recorded it: the body's
  /// `updated_by` and `updated_at` are what the writer claimed, and any member may claim
  /// anything there. A replicated revision was written elsewhere: its claim is shown with
  /// who brought it here.
  static func lastChange(_ doc: JSONObject, id: String, rev: String, _ store: DocumentStore)
    -> (by: String, at: String)
  {
    let claimedBy = doc["updated_by"]?.stringValue ?? ""
    let claimedAt = WikiSite.time(text: doc["updated_at"]?.stringValue ?? "")
    guard let parsed = try? RevID(rev), let record = try? store.record(id),
      let position = record.tree.revision(parsed)?.body,
      let event = try? store.log.event(at: LogPosition(position))
    else { return (claimedBy, claimedAt) }
    let at = time(event.timestampMicroseconds)
    if event.type == DocumentEvent.Kind.replicated.eventType {
      let by =
        claimedBy.isEmpty || claimedBy == event.actor
        ? event.actor : "\(claimedBy) (replicated by \(event.actor))"
      return (by, claimedAt.isEmpty ? at : claimedAt)
    }
    return (event.actor, at)
  }

  // MARK: Time travel

  /// The moment `asOf` names in `store`'s log (``AsOfMoment``), its time as `session`'s user
  /// may know it; a value that names none is a 400 page saying why.
  func moment(_ asOf: String, _ store: DocumentStore, _ session: Session) throws -> AsOfMoment {
    let access = try view(session, store)
    return try AsOfMoment(resolving: asOf, in: store) { access?.includes($0) ?? true }
  }

  /// Runs `body` with the store as it was at `moment` (a scratch view, closed afterwards).
  func withAsOf<T: Sendable>(
    _ moment: AsOfMoment, _ store: DocumentStore,
    _ body: @escaping @Sendable (AsOfView) throws -> T
  ) async throws -> T {
    try await blocking {
      let view = try store.asOf(moment.position)
      defer { view.close() }
      return try body(view)
    }
  }
}
