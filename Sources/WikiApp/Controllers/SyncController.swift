import Auth
import CouchAPI
import CouchReplicator
import Crypto
import Formats
import Foundation
import HTTPTypes
import Hummingbird
import JSON
import NIOCore
import Projections
import Replication
import RevTree
import ServiceLifecycle
import Synchronization
import Wiki

/// `/_wiki/_sync`: two-way continuous sync of the wiki database with another server (a
/// wikilog, a CouchDB, anything that speaks the replication protocol), kept in `_replicator`
/// documents the signed-in user owns, run by the server's scheduler
/// (``Replication/ReplicatorDocuments``).
///
/// A sync is two documents, `wikisync-{id}-push` and `-pull`, with a `wikilog_sync` member
/// that names the remote (without credentials) and the direction. The remote's credentials
/// (a name and password, or a token) go into the remote endpoint's `auth` or `headers`; this
/// server's side is reached at the address the request came in on, with an API token made
/// for the user (``Auth/APITokens``, revoked when the sync is removed), so that the
/// replication reads and writes exactly what the user may. Credentials are never shown back:
/// the page shows the remote's URL without them, `_scheduler/docs` strips them, and a user
/// sees only their own syncs (administrators see all). Pausing sets
/// ``Replication/ReplicatorDocuments/pausedField`` on both documents.
///
/// `/_wiki/_sync/_events` streams the syncs' states as `text/event-stream` while the page is
/// open (one event when something changed, checked every second), and every page's header
/// shows a summary (``SyncController/summary(for:)``).
struct SyncController: RoutedController {
  let site: WikiSite

  func routes() -> RouteCollection<CouchRequestContext> {
    let routes = RouteCollection(context: CouchRequestContext.self)
    routes.get("_sync") { request, context in try await page(request, context) }
    routes.head("_sync") { request, context in try await page(request, context) }
    routes.post("_sync") { request, context in try await post(request, context) }
    routes.get("_sync/_events") { request, context in try await events(request, context) }
    return routes
  }

  // MARK: Reading

  /// One direction of a sync.
  struct Direction: Sendable {
    let name: String
    let docID: String
    let state: ReplicatorDocuments.DocumentState

    /// The state shown: the job's, with "not all sent" as "not all received" when pulling.
    var stateText: String {
      state.state == .refused && name == "pull" ? "not all received" : state.state.rawValue
    }

    /// The remote's URL without credentials, as the sync's document names it.
    var remote = ""

    /// Whether the last error is the remote's answer rather than this server's: errors name
    /// the URL that answered.
    var remoteFailed: Bool {
      guard let error = state.lastError, !remote.isEmpty else { return true }
      return error.contains(remote)
    }

    /// What to do about the state, in a sentence; nil when nothing is to be done.
    var advice: String? {
      switch state.state {
      case .offline:
        return "Nothing to do: it is tried again by itself (or press Retry now)."
      case .needsAttention:
        switch state.problem {
        case .unauthorized?:
          return remoteFailed
            ? "The remote refuses the user name and password (or token) given: change them with Change credentials."
            : "This server no longer accepts the sync's own token (it was revoked): save the credentials again with Change credentials to give it a new one."
        case .forbidden?:
          return remoteFailed
            ? "The remote does not let this user read or write the database: ask its administrator for access, or use another user's credentials (Change credentials)."
            : "You may not use this server's wiki database: ask an administrator of this server."
        case .missingDatabase?:
          return remoteFailed
            ? "The remote database does not exist: create it there, or remove this sync and set it up again with the right URL."
            : "This server's wiki database does not exist any more: ask an administrator of this server."
        default:
          return
            "The other side refuses the requests: check the URL and the credentials, then press Retry now."
        }
      case .refused:
        // Pages of wikis the user is not in (what wikis refuse); anything else by its reason.
        let forbidden = refused.allSatisfy { $0.text.hasPrefix("forbidden") }
        if name == "push" {
          return forbidden
            ? "On the remote you may not write these (pages of wikis you are not the owner or a member of there, or such wikis): ask their owners there to add you, then press Retry now. They stay here meanwhile."
            : "Fix what the reasons say, then press Retry now; the documents stay here meanwhile."
        }
        return forbidden
          ? "On this server you may not write these (pages of wikis you are not the owner or a member of here, or such wikis): ask their owners here to add you, then press Retry now."
          : "Fix what the reasons say, then press Retry now."
      case .failed:
        return "Remove this sync and set it up again."
      default:
        return nil
      }
    }

