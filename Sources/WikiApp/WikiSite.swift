import Auth
import CouchAPI
import Crypto
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
import Synchronization
import Wiki
import WikiMarkdown

/// What the wiki's pages under `/_wiki/` share: the server, the Markdown renderer and its
/// cache, sessions and their CSRF tokens, forms, and the HTML layout. The pages themselves are
/// controllers (``WikiController``), each a Hummingbird `RouteCollection` on
/// ``CouchAPI/CouchPipeline``'s router: ``SignInController``, ``WikisController``,
/// ``PagesController`` (with the actions of ``EditController`` and ``HistoryController``),
/// ``SyncController``, ``SearchController``, ``DraftsController`` and ``StaticFilesController``; ``PageErrors`` renders what they throw.
///
/// Every page reads and writes through the same rules as the API: the signed-in user (the API's
/// cookie, Basic, token or JWT; `/_wiki/_signin` sets CouchDB's `AuthSession` cookie), the wiki
/// access rules (``WikiAccess``: a wiki one is not in answers the same 404 as one that does not
/// exist), the user as the actor of every write. Every POST carries a CSRF token (an HMAC of the
/// session under the server secret) and, when the browser sends one, an `Origin` of this host.
/// Pages are HTML-escaped Mustache templates (``Templates``) with a Content-Security-Policy
/// that allows only this server's own script and style.
struct WikiSite: Sendable {
  let couch: CouchServer
  let options: WikiAppOptions
  let renderer = MarkdownRenderer()
  let cache = RenderCache(capacity: 2_000)
  /// The key of the CSRF tokens' HMAC (SymmetricKey is not Sendable in swift-crypto 3).
  let csrfKey: [UInt8]

  init(couch: CouchServer, options: WikiAppOptions) {
    self.couch = couch
    self.options = options
    let secret = (try? ServerSecret.load(directory: couch.dataDirectory.path)) ?? UUID().uuidString
    csrfKey = Array(("wikilog-ui-csrf:" + secret).utf8)
  }

  typealias Context = CouchRequestContext

  // MARK: Dispatch

  /// The signed-in user of a page request.
  struct Session {
    let user: UserContext
    let actor: String
    let origin: String
    let csrf: String
    let setCookie: String?
    var displayName: String { user.name ?? "administrator" }
  }

  /// A page's answer, or a redirect.
  struct Page {
    var status: HTTPResponse.Status = .ok
    var title: String
    var body: String
    /// The moment an as-of page shows: the layout's read-only bar says it.
    var asOf: AsOfMoment? = nil
    var asOfExit: String? = nil
    /// The wiki the page belongs to: the header's search box searches it first.
    var wiki: String? = nil
    /// An Atom feed of the page (its address and title), advertised in the head for feed
    /// readers' autodiscovery.
    var feed: (href: String, title: String)? = nil
  }

  struct Redirect: Error {
    let location: String
    var setCookie: String? = nil
  }

  /// A page's refusal: its status and what to tell the user, under `heading` (the status's
  /// reason phrase when nil). A signed-in user gets it in the app's frame, header and all.
  struct Failure: Error {
    let status: HTTPResponse.Status
    let message: String
    var heading: String? = nil

    /// A post to a view of the past: it changes nothing, whatever is posted to it.
    static let readOnlyPast = Failure(
      status: .badRequest,
      message:
        "This is the wiki as of a moment in the past: nothing here can be changed, and nothing was written.",
      heading: "Read-only")
  }

  /// The controllers, in the order their routes are added.
  func controllers() -> [any RoutedController] {
    [
      StaticFilesController(site: self), SignInController(site: self),
      WikisController(site: self), SyncController(site: self), SearchController(site: self),
      DraftsController(site: self),
      PagesController(
        site: self,
        actions: EditController(site: self).actions
          + HistoryController(site: self).actions + MoveController(site: self).actions
          + FilesController(site: self).actions),
      FeedsController(site: self), WatchController(site: self), UsersController(site: self),
      InviteController(site: self),
    ]
  }

