import Auth
import Formats
import HTTPTypes
import Hummingbird
import JSON
import Log
import Logging
import Projections
import RevTree

#if canImport(FoundationEssentials)
  import FoundationEssentials
#else
  import Foundation
#endif

extension CouchServer {
  // MARK: Server

  /// `GET /`: CouchDB's welcome.
  func welcome(head: Bool) -> Response {
    CouchResponse.json(
      .object(
        JSONObject([
          "couchdb": .string("Welcome"),
          "version": .string(Self.couchDBVersion),
          "uuid": .string(serverUUID),
          "features": .array([]),
          "vendor": .object(
            JSONObject(["name": .string("wikilog"), "version": .string(Self.version)])),
        ])), includeBody: !head)
  }

  /// `GET /_uuids?count=N`: random 32-hex-digit ids, as CouchDB's `random` algorithm, with
  /// CouchDB's limits (`count` at most `max_count`, ``CouchServerOptions/maxUUIDCount``) and
  /// its cache-busting headers (`Cache-Control: no-cache`, `Pragma`, `Expires` in the past, an
  /// `ETag` of the ids).
  func uuids(_ query: QueryParameters) throws -> Response {
    var count = 1
    if let text = query["count"] {
      guard let n = Int(text), n >= 0 else {
        throw CouchError.badRequest("count must be a positive integer")
      }
      guard n <= settings.current.maxUUIDCount else {
        throw CouchError.badRequest("count parameter too large")
      }
      count = n
    }
    let ids = uuids.next(count)
    var headers = HTTPFields()
    headers[HTTPField.Name("Pragma")!] = "no-cache"
    headers[HTTPField.Name("Expires")!] = "Mon, 01 Jan 1990 00:00:00 GMT"
    headers[.eTag] = "\"\(MD5.hash(Array(ids.joined().utf8)).description)\""
    var response = CouchResponse.json(
      .object(JSONObject(["uuids": .array(ids.map { .string($0) })])), headers: headers)
    response.headers[.cacheControl] = "no-cache"
    return response
  }

  /// A random 128-bit id in 32 lowercase hex digits (CouchDB's `random` uuids).
  static func randomUUID() -> String {
    String(UUID().uuidString.lowercased().filter { $0 != "-" })
  }

  /// A new document id by the server's uuid algorithm (``UUIDs``), as CouchDB gives a
  /// document posted without `_id`.
  func newUUID() -> String { uuids.next(1)[0] }

  /// The most keys one `POST /_dbs_info` may ask for (CouchDB's
  /// `max_db_number_for_dbs_info_req`).
  static let maxDatabasesInfoKeys = 100

  /// `GET /_dbs_info`: `[{"key": name, "info": {...}}]` for every database, in name order;
  /// `POST /_dbs_info` with `{"keys": [...]}`: the same for each key, in order, or
  /// `{"key": key, "error": "not_found"}` for one that is not a database. `info` is what
  /// `GET /{db}` answers.
  func databasesInfo(_ request: Request) async throws -> Response {
    var entries: [JSONValue] = []
    switch request.method {
    case .get, .head:
      for name in dataDirectory.databaseNames() {
        // A database deleted meanwhile is left out, as CouchDB does.
        guard let store = try? await open(name) else { continue }
        entries.append(
          .object(JSONObject(["key": .string(name), "info": try databaseInfo(name, store)])))
      }
    case .post:
      let body = try await objectBody(of: request)
      guard let keys = body["keys"] else {
        throw CouchError.badRequest("`keys` member must exist.")
      }
      guard let array = keys.arrayValue else {
        throw CouchError.badRequest("`keys` member must be an array.")
      }
      guard array.count <= Self.maxDatabasesInfoKeys else {
        throw CouchError.badRequest("too_many_keys")
      }
      for key in array {
        if let name = key.stringValue, let store = try? await open(name) {
          entries.append(
            .object(JSONObject(["key": key, "info": try databaseInfo(name, store)])))
        } else {
          entries.append(.object(JSONObject(["key": key, "error": .string("not_found")])))
        }
      }
    default:
      throw CouchError.methodNotAllowed(["GET", "HEAD", "POST"])
    }
    return CouchResponse.json(.array(entries), includeBody: request.method != .head)
  }

  // MARK: Databases

