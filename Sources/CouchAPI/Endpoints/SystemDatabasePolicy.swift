import Auth
public import JSON
public import Projections

/// How the HTTP API serves a system database (`_users`, `_replicator`): whether it is served
/// now, what a caller who is not a server administrator may reach of it, what they see of its
/// documents, and what a write of theirs stores, declared by the module that owns the database
/// instead of checked by name across the server.
///
/// The server keeps `_users`' policy (``users``); a feature declares its own in
/// ``CouchFeature/Instance/systemDatabases`` (the replicator's `_replicator`). A system
/// database of the data directory that no policy declares is not served (`501`). Server
/// administrators pass every gate and see every document whole.
public struct SystemDatabasePolicy: Sendable {
  /// What a request reaches in the database, for ``gate``.
  public enum Resource: Sendable, Equatable {
    /// The database itself (`/db`).
    case database
    /// One of the server's own `/db/_name` endpoints (`_all_docs`, `_changes`, `_bulk_docs`,
    /// `_all_docs/queries`, ...), by name.
    case endpoint(String)
    /// A feature's endpoint, by its first segment; `systemOnly` when it asked to be for
    /// server administrators on system databases (``DatabaseEndpoint/adminOnlyOnUsers``).
    case featureEndpoint(String, systemOnly: Bool)
    /// A `_local` document.
    case local(String)
    /// A document, or one of its attachments.
    case document(String)
  }

  /// The database's name.
  public let name: String
  /// The answer while the database is not served (its feature's `501`), or nil when it is.
  public var unserved: @Sendable () -> CouchError?
  /// Refuses, for a caller who is not a server administrator, what they may not reach
  /// (before the database's own security object is consulted).
  public var gate: @Sendable (Resource, UserContext) throws -> Void
  /// Whether a caller who is not a server administrator passes the security object's member
  /// check anyway (`_users`: everyone reaches their own document, which ``gate`` decides).
  /// The database's own information (`GET /{db}`) stays for server administrators then.
  public var admitsEveryone: Bool
  /// Whether a caller who is not a server administrator writes only by `PUT` and `DELETE` of
  /// a JSON document: not by `POST /{db}`, `COPY`, a `multipart/related` body or an
  /// attachment (`401`), as CouchDB's `_users` allows.
  public var plainWritesOnly: Bool
  /// What every write of a document stores, whoever makes it, administrators included
  /// (`_users`: a clear `password` replaced by its PBKDF2 fields,
  /// `couch_users_db:before_doc_update`); nil when bodies are stored as sent.
  public var stored: (@Sendable (JSONObject) throws -> JSONObject)?
  /// Why the database may not be deleted on this server now (`_users` on a server whose
  /// every administrator lives in it); nil when it may.
  public var refusesDeletion: (@Sendable (CouchServerOptions) -> CouchError?)?
  /// A document as the caller sees it (`doc`, their ``DatabaseAccess``, whether a made-up
  /// revision may stand in for the stored one); nil when documents are shown as stored.
  public var shown: (@Sendable (JSONValue, DatabaseAccess, Bool) -> JSONValue)?
  /// The body a write of the caller stores (`object`, its id, their access); nil when bodies
  /// are stored as sent.
  public var owned: (@Sendable (JSONObject, String, DatabaseAccess) throws -> JSONObject)?
  /// Refuses a write the caller may not make (the write: its id, its body — nil for a
  /// deletion — and whether it is replicated; their access; the store), read from the store
  /// just before the write; nil for none beyond the security object and rules. A document
  /// changed in between fails the write's own revision check (`conflict`), so a decision
  /// taken on what was read never applies to a newer document.
  public var checkWrite: (@Sendable (AccessWrite, DatabaseAccess, DocumentStore) throws -> Void)?
  /// The documents a query of the caller (`_find`, which matches stored bodies) may match,
  /// when ``shown`` hides parts of some from them: a selector must not find what they cannot
  /// see. Nil for every readable document.
  public var queryable: (@Sendable (DatabaseAccess, DocumentStore) throws -> DocumentFilter)?