  /// Runs `body` for the signed-in user of `request`, with the wiki database open and the
  /// user as the ``Projections/WriteAccess/user`` the store checks every write against, in the
  /// transaction that commits it. Without a session: a redirect to the sign-in page.
  func signedIn(
    _ request: Request, _ context: Context,
    _ body: (Session, DocumentStore) async throws -> Response
  ) async throws -> Response {
    guard let session = try await session(request, context) else {
      if request.headers[Self.scriptHeader] != nil {
        // The page's script (an autosave, a preview) asks again after signing in, in place:
        // a redirect would hand it the sign-in page as its answer.
        var headers = HTTPFields()
        headers[.contentType] = "application/json"
        let body = #"{"error":"unauthorized","reason":"Your session has ended: sign in again."}"#
        return Response(
          status: .unauthorized, headers: headers,
          body: ResponseBody(byteBuffer: ByteBuffer(string: body)))
      }
      let next = request.uri.path + (request.uri.query.map { "?" + $0 } ?? "")
      throw Redirect(location: "/_wiki/_signin?next=" + Self.encode(next))
    }
    return try await WriteAccess.$user.withValue(session.user) {
      do {
        return try await body(session, try await openStore())
      } catch let failure as Failure {
        // In the app's frame, with the user's header: a bad address or form is one more page.
        return html(errorPage(failure), session: session, head: request.method == .head)
      }
    }
  }

  /// The error page of `failure` (``PageErrors`` renders the same without a session).
  func errorPage(_ failure: Failure) -> Page {
    Page(
      status: failure.status, title: failure.heading ?? "Error",
      body: Templates.render(
        "error",
        ["heading": failure.heading ?? failure.status.reasonPhrase, "message": failure.message]))
  }

  /// The header the page's script sends with its own requests (`X-Wikilog-Script: 1`).
  static let scriptHeader = HTTPField.Name("X-Wikilog-Script")!

  /// ``signedIn(_:_:_:)`` for a page in the layout.
  func signedInPage(
    _ request: Request, _ context: Context,
    _ body: (Session, DocumentStore) async throws -> Page
  ) async throws -> Response {
    try await signedIn(request, context) { session, store in
      html(try await body(session, store), session: session, head: request.method == .head)
    }
  }

  /// The query string of `request` as `Q`, by Hummingbird's form decoding.
  func query<Q: Decodable>(_ type: Q.Type, _ request: Request) throws -> Q {
    do {
      return try URLEncodedFormDecoder().decode(Q.self, from: request.uri.query ?? "")
    } catch {
      throw Failure(status: .badRequest, message: "The address is not valid.")
    }
  }

  /// A path parameter, percent-decoded.
  static func parameter<S: StringProtocol>(_ text: S?) throws -> String {
    guard let text, let decoded = String(text).removingPercentEncoding else {
      throw Failure(status: .badRequest, message: "The address is not valid.")
    }
    return decoded
  }

  func openStore() async throws -> DocumentStore {
    let data = couch.dataDirectory
    let name = options.database
    if let store = data.storeIfOpen(name) { return store }
    return try await NIOThreadPool.singleton.runIfActive { try data.open(name, create: true) }
  }

  // MARK: Sessions

  func session(_ request: Request, _ context: Context) async throws -> Session? {
    let who: SignedInUser
    do {
      who = try await couch.signIn(request, context: context)
    } catch {
      return nil  // bad credentials: sign in again
    }
    guard who.isSignedIn || who.user.isAdmin else { return nil }
    let salt = who.user.name.flatMap { try? couch.options.authenticator?.users.user(named: $0) }?
      .salt
    return Session(
      user: who.user, actor: who.actor, origin: who.origin,
      csrf: csrfToken(name: who.user.name, salt: salt), setCookie: who.setCookie)
  }

  /// The forms' token of user `name`: a MAC of the name and the salt of their password hash
  /// under the server's secret. It does not change when a page renews the session cookie (a
  /// token made from the cookie went stale then, and the next save was refused), and a new
  /// password makes a new one, as it ends every session.
  func csrfToken(name: String?, salt: String?) -> String {
    let mac = HMAC<SHA256>.authenticationCode(
      for: Array(((name ?? "") + "\u{0}" + (salt ?? "")).utf8),
      using: SymmetricKey(data: csrfKey))
    return Hex.encode(Array(mac))
  }

  /// The form of a POST as `F` (Hummingbird's form decoding), after the CSRF checks: its
  /// token, and the `Origin` when the browser sends one.
  func form<F: PostedForm>(_ type: F.Type, _ request: Request, session: Session) async throws -> F {
    try checkOrigin(request)
    let form = try await decodedForm(F.self, request, upTo: 16 << 20)
    guard let token = form.csrf, token == session.csrf else {
      throw Failure(
        status: .forbidden,
        message: "The form has expired or came from another site; reload the page.")
    }
    return form
  }