  /// `HEAD/GET/PUT/DELETE/POST /{db}`.
  func database(
    _ name: String, request: Request, query: QueryParameters, context: Context, caller: Caller
  ) async throws -> Response {
    // A name no database can have names no database: CouchDB answers 404 for reads and
    // deletes of it (creating one is the 400 illegal_database_name).
    if request.method != .put, (try? dataDirectory.check(name: name)) == nil {
      throw CouchError.notFound("Database does not exist.")
    }
    let handler = try Self.databaseMethods.handler(for: request.method)
    return try await handler(self)(name, request, query, context, caller)
  }

  /// The methods of `/{db}` and their handlers (``MethodTable``).
  static let databaseMethods = MethodTable<
    @Sendable (CouchServer) ->
      @Sendable (String, Request, QueryParameters, Context, Caller) async throws -> Response
  >(
    [
      .head: databaseGet, .get: databaseGet, .put: databasePut, .delete: databaseDelete,
      .post: databasePost,
    ],
    allow: ["DELETE", "GET", "HEAD", "POST", "PUT"])

  /// `HEAD and GET` of database.
  func databaseGet(
    _ name: String, request: Request, query: QueryParameters, context: Context, caller: Caller
  ) async throws -> Response {
    let store = try await open(name)
    // A signed-in user who may read nothing here yet passes: a replicator's first request to
    // a target is this one (CouchDB's and PouchDB's stop at a 403), and what they may create
    // there is theirs to push. The counts are of what they may see (none).
    let access = try databaseAccess(name, store, caller)
    // Everyone passes the member check of a database that admits everyone to what its gate
    // lets them reach (`_users`: their own document); its information is not among that.
    if access.policy?.admitsEveryone == true && !caller.user.isAdmin {
      throw Self.notMember(caller.user)
    }
    return CouchResponse.json(
      try databaseInfo(name, store, view: try access.view(store)),
      includeBody: request.method == .get)
  }

  /// `PUT /{db}`.
  func databasePut(
    _ name: String, request: Request, query: QueryParameters, context: Context, caller: Caller
  ) async throws -> Response {
    try requireServerAdmin(caller)
    // As `chttpd_db:create_db_req`: malformed options are 400, then an existing database
    // 412 `file_exists` whatever it asks for, then what wikilog does not do 501.
    if let unsupported = try Self.unsupportedCreationOption(query) {
      if dataDirectory.exists(name) {
        throw StoreError(
          "file_exists", "The database could not be created, the file already exists.",
          code: .alreadyExists)
      }
      throw unsupported
    }
    let shards = query["q"].flatMap { Int($0) } ?? 1
    let partitioned = query["partitioned"] == "true"
    if partitioned
      && (systemPolicy(name) != nil || dataDirectory.systemDatabase(named: name) != nil)
    {
      throw CouchError.badRequest("Cannot partition a system database")
    }
    let actor = caller.actor
    try await blocking {
      let store = try dataDirectory.create(name)
      if partitioned { try store.makePartitioned(actor: actor) }
      if shards != 1 {
        // What `GET /{db}` reports as `cluster.q` (a wikilog database is one unsharded file).
        _ = try store.putLocal(
          Self.clusterLocalID, JSONValue.object(JSONObject(["q": .int(shards)])).serialized(),
          actor: caller.actor)
      }
    }
    try await restartAuthenticationDatabase(after: name)
    var headers = HTTPFields()
    headers[.location] = "/" + PercentDecoding.encode(name)
    return CouchResponse.json(
      .object(JSONObject(["ok": .bool(true)])), status: .created, headers: headers)
  }

  /// `DELETE /{db}`.
  func databaseDelete(
    _ name: String, request: Request, query: QueryParameters, context: Context, caller: Caller
  ) async throws -> Response {
    try requireServerAdmin(caller)
    if query.contains("rev") {
      throw CouchError.badRequest(
        "You tried to DELETE a database with a ?=rev parameter. Did you mean to DELETE a document instead?"
      )
    }
    if let error = systemPolicy(name)?.refusesDeletion?(options) { throw error }
    try await blocking { try dataDirectory.delete(name) }
    try await restartAuthenticationDatabase(after: name)
    return CouchResponse.ok()
  }

  /// After users database `name` (`_users`, or the one `chttpd_auth/authentication_db`
  /// names) was created or deleted: the authentication database gets its `_design/_auth`, as
  /// CouchDB's auth cache writes it when it starts listening again.
  func restartAuthenticationDatabase(after name: String) async throws {
    guard let users = options.authenticator?.users,
      name == UserStore.databaseName || name == users.authenticationDatabase
    else { return }
    try await blocking { try users.ensureDesignDocument() }
  }

