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
    routes.get("_users") { request, context in
      try await site.signedInPage(request, context) { session, _ in try usersPage(session) }
    }
    routes.post("_users") { request, context in
      try await site.signedIn(request, context) { session, _ in
        try await postUsers(
          try await site.form(UsersForm.self, request, session: session), request, session)
      }
    }
    return routes
  }

  struct UsersForm: PostedForm {
    var csrf: String?
    var action: String?
    var name: String?
    var confirm: String?
  }

  /// The users' administration is an administrator's; anyone else gets a 403 in the frame.
  func requireAdmin(_ session: Session) throws -> Authenticator {
    guard session.user.isAdmin, let auth = couch.options.authenticator else {
      throw Failure(status: .forbidden, message: "Only administrators manage users.")
    }
    return auth
  }

  /// `/_wiki/_users`: every user, their roles and status, with Disable/Enable and Remove (asked
  /// first); the invitations waiting to be used, with Revoke, and a button that makes one (its
  /// link shown once, in `link`); `changed` says what the last action did.
  func usersPage(_ session: Session, link: String? = nil, changed: String? = nil) throws -> Page {
    let auth = try requireAdmin(session)
    let micros = { (date: Date) in Int64(date.timeIntervalSince1970 * 1_000_000) }
    let invitations: [[String: Any]] = try auth.invitations.list().map { i in
      [
        "id": i.id, "createdBy": i.createdBy, "createdAt": WikiSite.time(micros(i.createdAt)),
        "plainCreatedAt": WikiSite.plainTime(micros(i.createdAt)),
        "expiresAt": WikiSite.time(micros(i.expiresAt)), "csrf": session.csrf,
      ]
    }
    var invitationData: [String: Any] = [
      "invitations": invitations, "hasInvitations": !invitations.isEmpty, "csrf": session.csrf,
    ]
    if let link { invitationData["link"] = link }
    let rows: [[String: Any]] = try auth.users.users().sorted { $0.name < $1.name }.map { u in
      [
        "name": u.name, "roles": u.roles.joined(separator: ", "), "isAdmin": u.isAdmin,
        "isYou": u.name == session.user.name, "hasPassword": u.hasPassword,
        "isDisabled": u.isDisabled, "csrf": session.csrf,
      ]
    }
    var usersData: [String: Any] = ["users": rows, "count": rows.count]
    if let changed { usersData["changed"] = changed }
    return Page(
      title: "Users",
      body: Templates.render("users", usersData)
        + Templates.render("users-invitations", invitationData))
  }

  func postUsers(_ form: UsersForm, _ request: Request, _ session: Session) async throws
    -> Response
  {
    let auth = try requireAdmin(session)
    switch form.action {
    case "invite":
      let made = try await blocking { try auth.invitations.create(actor: session.actor) }
      let scheme = couch.options.secure ? "https" : "http"
      let host = request.head.authority ?? "localhost"
      let link = "\(scheme)://\(host)/_wiki/_invite#\(made.token)"
      return html(try usersPage(session, link: link), session: session)
    case "revoke-invitation":
      let id = form.name ?? ""
      do {
        try await blocking { try auth.invitations.revoke(id: id, actor: session.actor) }
      } catch let error as StoreError where error.code == .notFound {
        throw Failure(
          status: .notFound, message: "There is no such invitation: it was used or revoked.")
      }
      throw Redirect(location: "/_wiki/_users")
    default:
      break
    }
    guard ["remove", "disable", "enable"].contains(form.action ?? "") else {
      throw Failure(status: .badRequest, message: "Unknown action.")
    }
    let name = form.name ?? ""
    guard let user = try auth.users.user(named: name) else {
      throw Failure(status: .notFound, message: "There is no user called “\(name)”.")
    }
    guard name != session.user.name else {
      throw Failure(
        status: .badRequest,
        message:
          "You cannot \(form.action == "remove" ? "remove" : "disable") yourself: another administrator can. Nothing was changed."
      )
    }
    if form.action == "disable" || form.action == "enable" {
      let disable = form.action == "disable"
      if user.isDisabled != disable {
        try await blocking { try auth.users.setDisabled(name, disable, actor: session.actor) }
      }
      return html(
        try usersPage(
          session,
          changed: disable
            ? "\(name) is disabled: they cannot sign in, and their sessions and tokens no longer work."
            : "\(name) is enabled: they can sign in again."),
        session: session)
    }
    guard form.confirm == "yes" else {
      return html(
        Page(
          title: "Remove \(name)?",
          body: Templates.render("user-remove", ["name": name, "csrf": session.csrf])),
        session: session)
    }
    try await blocking { try auth.users.remove(name: name, actor: session.actor) }
    throw Redirect(location: "/_wiki/_users")
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
    var object: [String: Any] = [
      "csrf": session.csrf, "name": name, "isAdmin": session.user.isAdmin,
    ]
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
