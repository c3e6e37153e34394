import Formats
public import JSON
public import Projections
import RevTree
import Synchronization

#if canImport(FoundationEssentials)
  public import FoundationEssentials
#else
  public import Foundation
#endif

/// The replications a server runs, as `/_active_tasks` and `/_scheduler/jobs` list them
/// (CouchDB's shapes): the transient ones of `POST /_replicate` and the persistent ones of the
/// `_replicator` database (``ReplicatorDocuments``).
///
/// A transient one-shot job lives while its request waits for it; a continuous one until it is
/// cancelled (`{"cancel": true}`) or the server stops. A persistent job lives while its
/// document asks for it; its ``Job/history`` is CouchDB's (`added`, `started`, `crashed` with
/// its reason, `stopped`; newest first, at most ``maxHistory``), from which its scheduler state
/// (`running`, `pending`, `crashing`) and error count are worked out as CouchDB's
/// `couch_replicator_scheduler:job_summary/2` does. Listings show the source and target URLs
/// without credentials, never the credentials or headers given.
public final class ReplicationJobs: Sendable {
  /// One replication: a transient one of `POST /_replicate` or a `_replicator` document's.
  public struct Job: Sendable {
    public let id: String
    public let source: String
    public let target: String
    public let continuous: Bool
    public let user: String?
    public let startTime: Date
    public var updated: Date
    public var status: ReplicationStatus
    /// CouchDB's job history, newest first, without the `added` entry (``startTime``):
    /// `started`, `crashed` (with its reason), `stopped`.
    public var history: [(time: Date, type: String, reason: String?)]
    var task: Task<ReplicationReport, any Error>?
    /// For a job of a `_replicator` document: the database and the document.
    public var database: String? = nil
    public var docID: String? = nil
    /// Whether a persistent job's replication runs now (CouchDB's job `pid`); transient jobs
    /// run while they exist.
    public var running = true
    /// Its replication's ``ReplicationOptions/checkpointInterval`` (`_active_tasks` shows it).
    public var checkpointInterval: Duration = .seconds(30)
    /// Crashes before this do not count toward the backoff: someone asked for the job to be
    /// tried again now (``ReplicatorDocuments/retryNow(documentID:)``).
    var crashesForgottenBefore: Date? = nil

    public var isPersistent: Bool { docID != nil }

    /// A transient job (`POST /_replicate`) between `source` and `target` (their identities,
    /// without credentials), started now.
    public init(
      id: String, source: String, target: String, continuous: Bool, user: String?,
      startTime: Date = .now, status: ReplicationStatus
    ) {
      self.id = id
      self.source = source
      self.target = target
      self.continuous = continuous
      self.user = user
      self.startTime = startTime
      self.updated = startTime
      self.status = status
      self.history = []
      self.task = nil
    }

  }

  /// History entries kept per job (CouchDB's `max_history`).
  let maxHistory: Int
  /// How long a job must run without crashing for its crashes to stop counting (CouchDB's
  /// `health_threshold`).
  let healthThreshold: Duration

  public init(maxHistory: Int = 20, healthThreshold: Duration = .seconds(120)) {
    self.maxHistory = max(1, maxHistory)
    self.healthThreshold = healthThreshold
  }

  let jobs = Mutex([String: Job]())

  /// Registers a job; false when one with this id already runs.
  public func add(_ job: Job) -> Bool {
    jobs.withLock { jobs in
      if jobs[job.id] != nil { return false }
      jobs[job.id] = job
      return true
    }
  }

  /// The task that runs job `id` (cancelled by ``cancel(_:)``).
  public func attach(_ id: String, _ task: Task<ReplicationReport, any Error>) {
    jobs.withLock { $0[id]?.task = task }
  }

  /// Records a status change and the history entry it makes.
  public func update(_ id: String, _ status: ReplicationStatus) {
    jobs.withLock { jobs in
      guard var job = jobs[id] else { return }
      let now = Date.now
      if !job.isPersistent, status.state != job.status.state {
        switch status.state {
        case .running where job.status.state == .starting || job.status.state == .offline:
          job.history.insert((now, "started", nil), at: 0)
        case .offline: job.history.insert((now, "crashed", status.lastError), at: 0)
        default: break
        }
        job.history = Array(job.history.prefix(maxHistory))
      }
      job.status = status
      job.updated = now
      jobs[id] = job
    }
  }

