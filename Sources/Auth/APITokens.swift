import Crypto
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
  /// Tokens verified since `_users` last changed, by digest: their user and last use.
  private let verified = Mutex<
    (position: LogPosition, tokens: [String: (user: User, lastUsedAt: Date?)])
  >(
    (.start, [:]))
  /// Token records read since `_users` last changed.
  private let cache = Mutex<
    (position: LogPosition, records: [String: (rev: String, body: JSONObject)?])
  >(
    (.start, [:]))

  /// The `_local` id prefix of token records.
  public static let idPrefix = "org.wikilog.token:"
  /// What every token begins with.
  public static let tokenPrefix = "wlt_"
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
  public func create(user: String, label: String? = nil, actor: String) throws -> (
    token: String, record: APIToken
  ) {
    guard try users.user(named: user) != nil else {
      throw StoreError.notFound("no user \(user)")
    }
    let id = Hex.encode(Random.bytes(8))
    let token = Self.tokenPrefix + id + "_" + Hex.encode(Random.bytes(32))
    let created = now()
    var body = JSONObject([
      "type": .string("api_token"), "user": .string(user),
      "sha256": .string(Self.digest(token)),
      "created_at": .string(Self.timestamp(created)),
    ])
    if let label { body["label"] = .string(label) }
    try users.store.putLocal(Self.idPrefix + id, JSONValue.object(body).serialized(), actor: actor)
    return (token, APIToken(id: id, user: user, label: label, createdAt: created, lastUsedAt: nil))
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
  /// user. Records the use (see ``lastUsedGranularity``).
  public func verify(_ token: String) throws -> User? {
    guard token.hasPrefix(Self.tokenPrefix) else { return nil }
    let rest = token.dropFirst(Self.tokenPrefix.count)
    guard rest.count == 16 + 1 + 64, rest.dropFirst(16).first == "_" else { return nil }
    let id = String(rest.prefix(16))
    let position: LogPosition
    do { position = try users.store.log.committedPosition } catch {
      throw StoreError.storage(error)
    }
    let digest = Self.digest(token)
    if let hit = verified.withLock({ $0.position == position ? $0.tokens[digest] : nil }),
      hit.lastUsedAt.map({ now().timeIntervalSince($0) < lastUsedGranularity }) ?? false
    {
      return hit.user
    }
    guard Self.isID(id), let (rev, body) = try local(Self.idPrefix + id),
      let stored = body["sha256"]?.stringValue.flatMap(Hex.decode),
      let presented = Hex.decode(digest),
      Password.constantTimeEqual(stored, presented),
      let record = Self.record(id: id, body),
      let user = try users.user(named: record.user)
    else { return nil }
    let time = now()
    verified.withLock { state in
      if state.position != position { state = (position, [:]) }
      if state.tokens.count < 10_000 {
        state.tokens[digest] = (user, record.lastUsedAt)
      }
    }
    if record.lastUsedAt.map({ time.timeIntervalSince($0) >= lastUsedGranularity }) ?? true {
      var updated = body
      updated["last_used_at"] = .string(Self.timestamp(time))
      // Last write wins; a failure to record the use does not refuse the request.
      _ = try? users.store.putLocal(
        Self.idPrefix + id, JSONValue.object(updated).serialized(), rev: rev, actor: user.name)
    }
    return user
  }

  // MARK: -

  private func local(_ docID: String) throws -> (rev: String, body: JSONObject)? {
    // Every token request reads its record: kept until `_users` changes.
    let position: LogPosition
    do { position = try users.store.log.committedPosition } catch {
      throw StoreError.storage(error)
    }
    if let hit = cache.withLock({ $0.position == position ? $0.records[docID] : nil }) {
      return hit
    }
    let doc: JSONValue
    let found: (rev: String, body: JSONObject)?
    do {
      doc = try users.store.getLocal(docID)
      if var body = doc.objectValue, let rev = body["_rev"]?.stringValue {
        body["_id"] = nil
        body["_rev"] = nil
        found = (rev, body)
      } else {
        found = nil
      }
    } catch let error as StoreError where error.code == .notFound {
      found = nil
    }
    cache.withLock { state in
      if state.position != position { state = (position, [:]) }
      if state.records.count < 10_000 { state.records[docID] = .some(found) }
    }
    return found
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
      lastUsedAt: body["last_used_at"]?.stringValue.flatMap(parseTimestamp))
  }

  static func timestamp(_ date: Date) -> String {
    date.formatted(.iso8601)
  }

  static func parseTimestamp(_ text: String) -> Date? {
    try? Date(text, strategy: .iso8601)
  }
}
