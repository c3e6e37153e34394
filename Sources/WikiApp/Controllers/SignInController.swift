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

/// `/_wiki/_signin` (the form, and CouchDB's `AuthSession` cookie when it is right) and
/// `/_wiki/_signout`. The sign-in form has its own CSRF token, in a `SameSite=Strict` cookie
/// and the form (a double submit), as no session exists yet.
struct SignInController: RoutedController {
  let site: WikiSite

  func routes() -> RouteCollection<CouchRequestContext> {
    let routes = RouteCollection(context: CouchRequestContext.self)
    routes.get("_signin") { request, context in try await signIn(request, context) }
    routes.head("_signin") { request, context in try await signIn(request, context) }
    routes.post("_signin") { request, context in try await signIn(request, context) }
    routes.post("_signout") { request, context in
      try await site.signedIn(request, context) { session, _ in
        _ = try await site.form(TokenForm.self, request, session: session)
        throw Redirect(
          location: "/_wiki/_signin",
          setCookie: couch.options.authenticator?.signOutCookie(secure: couch.options.secure))
      }
    }
    routes.get("_signout") { request, context in
      try await site.signedIn(request, context) { _, _ in
        throw Failure(status: .methodNotAllowed, message: "Sign out with the button.")
      }
    }
    return routes
  }

  struct SignInQuery: Decodable {
    var next: String?
  }

  struct SignInForm: Decodable {
    var csrf: String?
    var name: String?
    var password: String?
    var next: String?
  }

  func signIn(_ request: Request, _ context: Context) async throws -> Response {
    let query = try site.query(SignInQuery.self, request)
    guard let auth = couch.options.authenticator else {
      throw Redirect(location: "/_wiki/")
    }
    var next = query.next ?? "/_wiki/"
    if !next.hasPrefix("/_wiki/") { next = "/_wiki/" }
    if request.method == .post {
      let form = try await site.decodedForm(SignInForm.self, request, upTo: 1 << 20)
      if let n = form.next, n.hasPrefix("/_wiki/") { next = n }
      // Hummingbird's cookie parsing (every `Cookie` header, `;`-separated).
      let expected = request.cookies[WikiSite.signInCookie]?.value
      try site.checkOrigin(request)
      guard let expected, !expected.isEmpty, form.csrf == expected else {
        throw Failure(
          status: .forbidden,
          message: "The sign-in form has expired or came from another site; reload it.")
      }
      let name = form.name ?? ""
      do {
        let signed = try await auth.signIn(
          name: name, password: form.password ?? "", client: context.peerAddress,
          secure: couch.options.secure)
        throw Redirect(location: next, setCookie: signed.setCookie + "; SameSite=Lax")
      } catch let error as AuthError {
        var reason = error.reason
        if error.status == 401 && !auth.users.exists {
          // CouchDB's answer names no cause; the page says what happened to everyone's user.
          reason +=
            " This server's users database (_users) was deleted by an administrator: only its server administrators can sign in until one creates it again (PUT /_users) and adds the users."
        }
        var page = Page(
          title: "Sign in",
          body: Templates.render(
            "signin", ["error": reason, "next": next, "name": name, "csrf": expected]))
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
      "\(WikiSite.signInCookie)=\(token); Path=/_wiki/_signin; HttpOnly; SameSite=Strict"
      + (couch.options.secure ? "; Secure" : "")
    return response
  }

}