    var json: JSONValue {
      var object = JSONObject([
        "direction": .string(name), "doc_id": .string(docID),
        "state": .string(stateText),
        "docs_read": .int(state.status?.report.docsRead ?? 0),
        "docs_written": .int(state.status?.report.docsWritten ?? 0),
      ])
      if let pending = state.status?.pending { object["pending"] = .int(pending) }
      if let error = state.lastError { object["error"] = .string(error) }
      if let problem = state.problem { object["problem"] = .string(problem.rawValue) }
      if let advice { object["advice"] = .string(advice) }
      if let retry = state.nextRetry { object["next_retry"] = .string(ISO8601.format(retry)) }
      if let last = state.lastActivity { object["last_activity"] = .string(ISO8601.format(last)) }
      object["refused"] = .array(
        refused.map { .object(JSONObject(["id": .string($0.id), "reason": .string($0.text)])) })
      return .object(object)
    }

    /// What the other side refuses, per document, with the reason.
    var refused: [(id: String, text: String)] {
      (state.status?.report.refused ?? []).map { r in
        (r.id, [r.error, r.reason].filter { !$0.isEmpty }.joined(separator: ": "))
      }
    }

    /// "3 pages could not be sent" (documents, when some are not pages); nil when none.
    var refusedSummary: String? {
      let list = refused
      guard !list.isEmpty else { return nil }
      let pages = list.allSatisfy { $0.id.contains(":") }
      let noun =
        pages ? (list.count == 1 ? "page" : "pages") : (list.count == 1 ? "document" : "documents")
      return "\(list.count) \(noun) could not be \(name == "push" ? "sent" : "received")"
    }
  }

  /// A sync: its remote and its two directions.
  struct Sync: Sendable {
    let id: String
    let remote: String
    let owner: String?
    let paused: Bool
    var directions: [Direction]

    /// The state of the sync as a whole: the worst of its directions'.
    var state: String { SyncController.worst(directions.map(\.stateText)) }
  }

  /// The jobs of the server's `_replicator` documents (CouchReplicator's feature), nil when it
  /// has none.
  var replicatorDocuments: ReplicatorDocuments? {
    couch.featureState(ServerReplications.self)?.documents
  }

  /// The `_replicator` database, nil when the server runs none.
  func replicator() throws -> DocumentStore? {
    guard let documents = replicatorDocuments, documents.isEnabled else { return nil }
    let data = couch.dataDirectory
    return try data.storeIfOpen(ReplicatorDocuments.databaseName)
      ?? data.open(ReplicatorDocuments.databaseName, create: true)
  }

  /// The syncs `session`'s user may see: their own, every one for an administrator.
  func syncs(for session: Session) throws -> [Sync] {
    guard let store = try replicator() else { return [] }
    var options = AllDocsOptions()
    options.includeDocs = true
    options.startKey = "wikisync-"
    options.endKey = "wikisync-\u{FFF0}"
    var byID: [String: Sync] = [:]
    var order: [String] = []
    for row in try store.allDocs(options).rows {
      guard let id = row["id"]?.stringValue, case .object(let doc)? = row["doc"],
        case .object(let sync)? = doc["wikilog_sync"], let syncID = sync["id"]?.stringValue,
        let direction = sync["direction"]?.stringValue
      else { continue }
      let owner = doc["owner"]?.stringValue
      guard session.user.isAdmin || (owner != nil && owner == session.user.name) else {
        continue
      }
      // The document is read already: its state without a second read.
      guard let state = replicatorDocuments?.state(ofDocument: id, body: doc) else { continue }
      if byID[syncID] == nil {
        order.append(syncID)
        byID[syncID] = Sync(
          id: syncID, remote: sync["remote"]?.stringValue ?? "?", owner: owner,
          paused: doc[ReplicatorDocuments.pausedField] == .bool(true), directions: [])
      }
      byID[syncID]?.directions.append(
        Direction(
          name: direction, docID: id, state: state, remote: sync["remote"]?.stringValue ?? ""))
    }
    return order.compactMap { byID[$0] }
  }

