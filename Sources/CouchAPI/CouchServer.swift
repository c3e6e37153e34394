import Auth
import HTTPTypes
public import Hummingbird
public import JSON
public import Logging
import NIOCore
import NIOPosix
public import Projections
import RevTree
public import ServiceLifecycle

#if canImport(FoundationEssentials)
  import FoundationEssentials
#else
  import Foundation
#endif

/// The CouchDB HTTP API over a `DataDirectory`: every database of the directory is served at
/// `/{db}`, with CouchDB's request and response shapes, so CouchDB's replicator, PouchDB and other
/// CouchDB tools can talk to wikilog unchanged.
///
/// The server answers behind ``CouchPipeline`` (its router and middlewares: the `Server`
/// header, the request log, CORS, error rendering);
/// ``buildApplication(dataDirectory:options:server:configuration:logger:onServerRunning:)``
/// wraps that in an application (used by `wikilog serve` and the tests).
///
/// With ``CouchServerOptions/authenticator`` every request is signed in (cookie, Basic, JWT,
/// token; `/_session`), the database's security object and the data directory's
/// `DocumentAccess` rules decide what it may read and write (a user's filtered view of
/// `_all_docs` and `_changes`, per-document checks of every write: `CouchServer+Access.swift`),
/// and every write is recorded with the user as its actor and the client's address as its
/// origin. Without one, every request is an administrator's.
///
/// Every response, errors included, carries the CORS headers when the request's `Origin` is
/// allowed; errors are `{"error","reason"}` with CouchDB's status codes; each request is logged
/// in one line at `info` (method, path, status, duration).
///
/// ```swift
/// let server = CouchServer(dataDirectory: DataDirectory(path: "/var/lib/wikilog"))
/// let app = Application(
///   responder: CouchPipeline(couch: server),
///   configuration: .init(address: .hostname("127.0.0.1", port: 5984)))
/// try await app.runService()
/// ```
public struct CouchServer: Sendable {
  public typealias Context = CouchRequestContext

  public let dataDirectory: DataDirectory
  public let options: CouchServerOptions
  /// Where every request's line goes (``RequestLog``).
  public let logger: Logger
  /// A stable identity for this data directory (CouchDB's server `uuid`).
  let serverUUID: String
  /// What waiting feeds wait on, one hub per open database.
  let hubs = ChangesHubs()
  /// The requests this server answered, by method and status (`_prometheus`).
  let metrics = HTTPMetrics()
  /// Whether `_users` has an administrator (for the admin party).
  let adminPresence = AdminPresence()
  /// The databases' security objects.
  let securityCache = SecurityCache()
  /// The endpoints under databases of ``CouchServerOptions/features``, in order.
  let featureEndpoints: [DatabaseEndpoint]
  /// What each feature made for this server (``CouchFeature/perServer``).
  let featureInstances: [CouchFeature.Instance]
  /// The endpoints at the root of the features, in order.
  let serverFeatureEndpoints: [ServerEndpoint]
  /// How each system database is served, by name: `_users`' own, and the features'.
  let systemPolicies: [String: SystemDatabasePolicy]

  /// The policy of database `name`: a system database's, or `_users`' for the database
  /// `chttpd_auth/authentication_db` names, as CouchDB treats it as its users database.
  func systemPolicy(_ name: String) -> SystemDatabasePolicy? {
    if let policy = systemPolicies[name] { return policy }
    guard let users = options.authenticator?.users, name == users.authenticationDatabase else {
      return nil
    }
    return systemPolicies[UserStore.databaseName]
  }
  /// What `/_node/{node}/_config` may change while the server runs.
  let settings: ServerSettings
  /// `/_uuids` and the ids of documents posted without one.
  let uuids = UUIDs()

