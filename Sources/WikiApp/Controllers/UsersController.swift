import Auth
import CouchAPI
import Foundation
import Hummingbird
import Projections

/// `/_wiki/_settings`: the signed-in user's own settings: their feed token (see
/// ``FeedsController``: shown with the feeds it opens, made, made again, which revokes the
/// old one, or revoked) and their password (the current one required; a new one ends every
/// other session, and this one gets a fresh cookie).
struct UsersController: RoutedController {
  let site: WikiSite

  func routes() -> RouteCollection<CouchRequestContext> {
    let routes = RouteCollection(context: CouchRequestContext.self)
    routes.get("_settings") { request, context in try await settings(request, context) }
    routes.head("_settings") { request, context in try await settings(request, context) }
    routes.post("_settings") { request, context in
      try await site.signedIn(request, context) { session, store in
        try await post(
          try await site.form(SettingsForm.self, request, session: session), request, context,
          session)
      }
    }
    return routes
  }

  struct SettingsQuery: Decodable {
    var saved: String?
  }

  struct SettingsForm: PostedForm {
    var csrf: String?
    var action: String?
    var old_password: String?
    var new_password: String?
    var new_password2: String?
  }

  func settings(_ request: Request, _ context: Context) async throws -> Response {
    let query = try site.query(SettingsQuery.self, request)
    return try await site.signedInPage(request, context) { session, _ in
      try settingsPage(session, request, saved: query.saved)
    }
  }

  func settingsPage(
    _ session: Session, _ request: Request, saved: String?, error: String? = nil,
    status: HTTPResponse.Status = .ok
  ) throws -> Page {
    guard let name = session.user.name, couch.options.authenticator != nil else {
      throw Failure(
        status: .forbidden,
        message:
          "Settings are a signed-in user's: this server has no users, or you are not signed in as one."
      )
    }
    var object: [String: Any] = ["csrf": session.csrf, "name": name]
    if let (token, record) = try site.feedToken(for: session) {
      let base = site.baseURL(request)
      object["token"] = token
      object["tokenMade"] = WikiSite.time(Int64(record.createdAt.timeIntervalSince1970 * 1e6))
      if let used = record.lastUsedAt {
        object["tokenUsed"] = WikiSite.time(Int64(used.timeIntervalSince1970 * 1e6))
      }
      object["allFeed"] = base + "/_wiki/_feed?token=" + token
    }
    switch saved {
    case "password":
      object["saved"] = "Your password is changed. Other sessions with the old one have ended."
    case "token":
      object["saved"] =
        "Your feed token is made. Any token you had before no longer works."
    case "revoked":
      object["saved"] = "Your feed token is revoked: no feed reader can read your feeds."
    default: break
    }
    if let error { object["error"] = error }
    var page = Page(title: "Settings", body: Templates.render("user-settings", object))
    page.status = status
    return page
  }

  func post(
    _ form: SettingsForm, _ request: Request, _ context: Context, _ session: Session
  ) async throws -> Response {
    guard let name = session.user.name, let auth = couch.options.authenticator else {
      throw Failure(status: .forbidden, message: "Settings are a signed-in user's.")
    }
    switch form.action {
    case "token", "revoke":
      // One feed token per user: a new one revokes the old.
      let old = try auth.tokens.list(user: name).filter { $0.scope == APITokens.feedScope }
      let key = site.feedKey
      try await blocking {
        for token in old { try auth.tokens.revoke(id: token.id, actor: name) }
        if form.action == "token" {
          _ = try auth.tokens.create(
            user: name, label: "feeds", scope: APITokens.feedScope, key: key, actor: name)
        }
      }
      throw Redirect(
        location: "/_wiki/_settings?saved=" + (form.action == "token" ? "token" : "revoked"))
    case "password":
      let new = form.new_password ?? ""
      func refuse(_ message: String) throws -> Response {
        html(
          try settingsPage(session, request, saved: nil, error: message, status: .badRequest),
          session: session)
      }
      guard !new.isEmpty else { return try refuse("Choose a new password.") }
      guard new == form.new_password2 else {
        return try refuse("The new password and its repetition differ: nothing was changed.")
      }
      guard new.count >= 8 else {
        return try refuse("A password needs at least 8 characters: nothing was changed.")
      }
      do {
        _ = try await auth.verifyPassword(
          name: name, password: form.old_password ?? "", client: context.peerAddress)
      } catch {
        return try refuse("Your current password is not that one: nothing was changed.")
      }
      try await blocking { try auth.users.setPassword(of: name, to: new, actor: name) }
      let signed = try await auth.signIn(
        name: name, password: new, client: context.peerAddress, secure: couch.options.secure)
      throw Redirect(
        location: "/_wiki/_settings?saved=password", setCookie: signed.setCookie + "; SameSite=Lax")
    default:
      throw Failure(status: .badRequest, message: "Unknown action.")
    }
  }
}
