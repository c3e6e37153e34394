import Auth
import CouchAPI
import Formats
import Foundation
import HTTPTypes
import Hummingbird
import Projections

/// `/_wiki/_invite`: where an invitation link leads (``Auth/Invitations``). The link carries
/// its code after `#`, which browsers never send, so no server log holds it: the page's script
/// puts it in the form (without a script it is pasted). The visitor chooses a name and a
/// password, the account is made, the invitation is used up, and they are signed in. The form
/// has the sign-in form's CSRF double submit, as no session exists yet.
struct InviteController: RoutedController {
  let site: WikiSite

  func routes() -> RouteCollection<CouchRequestContext> {
    let routes = RouteCollection(context: CouchRequestContext.self)
    routes.get("_invite") { request, context in try await invite(request, context) }
    routes.head("_invite") { request, context in try await invite(request, context) }
    routes.post("_invite") { request, context in try await invite(request, context) }
    return routes
  }

  struct InviteForm: Decodable {
    var csrf: String?
    var code: String?
    var name: String?
    var password: String?
    var password2: String?
  }

  /// The cookie of the form's CSRF token.
  static let cookie = "wikilog_invite"

  func invite(_ request: Request, _ context: Context) async throws -> Response {
    guard let auth = couch.options.authenticator else {
      throw Failure(
        status: .notFound, message: "This server signs no one in: it takes no invitations.")
    }
    if request.method == .post {
      let form = try await site.decodedForm(InviteForm.self, request, upTo: 1 << 16)
      try site.checkOrigin(request)
      let expected = request.cookies[Self.cookie]?.value
      guard let expected, !expected.isEmpty, form.csrf == expected else {
        throw Failure(
          status: .forbidden,
          message: "The form has expired or came from another site: open the invitation link again."
        )
      }
      let code = (form.code ?? "").trimmingCharacters(in: .whitespaces)
      let name = (form.name ?? "").trimmingCharacters(in: .whitespaces)
      func again(_ reason: String, _ status: HTTPResponse.Status) -> Response {
        var page = Page(
          title: "Make your account",
          body: Templates.render(
            "invite", ["error": reason, "code": code, "name": name, "csrf": expected]))
        page.status = status
        return html(page, session: nil)
      }
      guard form.password == form.password2 else {
        return again("The two passwords differ: nothing was made.", .badRequest)
      }
      let user: User
      do {
        user = try await blocking {
          try auth.invitations.accept(code, name: name, password: form.password ?? "")
        }
      } catch let error as StoreError {
        let status = HTTPResponse.Status(code: error.code.httpStatus)
        return again(error.reason, status)
      }
      throw Redirect(
        location: "/_wiki/",
        setCookie: auth.cookie(for: user, secure: couch.options.secure) + "; SameSite=Lax")
    }
    let token = Hex.encode((0..<16).map { _ in UInt8.random(in: 0...255) })
    var response = html(
      Page(title: "Make your account", body: Templates.render("invite", ["csrf": token])),
      session: nil, head: request.method == .head)
    response.headers[.setCookie] =
      "\(Self.cookie)=\(token); Path=/_wiki/_invite; HttpOnly; SameSite=Strict"
      + (couch.options.secure ? "; Secure" : "")
    return response
  }
}