  public init(
    dataDirectory: DataDirectory, options: CouchServerOptions = CouchServerOptions(),
    logger: Logger = Logger(label: "wikilog.http")
  ) {
    self.dataDirectory = dataDirectory
    self.options = options
    self.logger = logger
    // What the features need of the data directory (CouchQuery's: design documents'
    // `validate_doc_update` on every write).
    for feature in options.features { feature.prepare(dataDirectory) }
    featureEndpoints = options.features.flatMap(\.databaseEndpoints)
    let setup = CouchFeature.Setup(dataDirectory: dataDirectory, logger: logger)
    featureInstances = options.features.compactMap { $0.perServer?(setup) }
    serverFeatureEndpoints = featureInstances.flatMap(\.serverEndpoints)
    let authenticator = options.authenticator
    let users = SystemDatabasePolicy.users(iterations: {
      authenticator?.passwordIterations ?? Password.iterations
    })
    var policies = [users.name: users]
    for policy in featureInstances.flatMap(\.systemDatabases) { policies[policy.name] = policy }
    systemPolicies = policies
    settings = ServerSettings(options)
    dataDirectory.state.maxPartitionBytes = options.maxPartitionBytes
    self.serverUUID = MD5.hash(Array(dataDirectory.path.utf8)).description
  }

  /// What runs beside the server for its lifetime, from its features (the replicator's: the
  /// `_replicator` database's jobs); pass them to the application
  /// (``buildApplication(dataDirectory:options:server:configuration:logger:onServerRunning:)``
  /// does).
  public var services: [any Service] { featureInstances.flatMap(\.services) }

  /// The CouchDB version whose API this server follows, reported in `GET /`.
  public static let couchDBVersion = "3.4.2"
  /// wikilog's own version, reported as the vendor version.
  public static let version = "0.1.0"
  /// The `Server` header of every response.
  /// `Server`: CouchDB's product token first, as clients and CouchDB's own tests look for it
  /// (`CouchDB/3.4.3 (Erlang OTP/25)` there), then what answers.
  static let serverHeader = "CouchDB/\(couchDBVersion) (wikilog/\(version))"

  /// The API's answer to `request`, behind ``CouchPipeline``'s middlewares (which set the
  /// `Server` and CORS headers, render a thrown error and log the request): signs the caller
  /// in, parses the route once, and dispatches it by the endpoint tables
  /// (`CouchServer+Endpoints.swift`), with the caller's `WriteAccess` for the store's write
  /// transaction. A failure is thrown as a ``CouchError`` carrying a renewed session cookie.
  public func answer(_ request: Request, context: Context) async throws -> Response {
    var request = request
    Self.overrideMethod(&request)
    // The route, parsed once for the whole request (a malformed path is answered where it is
    // first needed, after the caller is signed in, as before).
    let endpoints = featureEndpoints
    let serverEndpoints = serverFeatureEndpoints
    let plusIsSpace = settings.current.decodePlusToSpace
    let parsed = Result { () throws(CouchError) in
      try CouchRoute.parse(
        request.uri.path, endpoints: endpoints, serverEndpoints: serverEndpoints,
        plusIsSpace: plusIsSpace)
    }
    var setCookie: String?
    var response: Response
    do {
      let caller = try await caller(request, context: context)
      setCookie = caller.authentication.setCookie
      // A write's body is held (as its handler would read it whole anyway) so that it can be
      // sent again; attachment uploads stream, and are not.
      let replayable = try await holdingBody(&request, route: try? parsed.get())
      // The store checks the caller's writes against the database's access rules in the
      // transaction that commits them (``WriteAccess``), whatever the handler checked before.
      let held = request
      // (An administrator may write anything: nothing to check, and none is made.)
      response = try await WriteAccess.$user.withValue(
        caller.user.isAdmin ? nil : caller.user
      ) {
        do {
          return try await route(held, try parsed.get(), context: context, caller: caller)
        } catch let error as StoreError where error.code == .unavailable && replayable {
          // A request that met its database closed under it by a compaction: nothing of it
          // was written (the compaction holds the writer's lock until the log is closed),
          // and the data directory has the database open again on the compacted file.
          return try await route(held, try parsed.get(), context: context, caller: caller)
        }
      }
    } catch {
      var e = CouchError(error)
      if e.statusCode == 503, let db = (try? parsed.get())?.database,
        !dataDirectory.exists(db)
      {
        // A request that met its database closed under it by a delete: the database is gone.
        e = CouchError("not_found", "Database does not exist.", status: 404)
      }
      if let setCookie { e.extraHeaders.append(("Set-Cookie", setCookie)) }
      if e.statusCode == 401 {
        // CouchDB's `chttpd:error_headers`: the header the client asks for, else the one set.
        let asked = HTTPField.Name("X-CouchDB-WWW-Authenticate").flatMap { request.headers[$0] }
        if let value = asked ?? settings.current.wwwAuthenticate {
          e.extraHeaders.append(("WWW-Authenticate", value))
        }
      }
      throw e
    }
    if let setCookie, response.headers[.setCookie] == nil {
      response.headers[.setCookie] = setCookie
    }
    if let route = try? parsed.get() { Self.applyQuorum(&response, request: request, route: route) }
    return response
  }

