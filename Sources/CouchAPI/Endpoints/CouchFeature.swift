import Auth
public import HTTPTypes
public import Hummingbird
public import JSON
public import Projections

/// What a module brings to a ``CouchServer``: endpoints under each database, a kind of
/// `_changes` filter, and whatever the data directory needs before the first request (a
/// validator of design documents, say). The server's own endpoints (documents, `_all_docs`,
/// `_changes`, `_bulk_docs`, ...) are built in; Mango, views and design functions come as the
/// `CouchQuery` module's feature, in the same way an application's own would.
///
/// ```swift
/// var options = CouchServerOptions()
/// options.features = [.query]  // CouchQuery: _find, _index, _explain, views, _show, _list, ...
/// let server = CouchServer(dataDirectory: data, options: options)
/// ```
///
/// The server opens the database and decides the caller's access to it (its security object
/// and access rules, ``DatabaseAccess``) once, before any endpoint's handler runs; then the
/// endpoint's ``DatabaseEndpoint/Role`` and methods are checked; then the handler is called
/// with a ``DatabaseRequest``.
public struct CouchFeature: Sendable {
  /// A name for logs and errors (`"query"`).
  public var name: String
  /// The endpoints under `/{db}/`, tried in order before the built-in routes of documents.
  public var databaseEndpoints: [DatabaseEndpoint]
  /// The filters of `_changes` it answers (`filter=ddoc/name`, `filter=_view`): given the
  /// filter's name and the request, the document filter, or nil for a name it does not know.
  public var changesFilter: (@Sendable (ChangesFilterRequest) throws -> DocumentBodyFilter?)?
  /// Runs once when a server is made with the feature, before it answers anything.
  public var prepare: @Sendable (DataDirectory) -> Void
  /// Makes the feature's part of each server made with it (its server endpoints, system
  /// databases, tasks, metrics and services, with the state they share), once per server.
  public var perServer: (@Sendable (Setup) -> Instance)?

  public init(
    name: String, databaseEndpoints: [DatabaseEndpoint] = [],
    changesFilter: (@Sendable (ChangesFilterRequest) throws -> DocumentBodyFilter?)? = nil,
    prepare: @escaping @Sendable (DataDirectory) -> Void = { _ in },
    perServer: (@Sendable (Setup) -> Instance)? = nil
  ) {
    self.name = name
    self.databaseEndpoints = databaseEndpoints
    self.changesFilter = changesFilter
    self.prepare = prepare
    self.perServer = perServer
  }
}

/// An endpoint under a database: a path pattern after `/{db}/`, the methods it answers, the
/// role it needs and its handler.
public struct DatabaseEndpoint: Sendable {
  /// One segment of a path pattern, matched against the percent-decoded segments after
  /// `/{db}/`.
  public enum Segment: Sendable, Hashable, ExpressibleByStringLiteral {
    /// This segment, exactly.
    case literal(String)
    /// Any one segment, given to the handler under this name
    /// (``DatabaseRequest/parameters``).
    case parameter(String)
    /// The segments left, none or more (``DatabaseRequest/rest``); last in a pattern.
    case rest

    public init(stringLiteral value: String) { self = .literal(value) }
  }

  /// Who may call the endpoint, beyond the database's own check (the caller is a member, or
  /// the database's rules let them read part of it).
  public enum Role: Sendable {
    /// Anyone the database lets in (the handler checks each document read or written).
    case reader
    /// A member of the database's security object (a reader whose reads are filtered by
    /// access rules is refused: `401`/`403`).
    case member
    /// A database administrator (`401`/`403` `You are not a db or server admin.`).
    case databaseAdmin
    /// Anyone may read it; `PUT` needs a database administrator.
    case databaseAdminToWrite
  }

  public var path: [Segment]
  /// The methods it answers (`405` with `Allow` for others); nil when the handler checks.
  public var methods: [HTTPRequest.Method]?
  public var role: Role
  /// The error name of a malformed query parameter (`query_parse_error`), else `bad_request`.
  public var queryErrors: String?
  /// Whether only server administrators may call it on a system database whose policy keeps
  /// its `_` endpoints for them (`_users`, as CouchDB answers every `/{db}/_...` endpoint of a
  /// system database: ``SystemDatabasePolicy``).
  public var adminOnlyOnUsers: Bool
  public var handler: @Sendable (DatabaseRequest) async throws -> Response

  public init(
    _ path: [Segment], methods: [HTTPRequest.Method]? = nil, role: Role = .reader,
    queryErrors: String? = nil, adminOnlyOnUsers: Bool = true,
    handler: @escaping @Sendable (DatabaseRequest) async throws -> Response
  ) {
    self.path = path
    self.methods = methods
    self.role = role
    self.queryErrors = queryErrors
    self.adminOnlyOnUsers = adminOnlyOnUsers
    self.handler = handler
  }

