import HTTPTypes
import Hummingbird
import JSON
import Projections

#if canImport(FoundationEssentials)
  import FoundationEssentials
#else
  import Foundation
#endif

extension CouchServer {
  /// `POST /_replicate` (any signed-in user, as in CouchDB 3.4): `{"source", "target"}` as URLs
  /// or `{"url", "auth": {"basic": {"username", "password"}}, "headers": {...}}` objects, with
  /// `continuous`, `create_target`, `doc_ids`, `selector`, `filter` and `query_params`,
  /// `since_seq`, `worker_batch_size`, `retries_per_request` (5 by default, as CouchDB's);
  /// `{"cancel": true}` with the same source, target and `continuous` (or with the job's id as
  /// `replication_id`, `id` or `_local_id`) stops a job.
  ///
  /// A one-shot replication answers when it is done, with the checkpoint's history
  /// (`{"ok": true, "session_id", "source_last_seq", "history": [...]}`); a continuous one
  /// answers at once with `{"ok": true, "_local_id": "<id>+continuous"}` and runs until
  /// cancelled, listed in `/_active_tasks` and `/_scheduler/jobs`. An endpoint given as a plain
  /// database name is this server's database, reached with the caller's own credentials (its
  /// `Authorization` header and cookie), as chttpd rewrites such a name into the server's own
  /// URL; here the requests go to the server in process (``LocalTransport``). (`_replicator`
  /// documents refuse names, as in CouchDB 3.) A job belongs to the user who started it: another user's job, or a
  /// `_replicator` document's job owned by another user, is started over or cancelled by
  /// server administrators only (CouchDB's `check_authorization/2`: 401 `You are not a server
  /// admin.`).
  func replicate(_ request: Request, caller: Caller) async throws -> Response {
    let body = try await objectBody(of: request)
    let continuous = body["continuous"]?.boolValue ?? false
    if let cancel = body["cancel"] {
      guard let flag = cancel.boolValue else {
        throw ReplicationError.badRequest("parameter `cancel` must be a boolean")
      }
      if flag {
        return try await cancelReplication(body, caller: caller, local: localEndpoint(request))
      }
    }
    let replicator = try Self.replicator(body, local: localEndpoint(request))
    let id = replicator.replicationID + (continuous ? "+continuous" : "")
    let job = ReplicationJobs.Job(
      id: id, source: replicator.source.identity, target: replicator.target.identity,
      continuous: continuous, user: caller.user.name, startTime: .now, updated: .now,
      status: ReplicationStatus(
        state: .starting,
        report: ReplicationReport(sessionID: "", startSeq: .int(0), endSeq: .int(0))),
      history: [], task: nil)
    if let existing = replications.job(id), existing.user != caller.user.name {
      try requireServerAdmin(caller)
    }
    if continuous {
      guard replications.add(job) else {
        // Already running: CouchDB answers with the running job's id.
        return CouchResponse.json(
          .object(JSONObject(["ok": .bool(true), "_local_id": .string(id)])), status: .accepted)
      }
      let jobs = replications
      let task = Task {
        defer { jobs.remove(id) }
        return try await replicator.replicate { jobs.update(id, $0) }
      }
      replications.attach(id, task)
      return CouchResponse.json(
        .object(JSONObject(["ok": .bool(true), "_local_id": .string(id)])), status: .accepted)
    }
    guard replications.add(job) else {
      throw ReplicationError("conflict", "Replication `\(id)` is already running.", status: 409)
    }
    defer { replications.remove(id) }
    let jobs = replications
    let report: ReplicationReport
    do {
      report = try await replicator.replicate { jobs.update(id, $0) }
    } catch let error as ReplicatorError {
      throw Self.replicationFailure(error)
    }
    var answer = replicator.checkpointDocument(
      sessionID: report.sessionID, startTime: ReplicationJobs.time(job.startTime).stringValue ?? "",
      report: report, previous: nil)
    answer.members.insert(.init(key: "ok", value: .bool(true)), at: 0)
    if report.docsRead == 0 { answer["no_changes"] = .bool(true) }
    return CouchResponse.json(.object(answer))
  }