  /// The header's sync indicator for `session`: nil when the user has no sync.
  static func summary(site: WikiSite, for session: WikiSite.Session) -> (
    text: String, state: String
  )? {
    let controller = SyncController(site: site)
    guard let syncs = try? controller.syncs(for: session), !syncs.isEmpty else { return nil }
    let state = worst(syncs.map(\.state))
    return ("Sync: " + state, state.replacingOccurrences(of: " ", with: "-"))
  }

  /// The worst of `states`, the order the page and the header show them in (the script's too).
  static func worst(_ states: [String]) -> String {
    [
      "needs attention", "failed", "offline", "not all sent", "not all received", "paused",
      "starting", "waiting", "active",
    ].first(where: states.contains) ?? "up to date"
  }

  // MARK: The page

  func page(_ request: Request, _ context: Context) async throws -> Response {
    try await site.signedInPage(request, context) { session, store in
      try render(session, store)
    }
  }

  func render(
    _ session: Session, _ store: DocumentStore, error: String? = nil,
    status: HTTPResponse.Status = .ok
  ) throws -> Page {
    guard replicatorDocuments?.isEnabled == true else {
      return Page(
        title: "Sync",
        body: Templates.render("sync", ["disabled": true, "csrf": session.csrf]))
    }
    let rows: [[String: Any]] = try syncs(for: session).map { sync in
      [
        "id": sync.id, "remote": sync.remote, "owner": sync.owner ?? "administrators",
        "state": sync.state, "paused": sync.paused, "csrf": session.csrf,
        "directions": sync.directions.map { d -> [String: Any] in
          var row: [String: Any] = [
            "name": d.name == "push" ? "Sending" : "Receiving", "docID": d.docID,
            "state": d.stateText,
            "docsRead": d.state.status?.report.docsRead ?? 0,
            "docsWritten": d.state.status?.report.docsWritten ?? 0,
            "pending": d.state.status?.pending.map(String.init) ?? "–",
          ]
          if let error = d.state.lastError { row["error"] = error }
          if let advice = d.advice { row["advice"] = advice }
          if let summary = d.refusedSummary {
            row["refusedSummary"] = summary
            row["refused"] = d.refused.map { ["id": $0.id, "reason": $0.text] }
          }
          row["refusedCount"] = d.refused.count
          if let retry = d.state.nextRetry {
            row["nextRetry"] = WikiSite.time(Int64(retry.timeIntervalSince1970 * 1_000_000))
          }
          if let last = d.state.lastActivity {
            row["lastActivity"] = WikiSite.time(Int64(last.timeIntervalSince1970 * 1_000_000))
          }
          return row
        },
      ]
    }
    var object: [String: Any] = [
      "syncs": rows, "csrf": session.csrf, "database": options.database,
      "conflicts": try conflicts(session, store),
    ]
    if let error { object["error"] = error }
    var page = Page(title: "Sync", body: Templates.render("sync", object))
    page.status = status
    return page
  }

  /// The wikis the user may read that have pages with conflicting revisions (both sides
  /// changed them: what a sync brings), with how many, linked to each wiki's Conflicts page.
  func conflicts(_ session: Session, _ store: DocumentStore) throws -> [[String: Any]] {
    let queries = try WikiQueries(store)
    let view = try self.view(session, store)
    var rows: [[String: Any]] = []
    for wiki in try queries.wikis() where view?.includes(wiki.id) ?? true {
      var count = 0
      for id in [wiki.id] + (try queries.pages(in: wiki.id).map(\.id)) {
        if let record = try store.record(id),
          record.tree.leaves.filter({ !$0.isDeleted }).count > 1
        {
          count += 1
        }
      }
      guard count > 0 else { continue }
      rows.append([
        "wikiTitle": wiki.title.isEmpty ? wiki.id : wiki.title,
        "href": Self.wikiHref(wiki.id) + "?action=conflicts",
        "count": WikiSite.count(count, "page"),
      ])
    }
    return rows
  }

  // MARK: Setting up, pausing, removing