  public init(
    name: String, unserved: @escaping @Sendable () -> CouchError? = { nil },
    gate: @escaping @Sendable (Resource, UserContext) throws -> Void = { _, _ in },
    admitsEveryone: Bool = false, plainWritesOnly: Bool = false,
    stored: (@Sendable (JSONObject) throws -> JSONObject)? = nil,
    refusesDeletion: (@Sendable (CouchServerOptions) -> CouchError?)? = nil,
    shown: (@Sendable (JSONValue, DatabaseAccess, Bool) -> JSONValue)? = nil,
    owned: (@Sendable (JSONObject, String, DatabaseAccess) throws -> JSONObject)? = nil,
    checkWrite: (@Sendable (AccessWrite, DatabaseAccess, DocumentStore) throws -> Void)? = nil,
    queryable: (@Sendable (DatabaseAccess, DocumentStore) throws -> DocumentFilter)? = nil
  ) {
    self.name = name
    self.unserved = unserved
    self.gate = gate
    self.admitsEveryone = admitsEveryone
    self.plainWritesOnly = plainWritesOnly
    self.stored = stored
    self.refusesDeletion = refusesDeletion
    self.shown = shown
    self.owned = owned
    self.checkWrite = checkWrite
    self.queryable = queryable
  }

  /// `_users`, as CouchDB serves it: a user who is not a server administrator reads, writes
  /// and deletes their own `org.couchdb.user:NAME` document only (anonymous callers `401`,
  /// another user's document `404` as if missing); its `_` endpoints (listings, feeds, ...)
  /// and `_local` documents are for server administrators (`401`/`403`).
  public static let users = users()

  /// ``users`` with passwords hashed in `iterations()` PBKDF2 rounds (the server's
  /// `chttpd_auth/iterations`).
  public static func users(iterations: (@Sendable () -> Int)? = nil) -> SystemDatabasePolicy {
    SystemDatabasePolicy(
      name: UserStore.databaseName,
      gate: { resource, user in
        func adminsOnly(_ name: String) -> CouchError {
          user.name == nil
            ? CouchError("unauthorized", "You are not authorized to access this db.", status: 401)
            : CouchError(
              "forbidden", "Only admins can access \(name) of system databases.", status: 403)
        }
        switch resource {
        case .database: break
        case .endpoint(let name): throw adminsOnly(name)
        case .featureEndpoint(let name, let systemOnly): if systemOnly { throw adminsOnly(name) }
        case .local: throw CouchServer.notMember(user)
        case .document(let id):
          guard let name = user.name else {
            throw CouchError(
              "unauthorized", "You are not authorized to access this db.", status: 401)
          }
          // Another user's document: as if it did not exist.
          guard id == UserStore.documentID(of: name) else { throw StoreError.notFound("missing") }
        }
      },
      admitsEveryone: true, plainWritesOnly: true,
      stored: { object in
        guard object["password"] != nil else { return object }
        return try UserStore.hashingPassword(
          object, iterations: iterations?() ?? Password.iterations)
      },
      refusesDeletion: { options in
        guard let authenticator = options.authenticator, authenticator.serverAdminNames.isEmpty
        else { return nil }
        // CouchDB keeps its administrators in its configuration, so deleting `_users` leaves
        // them; so does wikilog for the server administrators of `wikilog serve --admin`. A
        // server without one keeps every administrator in `_users`: deleting it would lock every
        // user out, or leave no administrator at all, which lets anonymous requests administer.
        return CouchError(
          "forbidden",
          "_users holds every administrator of this server; start it with `wikilog serve --admin NAME` (a server administrator kept outside _users) to delete _users, or remove users one by one (`wikilog user remove`)",
          status: 403)
      },
      checkWrite: { write, access, store in try checkUserWrite(write, access: access, store: store)
      })
  }

  /// What a user who is not a server administrator may not change of their own `_users`
  /// document: they write no replicated revision, create no user, change no roles and do not
  /// disable or enable themselves; they delete their document only while it has one live
  /// revision.
  static func checkUserWrite(_ write: AccessWrite, access: DatabaseAccess, store: DocumentStore)
    throws
  {
    guard !access.isServerAdmin else { return }
    let id = write.docID
    if write.replicated {
      throw StoreError.forbidden(
        "Only admins may write replicated revisions (new_edits=false) to _users.")
    }
    // A deletion, by DELETE or by a body with `_deleted: true`.
    guard let body = write.body else {
      let live = try store.openRevs(id, .all).filter {
        $0["ok"] != nil && $0["ok"]?["_deleted"] != .bool(true)
      }
      if live.count > 1 {
        throw StoreError.forbidden(
          "This user document has conflicting revisions; only admins may delete it.")
      }
      return
    }
    let current = try? store.get(id).objectValue
    let wanted = body["roles"]?.arrayValue?.compactMap(\.stringValue) ?? []
    let had = current?["roles"]?.arrayValue?.compactMap(\.stringValue) ?? []
    if current == nil || Set(wanted) != Set(had) {
      throw StoreError.forbidden(
        current == nil
          ? "Only admins may create users." : "Only admins may change a user's roles.")
    }
    if (body["disabled"] == .bool(true)) != (current?["disabled"] == .bool(true)) {
      throw StoreError.forbidden("Only admins may disable or enable a user.")
    }
  }
}
