import HTTPTypes
import Hummingbird
import JSON
import Projections

/// The database endpoints (`/{db}/_all_docs`, `/{db}/_bulk_docs`, ...) as a table: for each,
/// who may call it, with which methods, how its query's errors are named, and its handler.
/// ``CouchServer/route(_:_:context:caller:)`` checks the caller's access to the database
/// first (``CouchServer/databaseAccess(_:_:_:)``), then the endpoint's role, then its
/// methods (`405` with `Allow`), then calls the handler.
struct DatabaseEndpointRule: Sendable {
  /// Who may call the endpoint, beyond the database's member check.
  enum Role: Sendable {
    /// Anyone the database lets in (each document still checked by the handler).
    case reader
    /// A database administrator (`403` otherwise, CouchDB's `You are not a db or server
    /// admin.`).
    case databaseAdmin
    /// Anyone may read it; writing (`PUT`) needs a database administrator.
    case databaseAdminToWrite
  }

  /// What a handler is given.
  struct Call {
    let server: CouchServer
    let store: DocumentStore
    let db: String
    let request: Request
    let query: QueryParameters
    let context: CouchServer.Context
    let caller: Caller
    let access: DatabaseAccess
  }

  var role: Role = .reader
  /// The methods it answers; nil when the handler checks them itself.
  var methods: [HTTPRequest.Method]? = nil
  /// The error name of a malformed query parameter (`query_parse_error` for `_all_docs`, as
  /// CouchDB answers), else `bad_request`.
  var queryErrors: String? = nil
  let handler: @Sendable (Call) async throws -> Response
}

extension CouchServer {
  typealias Rule = DatabaseEndpointRule

  /// Every ``CouchRoute/DatabaseEndpoint`` and its rule.
  static let databaseEndpoints: [CouchRoute.DatabaseEndpoint: DatabaseEndpointRule] = [
    .allDocs: Rule(queryErrors: "query_parse_error") { c in
      try await c.server.allDocs(c.store, request: c.request, query: c.query, access: c.access)
    },
    .designDocs: Rule(queryErrors: "query_parse_error") { c in
      try await c.server.allDocs(
        c.store, request: c.request, query: c.query, access: c.access, namespace: .design)
    },
    .localDocs: Rule(queryErrors: "query_parse_error") { c in
      try await c.server.localDocs(c.store, request: c.request, query: c.query, access: c.access)
    },
    .allDocsQueries: Rule(queryErrors: "query_parse_error") { c in
      try await c.server.allDocsQueries(
        c.store, request: c.request, query: c.query, access: c.access, namespace: .all)
    },
    .designDocsQueries: Rule(queryErrors: "query_parse_error") { c in
      try await c.server.allDocsQueries(
        c.store, request: c.request, query: c.query, access: c.access, namespace: .design)
    },
    .localDocsQueries: Rule(queryErrors: "query_parse_error") { c in
      try await c.server.allDocsQueries(
        c.store, request: c.request, query: c.query, access: c.access, namespace: .local)
    },
    .bulkDocs: Rule(methods: [.post]) { c in
      try await c.server.bulkDocs(
        c.store, request: c.request, query: c.query, context: c.context, caller: c.caller,
        access: c.access)
    },
    .bulkGet: Rule(methods: [.post]) { c in
      try await c.server.bulkGet(c.store, request: c.request, query: c.query, access: c.access)
    },
    .revsDiff: Rule(methods: [.post]) { c in
      try await c.server.revsDiff(c.store, request: c.request, access: c.access)
    },
    .missingRevs: Rule(methods: [.post]) { c in
      try await c.server.missingRevs(c.store, request: c.request, access: c.access)
    },
    .changes: Rule { c in
      try await c.server.changes(c.store, request: c.request, query: c.query, access: c.access)
    },
    .ensureFullCommit: Rule(methods: [.post]) { c in
      try await c.server.ensureFullCommit(c.store)
    },
    .compact: Rule(role: .databaseAdmin) { c in
      try await c.server.compact(c.db, request: c.request)
    },
    .purge: Rule(role: .databaseAdmin, methods: [.post]) { c in
      try await c.server.erase(
        .purge, c.db, request: c.request, query: c.query, context: c.context, caller: c.caller)
    },
    .redact: Rule(role: .databaseAdmin, methods: [.post]) { c in
      try await c.server.erase(
        .redact, c.db, request: c.request, query: c.query, context: c.context, caller: c.caller)
    },
    .purgedInfos: Rule(role: .databaseAdmin, methods: [.get, .head]) { c in
      try c.server.purgedInfos(c.store)
    },
    .purgedInfosLimit: Rule(role: .databaseAdminToWrite) { c in
      try await c.server.purgedInfosLimit(c.store, request: c.request, caller: c.caller)
    },
    .revsLimit: Rule(role: .databaseAdminToWrite) { c in
      try await c.server.revsLimit(c.store, request: c.request, caller: c.caller)
    },
    .security: Rule { c in
      try await c.server.securityObject(
        c.store, access: c.access, request: c.request, caller: c.caller)
    },
  ]

