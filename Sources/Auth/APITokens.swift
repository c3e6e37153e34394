import Crypto
import Formats
public import Foundation
import JSON
import Log
import Projections
import Synchronization

/// An API token's record, without its secret.
public struct APIToken: Sendable, Hashable {
  /// What `wikilog token revoke` takes: 16 hex digits, also the start of the token.
  public var id: String
  public var user: String
  public var label: String?
  public var createdAt: Date
  /// When it last signed a request in (to within ``APITokens/lastUsedGranularity``).
  public var lastUsedAt: Date?
  /// What the token is for: nil for an API token (it signs requests in as its user), or a
  /// scope such as ``APITokens/feedScope``: a scoped token signs nothing in
  /// (``APITokens/verify(_:)`` refuses it) and is checked only by
  /// ``APITokens/verify(_:scope:)``, by the one reader of that scope.
  public var scope: String? = nil
}

/// API tokens (`Authorization: Token token=...`, as PingPong sends them): per user, random,
/// revocable.
///
/// A token is `wlt_` + its id (16 hex digits) + `_` + 64 hex digits of randomness (256 bits);
/// it is shown once, by ``create(user:label:actor:)``. What is stored is its SHA-256 (no
/// stretching is needed for 256 random bits), in a `_local` document of `_users`
/// (`_local/org.wikilog.token:ID`): written as an event like every write, so creating,
/// revoking and using tokens is auditable, but never replicated and never in the changes feed.
/// A token signs in only while its user exists; its roles are the user's at that moment.
public final class APITokens: Sendable {
  /// What each presented token (by digest) resolved to, until `_users` next changes.
  /// Tokens verified since `_users` last changed, kept with the store they were read from (a
  /// `_users` deleted and made again starts afresh: its positions say nothing of the old one's).
  private let verified = Mutex<(store: DocumentStore?, tokens: CommittedCache<String, Verified?>)>(
    (nil, CommittedCache<String, Verified?>()))

  /// A live token's user and record.
  struct Verified: Sendable {
    let user: User
    let lastUsedAt: Date?
    let rev: String
    let body: JSONObject
  }

  /// The `_local` id prefix of token records.
  public static let idPrefix = "org.wikilog.token:"
  /// What every token begins with.
  public static let tokenPrefix = "wlt_"
  /// The scope of a feed reader's token: it reads a user's Atom feeds and nothing else (it
  /// cannot sign a request in, so it cannot write).
  public static let feedScope = "feed"
  public let users: UserStore
  /// A use is recorded when the recorded last use is at least this old (a write per request
  /// would grow the log by one event per request).
  public let lastUsedGranularity: TimeInterval
  let now: @Sendable () -> Date

  public init(
    users: UserStore, lastUsedGranularity: TimeInterval = 60,
    now: @escaping @Sendable () -> Date = { Date() }
  ) {
    self.users = users
    self.lastUsedGranularity = lastUsedGranularity
    self.now = now
  }

  /// Makes a token for user `user`, which must exist; returns the token (shown once: only its
  /// hash is kept) and its record.
  ///
  /// - Parameters:
  ///   - scope: nil for an API token; a scope (``feedScope``) for a token only
  ///     ``verify(_:scope:)`` accepts.
  ///   - key: when given, the token's secret is derived from its id under this key
  ///     (``derivedToken(id:key:)``), so whoever holds the key can show the token again
  ///     (a feed token, which a page links to); without it the secret is random and shown once.
  public func create(
    user: String, label: String? = nil, scope: String? = nil, key: [UInt8]? = nil,
    actor: String
  ) throws -> (token: String, record: APIToken) {
    guard try users.user(named: user) != nil else {
      throw StoreError.notFound("no user \(user)")
    }
    if let label,
      label.unicodeScalars.contains(where: { $0.properties.generalCategory == .control })
    {
      throw StoreError.badRequest("a token's label may not contain control characters")
    }
    let id = Hex.encode(Random.bytes(8))
    let token =
      key.map { Self.derivedToken(id: id, key: $0) }
      ?? Self.tokenPrefix + id + "_" + Hex.encode(Random.bytes(32))
    let created = now()
    var body = JSONObject([
      "type": .string("api_token"), "user": .string(user),
      "sha256": .string(Self.digest(token)),
      "created_at": .string(Self.timestamp(created)),
    ])
    if let label { body["label"] = .string(label) }
    if let scope { body["scope"] = .string(scope) }
    try users.store.putLocal(Self.idPrefix + id, JSONValue.object(body).serialized(), actor: actor)
    return (
      token,
      APIToken(
        id: id, user: user, label: label, createdAt: created, lastUsedAt: nil, scope: scope)
    )
  }

  /// The token of id `id` whose secret is the HMAC-SHA256 of the id under `key`: what
  /// ``create(user:label:scope:key:actor:)`` made with that key.
  public static func derivedToken(id: String, key: [UInt8]) -> String {
    let mac = HMAC<SHA256>.authenticationCode(
      for: Array(("wikilog-token:" + id).utf8), using: SymmetricKey(data: key))
    return tokenPrefix + id + "_" + Hex.encode(Array(mac))
  }