  struct SyncForm: PostedForm {
    var csrf: String?
    var action: String?
    var remote: String?
    var username: String?
    var password: String?
    var token: String?
    var sync: String?
    /// `yes` once Remove was confirmed.
    var confirm: String?
  }

  func post(_ request: Request, _ context: Context) async throws -> Response {
    try await site.signedIn(request, context) { session, wikiStore in
      let form = try await site.form(SyncForm.self, request, session: session)
      guard let store = try replicator() else {
        throw Failure(status: .notImplemented, message: "This server runs no replications.")
      }
      do {
        switch form.action {
        case "add": try await add(form, session, store, context: context)
        case "pause": try await setPaused(true, form, session, store)
        case "resume": try await setPaused(false, form, session, store)
        case "retry": try await retry(form, session)
        case "credentials": try await changeCredentials(form, session, store)
        case "remove":
          guard form.confirm == "yes" else {
            return html(try confirmRemoval(form, session), session: session)
          }
          try await remove(form, session, store)
        default: throw Failure(status: .badRequest, message: "Unknown action.")
        }
      } catch let failure as Failure {
        return html(
          try render(session, wikiStore, error: failure.message, status: failure.status),
          session: session)
      }
      throw Redirect(location: "/_wiki/_sync")
    }
  }

  /// The remote's URL, checked: http or https, a host, a database.
  static func remoteURL(_ text: String) throws -> URL {
    let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
    guard let url = URL(string: trimmed), let scheme = url.scheme?.lowercased(),
      scheme == "http" || scheme == "https", url.host != nil,
      url.path.split(separator: "/").count >= 1
    else {
      throw Failure(
        status: .badRequest,
        message:
          "The remote must be the URL of a database, such as https://team.example/wiki.")
    }
    guard url.user == nil && url.password == nil else {
      throw Failure(
        status: .badRequest,
        message: "Give the remote's user name and password in their own fields, not the URL.")
    }
    return url
  }

  func add(_ form: SyncForm, _ session: Session, _ store: DocumentStore, context: Context)
    async throws
  {
    let remote = try Self.remoteURL(form.remote ?? "")
    var remoteEndpoint = JSONObject(["url": .string(remote.absoluteString)])
    Self.setCredentials(form, in: &remoteEndpoint)
    // This server, as the replication reaches it: the address the request came in on.
    guard let local = context.localAddress else {
      throw Failure(status: .internalServerError, message: "This server's address is unknown.")
    }
    let scheme = couch.options.secure ? "https" : "http"
    var localEndpoint = JSONObject([
      "url": .string("\(scheme)://\(local)/" + PercentDecoding.encode(options.database))
    ])
    let tokenID = try await setLocalToken(
      in: &localEndpoint, session, label: "sync with \(Self.stripped(remote))")
    let owner = session.user.name
    let syncID = Hex.encode(
      Array(SHA256.hash(data: Array("\(owner ?? "")\u{0}\(remote.absoluteString)".utf8)))
    ).prefix(16)
    let now = ISO8601.format(Date())
    for (direction, source, target) in [
      ("push", localEndpoint, remoteEndpoint), ("pull", remoteEndpoint, localEndpoint),
    ] {
      let id = "wikisync-\(syncID)-\(direction)"
      if (try? store.get(id)) != nil {
        throw Failure(
          status: .conflict, message: "You sync with \(Self.stripped(remote)) already.")
      }
      var sync = JSONObject([
        "id": .string(String(syncID)), "remote": .string(Self.stripped(remote)),
        "direction": .string(direction), "created_at": .string(now),
      ])
      if let tokenID { sync["token_id"] = .string(tokenID) }
      let body = JSONObject([
        "source": .object(source), "target": .object(target), "continuous": .bool(true),
        "owner": owner.map { .string($0) } ?? .null, "wikilog_sync": .object(sync),
      ])
      _ = try await store.putAsync(
        parsed: .object(body), id: id, actor: session.actor, origin: session.origin)
    }
  }

