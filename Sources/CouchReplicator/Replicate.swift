import CouchAPI
import Formats
import HTTPTypes
import Hummingbird
import JSON
import Projections
import Replication

#if canImport(FoundationEssentials)
  import FoundationEssentials
#else
  import Foundation
#endif

extension ServerReplications {
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
  func replicate(_ r: ServerRequest) async throws -> Response {
    let body = try await r.objectBody()
    let continuous = body["continuous"]?.boolValue ?? false
    if let cancel = body["cancel"] {
      guard let flag = cancel.boolValue else {
        throw CouchError.badRequest("parameter `cancel` must be a boolean")
      }
      if flag {
        return try await cancelReplication(body, r, local: localEndpoint(r))
      }
    }
    let replicator = try Replicator.described(body, local: localEndpoint(r))
    let id = replicator.replicationID + (continuous ? "+continuous" : "")
    var job = ReplicationJobs.Job(
      id: id, source: replicator.source.identity, target: replicator.target.identity,
      continuous: continuous, user: r.user.name,
      status: ReplicationStatus(
        state: .starting,
        report: ReplicationReport(sessionID: "", startSeq: .int(0), endSeq: .int(0))))
    job.checkpointInterval = replicator.options.checkpointInterval
    if let existing = jobs.job(id), existing.user != r.user.name {
      try r.requireServerAdmin()
    }
    if continuous {
      guard jobs.add(job) else {
        // Already running: CouchDB answers with the running job's id.
        return CouchResponse.json(
          .object(JSONObject(["ok": .bool(true), "_local_id": .string(id)])), status: .accepted)
      }
      let jobs = self.jobs
      let task = Task {
        defer { jobs.remove(id) }
        return try await replicator.replicate { jobs.update(id, $0) }
      }
      jobs.attach(id, task)
      return CouchResponse.json(
        .object(JSONObject(["ok": .bool(true), "_local_id": .string(id)])), status: .accepted)
    }
    guard jobs.add(job) else {
      throw CouchError("conflict", "Replication `\(id)` is already running.", status: 409)
    }
    let jobs = self.jobs
    defer { jobs.remove(id) }
    let report: ReplicationReport
    do {
      report = try await replicator.replicate { jobs.update(id, $0) }
    } catch let error as ReplicatorError {
      throw CouchError(error.answer)
    }
    var answer = replicator.checkpointDocument(
      sessionID: report.sessionID, startTime: ReplicationJobs.time(job.startTime).stringValue ?? "",
      report: report, previous: report.previousLog)
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
    _ body: JSONObject, _ r: ServerRequest, local: (@Sendable (String) -> CouchEndpoint)? = nil
  ) async throws -> Response {
    var id: String?
    for member in body.members where ["_local_id", "replication_id", "id"].contains(member.key) {
      guard let text = member.value.stringValue else {
        throw CouchError.badRequest("parameter `\(member.key)` must be a string")
      }
      id = String(text.map { $0 == " " ? "+" : $0 })
      break
    }
    if id == nil {
      let replicator = try Replicator.described(body, local: local)
      let continuous = body["continuous"]?.boolValue ?? false
      id = replicator.replicationID + (continuous ? "+continuous" : "")
    }
    guard let id, let job = jobs.job(id) else {
      throw CouchError("not_found", "missing", status: 404)
    }
    if job.user != r.user.name { try r.requireServerAdmin() }
    let cancelled: Bool
    if job.isPersistent {
      cancelled = await documents.cancel(jobID: id)
    } else {
      cancelled = jobs.cancel(id)
    }
    guard cancelled else { throw CouchError("not_found", "missing", status: 404) }
    return CouchResponse.json(.object(JSONObject(["ok": .bool(true), "_local_id": .string(id)])))
  }

  /// The endpoint of this server's database `name` for a `_replicate` request: reached in
  /// process, with the request's `Authorization` and `Cookie` headers, so that the replication
  /// may do exactly what its caller may.
  func localEndpoint(_ r: ServerRequest) -> @Sendable (String) -> CouchEndpoint {
    let request = r.request
    var credentials = HTTPFields()
    if let authorization = request.headers[.authorization] {
      credentials[.authorization] = authorization
    }
    if let cookie = request.headers[.cookie] { credentials[.cookie] = cookie }
    let transport = LocalTransport(
      server: r.server, credentials: credentials, logger: r.server.logger)
    return { name in
      CouchEndpoint(
        transport: transport, database: name,
        identity: "local:/" + PercentDecoding.encode(name) + "/")
    }
  }

}