  /// CouchDB's answer to a write quorum this single copy cannot meet: a database write
  /// asking `w` above 1 (the one copy here, `n` 1) that succeeded is `202 Accepted` instead
  /// of `201 Created` (or `200` for a deletion): written and durable, the quorum unmet. (Not
  /// the creation of a database, which CouchDB answers 201, nor an attachment's deletion.)
  static func applyQuorum(_ response: inout Response, request: Request, route: CouchRoute) {
    if case .database = route, request.method == .put { return }
    // CouchDB answers an attachment's deletion 200 whatever `w` asks.
    if case .attachment = route, request.method == .delete { return }
    guard route.database != nil, response.status == .created || response.status == .ok,
      [.put, .post, .delete, documentCopyMethod].contains(request.method),
      let w = request.uri.queryParameters.get("w").flatMap({ Int($0) }), w > 1
    else { return }
    if response.status == .ok && request.method != .delete { return }
    response.status = .accepted
  }

  static let documentCopyMethod = HTTPRequest.Method("COPY")!

  /// CouchDB's `X-HTTP-Method-Override` (`chttpd:handle_request_int`): a `POST` carrying it
  /// with one of `GET`, `HEAD`, `POST`, `PUT`, `DELETE`, `TRACE`, `CONNECT` or `COPY` is
  /// answered as that method; on any other method the header is ignored, as there.
  static func overrideMethod(_ request: inout Request) {
    guard request.method == .post,
      let name = HTTPField.Name("X-HTTP-Method-Override"),
      let value = request.headers[name],
      ["GET", "HEAD", "POST", "PUT", "DELETE", "TRACE", "CONNECT", "COPY"].contains(value),
      let method = HTTPRequest.Method(value)
    else { return }
    var head = request.head
    head.method = method
    request = Request(head: head, body: request.body)
  }

  /// Whether `request` can be routed a second time: a read, or a write whose body (declared
  /// by `Content-Length`, within ``CouchServerOptions/maxRequestBytes``, not an attachment's)
  /// is now held in memory.
  func holdingBody(_ request: inout Request, route: CouchRoute?) async throws -> Bool {
    if request.method == .get || request.method == .head { return true }
    guard let length = request.headers[.contentLength].flatMap({ Int($0) }),
      length <= settings.current.maxRequestBytes
    else { return false }
    if case .attachment = route { return false }
    _ = try await request.collectBody(upTo: length)
    return true
  }

  // MARK: Routing