  /// The credentials of `form` (a token, or a name and password; none when both are empty)
  /// as the remote endpoint's `headers` or `auth`, replacing those it had.
  static func setCredentials(_ form: SyncForm, in endpoint: inout JSONObject) {
    endpoint["headers"] = nil
    endpoint["auth"] = nil
    let token = (form.token ?? "").trimmingCharacters(in: .whitespaces)
    let username = (form.username ?? "").trimmingCharacters(in: .whitespaces)
    if !token.isEmpty {
      let header =
        token.hasPrefix(APITokens.tokenPrefix) ? "Token token=" + token : "Bearer " + token
      endpoint["headers"] = .object(JSONObject(["Authorization": .string(header)]))
    } else if !username.isEmpty {
      endpoint["auth"] = .object(
        JSONObject([
          "basic": .object(
            JSONObject([
              "username": .string(username), "password": .string(form.password ?? ""),
            ]))
        ]))
    }
  }

  /// Makes an API token for `session`'s user to reach this server with and puts it in
  /// `endpoint`'s headers; returns its id (nil on a server without users, reached as it is).
  func setLocalToken(in endpoint: inout JSONObject, _ session: Session, label: String)
    async throws -> String?
  {
    guard let auth = couch.options.authenticator, let name = session.user.name else {
      return nil
    }
    let made = try await blocking {
      try auth.tokens.create(user: name, label: label, actor: session.actor)
    }
    endpoint["headers"] = .object(
      JSONObject(["Authorization": .string("Token token=" + made.token)]))
    return made.record.id
  }

  /// Retry now: each direction's job is tried again at once (``ReplicatorDocuments/retryNow(documentID:)``).
  func retry(_ form: SyncForm, _ session: Session) async throws {
    let directions = try documents(form, session)
    guard directions.contains(where: { $0.state.state != .paused }) else {
      throw Failure(status: .conflict, message: "The sync is paused: resume it first.")
    }
    for direction in directions {
      _ = await replicatorDocuments?.retryNow(documentID: direction.docID)
    }
  }

  /// Change credentials: the remote's side gets the credentials of the form, this server's
  /// side a new token (the old one is revoked); both documents change, so their jobs start
  /// again with them.
  func changeCredentials(_ form: SyncForm, _ session: Session, _ store: DocumentStore)
    async throws
  {
    let directions = try documents(form, session)
    var oldTokens: Set<String> = []
    var newToken: (id: String?, header: JSONValue?)? = nil
    for direction in directions {
      guard case .object(var body) = try store.get(direction.docID),
        case .object(var sync)? = body["wikilog_sync"]
      else { continue }
      let rev = body["_rev"]?.stringValue
      body.members.removeAll { $0.key == "_id" || $0.key == "_rev" }
      let (remoteSide, localSide) =
        direction.name == "push" ? ("target", "source") : ("source", "target")
      if case .object(var remote)? = body[remoteSide] {
        Self.setCredentials(form, in: &remote)
        body[remoteSide] = .object(remote)
      }
      if case .object(var local)? = body[localSide] {
        if newToken == nil {
          let id = try await setLocalToken(
            in: &local, session, label: "sync with \(sync["remote"]?.stringValue ?? "?")")
          newToken = (id, local["headers"])
        } else {
          local["headers"] = newToken?.header
        }
        body[localSide] = .object(local)
      }
      if let old = sync["token_id"]?.stringValue { oldTokens.insert(old) }
      sync["token_id"] = newToken?.id.map { .string($0) }
      sync["credentials_changed_at"] = .string(ISO8601.format(Date()))
      body["wikilog_sync"] = .object(sync)
      _ = try await store.putAsync(
        parsed: .object(body), id: direction.docID, rev: rev, actor: session.actor,
        origin: session.origin)
    }
    if let auth = couch.options.authenticator {
      for token in oldTokens where token != newToken?.id {
        try? await blocking { try auth.tokens.revoke(id: token, actor: session.actor) }
      }
    }
  }

  /// The page that asks before a sync is removed.
  func confirmRemoval(_ form: SyncForm, _ session: Session) throws -> Page {
    let sync = try sync(form, session)
    return Page(
      title: "Remove sync",
      body: Templates.render(
        "sync-remove", ["id": sync.id, "remote": sync.remote, "csrf": session.csrf]))
  }