  /// A form body as `F`; a body that is not a form is 400.
  func decodedForm<F: Decodable>(_ type: F.Type, _ request: Request, upTo limit: Int)
    async throws -> F
  {
    let bytes = try await request.body.collect(upTo: limit)
    do {
      return try URLEncodedFormDecoder().decode(F.self, from: String(buffer: bytes))
    } catch {
      throw Failure(status: .badRequest, message: "The form is not valid.")
    }
  }

  /// Refuses a form whose `Origin` is another site's.
  func checkOrigin(_ request: Request) throws {
    if let origin = request.headers[.origin], let host = request.head.authority {
      guard origin == "http://" + host || origin == "https://" + host else {
        throw Failure(status: .forbidden, message: "The form came from another site.")
      }
    }
  }

  /// The cookie of the sign-in form's CSRF token.
  static let signInCookie = "wikilog_signin"

  // MARK: Responses

  static let contentSecurityPolicy =
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data: https:; connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"

  func html(_ page: Page, session: Session?, head: Bool = false) -> Response {
    // The body goes between the layout's two halves: Mustache need not carry it, and nothing
    // searches the page for where it goes.
    var object: [String: Any] = ["title": page.title, "csrf": session?.csrf ?? ""]
    if let session {
      object["user"] = session.displayName
      if let (text, state) = SyncController.summary(site: self, for: session) {
        object["sync"] = text
        object["syncState"] = state
      }
    }
    if let wiki = page.wiki { object["searchWiki"] = wiki }
    if let feed = page.feed {
      object["feedHref"] = feed.href
      object["feedTitle"] = feed.title
    }
    if let asOf = page.asOf {
      object["asOf"] = asOf.parameter
      object["asOfLabel"] = asOf.label
      object["asOfQuery"] = asOf.query
      object["asOfExit"] = page.asOfExit ?? "?"
    }
    let text =
      Templates.render("layout.head", object) + page.body
      + Templates.render("layout.tail", object)
    var headers = HTTPFields()
    headers[.contentType] = "text/html; charset=utf-8"
    headers[HTTPField.Name("Content-Security-Policy")!] = Self.contentSecurityPolicy
    headers[HTTPField.Name("X-Content-Type-Options")!] = "nosniff"
    headers[HTTPField.Name("Referrer-Policy")!] = "same-origin"
    headers[HTTPField.Name("X-Frame-Options")!] = "DENY"
    headers[.cacheControl] = "no-store"
    if let cookie = session?.setCookie { headers[.setCookie] = cookie + "; SameSite=Lax" }
    let buffer = ByteBuffer(string: text)
    headers[.contentLength] = String(buffer.readableBytes)
    return Response(
      status: page.status, headers: headers,
      body: head ? ResponseBody() : ResponseBody(byteBuffer: buffer))
  }

  static func plainError(_ code: Int, _ message: String) -> Response {
    var headers = HTTPFields()
    headers[.contentType] = "text/plain; charset=utf-8"
    return Response(
      status: .init(code: code), headers: headers,
      body: ResponseBody(byteBuffer: ByteBuffer(string: message + "\n")))
  }

  func notFound(_ message: String, create: (href: String, title: String)? = nil) -> Page {
    var object: [String: Any] = ["message": message]
    if let create {
      object["createHref"] = create.href
      object["title"] = create.title
    }
    return Page(status: .notFound, title: "Not found", body: Templates.render("notfound", object))
  }

  // MARK: URLs

  static func encode(_ text: String) -> String {
    text.addingPercentEncoding(withAllowedCharacters: .urlPathAllowedSegment) ?? text
  }

  static func wikiHref(_ wiki: String) -> String { "/_wiki/" + encode(wiki) + "/" }

  static func pageHref(_ wiki: String, _ title: String) -> String {
    "/_wiki/" + encode(wiki) + "/" + encode(title)
  }