  /// `POST /{db}`.
  func databasePost(
    _ name: String, request: Request, query: QueryParameters, context: Context, caller: Caller
  ) async throws -> Response {
    let store = try await open(name)
    let access = try databaseAccess(name, store, caller)
    try Self.requireJSONContentType(request)
    if access.plainWritesOnly { try requireServerAdmin(caller) }
    // The body is parsed once: the checks and the store share the value.
    var parsed = try access.stored(DocumentInput.parse(try await self.body(of: request)))
    let docID = parsed["_id"]?.stringValue ?? newUUID()
    if case .object(let object) = parsed {
      parsed = .object(try access.owned(object, id: docID))
    }
    try access.checkWrite(docID: docID, body: parsed, replicated: false, in: store)
    let actor = caller.actor
    let result = try await store.putAsync(
      parsed: parsed, id: docID, actor: actor, origin: replicationOrigin(context))
    if query["batch"] == "ok" { return batchAccepted(result) }
    return writeResponse(result, location: location(name, result.id))
  }

  /// The options of `PUT /{db}` that ask for what a wikilog database is not, refused before
  /// anything is created: `partitioned=true` (`501`; `false` is what every database is),
  /// `q` or `n` other than 1 (sharding and clustering, `501`; a wikilog database is one
  /// unsharded copy, `q=1&n=1`), `placement` (`501`) and `engine` (`400
  /// invalid_engine_extension`, CouchDB's answer for an engine it does not have). Values that
  /// are not valid at all throw CouchDB's `400`; the first option wikilog does not do is
  /// returned (the caller answers `412` instead when the database exists, as CouchDB does).
  static func unsupportedCreationOption(_ query: QueryParameters) throws(CouchError)
    -> CouchError?
  {
    var unsupported: CouchError? = nil
    switch query["partitioned"] {
    case nil, "false", "true": break
    default: throw .badRequest("Invalid `partitioned` parameter")
    }
    // `q` and `n` are taken as a single-node CouchDB takes them: the database is one copy
    // here whatever they say; `GET /{db}` reports the `q` asked for, and `n` 1.
    for name in ["q", "n"] {
      guard let text = query[name] else { continue }
      guard let n = Int(text), n > 0 else {
        throw .badRequest("The `\(name)` value should be a positive integer.")
      }
    }
    if query["engine"] != nil {
      throw .badRequest("invalid_engine_extension")
    }
    if query["placement"] != nil && unsupported == nil {
      unsupported = .notImplemented("shard placement (?placement=)")
    }
    return unsupported
  }

  /// `GET /{db}`'s body; with `view` (a user under access rules), the counts and update seq
  /// of what the user may see, and no sizes.
  func databaseInfo(_ name: String, _ store: DocumentStore, view: (any AccessView)? = nil) throws
    -> JSONValue
  {
    let info = try store.info
    // LMDB does not separate live data from free pages cheaply: every size is the data file's.
    let file = view == nil ? Self.fileSize(dataDirectory.directory(of: name) + "/data.mdb") : 0
    let sizes = JSONObject([
      "file": .int(file), "external": .int(file), "active": .int(file),
    ])
    return .object(
      JSONObject([
        "db_name": .string(name),
        // CouchDB's opaque sequence strings.
        "purge_seq": .string(
          store.sequenceString(LogPosition(UInt64(max(0, (try? store.purgeSeq) ?? 0))))),
        "update_seq": .string(store.sequenceString(view?.updateSeq ?? info.updateSeq)),
        "sizes": .object(sizes),
        "props": .object(
          store.isPartitioned ? JSONObject(["partitioned": .bool(true)]) : JSONObject()),
        "doc_del_count": .int(view?.deletedDocCount ?? info.deletedDocCount),
        "doc_count": .int(view?.docCount ?? info.docCount),
        "disk_format_version": .int(Int(EventLog.formatVersion)),
        "compact_running": .bool(dataDirectory.isCompacting(name)),
        "cluster": .object(
          JSONObject([
            "q": .int(Self.shards(store)), "n": .int(1),
            "w": .int(1), "r": .int(1),
          ])),
        "instance_start_time": .string("0"),
        "revs_limit": .int(info.revsLimit),
      ]))
  }

