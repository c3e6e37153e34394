public import HTTPTypes
public import Hummingbird
public import JSON
public import Logging
public import Projections
public import ServiceLifecycle

extension CouchFeature {
  /// What a feature needs to make its part of one server: the data directory and the log.
  public struct Setup: Sendable {
    public let dataDirectory: DataDirectory
    public let logger: Logger
  }

  /// A feature's part of one server, made once when the server is made
  /// (``CouchFeature/perServer``), with whatever state it keeps for that server's lifetime:
  /// endpoints at the server's root, the system databases it serves and their HTTP policy,
  /// what `/_active_tasks`, `/_node/{node}/_prometheus` and `/_node/{node}/_config` show of
  /// it, and what runs beside the server.
  public struct Instance: Sendable {
    /// Endpoints under the server's root (`/_replicate`, `/_scheduler/jobs`), tried before the
    /// built-in ones.
    public var serverEndpoints: [ServerEndpoint]
    /// The system databases the feature serves, and how (``SystemDatabasePolicy``).
    public var systemDatabases: [SystemDatabasePolicy]
    /// Rows of `/_active_tasks`, now.
    public var activeTasks: @Sendable () -> [JSONValue]
    /// Metrics of `/_node/{node}/_prometheus`, now.
    public var metrics: @Sendable () -> [PrometheusMetric]
    /// Read-only settings of `/_node/{node}/_config`, by section and key.
    public var configuration: [String: [String: @Sendable () -> String]]
    /// What runs beside the server for its lifetime (``CouchServer/services``).
    public var services: [any Service]
    /// What the feature keeps for the server, for the modules above it
    /// (``CouchServer/featureState(_:)``).
    public var state: (any Sendable)?
    /// Members of `/_node/{node}/_versions` (CouchDB's `javascript_engine`, say), by name.
    public var versions: [String: JSONValue] = [:]

    public init(
      serverEndpoints: [ServerEndpoint] = [], systemDatabases: [SystemDatabasePolicy] = [],
      activeTasks: @escaping @Sendable () -> [JSONValue] = { [] },
      metrics: @escaping @Sendable () -> [PrometheusMetric] = { [] },
      configuration: [String: [String: @Sendable () -> String]] = [:],
      services: [any Service] = [], state: (any Sendable)? = nil,
      versions: [String: JSONValue] = [:]
    ) {
      self.versions = versions
      self.serverEndpoints = serverEndpoints
      self.systemDatabases = systemDatabases
      self.activeTasks = activeTasks
      self.metrics = metrics
      self.configuration = configuration
      self.services = services
      self.state = state
    }
  }
}

/// One metric of `/_node/{node}/_prometheus`: its name, type (`counter`, `gauge`), help text
/// and samples (labels such as `{code="200"}`, or none).
public struct PrometheusMetric: Sendable {
  public var name: String
  public var type: String
  public var help: String
  public var samples: [(labels: String, value: Int)]

  public init(_ name: String, _ type: String, _ help: String, _ samples: [(String, Int)]) {
    self.name = name
    self.type = type
    self.help = help
    self.samples = samples.map { (labels: $0.0, value: $0.1) }
  }
}

/// An endpoint at the server's root, from a feature (``CouchFeature/Instance/serverEndpoints``):
/// a path pattern from the first segment, the methods it answers, who may call it and its
/// handler.
public struct ServerEndpoint: Sendable {
  /// Who may call it.
  public enum Role: Sendable {
    case anyone
    /// A signed-in user (`401 You are not an authenticated user`).
    case signedIn
    /// A server administrator (`401 You are not a server admin.`).
    case serverAdmin
  }

  public var path: [DatabaseEndpoint.Segment]
  /// The methods it answers (`405` with `Allow` for others, checked first); nil when the
  /// handler checks.
  public var methods: [HTTPRequest.Method]?
  public var role: Role
  public var handler: @Sendable (ServerRequest) async throws -> Response

  public init(
    _ path: [DatabaseEndpoint.Segment], methods: [HTTPRequest.Method]? = [.get, .head],
    role: Role = .anyone, handler: @escaping @Sendable (ServerRequest) async throws -> Response
  ) {
    self.path = path
    self.methods = methods
    self.role = role
    self.handler = handler
  }

  func match(_ segments: [String]) -> (parameters: [String: String], rest: [String])? {
    DatabaseEndpoint.Segment.match(path, segments[...])
  }
}

/// What a server endpoint's handler is given: the server, the caller, the request and its
/// decoded query string.
public struct ServerRequest: Sendable {
  public let server: CouchServer
  public let request: Request
  public let context: CouchRequestContext
  public let query: QueryParameters
  /// The pattern's ``DatabaseEndpoint/Segment/parameter(_:)`` segments, by name.
  public let parameters: [String: String]
  /// The segments the pattern's ``DatabaseEndpoint/Segment/rest`` matched.
  public let rest: [String]
  let caller: Caller

  /// The user the rules see.
  public var user: UserContext { caller.user }
  /// The actor of the caller's writes.
  public var actor: String { caller.actor }
  public var method: HTTPRequest.Method { request.method }
  /// Whether the request is a `HEAD` (answer without a body).
  public var head: Bool { request.method == .head }

  /// The body, parsed as a JSON object (`400 bad_request` when it is not).
  public func objectBody() async throws -> JSONObject { try await server.objectBody(of: request) }
  /// `401 You are not a server admin.` unless the caller is one.
  public func requireServerAdmin() throws { try server.requireServerAdmin(caller) }
  /// Runs blocking store work on the thread pool, with the caller's ``WriteAccess``.
  public func blocking<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await server.blocking(body)
  }
}

extension CouchServer {
  /// Runs a feature's server endpoint: its methods, then its role, then its handler.
  func featureServerEndpoint(
    _ endpoint: ServerEndpoint, parameters: [String: String], rest: [String], request: Request,
    query: QueryParameters, context: Context, caller: Caller
  ) async throws -> Response {
    if let methods = endpoint.methods { try allow(request.method, methods) }
    switch endpoint.role {
    case .anyone: break
    case .signedIn:
      if caller.user.name == nil && !caller.user.isAdmin {
        throw CouchError("unauthorized", "You are not an authenticated user", status: 401)
      }
    case .serverAdmin: try requireServerAdmin(caller)
    }
    return try await endpoint.handler(
      ServerRequest(
        server: self, request: request, context: context, query: query,
        parameters: parameters, rest: rest, caller: caller))
  }

  /// The state a feature keeps for this server (``CouchFeature/Instance/state``) of type `T`,
  /// if a feature of the server keeps one.
  public func featureState<T: Sendable>(_ type: T.Type) -> T? {
    for instance in featureInstances { if let state = instance.state as? T { return state } }
    return nil
  }
}