  func route(_ request: Request, _ route: CouchRoute, context: Context, caller: Caller)
    async throws -> Response
  {
    let query = try QueryParameters(request.uri.query)
    if let db = route.database {
      try systemDatabaseGate(db, route, request: request, caller: caller)
    }
    let method = request.method
    switch route {
    case .serverFeature(let index, let parameters, let rest):
      return try await featureServerEndpoint(
        serverFeatureEndpoints[index], parameters: parameters, rest: rest, request: request,
        query: query, context: context, caller: caller)
    case .root, .session, .allDatabases, .databasesInfo, .up, .uuids, .activeTasks, .node,
      .nodeStats, .membership, .prometheus, .config, .versions:
      // The server's own endpoints: by their table (CouchServer+Endpoints.swift).
      guard let endpoint = route.serverEndpoint else { throw CouchError.notFound() }
      return try await serverEndpoint(
        endpoint,
        ServerEndpointRule.Call(
          server: self, route: route, request: request, query: query, context: context,
          caller: caller))
    case .database(let name):
      return try await database(
        name, request: request, query: query, context: context, caller: caller)
    case .globalChanges:
      if method == .put {
        throw CouchError(
          "file_exists", "The database could not be created, the file already exists.",
          status: 412)
      }
      throw CouchError("not_found", "Database does not exist.", status: 404)
    case .unserved(let error):
      throw error
    default:
      guard let db = route.database else { throw CouchError.notFound() }
      // Every route under a database: it is opened, and the caller's access to it decided,
      // once, here.
      let store = try await open(db)
      let access = try databaseAccess(db, store, caller)
      return try await self.route(
        request, route, in: store, access: access, query: query, context: context,
        caller: caller)
    }
  }

  /// A route under a database, opened, with the caller's access to it (``route(_:_:context:caller:)``).
  func route(
    _ request: Request, _ route: CouchRoute, in store: DocumentStore, access: DatabaseAccess,
    query: QueryParameters, context: Context, caller: Caller
  ) async throws -> Response {
    let method = request.method
    switch route {
    case .databaseEndpoint(let db, let endpoint):
      return try await databaseEndpoint(
        endpoint,
        DatabaseEndpointRule.Call(
          server: self, store: store, db: db, request: request, query: query, context: context,
          caller: caller, access: access))
    case .feature(let db, let index, let parameters, let rest):
      let name = request.uri.path.split(separator: "/").dropFirst().first.map(String.init) ?? ""
      return try await featureEndpoint(
        featureEndpoints[index], name: name, parameters: parameters, rest: rest,
        request: request, in: store, db: db, access: access, query: query, context: context,
        caller: caller)
    case .partitionInfo(let db, let partition):
      return try await partitionInfo(
        store, db: db, partition: partition, request: request, access: access)
    case .partitioned(let db, let partition, let segments, let inner):
      guard store.isPartitioned else {
        throw CouchError.badRequest("database is not partitioned")
      }
      do { try Partitions.validate(partition: partition) } catch { throw CouchError(error) }
      if let asked = query["partition"], asked != partition {
        throw CouchError.badRequest("Conflicting value for `partition` in query string")
      }
      let head = segments.first ?? ""
      guard
        ["_all_docs", "_find", "_explain", "_index"].contains(head)
          || (head == "_design" && segments.count > 2 && segments[2].hasPrefix("_"))
      else { throw CouchError.notFound() }
      var within = QueryParameters(
        pairs: [("partition", partition)]
          + query.pairs.filter { $0.name != "partition" }.map { ($0.name, $0.value) })
      within.errorName = query.errorName
      _ = db
      return try await self.route(
        request, inner, in: store, access: access, query: within, context: context,
        caller: caller)
    case .local(_, let id):
      if id.hasPrefix("org.wikilog.") && !(caller.user.isAdmin && request.method == .get) {
        // The security object and the API tokens' records: reached through their own APIs.
        throw CouchError(
          "forbidden", "_local/org.wikilog.* documents are reserved to wikilog.", status: 403)
      }
      return try await local(
        store, id: id, request: request, query: query, caller: caller, access: access)
    case .document(let db, let id):
      return try await document(
        store, db: db, id: id, request: request, query: query, context: context, caller: caller,
        access: access)
    case .attachment(let db, let id, let name):
      return try await attachment(
        store, db: db, id: id, name: name, request: request, query: query, caller: caller,
        access: access)
    case .log(_, let endpoint):
      // The log holds every event of every document: for administrators only.
      guard access.isAdmin else { throw Self.notDatabaseAdmin(caller.user) }
      try allow(method, [.get, .head])
      return try logEndpoint(endpoint, store, query: query, head: method == .head)
    case .databaseUnserved(_, let error):
      throw error
    default:
      throw CouchError.notFound()
    }
  }