  /// `GET /{db}/_partition/{partition}`: the partition's documents and the size of their
  /// bodies, in CouchDB's shape; `400 database is not partitioned` for a database that is not.
  func partitionInfo(
    _ store: DocumentStore, db: String, partition: String, request: Request,
    access: DatabaseAccess
  ) async throws -> Response {
    if request.method == .post && partition.hasPrefix("_") {
      throw CouchError(
        "illegal_partition", "Partition must not start with an underscore", status: 400)
    }
    guard request.method == .get || request.method == .head else {
      throw CouchError.methodNotAllowed(["GET"])
    }
    do { try Partitions.validate(partition: partition) } catch { throw CouchError(error) }
    guard store.isPartitioned else { throw CouchError.badRequest("database is not partitioned") }
    if access.restricted && !access.isMember { throw Self.notMember(access.user) }
    let (live, deleted, bytes) = try await blocking { try store.partitionInfo(partition) }
    return CouchResponse.json(
      .object(
        JSONObject([
          .init(key: "db_name", value: .string(db)),
          .init(
            key: "sizes",
            value: .object(JSONObject(["active": .int(bytes), "external": .int(bytes)]))),
          .init(key: "partition", value: .string(partition)),
          .init(key: "doc_count", value: .int(live)),
          .init(key: "doc_del_count", value: .int(deleted)),
        ])), includeBody: request.method != .head)
  }

  /// The `_local` document that keeps the `q` a database was created with (wikilog's own
  /// `org.wikilog.` prefix: not reachable through the API).
  static let clusterLocalID = "org.wikilog.cluster"

  /// The `q` database `store` was created with (1 unless it asked for another).
  static func shards(_ store: DocumentStore) -> Int {
    guard let q = (try? store.getLocal(clusterLocalID))?["q"]?.numberValue?.int64Value else {
      return 1
    }
    return Int(q)
  }

  static func fileSize(_ path: String) -> Int {
    let size = (try? FileManager.default.attributesOfItem(atPath: path))?[.size]
    if let n = size as? Int { return n }
    if let n = size as? UInt64 { return Int(clamping: n) }
    if let n = size as? Int64 { return Int(clamping: n) }
    return 0
  }

  /// `POST /{db}/_compact`: starts a compaction of the database (``DataDirectory/compact(_:)``)
  /// and answers `202 {"ok":true}` at once, as CouchDB does; `GET /{db}` shows
  /// `compact_running` until it ends. The body must be declared `application/json` (415
  /// otherwise, as in CouchDB).
  func compact(_ name: String, request: Request) async throws -> Response {
    try allow(request.method, [.post])
    let type = request.headers[.contentType] ?? ""
    guard type.lowercased().hasPrefix("application/json") else {
      throw CouchError(
        "bad_content_type", "Content-Type must be application/json", status: 415)
    }
    _ = try await open(name)
    let logger = self.logger
    // Marked before the answer, so a `GET /{db}` after it sees `compact_running`; a second
    // request while one runs is answered 202 too, as CouchDB does.
    if let work = try? dataDirectory.startCompaction(name) {
      Task.detached {
        do {
          let result = try await self.blocking { try work() }
          logger.info(
            "compacted \(name): data.mdb \(result.bytesBefore) -> \(result.bytesAfter) bytes, \(result.blobs.files) unreferenced attachment file(s) removed"
          )
        } catch {
          logger.error("compaction of \(name) failed: \(CouchError(error).reason)")
        }
      }
    }
    return CouchResponse.json(.object(JSONObject(["ok": .bool(true)])), status: .accepted)
  }

  /// `POST /{db}/_ensure_full_commit`: makes every commit so far durable.
  func ensureFullCommit(_ store: DocumentStore) async throws -> Response {
    if store.log.durability == .unsynced {
      try await blocking {
        do { try store.log.sync() } catch let error as LogError { throw StoreError.storage(error) }
      }
    }
    return CouchResponse.json(
      .object(JSONObject(["ok": .bool(true), "instance_start_time": .string("0")])),
      status: .created)
  }

  /// `GET/PUT /{db}/_revs_limit`.
  func revsLimit(_ store: DocumentStore, request: Request, caller: Caller) async throws
    -> Response
  {
    switch request.method {
    case .get, .head:
      return CouchResponse.json(.int(try store.revsLimit), includeBody: request.method == .get)
    case .put:
      let value = try await jsonBody(of: request)
      guard let n = value.numberValue?.int64Value, n > 0, n <= Int64(Int32.max) else {
        throw CouchError.badRequest("revs_limit must be a positive integer")
      }
      let actor = caller.actor
      try await store.setRevsLimitAsync(Int(n), actor: actor)
      return CouchResponse.ok()
    default:
      throw CouchError.methodNotAllowed(["GET", "HEAD", "PUT"])
    }
  }
}
