import Crypto
import Formats
public import Foundation
import JSON
import Projections

/// An invitation to make an account, without its secret.
public struct Invitation: Sendable, Hashable {
  /// 16 hex digits, also the start of the invitation's link.
  public var id: String
  /// The administrator who made it.
  public var createdBy: String
  public var createdAt: Date
  /// After this moment the link makes no account.
  public var expiresAt: Date
}

/// One-time invitations: an administrator makes a link (``create(actor:)``), and whoever opens
/// it chooses a name and a password once (``accept(_:name:password:)``).
///
/// An invitation is `wli_` + its id (16 hex digits) + `_` + 64 hex digits of randomness; only
/// its SHA-256 is stored, in a `_local` document of `_users` (`_local/org.wikilog.invitation:ID`),
/// written as an event like every write (auditable, never replicated). Accepting it makes the
/// user, then deletes the record at the revision it was read at: of two people using one link
/// at once, one keeps the account and the other's is removed again, with an error.
public final class Invitations: Sendable {
  public static let idPrefix = "org.wikilog.invitation:"
  public static let tokenPrefix = "wli_"
  public let users: UserStore
  /// How long a link stays good: seven days unless told.
  public let lifetime: TimeInterval
  let now: @Sendable () -> Date

  public init(
    users: UserStore, lifetime: TimeInterval = 7 * 24 * 3600,
    now: @escaping @Sendable () -> Date = { Date() }
  ) {
    self.users = users
    self.lifetime = lifetime
    self.now = now
  }

  /// Makes an invitation; returns its token (shown once: only its hash is kept) and record.
  public func create(actor: String) throws -> (token: String, invitation: Invitation) {
    let id = Hex.encode(Random.bytes(8))
    let token = Self.tokenPrefix + id + "_" + Hex.encode(Random.bytes(32))
    let created = now()
    let invitation = Invitation(
      id: id, createdBy: actor, createdAt: created, expiresAt: created + lifetime)
    let body = JSONObject([
      "type": .string("invitation"), "sha256": .string(APITokens.digest(token)),
      "created_by": .string(actor), "created_at": .string(ISO8601.format(created)),
      "expires_at": .string(ISO8601.format(invitation.expiresAt)),
    ])
    try users.store.putLocal(Self.idPrefix + id, JSONValue.object(body).serialized(), actor: actor)
    return (token, invitation)
  }

  /// The invitations not used, revoked or expired, oldest first.
  public func list() throws -> [Invitation] {
    let time = now()
    return try users.store.localDocuments(prefix: Self.idPrefix).compactMap { doc in
      Self.record(id: String(doc.id.dropFirst(Self.idPrefix.count)), doc.body)
    }
    .filter { $0.expiresAt > time }
    .sorted { $0.createdAt < $1.createdAt }
  }

  /// Revokes invitation `id`; `not_found` when there is no such invitation.
  public func revoke(id: String, actor: String) throws {
    guard APITokens.isID(id), let found = try local(id) else {
      throw StoreError.notFound("no invitation \(id)")
    }
    try users.store.deleteLocal(Self.idPrefix + id, rev: found.rev, actor: actor)
  }

  /// The invitation `token` is, while it may still be used; nil otherwise.
  public func check(_ token: String) throws -> Invitation? {
    try live(token)?.invitation
  }

  /// Makes user `name` with `password` from invitation `token`, which is used up.
  ///
  /// - Throws: `not_found` when the link is not (or no longer) an invitation; `conflict` when
  ///   the name is taken or the invitation was used meanwhile; `bad_request` for a name or a
  ///   password `_users` refuses, or a password shorter than 8 characters. Nothing is written
  ///   then, and the invitation stays usable unless it was used.
  @discardableResult
  public func accept(_ token: String, name: String, password: String) throws -> User {
    guard let found = try live(token) else {
      throw StoreError.notFound(
        "This invitation link is not valid any more: it was used, revoked or has expired.")
    }
    guard password.count >= 8 else {
      throw StoreError.badRequest("The password must have at least 8 characters.")
    }
    let user = try users.add(name: name, password: password, actor: name)
    do {
      try users.store.deleteLocal(
        Self.idPrefix + found.invitation.id, rev: found.rev, actor: name)
    } catch {
      // Not used up: the account goes again, whatever stopped the deletion.
      try? users.remove(name: name, actor: name)
      if let refusal = error as? StoreError, refusal.code == .conflict || refusal.code == .notFound
      {
        // Used (or revoked) by someone else between the two writes.
        throw StoreError(
          "conflict", "This invitation was used by someone else a moment ago.", code: .conflict)
      }
      throw error
    }
    return user
  }

  private func live(_ token: String) throws -> (invitation: Invitation, rev: String)? {
    guard token.hasPrefix(Self.tokenPrefix) else { return nil }
    let rest = token.dropFirst(Self.tokenPrefix.count)
    guard let separator = rest.firstIndex(of: "_") else { return nil }
    let id = String(rest[..<separator])
    guard APITokens.isID(id), let found = try local(id),
      let stored = found.body["sha256"]?.stringValue,
      Self.constantTimeEqual(stored, APITokens.digest(token)),
      let invitation = Self.record(id: id, found.body), invitation.expiresAt > now()
    else { return nil }
    return (invitation, found.rev)
  }

  private func local(_ id: String) throws -> (rev: String, body: JSONObject)? {
    let doc: JSONValue
    do {
      doc = try users.store.getLocal(Self.idPrefix + id)
    } catch let error as StoreError where error.code == .notFound {
      return nil
    }
    guard let body = doc.objectValue, let rev = body["_rev"]?.stringValue else { return nil }
    return (rev, body)
  }

  static func record(id: String, _ body: JSONObject) -> Invitation? {
    guard body["type"]?.stringValue == "invitation",
      let by = body["created_by"]?.stringValue,
      let created = body["created_at"]?.stringValue.flatMap(ISO8601.parse),
      let expires = body["expires_at"]?.stringValue.flatMap(ISO8601.parse)
    else { return nil }
    return Invitation(id: id, createdBy: by, createdAt: created, expiresAt: expires)
  }

  static func constantTimeEqual(_ a: String, _ b: String) -> Bool {
    let x = Array(a.utf8)
    let y = Array(b.utf8)
    guard x.count == y.count else { return false }
    var difference: UInt8 = 0
    for i in x.indices { difference |= x[i] ^ y[i] }
    return difference == 0
  }
}