  /// `POST /_replicate` with `"cancel": true` (CouchDB's `couch_replicator:replicate/2`): the
  /// job named by `_local_id`, `replication_id` or `id` (a space read as the `+` a URL
  /// decoding turned into one), else the one the body describes. 404 `not_found` `missing`
  /// when there is none; a job of another user needs a server administrator. A `_replicator`
  /// document's job is taken out of the scheduler, as CouchDB's `remove_job` does: the document
  /// stays, without a job, until it is edited into another replication or the server restarts.
  /// Answers `200 {"ok": true, "_local_id": id}`.
  func cancelReplication(
    _ body: JSONObject, caller: Caller, local: (@Sendable (String) -> CouchEndpoint)? = nil
  ) async throws -> Response {
    var id: String?
    for member in body.members where ["_local_id", "replication_id", "id"].contains(member.key) {
      guard let text = member.value.stringValue else {
        throw ReplicationError.badRequest("parameter `\(member.key)` must be a string")
      }
      id = String(text.map { $0 == " " ? "+" : $0 })
      break
    }
    if id == nil {
      let replicator = try Self.replicator(body, local: local)
      let continuous = body["continuous"]?.boolValue ?? false
      id = replicator.replicationID + (continuous ? "+continuous" : "")
    }
    guard let id, let job = replications.job(id) else {
      throw ReplicationError("not_found", "missing", status: 404)
    }
    if job.user != caller.user.name { try requireServerAdmin(caller) }
    let cancelled: Bool
    if job.isPersistent {
      cancelled = await replicatorDocuments.cancel(jobID: id)
    } else {
      cancelled = replications.cancel(id)
    }
    guard cancelled else { throw ReplicationError("not_found", "missing", status: 404) }
    return CouchResponse.json(.object(JSONObject(["ok": .bool(true), "_local_id": .string(id)])))
  }

  /// A failed replication as CouchDB answers it: `db_not_found` for a missing database, the
  /// peer's own 401/403, else 500 with the reason.
  static func replicationFailure(_ error: ReplicatorError) -> ReplicationError {
    switch error {
    case .http(404, _, let reason):
      return ReplicationError("db_not_found", "could not open \(reason)", status: 404)
    case .http(let status, let name, let reason) where status == 401 || status == 403:
      return ReplicationError(name.isEmpty ? "unauthorized" : name, reason, status: status)
    default:
      return ReplicationError("replication_failed", error.description, status: 500)
    }
  }

  /// The endpoint of this server's database `name` for a `_replicate` request: reached in
  /// process, with the request's `Authorization` and `Cookie` headers, so that the replication
  /// may do exactly what its caller may.
  func localEndpoint(_ request: Request) -> @Sendable (String) -> CouchEndpoint {
    var credentials = HTTPFields()
    if let authorization = request.headers[.authorization] {
      credentials[.authorization] = authorization
    }
    if let cookie = request.headers[.cookie] { credentials[.cookie] = cookie }
    let transport = LocalTransport(server: self, credentials: credentials, logger: logger)
    return { name in
      CouchEndpoint(
        transport: transport, database: name,
        identity: "local:/" + PercentDecoding.encode(name) + "/")
    }
  }

  /// The replicator a `_replicate` body describes; `local` makes the endpoint of a plain
  /// database name (none: such a name is refused, as `_replicator` documents refuse it).
  static func replicator(
    _ body: JSONObject, local: (@Sendable (String) -> CouchEndpoint)? = nil
  ) throws(ReplicationError) -> Replicator {
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
  static func endpoint(
    _ spec: JSONValue, _ name: String, local: (@Sendable (String) -> CouchEndpoint)? = nil
  ) throws(ReplicationError) -> CouchEndpoint {
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