  /// Runs database endpoint `endpoint` by its rule (``databaseEndpoints``).
  func databaseEndpoint(
    _ endpoint: CouchRoute.DatabaseEndpoint, _ call: DatabaseEndpointRule.Call
  ) async throws -> Response {
    guard let rule = Self.databaseEndpoints[endpoint] else {
      throw CouchError.notFound()
    }
    let method = call.request.method
    switch rule.role {
    case .reader: break
    case .databaseAdmin:
      guard call.access.isAdmin else { throw Self.notDatabaseAdmin(call.caller.user) }
    case .databaseAdminToWrite:
      if method == .put && !call.access.isAdmin { throw Self.notDatabaseAdmin(call.caller.user) }
    }
    if let methods = rule.methods { try allow(method, methods) }
    var call = call
    if let name = rule.queryErrors {
      var query = call.query
      query.errorName = name
      call = DatabaseEndpointRule.Call(
        server: call.server, store: call.store, db: call.db, request: call.request, query: query,
        context: call.context, caller: call.caller, access: call.access)
    }
    return try await rule.handler(call)
  }
}

/// The server's own endpoints (`/`, `/_all_dbs`, `/_active_tasks`, `/_node/...`, ...) as a
/// table: the methods each answers (checked first, `405` with `Allow`), then who may call it,
/// then its handler.
struct ServerEndpointRule: Sendable {
  enum Role: Sendable {
    case anyone
    /// A server administrator (`401 You are not a server admin.`).
    case serverAdmin
  }

  struct Call {
    let server: CouchServer
    let route: CouchRoute
    let request: Request
    let query: QueryParameters
    let context: CouchServer.Context
    let caller: Caller
    var head: Bool { request.method == .head }
  }

  /// The methods it answers; nil when the handler checks them itself.
  var methods: [HTTPRequest.Method]? = [.get, .head]
  var role: Role = .anyone
  let handler: @Sendable (Call) async throws -> Response
}

extension CouchServer {
  typealias ServerRule = ServerEndpointRule