  /// A URL without its userinfo, query and fragment.
  static func stripped(_ url: URL) -> String {
    var parts = URLComponents(url: url, resolvingAgainstBaseURL: false)
    parts?.user = nil
    parts?.password = nil
    parts?.query = nil
    parts?.fragment = nil
    return parts?.string ?? url.host ?? "?"
  }

  /// The documents of sync `form.sync`, when `session`'s user may change them.
  func documents(_ form: SyncForm, _ session: Session) throws -> [Direction] {
    try sync(form, session).directions
  }

  /// Sync `form.sync`, when `session`'s user may change it.
  func sync(_ form: SyncForm, _ session: Session) throws -> Sync {
    guard let id = form.sync, let sync = try syncs(for: session).first(where: { $0.id == id })
    else {
      throw Failure(status: .notFound, message: "There is no such sync, or it is not yours.")
    }
    return sync
  }

  func setPaused(_ paused: Bool, _ form: SyncForm, _ session: Session, _ store: DocumentStore)
    async throws
  {
    for direction in try documents(form, session) {
      guard case .object(var body) = try store.get(direction.docID) else { continue }
      let rev = body["_rev"]?.stringValue
      body.members.removeAll { $0.key == "_id" || $0.key == "_rev" }
      body[ReplicatorDocuments.pausedField] = paused ? .bool(true) : nil
      _ = try await store.putAsync(
        parsed: .object(body), id: direction.docID, rev: rev, actor: session.actor,
        origin: session.origin)
    }
  }

  func remove(_ form: SyncForm, _ session: Session, _ store: DocumentStore) async throws {
    var tokens: Set<String> = []
    for direction in try documents(form, session) {
      guard let doc = try? store.get(direction.docID), let rev = doc["_rev"]?.stringValue
      else { continue }
      if let token = doc["wikilog_sync"]?["token_id"]?.stringValue { tokens.insert(token) }
      _ = try await store.deleteAsync(
        direction.docID, rev: rev, actor: session.actor, origin: session.origin)
    }
    if let auth = couch.options.authenticator {
      for token in tokens {
        try? await blocking { try auth.tokens.revoke(id: token, actor: session.actor) }
      }
    }
  }

  // MARK: Live

  /// The syncs' states as `text/event-stream`: an event (`data:` the JSON of every sync)
  /// when they change, checked every second, and a comment every 15 seconds to keep the
  /// connection open. Ends when the browser goes.
  func events(_ request: Request, _ context: Context) async throws -> Response {
    try await site.signedIn(request, context) { session, _ in
      let controller = self
      var headers = HTTPFields()
      headers[.contentType] = "text/event-stream"
      headers[.cacheControl] = "no-store"
      let body = ResponseBody { writer in
        var last = ""
        var quiet = 0
        // The server's graceful shutdown ends the stream (as it ends the changes feeds), within
        // the second the loop sleeps.
        let stopping = StopFlag()
        try await withGracefulShutdownHandler {
          while !Task.isCancelled && !stopping.isSet {
            let state = controller.stateJSON(session)
            if state != last {
              last = state
              quiet = 0
              try await writer.write(ByteBuffer(string: "data: \(state)\n\n"))
            } else {
              quiet += 1
              if quiet >= 15 {
                quiet = 0
                try await writer.write(ByteBuffer(string: ": keep-alive\n\n"))
              }
            }
            try await Task.sleep(for: .seconds(1))
          }
        } onGracefulShutdown: {
          stopping.set()
        }
        try await writer.finish(nil)
      }
      return Response(status: .ok, headers: headers, body: body)
    }
  }

  /// `[{"id","remote","state","directions":[{"direction","state","docs_read",...}]}]`.
  func stateJSON(_ session: Session) -> String {
    let syncs = (try? syncs(for: session)) ?? []
    let value = JSONValue.array(
      syncs.map { sync in
        .object(
          JSONObject([
            "id": .string(sync.id), "remote": .string(sync.remote), "state": .string(sync.state),
            "directions": .array(sync.directions.map(\.json)),
          ]))
      })
    return String(decoding: value.serialized(), as: UTF8.self)
  }
}

/// A flag one task sets and another reads.
final class StopFlag: Sendable {
  private let value = Mutex(false)
  var isSet: Bool { value.withLock { $0 } }
  func set() { value.withLock { $0 = true } }
}
