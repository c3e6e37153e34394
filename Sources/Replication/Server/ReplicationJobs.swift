import JSON
import Synchronization

#if canImport(FoundationEssentials)
  import FoundationEssentials
#else
  import Foundation
#endif

/// The replications a server runs for `POST /_replicate`, as `/_active_tasks` and
/// `/_scheduler/jobs` list them (CouchDB's shapes).
///
/// A one-shot job lives while its request waits for it; a continuous one until it is cancelled
/// (`{"cancel": true}`) or the server stops. Jobs live in memory: a restart forgets them (the
/// persistent `_replicator` database is not implemented). Listings show the source and target
/// URLs without credentials, never the credentials or headers given.
final class ReplicationJobs: Sendable {
  struct Job: Sendable {
    let id: String
    let source: String
    let target: String
    let continuous: Bool
    let user: String?
    let startTime: Date
    var updated: Date
    var status: ReplicationStatus
    /// CouchDB's job history: `added`, `started`, `crashed` (with its reason), `stopped`.
    var history: [(time: Date, type: String, reason: String?)]
    var task: Task<ReplicationReport, any Error>?
  }

  let jobs = Mutex([String: Job]())

  /// Registers a job; false when one with this id already runs.
  func add(_ job: Job) -> Bool {
    jobs.withLock { jobs in
      if jobs[job.id] != nil { return false }
      jobs[job.id] = job
      return true
    }
  }

  func attach(_ id: String, _ task: Task<ReplicationReport, any Error>) {
    jobs.withLock { $0[id]?.task = task }
  }

  /// Records a status change and the history entry it makes.
  func update(_ id: String, _ status: ReplicationStatus) {
    jobs.withLock { jobs in
      guard var job = jobs[id] else { return }
      let now = Date.now
      if status.state != job.status.state {
        switch status.state {
        case .running where job.status.state == .starting || job.status.state == .offline:
          job.history.insert((now, "started", nil), at: 0)
        case .offline: job.history.insert((now, "crashed", status.lastError), at: 0)
        default: break
        }
      }
      job.status = status
      job.updated = now
      jobs[id] = job
    }
  }

  func remove(_ id: String) {
    _ = jobs.withLock { $0.removeValue(forKey: id) }
  }

  /// Cancels job `id`; false when there is none.
  func cancel(_ id: String) -> Bool {
    let task = jobs.withLock { $0.removeValue(forKey: id)?.task }
    task?.cancel()
    return task != nil
  }

  var snapshot: [Job] { jobs.withLock { Array($0.values) }.sorted { $0.startTime < $1.startTime } }

  static func time(_ date: Date) -> JSONValue { .string(date.formatted(.iso8601)) }

  /// `GET /_active_tasks`: one `replication` task per job.
  func activeTasks() -> JSONValue {
    .array(
      snapshot.map { job in
        let status = job.status
        let report = status.report
        var task = JSONObject([
          "type": .string("replication"),
          "node": .string("nonode@nohost"),
          "pid": .string("<0.\(abs(job.id.hashValue % 100_000)).0>"),
          "replication_id": .string(job.id),
          "doc_id": .null,
          "database": .null,
          "user": job.user.map { .string($0) } ?? .null,
          "source": .string(job.source),
          "target": .string(job.target),
          "continuous": .bool(job.continuous),
          "process_status": .string(status.state == .offline ? "waiting" : "running"),
          "docs_read": .int(report.docsRead),
          "docs_written": .int(report.docsWritten),
          "doc_write_failures": .int(report.docWriteFailures),
          "missing_revisions_found": .int(report.missingFound),
          "revisions_checked": .int(report.missingChecked),
          "changes_pending": status.pending.map { .int($0) } ?? .null,
          "checkpointed_source_seq": status.checkpointedSeq ?? .int(0),
          "source_seq": report.endSeq,
          "through_seq": report.endSeq,
          "started_on": .int(Int(job.startTime.timeIntervalSince1970)),
          "updated_on": .int(Int(job.updated.timeIntervalSince1970)),
          "checkpoint_interval": .int(0),
        ])
        task["state"] = .string(Self.schedulerState(status.state))
        return .object(task)
      })
  }

  /// The scheduler state CouchDB would show: `initializing`, `running`, `crashing`, `completed`
  /// (a one-shot job's end), and `pending` for a caught-up continuous job between feeds.
  static func schedulerState(_ state: ReplicationStatus.State) -> String {
    switch state {
    case .starting: "initializing"
    case .running, .idle: "running"
    case .offline: "crashing"
    case .completed: "completed"
    }
  }

  /// `GET /_scheduler/jobs` and `/_scheduler/jobs/{id}`.
  func schedulerJobs(_ id: String?) throws(ReplicationError) -> JSONValue {
    let rows = snapshot.map { job -> JSONValue in
      let report = job.status.report
      var info = JSONObject([
        "revisions_checked": .int(report.missingChecked),
        "missing_revisions_found": .int(report.missingFound),
        "docs_read": .int(report.docsRead),
        "docs_written": .int(report.docsWritten),
        "changes_pending": job.status.pending.map { .int($0) } ?? .null,
        "doc_write_failures": .int(report.docWriteFailures),
        "checkpointed_source_seq": job.status.checkpointedSeq ?? .int(0),
        "source_seq": report.endSeq,
        "through_seq": report.endSeq,
      ])
      if job.status.state == .offline, let error = job.status.lastError {
        info["error"] = .string(error)
      }
      let history = (job.history + [(job.startTime, "added", nil)]).map { entry in
        var object = JSONObject([
          "timestamp": Self.time(entry.time), "type": .string(entry.type),
        ])
        if let reason = entry.reason { object["reason"] = .string(reason) }
        return JSONValue.object(object)
      }
      return .object(
        JSONObject([
          "database": .null,
          "id": .string(job.id),
          "pid": .string("<0.\(abs(job.id.hashValue % 100_000)).0>"),
          "source": .string(job.source),
          "target": .string(job.target),
          "user": job.user.map { .string($0) } ?? .null,
          "doc_id": .null,
          "info": .object(info),
          "history": .array(history),
          "node": .string("nonode@nohost"),
          "start_time": Self.time(job.startTime),
        ]))
    }
    if let id {
      guard let row = rows.first(where: { $0["id"]?.stringValue == id }) else {
        throw ReplicationError("not_found", "unknown_job", status: 404)
      }
      return row
    }
    return .object(
      JSONObject([
        "total_rows": .int(rows.count), "offset": .int(0), "jobs": .array(rows),
      ]))
  }
}