  /// A time for people, as HTML: `<time datetime="2026-11-28T15:06:29Z" title="…">28 Nov 2026,
  /// 15:06 UTC</time>`. The page's script shows it relative to now ("3 minutes ago",
  /// "yesterday at 14:02") in the viewer's time zone, with the exact local time as its title;
  /// without the script it reads in UTC. The same for everyone, so pages holding it can be
  /// cached. Use it with `{{{…}}}` in a template (it is made only of the number).
  static func time(_ micros: Int64) -> String {
    let iso = ISO8601.format(microseconds: micros, fractionDigits: 0)
    let days = micros >= 0 ? micros / 86_400_000_000 : (micros + 1) / 86_400_000_000 - 1
    let (year, month, day) = ISO8601.civil(fromDays: days)
    let seconds = (micros / 1_000_000) - days * 86_400
    let hour = seconds / 3600
    let minute = (seconds % 3600) / 60
    let months = [
      "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ]
    func two(_ n: Int64) -> String { n < 10 ? "0\(n)" : "\(n)" }
    let text = "\(day) \(months[Int(month - 1)]) \(year), \(two(hour)):\(two(minute)) UTC"
    return "<time datetime=\"\(iso)\" title=\"\(iso)\">\(text)</time>"
  }

  /// ``time(_:)`` as plain text, for a label: `28 Nov 2026, 15:06 UTC`.
  static func plainTime(_ micros: Int64) -> String {
    let html = time(micros)
    guard let open = html.firstIndex(of: ">"), let close = html.lastIndex(of: "<") else {
      return html
    }
    return String(html[html.index(after: open)..<close])
  }

  /// A time that stays as written, as HTML: `<time class="exact" datetime="…">2 Dec 2026
  /// 16:20:05 UTC</time>` (the page's script leaves it alone), for a moment people check
  /// against others: the as-of bar, a deletion.
  static func exactTime(_ micros: Int64) -> String {
    let iso = ISO8601.format(microseconds: micros, fractionDigits: 0)
    let days = micros >= 0 ? micros / 86_400_000_000 : (micros + 1) / 86_400_000_000 - 1
    let (year, month, day) = ISO8601.civil(fromDays: days)
    let seconds = (micros / 1_000_000) - days * 86_400
    let months = [
      "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ]
    func two(_ n: Int64) -> String { n < 10 ? "0\(n)" : "\(n)" }
    let clock = "\(two(seconds / 3600)):\(two((seconds % 3600) / 60)):\(two(seconds % 60))"
    let text = "\(day) \(months[Int(month - 1)]) \(year) \(clock) UTC"
    return "<time class=\"exact\" datetime=\"\(iso)\" title=\"\(iso)\">\(text)</time>"
  }

  /// ``time(_:)`` of a time written as text (a document's `updated_at`): as HTML, the text
  /// escaped when it is not ISO-8601.
  static func time(text: String) -> String {
    if let micros = ISO8601.parseMicroseconds(text) { return time(micros) }
    return escape(text)
  }

  /// `text` with HTML's special characters escaped.
  static func escape(_ text: String) -> String {
    var out = ""
    for c in text {
      switch c {
      case "&": out += "&amp;"
      case "<": out += "&lt;"
      case ">": out += "&gt;"
      case "\"": out += "&quot;"
      case "'": out += "&#39;"
      default: out.append(c)
      }
    }
    return out
  }

  /// `count` and the noun, singular or plural: "1 page", "3 pages".
  static func count(_ count: Int, _ singular: String, _ plural: String? = nil) -> String {
    "\(count) " + (count == 1 ? singular : plural ?? singular + "s")
  }
}

extension CharacterSet {
  /// What may stand unescaped in one path segment.
  static let urlPathAllowedSegment: CharacterSet = {
    var set = CharacterSet.alphanumerics
    set.insert(charactersIn: "-._~!$&'()*+,;=:@")
    return set.intersection(CharacterSet(charactersIn: Unicode.Scalar(0)...Unicode.Scalar(127)))
  }()
}

/// Rendered pages and Markdown by key (a document revision and the state of its wiki): what a
/// key names never changes, so each is made once. At most `capacity` entries, the oldest
/// dropped first.
final class RenderCache: Sendable {
  private let state = Mutex<(entries: [String: String], order: [String])>(([:], []))
  let capacity: Int

  init(capacity: Int) { self.capacity = capacity }

  func get(_ key: String) -> String? {
    state.withLock { $0.entries[key] }
  }

  func put(_ key: String, _ html: String) {
    state.withLock { s in
      if s.entries.updateValue(html, forKey: key) == nil { s.order.append(key) }
      if s.order.count > capacity {
        let old = s.order.removeFirst()
        s.entries[old] = nil
      }
    }
  }
}