  /// The tokens of `user` (every token when nil), by id.
  public func list(user: String? = nil) throws -> [APIToken] {
    try users.store.localDocuments(prefix: Self.idPrefix).compactMap { doc in
      guard let record = Self.record(id: String(doc.id.dropFirst(Self.idPrefix.count)), doc.body)
      else { return nil }
      return user == nil || record.user == user ? record : nil
    }
  }

  /// Revokes token `id`: it stops working at once. `not_found` when there is no such token.
  public func revoke(id: String, actor: String) throws {
    let docID = Self.idPrefix + id
    guard Self.isID(id), let current = try local(docID) else {
      throw StoreError.notFound("no token \(id)")
    }
    try users.store.deleteLocal(docID, rev: current.rev, actor: actor)
  }

  /// The user a presented token signs in, or nil when it is not a live token of an existing
  /// user, or is a scoped token (a feed token signs nothing in). Records the use (see
  /// ``lastUsedGranularity``).
  public func verify(_ token: String) throws -> User? {
    try verify(token, scope: nil)
  }

  /// The user of a live token of scope `scope` (nil: an API token), or nil when the token is
  /// not one, of an existing user who is not disabled. Records the use.
  public func verify(_ token: String, scope: String?) throws -> User? {
    guard token.hasPrefix(Self.tokenPrefix) else { return nil }
    let rest = token.dropFirst(Self.tokenPrefix.count)
    guard rest.count == 16 + 1 + 64, rest.dropFirst(16).first == "_" else { return nil }
    let id = String(rest.prefix(16))
    let digest = Self.digest(token)
    // No `_users`, no tokens: they lived in it.
    guard let store = try users.currentStore() else { return nil }
    let cache = verified.withLock { held in
      if held.store !== store { held = (store, CommittedCache<String, Verified?>()) }
      return held.tokens
    }
    let found: Verified?
    do {
      found = try cache.value(for: digest, in: store.log) {
        try lookUp(id: id, digest: digest)
      }
    } catch let error as LogError {
      throw StoreError.storage(error)
    }
    guard let found, found.body["scope"]?.stringValue == scope else { return nil }
    let time = now()
    if found.lastUsedAt.map({ time.timeIntervalSince($0) >= lastUsedGranularity }) ?? true {
      var updated = found.body
      updated["last_used_at"] = .string(Self.timestamp(time))
      // Last write wins; a failure to record the use does not refuse the request.
      _ = try? store.putLocal(
        Self.idPrefix + id, JSONValue.object(updated).serialized(), rev: found.rev,
        actor: found.user.name)
    }
    return found.user
  }

  /// The user and record of live token `id` whose SHA-256 is `digest`, nil when there is none.
  private func lookUp(id: String, digest: String) throws -> Verified? {
    guard Self.isID(id), let (rev, body) = try local(Self.idPrefix + id),
      let stored = body["sha256"]?.stringValue.flatMap(Hex.decode),
      let presented = Hex.decode(digest),
      Password.constantTimeEqual(stored, presented),
      let record = Self.record(id: id, body),
      let user = try users.user(named: record.user) ?? users.administrator(named: record.user),
      !user.isDisabled
    else { return nil }
    return Verified(user: user, lastUsedAt: record.lastUsedAt, rev: rev, body: body)
  }

  // MARK: -

  private func local(_ docID: String) throws -> (rev: String, body: JSONObject)? {
    let doc: JSONValue
    do {
      doc = try users.store.getLocal(docID)
    } catch let error as StoreError where error.code == .notFound {
      return nil
    }
    guard var body = doc.objectValue, let rev = body["_rev"]?.stringValue else { return nil }
    body["_id"] = nil
    body["_rev"] = nil
    return (rev, body)
  }

  static func isID(_ id: String) -> Bool {
    id.utf8.count == 16 && Hex.decode(id) != nil && id == id.lowercased()
  }

  static func digest(_ token: String) -> String {
    Hex.encode(Array(SHA256.hash(data: Array(token.utf8))))
  }

  static func record(id: String, _ body: JSONObject) -> APIToken? {
    guard body["type"]?.stringValue == "api_token", let user = body["user"]?.stringValue,
      let created = body["created_at"]?.stringValue.flatMap(parseTimestamp)
    else { return nil }
    return APIToken(
      id: id, user: user, label: body["label"]?.stringValue, createdAt: created,
      lastUsedAt: body["last_used_at"]?.stringValue.flatMap(parseTimestamp),
      scope: body["scope"]?.stringValue)
  }

  static func timestamp(_ date: Date) -> String {
    ISO8601.format(date)
  }

  static func parseTimestamp(_ text: String) -> Date? {
    ISO8601.parse(text)
  }
}