  /// The gate of a system database (``SystemDatabasePolicy``), before the database is opened:
  /// `501` when no feature serves it (or its feature serves it not now), then what its policy
  /// refuses a caller who is not a server administrator.
  ///
  /// (The policy of database `db`: its own, or `_users`' for the database
  /// `chttpd_auth/authentication_db` names.)
  func systemDatabaseGate(_ db: String, _ route: CouchRoute, request: Request, caller: Caller)
    throws
  {
    guard let policy = systemPolicy(db) else {
      if dataDirectory.systemDatabases[db] != nil {
        throw CouchError.notImplemented(
          "the \(db) database", "no feature of this server serves it")
      }
      return
    }
    if let error = policy.unserved() { throw error }
    guard !caller.user.isAdmin else { return }
    let resource: SystemDatabasePolicy.Resource
    switch route {
    case .databaseEndpoint(_, let endpoint): resource = .endpoint(endpoint.rawValue)
    case .feature(_, let index, _, _):
      let name = request.uri.path.split(separator: "/").dropFirst().first.map(String.init) ?? ""
      resource = .featureEndpoint(name, systemOnly: featureEndpoints[index].adminOnlyOnUsers)
    case .local(_, let id): resource = .local(id)
    case .document(_, let id), .attachment(_, let id, _): resource = .document(id)
    default: resource = .database
    }
    try policy.gate(resource, caller.user)
  }

  /// The database names `_all_dbs` lists, as `chttpd_misc:handle_all_dbs_req` reads its
  /// options: `startkey`/`start_key` and `endkey`/`end_key` (JSON strings), `inclusive_end`,
  /// `descending`, `skip` and `limit`; a bad value is `400 query_parse_error`.
  static func page(_ sorted: [String], _ parameters: QueryParameters) throws(CouchError)
    -> [String]
  {
    var query = parameters
    query.errorName = "query_parse_error"
    func key(_ names: [String]) throws(CouchError) -> String? {
      for name in names {
        guard let value = try query.json(name) else { continue }
        guard let string = value.stringValue else {
          throw CouchError("query_parse_error", "\(name) must be a JSON string", status: 400)
        }
        return string
      }
      return nil
    }
    let descending = try query.bool("descending")
    let inclusiveEnd = try query.bool("inclusive_end", default: true)
    let start = try key(["startkey", "start_key"])
    let end = try key(["endkey", "end_key"])
    let skip = try query.int("skip") ?? 0
    let limit = try query.int("limit")
    func before(_ a: String, _ b: String) -> Bool {
      Array(a.utf8).lexicographicallyPrecedes(b.utf8)
    }
    var names = sorted.sorted(by: before)
    if descending { names.reverse() }
    names = names.filter { name in
      let afterStart = start.map { descending ? !before($0, name) : !before(name, $0) } ?? true
      let beforeEnd =
        end.map { e in
          if name == e { return inclusiveEnd }
          return descending ? before(e, name) : before(name, e)
        } ?? true
      return afterStart && beforeEnd
    }
    return Array(names.dropFirst(skip).prefix(limit ?? names.count))
  }

  /// Throws 405 unless `method` is one of `allowed`.
  func allow(_ method: HTTPRequest.Method, _ allowed: [HTTPRequest.Method]) throws(CouchError) {
    guard allowed.contains(method) else {
      throw CouchError.methodNotAllowed(allowed.map(\.rawValue))
    }
  }

  /// The open database `name`; 404 when it does not exist, 400 for an illegal name. A store
  /// not open yet is opened on the thread pool: opening can catch a projection up or rebuild
  /// it, which must not hold an event loop.
  func open(_ name: String) async throws -> DocumentStore {
    if let store = dataDirectory.storeIfOpen(name) { return store }
    let data = dataDirectory
    return try await blocking { try data.open(name, create: false) }
  }

