import HTTPTypes
import Hummingbird
import Projections

/// The database endpoints (`/{db}/_all_docs`, `/{db}/_bulk_docs`, ...) as a table: for each,
/// who may call it, with which methods, how its query's errors are named, and its handler.
/// ``CouchServer/route(_:_:context:caller:)`` checks the caller's access to the database
/// first (``CouchServer/databaseAccess(_:_:_:writing:)``), then the endpoint's role, then its
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
    .viewCleanup: Rule(role: .databaseAdmin, methods: [.post]) { c in
      c.server.viewCleanup()
    },
    .revsLimit: Rule(role: .databaseAdminToWrite) { c in
      try await c.server.revsLimit(c.store, request: c.request, caller: c.caller)
    },
    .security: Rule { c in
      try await c.server.securityObject(
        c.store, access: c.access, request: c.request, caller: c.caller)
    },
    .find: Rule(methods: [.post]) { c in
      try await c.server.find(c.store, request: c.request, access: c.access)
    },
    .explain: Rule(methods: [.post]) { c in
      // It names the indexes and their fields, which live in design documents: for those
      // who may read them (the security object's members), as `GET _index` lists them.
      if c.access.restricted && !c.access.isMember { throw notMember(c.caller.user) }
      return try await c.server.explain(c.store, db: c.db, request: c.request)
    },
    .search: Rule(methods: [.get, .head]) { c in
      try await c.server.search(c.store, request: c.request, query: c.query, access: c.access)
    },
    .index: Rule { c in
      try await c.server.indexes(
        c.store, request: c.request, context: c.context, caller: c.caller, access: c.access)
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