  /// The parameters and the rest of `segments` when they match ``path``, else nil.
  func match(_ segments: ArraySlice<String>) -> (parameters: [String: String], rest: [String])? {
    Segment.match(path, segments)
  }
}

extension DatabaseEndpoint.Segment {
  /// The parameters and the rest of `segments` when they match `pattern`, else nil.
  static func match(_ pattern: [Self], _ segments: ArraySlice<String>) -> (
    parameters: [String: String], rest: [String]
  )? {
    var parameters: [String: String] = [:]
    var index = segments.startIndex
    for segment in pattern {
      switch segment {
      case .rest:
        return (parameters, Array(segments[index...]))
      case .literal(let literal):
        guard index < segments.endIndex, segments[index] == literal else { return nil }
      case .parameter(let name):
        guard index < segments.endIndex else { return nil }
        parameters[name] = segments[index]
      }
      index += 1
    }
    return index == segments.endIndex ? (parameters, []) : nil
  }
}

/// What an endpoint's handler is given: the open database, the caller and their access to it,
/// the request and its decoded query string, and the server's readers of bodies.
public struct DatabaseRequest: Sendable {
  public let server: CouchServer
  public let store: DocumentStore
  /// The database's name.
  public let database: String
  public let request: Request
  public let context: CouchRequestContext
  /// The request's query string, decoded (its readers' errors named by the endpoint's
  /// ``DatabaseEndpoint/queryErrors``).
  public let query: QueryParameters
  /// What the caller may do with the database.
  public let access: DatabaseAccess
  /// The pattern's ``DatabaseEndpoint/Segment/parameter(_:)`` segments, by name.
  public let parameters: [String: String]
  /// The segments the pattern's ``DatabaseEndpoint/Segment/rest`` matched.
  public let rest: [String]
  let caller: Caller

  /// The user the rules see.
  public var user: UserContext { caller.user }
  /// The actor of the caller's writes.
  public var actor: String { caller.actor }
  /// The origin of the caller's writes (the client's address).
  public var origin: String { server.replicationOrigin(context) }
  public var method: HTTPRequest.Method { request.method }

  /// The whole body (gunzipped when sent so), within the server's limit.
  public func body() async throws -> [UInt8] { try await server.body(of: request) }
  /// The body, parsed as JSON (`400 bad_request` when it is not).
  public func jsonBody() async throws -> JSONValue { try await server.jsonBody(of: request) }
  /// `415 bad_content_type` unless the body is declared `application/json`.
  public func requireJSONContentType() throws(CouchError) {
    try CouchServer.requireJSONContentType(request)
  }
  /// `405` unless the method is one of `allowed`.
  public func allow(_ allowed: [HTTPRequest.Method]) throws(CouchError) {
    try server.allow(request.method, allowed)
  }
  /// CouchDB's refusal of a caller who is not a database administrator.
  public var notDatabaseAdmin: CouchError { CouchServer.notDatabaseAdmin(caller.user) }
  /// CouchDB's refusal of a caller who is not a member.
  public var notMember: CouchError { CouchServer.notMember(caller.user) }

  /// Runs blocking store work on the thread pool, with the caller's ``WriteAccess``.
  public func blocking<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await server.blocking(body)
  }
}

/// What a ``CouchFeature/changesFilter`` is given: the filter's name (`ddoc/name`, `_view`)
/// and the request's parameters.
public struct ChangesFilterRequest: Sendable {
  public let store: DocumentStore
  /// The `filter` parameter.
  public let name: String
  public let request: Request
  public let query: QueryParameters
  /// A `POST` body's object, if any.
  public let body: JSONObject?

  /// A parameter, from the query string or else the body.
  public func value(_ name: String) -> String? {
    query[name] ?? body?[name]?.stringValue
  }
}

extension CouchServer {
  /// Runs a feature's endpoint under database `db` (opened, with the caller's access decided);
  /// `name` is the path's first segment after the database's (for errors).
  func featureEndpoint(
    _ endpoint: DatabaseEndpoint, name: String, parameters: [String: String], rest: [String],
    request: Request, in store: DocumentStore, db: String, access: DatabaseAccess,
    query: QueryParameters, context: Context, caller: Caller
  ) async throws -> Response {
    switch endpoint.role {
    case .reader: break
    case .member:
      if access.restricted && !access.isMember { throw Self.notMember(caller.user) }
    case .databaseAdmin:
      guard access.isAdmin else { throw Self.notDatabaseAdmin(caller.user) }
    case .databaseAdminToWrite:
      if request.method == .put && !access.isAdmin { throw Self.notDatabaseAdmin(caller.user) }
    }
    if let methods = endpoint.methods { try allow(request.method, methods) }
    var query = query
    if let name = endpoint.queryErrors { query.errorName = name }
    return try await endpoint.handler(
      DatabaseRequest(
        server: self, store: store, database: db, request: request, context: context,
        query: query, access: access, parameters: parameters, rest: rest, caller: caller))
  }
}