  /// CouchDB's check of `POST /db` and `_bulk_docs` (`couch_httpd:validate_ctype`): the body
  /// must be declared `application/json`; 415 `bad_content_type` otherwise.
  static func requireJSONContentType(_ request: Request) throws(CouchError) {
    let type = request.headers[.contentType]?.lowercased() ?? ""
    guard type.hasPrefix("application/json") else {
      throw CouchError(
        "bad_content_type", "Content-Type must be application/json", status: 415)
    }
  }

  /// Reads the whole request body, up to the configured limit; a body sent with
  /// `Content-Encoding: gzip` is gunzipped (within the same limit), any encoding other than
  /// gzip and identity is `415`, as `chttpd:maybe_decompress` does for JSON bodies (multipart
  /// ones are read as they come).
  func body(of request: Request) async throws -> [UInt8] {
    let limit = settings.current.maxRequestBytes
    func tooLarge(_ what: String) -> CouchError {
      CouchError(
        "too_large", "the request body is \(what); the server accepts at most \(limit)",
        status: 413)
    }
    if let length = request.headers[.contentLength].flatMap({ Int($0) }), length > limit {
      throw tooLarge("\(length) bytes")
    }
    let buffer = try await request.body.collect(upTo: limit)
    let bytes = Array(buffer.readableBytesView)
    let type = request.headers[.contentType]?.lowercased() ?? ""
    guard let encoding = request.headers[.contentEncoding], !type.hasPrefix("multipart/") else {
      return bytes
    }
    switch String(encoding.filter { $0 != " " && $0 != "\t" }).lowercased() {
    case "identity": return bytes
    case "gzip":
      switch Gunzip.decode(bytes, limit: limit) {
      case .complete(let decoded)?: return decoded
      case .pastLimit?: throw tooLarge("more than that once gunzipped")
      case nil: throw CouchError.badRequest("Request body is not properly gzipped.")
      }
    default:
      throw CouchError(
        "bad_content_type", "\(encoding) is not a supported content encoding.", status: 415)
    }
  }

  /// Reads and parses a JSON request body; malformed JSON is `400 bad_request`.
  func jsonBody(of request: Request) async throws -> JSONValue {
    try Self.json(parsing: try await body(of: request))
  }

  /// Parses a JSON request body; malformed JSON is `400 bad_request`.
  public static func json(parsing bytes: [UInt8]) throws(CouchError) -> JSONValue {
    guard !bytes.isEmpty else { throw CouchError.badRequest("the request body is empty") }
    do {
      return try JSONValue(parsing: bytes)
    } catch {
      throw CouchError.badRequest("invalid UTF-8 JSON: \(error)")
    }
  }

  /// Parses a JSON object request body.
  static func object(parsing bytes: [UInt8]) throws(CouchError) -> JSONObject {
    guard let object = try json(parsing: bytes).objectValue else {
      throw CouchError.badRequest("Request body must be a JSON object")
    }
    return object
  }

  /// Reads a JSON object body.
  func objectBody(of request: Request) async throws -> JSONObject {
    try Self.object(parsing: try await body(of: request))
  }

  /// Runs a blocking store write on NIO's thread pool, so that waits for the LMDB writer lock
  /// and fsync never occupy the cooperative threads that serve the feeds.
  func blocking<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    // The caller's ``WriteAccess/user`` goes along: the pool's threads have no task.
    try await NIOThreadPool.singleton.runIfActive(WriteAccess.carrying(body))
  }

  /// Rows a read may return on the event loop; a read that may return more (no `limit`, or a
  /// larger one) runs on the thread pool, so one large answer does not stall the connections
  /// that share its loop.
  static let inlineReadLimit = 1_000

  /// Runs a read inline when it is bounded by `limit` rows (at most ``inlineReadLimit``),
  /// else on the thread pool.
  func reading<T: Sendable>(limit: Int?, _ body: @escaping @Sendable () throws -> T) async throws
    -> T
  {
    if let limit, limit <= Self.inlineReadLimit { return try body() }
    return try await blocking(body)
  }

  /// The origin recorded for writes made over HTTP: the client's address.
  func replicationOrigin(_ context: Context) -> String {
    context.peerAddress.map { "http:\($0)" } ?? "http"
  }
}