  /// A persistent job's replication starts (`started` in its history).
  func started(_ id: String) {
    record(id, "started", nil, running: true)
  }

  /// A persistent job's replication failed (`crashed`); returns its consecutive crashes.
  @discardableResult
  func crashed(_ id: String, reason: String) -> Int {
    record(id, "crashed", reason, running: false)
    return jobs.withLock { $0[id].map { errorCount(of: $0) } } ?? 0
  }

  /// Job `id`'s crashes so far no longer count toward its backoff (its history keeps them).
  func forgetCrashes(_ id: String) {
    jobs.withLock { $0[id]?.crashesForgottenBefore = .now }
  }

  /// A persistent job's replication was stopped by the scheduler (`stopped`).
  func stopped(_ id: String) {
    record(id, "stopped", nil, running: false)
  }

  private func record(_ id: String, _ type: String, _ reason: String?, running: Bool) {
    jobs.withLock { jobs in
      guard var job = jobs[id] else { return }
      job.history.insert((.now, type, reason), at: 0)
      job.history = Array(job.history.prefix(maxHistory))
      job.running = running
      job.updated = .now
      jobs[id] = job
    }
  }

  public func job(_ id: String) -> Job? { jobs.withLock { $0[id] } }

  /// How many jobs there are, and how many of them run now.
  public var counts: (jobs: Int, running: Int) {
    jobs.withLock { jobs in (jobs.count, jobs.values.filter(\.running).count) }
  }

  /// CouchDB's consecutive crashes (`consecutive_crashes/2`): crashes counted back from the
  /// newest event, each within the health threshold of the event before it; a `stopped` right
  /// after a `started`, or a crash after a long healthy run, ends the streak.
  func errorCount(of job: Job) -> Int {
    let forgotten = job.crashesForgottenBefore ?? .distantPast
    let events =
      job.history.filter { $0.time >= forgotten }.map { ($0.time, $0.type) }
      + [(job.startTime, "added")]
    let threshold = Double(Replicator.Run.milliseconds(healthThreshold)) / 1000
    var count = 0
    var index = 0
    while index < events.count {
      let (time, type) = events[index]
      if type == "crashed", index + 1 < events.count {
        if time.timeIntervalSince(events[index + 1].0) > threshold { return count }
        count += 1
      } else if type == "crashed" {
        count += 1
      } else if type == "stopped", index + 1 < events.count, events[index + 1].1 == "started" {
        return count
      }
      index += 1
    }
    return count
  }

  /// A job's scheduler state and its `info` (CouchDB's `job_summary/2`): `running` while its
  /// replication runs, `crashing` after a crash (its reason as `info.error`), `pending` while
  /// it waits for a slot; `info` of a running or pending job holds its counters.
  func summaryState(of job: Job) -> (state: String, info: JSONValue, errorCount: Int) {
    let errors = errorCount(of: job)
    if !job.running, errors > 0 || job.history.first?.type == "crashed" {
      let reason = job.history.first { $0.type == "crashed" }?.reason ?? "unknown"
      return ("crashing", .object(JSONObject(["error": .string(reason)])), errors)
    }
    return (job.running ? "running" : "pending", Self.info(job), errors)
  }

  /// CouchDB's replication counters (`couch_replicator_scheduler_job:rep_stats/1`).
  static func info(_ job: Job) -> JSONValue {
    let report = job.status.report
    return .object(
      JSONObject([
        "revisions_checked": .int(report.missingChecked),
        "missing_revisions_found": .int(report.missingFound),
        "docs_read": .int(report.docsRead),
        "docs_written": .int(report.docsWritten),
        "changes_pending": job.status.pending.map { .int($0) } ?? .null,
        "doc_write_failures": .int(report.docWriteFailures),
        "checkpointed_source_seq": job.status.checkpointedSeq ?? .int(0),
        "source_seq": report.endSeq,
        "through_seq": report.endSeq,
        // wikilog's: the revisions the target still refuses, each with its reason.
        "wikilog_refused": .array(report.refused.map(\.json)),
      ]))
  }

