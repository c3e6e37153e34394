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

/// The wiki in a browser: the pages under `/_wiki/`, one `RouteCollection`.
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

  func routes() -> RouteCollection<Context> {
    let routes = RouteCollection(context: Context.self)
    for path in ["", "**"] as [RouterPath] {
      routes.get(path) { request, context in await handle(request, context) }
      routes.head(path) { request, context in await handle(request, context) }
      routes.post(path) { request, context in await handle(request, context) }
    }
    return routes
  }

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
    var asOf: String? = nil
    var asOfExit: String? = nil
  }

  struct Redirect: Error {
    let location: String
    var setCookie: String? = nil
  }

  struct Failure: Error {
    let status: HTTPResponse.Status
    let message: String
  }

  func handle(_ request: Request, _ context: Context) async -> Response {
    do {
      return try await dispatch(request, context)
    } catch let redirect as Redirect {
      var headers = HTTPFields()
      headers[.location] = redirect.location
      if let cookie = redirect.setCookie { headers[.setCookie] = cookie }
      headers[.cacheControl] = "no-store"
      return Response(status: .seeOther, headers: headers)
    } catch let failure as Failure {
      return html(
        Page(
          status: failure.status, title: "Error",
          body: Templates.render(
            "error", ["heading": failure.status.reasonPhrase, "message": failure.message])),
        session: nil)
    } catch let error as CouchError {
      return html(
        Page(
          status: .init(code: error.statusCode), title: "Error",
          body: Templates.render("error", ["heading": error.error, "message": error.reason])),
        session: nil)
    } catch let error as StoreError {
      let e = CouchError(error)
      return html(
        Page(
          status: .init(code: e.statusCode), title: "Error",
          body: Templates.render("error", ["heading": e.error, "message": e.reason])),
        session: nil)
    } catch is NIOTooManyBytesError {
      return html(
        Page(
          status: .contentTooLarge, title: "Error",
          body: Templates.render(
            "error",
            ["heading": "Content Too Large", "message": "The form is larger than this site takes."])
        ),
        session: nil)
    } catch {
      return html(
        Page(
          status: .internalServerError, title: "Error",
          body: Templates.render("error", ["heading": "Error", "message": "\(error)"])),
        session: nil)
    }
  }

  func dispatch(_ request: Request, _ context: Context) async throws -> Response {
    var rawPath = request.uri.path
    rawPath.removeFirst("/_wiki".count)
    let segments = try rawPath.split(separator: "/", omittingEmptySubsequences: true).map {
      guard let decoded = String($0).removingPercentEncoding else {
        throw Failure(status: .badRequest, message: "The address is not valid.")
      }
      return decoded
    }
    let query = Query(request.uri.query)
    let method = request.method
    if segments.first == "_static" {
      return try staticFile(segments.dropFirst().joined(separator: "/"))
    }
    if segments == ["_signin"] {
      return try await signInPage(request, context, query: query)
    }
    if !rawPath.isEmpty && !rawPath.hasSuffix("/") && segments.count == 1
      && !segments[0].hasPrefix("_") && method == .get
    {
      // `/_wiki/{wiki}` → `/_wiki/{wiki}/`, so that relative links work.
      throw Redirect(location: request.uri.path + "/" + (request.uri.query.map { "?" + $0 } ?? ""))
    }
    guard let session = try await session(request, context) else {
      let next = request.uri.path + (request.uri.query.map { "?" + $0 } ?? "")
      throw Redirect(location: "/_wiki/_signin?next=" + Self.encode(next))
    }
    // The store checks this user's writes against the data directory's access rules in the
    // transaction that commits them (``WriteAccess``).
    return try await WriteAccess.$user.withValue(session.user) {
      try await signedIn(request, session, method: method, segments: segments, query: query)
    }
  }

  /// ``dispatch(_:_:)`` for a signed-in user.
  func signedIn(
    _ request: Request, _ session: Session, method: HTTPRequest.Method, segments: [String],
    query: Query
  ) async throws -> Response {
    var form: Query? = nil
    if method == .post {
      form = try await checkedForm(request, session: session)
    }
    let store = try await openStore()
    let page: Page
    switch segments.first {
    case nil:
      if let form { return try await createWiki(form, session, store) }
      page = try myWikis(session, store)
    case "_signout":
      guard method == .post else {
        throw Failure(status: .methodNotAllowed, message: "Sign out with the button.")
      }
      throw Redirect(
        location: "/_wiki/_signin",
        setCookie: couch.options.authenticator?.signOutCookie(secure: couch.options.secure))
    case "_recent":
      page = try recentChanges(session, store)
    case "_sync":
      page = Page(title: "Sync", body: Templates.render("sync", [:]))
    case let first? where first.hasPrefix("_"):
      page = notFound("There is no such page.")
    case let wiki?:
      if segments.count == 1 {
        page = try await wikiRequest(wiki, query: query, form: form, session, store)
      } else {
        let title = segments.dropFirst().joined(separator: "/")
        let result = try await pageRequest(
          wiki: wiki, title: title, query: query, form: form, session, store, method: method)
        switch result {
        case .page(let p): page = p
        case .response(let r): return r
        }
      }
    }
    return html(page, session: session, head: method == .head)
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

  /// The form of a POST, after the CSRF checks: the token, and the `Origin` when sent.
  func checkedForm(_ request: Request, session: Session) async throws -> Query {
    if let origin = request.headers[.origin], let host = request.head.authority {
      let allowed = ["http://" + host, "https://" + host]
      guard allowed.contains(origin) else {
        throw Failure(status: .forbidden, message: "The form came from another site.")
      }
    }
    let bytes = try await request.body.collect(upTo: 16 << 20)
    let form = Query(String(buffer: bytes))
    guard let token = form["csrf"], token == session.csrf else {
      throw Failure(
        status: .forbidden,
        message: "The form has expired or came from another site; reload the page.")
    }
    return form
  }

  func signInPage(_ request: Request, _ context: Context, query: Query) async throws -> Response {
    guard let auth = couch.options.authenticator else {
      throw Redirect(location: "/_wiki/")
    }
    var next = query["next"] ?? "/_wiki/"
    if !next.hasPrefix("/_wiki/") { next = "/_wiki/" }
    if request.method == .post {
      let bytes = try await request.body.collect(upTo: 1 << 20)
      let form = Query(String(buffer: bytes))
      if let n = form["next"], n.hasPrefix("/_wiki/") { next = n }
      // Hummingbird's cookie parsing (every `Cookie` header, `;`-separated).
      let expected = request.cookies[Self.signInCookie]?.value
      if let origin = request.headers[.origin], let host = request.head.authority,
        origin != "http://" + host && origin != "https://" + host
      {
        throw Failure(status: .forbidden, message: "The form came from another site.")
      }
      guard let expected, !expected.isEmpty, form["csrf"] == expected else {
        throw Failure(
          status: .forbidden,
          message: "The sign-in form has expired or came from another site; reload it.")
      }
      let name = form["name"] ?? ""
      do {
        let signed = try await auth.signIn(
          name: name, password: form["password"] ?? "", client: context.peerAddress,
          secure: couch.options.secure)
        throw Redirect(location: next, setCookie: signed.setCookie + "; SameSite=Lax")
      } catch let error as AuthError {
        var page = Page(
          title: "Sign in",
          body: Templates.render(
            "signin", ["error": error.reason, "next": next, "name": name, "csrf": expected]))
        page.status = .init(code: error.status)
        return html(page, session: nil)
      }
    }
    // Login CSRF: a random token in a SameSite=Strict cookie and in the form (double submit).
    let token = Hex.encode((0..<16).map { _ in UInt8.random(in: 0...255) })
    var response = html(
      Page(title: "Sign in", body: Templates.render("signin", ["next": next, "csrf": token])),
      session: nil)
    response.headers[.setCookie] =
      "\(Self.signInCookie)=\(token); Path=/_wiki/_signin; HttpOnly; SameSite=Strict"
      + (couch.options.secure ? "; Secure" : "")
    return response
  }

  /// The cookie of the sign-in form's CSRF token.
  static let signInCookie = "wikilog_signin"

  // MARK: Responses

  static let contentSecurityPolicy =
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data: https:; connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"

  func html(_ page: Page, session: Session?, head: Bool = false) -> Response {
    // The body goes in after the layout is rendered: Mustache need not carry it.
    let marker = "\u{1}wikilog-body\u{1}"
    var object: [String: Any] = [
      "title": page.title, "body": marker, "csrf": session?.csrf ?? "",
    ]
    if let session { object["user"] = session.displayName }
    if let asOf = page.asOf {
      object["asOf"] = asOf
      object["asOfExit"] = page.asOfExit ?? "?"
    }
    let layout = Templates.render("layout", object)
    var text = layout
    if let range = layout.range(of: marker) {
      text = String(layout[..<range.lowerBound]) + page.body + String(layout[range.upperBound...])
    }
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

  func staticFile(_ name: String) throws -> Response {
    guard let (type, text) = StaticFiles.files[name] else {
      return Self.plainError(404, "Not found")
    }
    var headers = HTTPFields()
    headers[.contentType] = type
    headers[.cacheControl] = "public, max-age=3600"
    headers[HTTPField.Name("X-Content-Type-Options")!] = "nosniff"
    return Response(
      status: .ok, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(string: text)))
  }

  // MARK: URLs

  static func encode(_ text: String) -> String {
    text.addingPercentEncoding(withAllowedCharacters: .urlPathAllowedSegment) ?? text
  }

  static func wikiHref(_ wiki: String) -> String { "/_wiki/" + encode(wiki) + "/" }

  static func pageHref(_ wiki: String, _ title: String) -> String {
    "/_wiki/" + encode(wiki) + "/" + encode(title)
  }

  static func time(_ micros: Int64) -> String {
    ISO8601.format(microseconds: micros, fractionDigits: 0)
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

/// A parsed query string or `application/x-www-form-urlencoded` body: the first value of each
/// name.
struct Query: Sendable {
  var values: [String: String] = [:]

  init(_ text: String?) {
    guard let text else { return }
    for pair in text.split(separator: "&") {
      let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
      func decode(_ s: Substring) -> String {
        String(s).replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? String(s)
      }
      let name = decode(parts[0])
      if values[name] == nil { values[name] = parts.count > 1 ? decode(parts[1]) : "" }
    }
  }

  subscript(name: String) -> String? { values[name] }
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
