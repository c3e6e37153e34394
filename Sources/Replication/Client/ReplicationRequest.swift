public import JSON
public import Projections

/// Reading CouchDB's replication requests (the body of `POST /_replicate`, a `_replicator`
/// document) into a ``Replicator``, and a failed replication as CouchDB answers it.
extension Replicator {
  /// The replicator a `_replicate` body or a `_replicator` document describes; `local` makes
  /// the endpoint of a plain database name (none: such a name is refused, as `_replicator`
  /// documents refuse it). A malformed body throws `bad_request`.
  ///
  /// ```swift
  /// let body = try JSONValue(parsing: #"{"source": "http://a:5984/wiki", "target": "http://b:5984/wiki"}"#)
  /// let replicator = try Replicator.described(body.objectValue!)
  /// ```
  public static func described(
    _ body: JSONObject, local: (@Sendable (String) -> CouchEndpoint)? = nil
  ) throws(StoreError) -> Replicator {
    guard let sourceSpec = body["source"], let targetSpec = body["target"] else {
      throw .badRequest("Both `source` and `target` are required")
    }
    var options = ReplicationOptions()
    options.continuous = body["continuous"]?.boolValue ?? false
    options.createTarget = body["create_target"]?.boolValue ?? false
    if let ids = body["doc_ids"] {
      guard let list = ids.arrayValue, list.allSatisfy({ $0.stringValue != nil }) else {
        throw .badRequest("`doc_ids` must be an array of strings")
      }
      options.docIDs = list.compactMap(\.stringValue)
    }
    if let selector = body["selector"] {
      guard selector.objectValue != nil else {
        throw .badRequest("`selector` must be a JSON object")
      }
      options.selector = selector
    }
    if let filter = body["filter"]?.stringValue {
      options.filter = filter
      for member in body["query_params"]?.objectValue?.members ?? [] {
        if let value = member.value.stringValue { options.filterParameters[member.key] = value }
      }
    }
    if let since = body["since_seq"] { options.since = since }
    if let size = body["worker_batch_size"]?.numberValue?.int64Value {
      options.batchSize = Int(max(1, min(size, 10_000)))
    }
    if let interval = body["checkpoint_interval"]?.numberValue?.int64Value {
      // Milliseconds, as CouchDB reads it.
      options.checkpointInterval = min(
        .milliseconds(max(0, interval)), ReplicationOptions.maximumCheckpointInterval)
    }
    // CouchDB's `retries_per_request` (5 by default, waits of 0.25 s doubling): a one-shot
    // replication whose peer does not answer fails after about 8 s.
    options.retry.maximumRetries = 5
    if let retries = body["retries_per_request"]?.numberValue?.int64Value {
      options.retry.maximumRetries = Int(max(0, min(retries, 100)))
    }
    return Replicator(
      source: try endpoint(sourceSpec, "source", local: local),
      target: try endpoint(targetSpec, "target", local: local), options: options)
  }

  /// A source or target: a URL (its userinfo as Basic credentials), or an object with `url`,
  /// `auth.basic` and `headers.Authorization`. When several are given, CouchDB's order picks
  /// one: `auth.basic`, else the URL's userinfo, else the `Authorization` header.
  public static func endpoint(
    _ spec: JSONValue, _ name: String, local: (@Sendable (String) -> CouchEndpoint)? = nil
  ) throws(StoreError) -> CouchEndpoint {
    let text = spec.stringValue ?? spec["url"]?.stringValue
    guard let text else { throw .badRequest("`\(name)` must be a URL or an object with `url`") }
    guard text.contains("://") else {
      guard let local, !text.isEmpty else {
        throw .badRequest("Local endpoints not supported since CouchDB 3.x")
      }
      return local(text)
    }
    guard let url = CouchURL(text) else { throw .badRequest("`\(name)` is not a database URL") }
    var credentials: HTTPTransport.Credentials?
    for member in spec["headers"]?.objectValue?.members ?? []
    where member.key.lowercased() == "authorization" {
      if let value = member.value.stringValue { credentials = .header(value) }
    }
    if let user = url.user { credentials = .basic(user: user, password: url.password ?? "") }
    if let basic = spec["auth"]?["basic"], let user = basic["username"]?.stringValue {
      credentials = .basic(user: user, password: basic["password"]?.stringValue ?? "")
    }
    return CouchEndpoint(
      transport: HTTPTransport(baseURL: url.baseURL, credentials: credentials),
      database: url.database, identity: url.description + "/")
  }
}

extension ReplicatorError {
  /// A failed replication as CouchDB answers it (`error`, `reason`, HTTP status):
  /// `db_not_found` for a missing database, the peer's own 401/403, else
  /// `replication_failed` (500) with the reason.
  public var answer: (error: String, reason: String, status: Int) {
    switch self {
    case .http(404, _, let reason):
      ("db_not_found", "could not open \(reason)", 404)
    case .http(let status, let name, let reason) where status == 401 || status == 403:
      (name.isEmpty ? "unauthorized" : name, reason, status)
    default:
      ("replication_failed", description, 500)
    }
  }
}