  /// Forgets job `id` (its task is not cancelled).
  public func remove(_ id: String) {
    _ = jobs.withLock { $0.removeValue(forKey: id) }
  }

  /// Cancels job `id`; false when there is none.
  public func cancel(_ id: String) -> Bool {
    let task = jobs.withLock { jobs -> Task<ReplicationReport, any Error>? in
      guard let job = jobs[id], !job.isPersistent else { return nil }
      return jobs.removeValue(forKey: id)?.task
    }
    task?.cancel()
    return task != nil
  }

  var snapshot: [Job] { jobs.withLock { Array($0.values) }.sorted { $0.startTime < $1.startTime } }

  /// A time as the scheduler's answers write it (ISO-8601).
  public static func time(_ date: Date) -> JSONValue { .string(ISO8601.format(date)) }

  /// `GET /_active_tasks`: one `replication` task per running job.
  public func activeTasks() -> JSONValue {
    .array(
      snapshot.filter(\.running).map { job in
        let status = job.status
        let report = status.report
        var task = JSONObject([
          "type": .string("replication"),
          "node": .string("nonode@nohost"),
          "pid": .string(Self.pid(job.id)),
          "replication_id": .string(job.id),
          "doc_id": job.docID.map { .string($0) } ?? .null,
          "database": job.database.map { .string($0) } ?? .null,
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
          "checkpoint_interval": .int(Int(Replicator.Run.milliseconds(job.checkpointInterval))),
          "wikilog_refused": .array(report.refused.map(\.json)),
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

  /// `GET /_scheduler/jobs` (sorted by id, `skip` and `limit` as CouchDB: 100 by default) and
  /// `/_scheduler/jobs/{id}`.
  public func schedulerJobs(_ id: String?, skip: Int = 0, limit: Int = 100) throws(StoreError)
    -> JSONValue
  {
    let all = snapshot.sorted { $0.id < $1.id }
    if let id {
      guard let job = all.first(where: { $0.id == id }) else {
        throw StoreError.notFound("unknown_job")
      }
      return jobRow(job)
    }
    let offset = min(max(0, skip), all.count)
    let rows = all.dropFirst(offset).prefix(max(0, limit)).map(jobRow)
    return .object(
      JSONObject([
        "total_rows": .int(all.count), "offset": .int(offset), "jobs": .array(Array(rows)),
      ]))
  }

  /// One job of `/_scheduler/jobs` (CouchDB's `job_ejson/1`).
  func jobRow(_ job: Job) -> JSONValue {
    guard case .object(var info) = Self.info(job) else { return .null }
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
        "id": .string(job.id),
        "pid": job.running ? .string(Self.pid(job.id)) : .null,
        "source": .string(job.source),
        "target": .string(job.target),
        "database": job.database.map { .string($0) } ?? .null,
        "user": job.user.map { .string($0) } ?? .null,
        "doc_id": job.docID.map { .string($0) } ?? .null,
        "info": .object(info),
        "history": .array(history),
        "node": .string("nonode@nohost"),
        "start_time": Self.time(job.startTime),
      ]))
  }

  /// A process id in Erlang's shape, stable for a job.
  static func pid(_ id: String) -> String {
    let digest = MD5.hash(Array(id.utf8)).description
    return "<0.\(Int(digest.prefix(4), radix: 16).map { $0 % 10_000 + 100 } ?? 100).0>"
  }

  /// The `/_scheduler/docs` row of a scheduled document (CouchDB's doc processor `ejson_doc`
  /// with the job's `job_summary`).
  func documentRow(_ job: Job) -> JSONValue {
    let (state, info, errors) = summaryState(of: job)
    let last = job.history.first?.time ?? job.startTime
    return .object(
      JSONObject([
        "doc_id": job.docID.map { .string($0) } ?? .null,
        "database": job.database.map { .string($0) } ?? .null,
        "id": .string(job.id),
        "node": .string("nonode@nohost"),
        "source": .string(job.source),
        "target": .string(job.target),
        "state": .string(state),
        "info": info,
        "error_count": .int(errors),
        "last_updated": Self.time(last),
        "start_time": Self.time(job.startTime),
        "source_proxy": .null,
        "target_proxy": .null,
      ]))
  }
}