  /// Every ``CouchRoute/ServerEndpoint`` and its rule.
  static let serverEndpoints: [CouchRoute.ServerEndpoint: ServerEndpointRule] = [
    .root: ServerRule { c in c.server.welcome(head: c.head) },
    .session: ServerRule(methods: nil) { c in
      try await c.server.session(c.request, caller: c.caller, context: c.context)
    },
    .allDatabases: ServerRule(role: .serverAdmin) { c in
      CouchResponse.json(
        .array(try page(c.server.dataDirectory.databaseNames(), c.query).map { .string($0) }),
        includeBody: !c.head)
    },
    .databasesInfo: ServerRule(methods: nil, role: .serverAdmin) { c in
      try await c.server.databasesInfo(c.request)
    },
    .up: ServerRule { c in
      CouchResponse.json(.object(JSONObject(["status": .string("ok")])), includeBody: !c.head)
    },
    .uuids: ServerRule { c in try c.server.uuids(c.query) },
    // A single node, named as `_scheduler` and `_node/_local` name it.
    .membership: ServerRule(role: .serverAdmin) { c in
      let nodes = JSONValue.array([.string(c.server.nodeName)])
      return CouchResponse.json(
        .object(JSONObject(["all_nodes": nodes, "cluster_nodes": nodes])), includeBody: !c.head)
    },
    .activeTasks: ServerRule(role: .serverAdmin) { c in
      let tasks =
        (c.server.activeTasks().arrayValue ?? [])
        + c.server.featureInstances.flatMap { $0.activeTasks() }
      return CouchResponse.json(.array(tasks), includeBody: !c.head)
    },
    .node: ServerRule { c in
      guard case .node(let node) = c.route else { throw CouchError.notFound() }
      return CouchResponse.json(
        .object(JSONObject(["name": .string(try c.server.checkedNodeName(node))])),
        includeBody: !c.head)
    },
    .prometheus: ServerRule(role: .serverAdmin) { c in
      guard case .prometheus(let node) = c.route else { throw CouchError.notFound() }
      return try c.server.prometheus(node: node, head: c.head)
    },
    .config: ServerRule(methods: nil, role: .serverAdmin) { c in
      guard case .config(let node, let path) = c.route else { throw CouchError.notFound() }
      return try await c.server.config(node: node, path: path, request: c.request)
    },
    // CouchDB's members (`collation_driver`, and the features' `javascript_engine`) and
    // wikilog's own version; no `erlang`.
    .versions: ServerRule(role: .serverAdmin) { c in
      guard case .versions(let node) = c.route else { throw CouchError.notFound() }
      _ = try c.server.checkedNodeName(node)
      let icu = CollationDriver.versions
      var body = JSONObject([
        "collation_driver": .object(
          JSONObject([
            "name": .string(CollationDriver.name), "library_version": .string(icu.library),
            "collation_algorithm_version": .string(icu.algorithm),
            "collator_version": .string(icu.collator),
          ])),
        "wikilog": .object(JSONObject(["version": .string(CouchServer.version)])),
      ])
      for instance in c.server.featureInstances {
        for (name, value) in instance.versions.sorted(by: { $0.key < $1.key }) {
          body[name] = value
        }
      }
      return CouchResponse.json(.object(body), includeBody: !c.head)
    },
    .nodeStats: ServerRule(role: .serverAdmin) { c in
      guard case .nodeStats(let node, let path) = c.route else { throw CouchError.notFound() }
      return try c.server.nodeStats(node: node, path: path, head: c.head)
    },
  ]

  /// Runs server endpoint `endpoint` by its rule (``serverEndpoints``).
  func serverEndpoint(_ endpoint: CouchRoute.ServerEndpoint, _ call: ServerEndpointRule.Call)
    async throws -> Response
  {
    guard let rule = Self.serverEndpoints[endpoint] else { throw CouchError.notFound() }
    if let methods = rule.methods { try allow(call.request.method, methods) }
    switch rule.role {
    case .anyone: break
    case .serverAdmin: try requireServerAdmin(call.caller)
    }
    return try await rule.handler(call)
  }
}

/// The methods of one of the API's resources (a database, a document, an attachment, a
/// `_local` document) and the handler of each: the dispatch of ``CouchServer`` instead of a
/// `switch` on the method. A method the table does not hold is `405 method_not_allowed` with
/// the `Allow` list CouchDB gives for that resource (in CouchDB's order, which is not always
/// the table's: `COPY` of a `_local` document is routed, to say it is not implemented, but not
/// listed).
struct MethodTable<Handler: Sendable>: Sendable {
  let handlers: [HTTPRequest.Method: Handler]
  let allow: [String]

  init(_ handlers: [HTTPRequest.Method: Handler], allow: [String]) {
    self.handlers = handlers
    self.allow = allow
  }

  /// The handler of `method`, or the 405 that lists the resource's methods.
  func handler(for method: HTTPRequest.Method) throws(CouchError) -> Handler {
    guard let handler = handlers[method] else { throw CouchError.methodNotAllowed(allow) }
    return handler
  }
}
