import JSON
import Log
import Logging
import NIOPosix
import Projections
import ServiceLifecycle
import Synchronization

#if canImport(FoundationEssentials)
  import FoundationEssentials
#else
  import Foundation
#endif

/// The `_replicator` database's document processor and job scheduler, CouchDB 3's
/// (`couch_replicator_doc_processor`, `couch_replicator_scheduler`), for a server whose data
/// directory knows `_replicator` (``SystemDatabase/replicator``).
///
/// While the server runs (``service``), it creates `_replicator` when it is missing, reads every
/// document and follows the database's changes:
///
/// ```
/// document written ─▶ _replication_state completed or failed? ─▶ nothing to run
///        │ (none, triggered, error)
///        ▼
///  parses? ── no ─▶ `failed` written back with _replication_state_reason
///        │ yes, same replication as another document's ─▶ `failed`
///        ▼
///  job added (`added`) ─▶ a slot free (max_jobs)? ─▶ `started` ─▶ replicating
///        ▲                                                │
///        └── wait 30 s · 2^(crashes-1) ◀── `crashed` ◀─────┤ failed (retries ran out)
///                                                         │ one-shot done
///                                                         ▼
///                                  `completed` written back with _replication_stats
/// document deleted or edited into another replication ─▶ its job stops and goes
/// ```
///
/// As in CouchDB 3.4 (`update_docs = false`), only the terminal states are written to the
/// document: `completed` (with `_replication_stats`) and `failed` (with
/// `_replication_state_reason`), each with `_replication_state_time`. The live states —
/// `initializing`, `error`, `running`, `pending`, `crashing` — are shown by `/_scheduler/docs`
/// and `/_scheduler/jobs`, never written. A job's replication gives up after
/// ``ReplicatorSchedulerOptions/retriesPerRequest`` failed requests (continuous ones too);
/// the scheduler then restarts it after its backoff, indefinitely, as CouchDB does. A restart of
/// the server starts every job again from its document; the checkpoints make them resume.
final class ReplicatorDocuments: Sendable {
  static let databaseName = "_replicator"
  /// The actor of the scheduler's writes to `_replicator` documents.
  static let actor = "_replicator"

  /// A document's state short of a job (CouchDB's doc processor states).
  enum DocState: String, Sendable {
    /// Read, its job not added yet.
    case initializing
    /// Its job cannot be added yet (a transient replication has its id); retried with backoff.
    case error
    /// Its job is in the scheduler.
    case scheduled
  }

  struct Entry: Sendable {
    var key: [UInt8]
    var state: DocState
    var jobID: String?
    var info: String?
    var errorCount = 0
    var lastUpdated = Date.now
    let startTime = Date.now
    var supervisor: Task<Void, Never>?
  }

  let data: DataDirectory
  let jobs: ReplicationJobs
  let options: ReplicatorSchedulerOptions
  let logger: Logger
  let entries = Mutex([String: Entry]())
  /// Jobs replicating now (at most ``ReplicatorSchedulerOptions/maxJobs``).
  let slots = Mutex(0)

  init(
    data: DataDirectory, jobs: ReplicationJobs, options: ReplicatorSchedulerOptions,
    logger: Logger
  ) {
    self.data = data
    self.jobs = jobs
    self.options = options
    self.logger = logger
  }

  /// Whether the data directory has a `_replicator` database to run.
  var isEnabled: Bool { data.systemDatabases[Self.databaseName] != nil }

  /// The service that runs the documents' jobs for the server's lifetime.
  var service: any Service { ReplicatorService(documents: self) }

  struct ReplicatorService: Service {
    let documents: ReplicatorDocuments
    func run() async throws {
      let documents = self.documents
      try await cancelWhenGracefulShutdown { await documents.run() }
    }
  }

  // MARK: The document processor

  /// Follows `_replicator` until cancelled, then stops every job.
  func run() async {
    var created = false
    while !Task.isCancelled {
      do {
        let data = self.data
        let create = !created
        let store = try await NIOThreadPool.singleton.runIfActive {
          try data.open(Self.databaseName, create: create)
        }
        created = true
        try await follow(store)
      } catch is CancellationError {
        break
      } catch let error as StoreError where error.code == .notFound {
        // Deleted: its jobs stop; wait for it to be created again.
      } catch {
        logger.error("_replicator: \(error)")
      }
      await stopAll()
      try? await Task.sleep(for: .seconds(1))
    }
    await stopAll()
  }

  /// Processes every document, then each change as it commits.
  func follow(_ store: DocumentStore) async throws {
    let initial = try store.changes(ChangesOptions())
    for row in initial.results { await process(row.id, store) }
    for try await notice in store.changeNotices(after: initial.lastSeq) {
      try Task.checkCancellation()
      if let id = notice.docID { await process(id, store) }
    }
    throw StoreError.notFound("Database does not exist.")
  }

  /// Brings document `id`'s job in line with the document.
  func process(_ id: String, _ store: DocumentStore) async {
    if id.hasPrefix("_design/") { return }
    guard case .object(let body)? = try? store.get(id) else {
      await remove(id)
      return
    }
    switch body["_replication_state"]?.stringValue {
    case "completed", "failed":
      // Terminal: shown from the document itself. A running job (the state written by hand)
      // stops.
      await remove(id)
      return
    default: break
    }
    let document: ReplicationDocument
    do {
      document = try ReplicationDocument(body)
    } catch {
      await remove(id)
      await writeBack(id, store, failed: error.reason)
      return
    }
    if let current = entries.withLock({ $0[id] }), current.key == document.key { return }
    await remove(id)
    let jobID = document.jobID
    let duplicate = entries.withLock { entries in
      entries.first { $0.key != id && $0.value.jobID == jobID }?.key
    }
    if let duplicate {
      await writeBack(
        id, store,
        failed:
          "Replication `\(jobID)` specified by document `\(id)` already started, triggered by document `\(duplicate)` from db `\(Self.databaseName)`"
      )
      return
    }
    entries.withLock { entries in
      var entry = Entry(key: document.key, state: .initializing, jobID: jobID)
      entry.supervisor = Task { [self] in await supervise(id, document, store) }
      entries[id] = entry
    }
  }

  /// Stops document `id`'s job, if any, and forgets it.
  func remove(_ id: String) async {
    let supervisor = entries.withLock { $0.removeValue(forKey: id)?.supervisor }
    supervisor?.cancel()
    await supervisor?.value
  }

  func stopAll() async {
    let supervisors = entries.withLock { entries in
      defer { entries.removeAll() }
      return entries.values.compactMap(\.supervisor)
    }
    for supervisor in supervisors { supervisor.cancel() }
    for supervisor in supervisors { await supervisor.value }
  }

  func updateEntry(_ id: String, _ change: (inout Entry) -> Void) {
    entries.withLock { entries in
      guard var entry = entries[id] else { return }
      change(&entry)
      entry.lastUpdated = .now
      entries[id] = entry
    }
  }

  // MARK: The scheduler

  /// Runs document `id`'s job until it completes (one-shot) or is cancelled: waits for a slot,
  /// replicates, and after a crash waits out the backoff and starts again.
  func supervise(_ id: String, _ document: ReplicationDocument, _ store: DocumentStore) async {
    let jobID = document.jobID
    // A transient replication (`POST /_replicate`) with the same id: CouchDB's doc processor
    // `error` state, retried with its backoff.
    var errors = 0
    while let other = jobs.job(jobID), !other.isPersistent {
      errors += 1
      let reason =
        "Replication `\(jobID)` specified by document `\(id)` already running as a transient replication, started via `_replicate` API endpoint"
      updateEntry(id) { entry in
        entry.state = .error
        entry.info = reason
        entry.errorCount = errors
      }
      do { try await Task.sleep(for: backoff(errors)) } catch { return }
    }
    var replicator = document.replicator
    replicator.options.retry.maximumRetries = options.retriesPerRequest
    replicator.options.retry.initialDelay = options.retryDelay
    replicator.options.retry.continuousGivesUp = true
    let job = ReplicationJobs.Job(
      id: jobID, source: replicator.source.identity, target: replicator.target.identity,
      continuous: document.continuous, user: document.user, startTime: .now, updated: .now,
      status: ReplicationStatus(
        state: .starting,
        report: ReplicationReport(sessionID: "", startSeq: .int(0), endSeq: .int(0))),
      history: [], task: nil, database: Self.databaseName, docID: id, running: false)
    guard jobs.add(job) else {
      updateEntry(id) { entry in
        entry.state = .error
        entry.info = "Replication `\(jobID)` is already running"
      }
      return
    }
    defer { jobs.remove(jobID) }
    updateEntry(id) { entry in
      entry.state = .scheduled
      entry.info = nil
      entry.errorCount = 0
    }
    let startTime = Date.now
    while !Task.isCancelled {
      guard await acquireSlot() else { return }
      jobs.started(jobID)
      let jobs = self.jobs
      let configured = replicator
      let run = Task { try await configured.replicate { jobs.update(jobID, $0) } }
      jobs.attach(jobID, run)
      let result = await withTaskCancellationHandler {
        await run.result
      } onCancel: {
        run.cancel()
      }
      releaseSlot()
      if Task.isCancelled {
        jobs.stopped(jobID)
        return
      }
      switch result {
      case .success(let report):
        if report.cancelled { return }
        // A one-shot replication is done: its document says so.
        jobs.remove(jobID)
        entries.withLock { entries in
          if entries[id]?.jobID == jobID { entries[id] = nil }
        }
        await writeBack(id, store, completed: report, startTime: startTime)
        return
      case .failure(let error):
        let reason = Self.crashReason(error)
        let crashes = jobs.crashed(jobID, reason: reason)
        logger.warning("_replicator: job \(jobID) of document \(id) crashed: \(reason)")
        do { try await Task.sleep(for: backoff(crashes)) } catch { return }
      }
    }
  }

  /// CouchDB's backoff after `crashes` consecutive crashes (`backoff_micros/1`): the base
  /// interval doubled for each crash after the first, at most 2^10 times; none when the crash
  /// ended a healthy run (no consecutive crashes).
  func backoff(_ crashes: Int) -> Duration {
    guard crashes > 0 else { return .zero }
    return options.backoff * (1 << min(crashes - 1, 10))
  }

  /// Waits for a free slot; false when cancelled meanwhile.
  func acquireSlot() async -> Bool {
    while true {
      let acquired = slots.withLock { used in
        guard used < options.maxJobs else { return false }
        used += 1
        return true
      }
      if acquired { return true }
      do { try await Task.sleep(for: .milliseconds(100)) } catch { return false }
    }
  }

  func releaseSlot() {
    slots.withLock { $0 -= 1 }
  }

  /// A crash's reason as CouchDB words it (`db_not_found: could not open ...`).
  static func crashReason(_ error: any Error) -> String {
    if let error = error as? ReplicatorError {
      let e = CouchServer.replicationFailure(error)
      return e.error == "replication_failed" ? error.description : "\(e.error): \(e.reason)"
    }
    return String(describing: error)
  }

  // MARK: Writing back

  /// `completed`: `_replication_stats` (CouchDB's `rep_stats` with the start time).
  func writeBack(
    _ id: String, _ store: DocumentStore, completed report: ReplicationReport, startTime: Date
  ) async {
    let stats = JSONObject([
      "revisions_checked": .int(report.missingChecked),
      "missing_revisions_found": .int(report.missingFound),
      "docs_read": .int(report.docsRead),
      "docs_written": .int(report.docsWritten),
      "changes_pending": .int(0),
      "doc_write_failures": .int(report.docWriteFailures),
      "checkpointed_source_seq": report.endSeq,
      "start_time": ReplicationJobs.time(startTime),
    ])
    await update(
      id, store,
      [
        ("_replication_state", .string("completed")), ("_replication_state_reason", nil),
        ("_replication_stats", .object(stats)),
      ])
  }

  /// `failed`: the reason, no stats.
  func writeBack(_ id: String, _ store: DocumentStore, failed reason: String) async {
    logger.error("_replicator: document \(id) failed: \(reason)")
    await update(
      id, store,
      [
        ("_replication_state", .string("failed")), ("_replication_stats", nil),
        ("_replication_state_reason", .string(reason)),
      ])
  }

  /// Sets (or with nil removes) fields of document `id`; `_replication_state_time` changes with
  /// the state. A conflict rereads and tries again; a document deleted meanwhile is left alone
  /// (CouchDB's `update_rep_doc`).
  func update(_ id: String, _ store: DocumentStore, _ fields: [(String, JSONValue?)]) async {
    for _ in 0..<8 {
      guard case .object(var body)? = try? store.get(id), let rev = body["_rev"]?.stringValue
      else { return }
      let before = body
      for (key, value) in fields {
        let changed = body[key] != value
        body[key] = value
        if key == "_replication_state", changed {
          body["_replication_state_time"] = ReplicationJobs.time(.now)
        }
      }
      if body == before { return }
      do {
        _ = try await store.putAsync(
          JSONValue.object(body).serialized(), id: id, rev: rev, actor: Self.actor)
        return
      } catch let error as StoreError where error.code == .conflict {
        continue
      } catch {
        logger.error("_replicator: cannot update document \(id): \(error)")
        return
      }
    }
  }

  // MARK: /_scheduler/docs

  /// `GET /_scheduler/docs[/_replicator]`: a row per document of `_replicator` (design
  /// documents aside), from its job while it has one, else from the document (`completed`,
  /// `failed`); `states` filters, `skip` and `limit` page (CouchDB's `couch_replicator_fabric`
  /// over `_all_docs`).
  func schedulerDocs(states: Set<String>, skip: Int, limit: Int?) throws -> JSONValue {
    let store = try data.open(Self.databaseName)
    var options = AllDocsOptions()
    options.includeDocs = true
    let all = try store.allDocs(options)
    var rows: [JSONValue] = []
    for row in all.rows {
      guard let id = row["id"]?.stringValue, !id.hasPrefix("_design/"), let doc = row["doc"],
        let info = documentInfo(id, doc)
      else { continue }
      if !states.isEmpty, !states.contains(info["state"]?.stringValue ?? "") { continue }
      rows.append(info)
    }
    let offset = min(max(0, skip), rows.count)
    let page = rows.dropFirst(offset).prefix(limit ?? .max)
    return .object(
      JSONObject([
        "total_rows": .int(all.totalRows), "offset": .int(offset), "docs": .array(Array(page)),
      ]))
  }

  /// `GET /_scheduler/docs/_replicator/{docid}`.
  func schedulerDoc(_ id: String) throws -> JSONValue {
    let store = try data.open(Self.databaseName)
    guard let doc = try? store.get(id), let info = documentInfo(id, doc) else {
      throw ReplicationError.notFound()
    }
    return info
  }

  /// One document's row: its job's, its entry's (`initializing`, `error`), or the document's
  /// own terminal state; nil while it has none of them (not processed yet).
  func documentInfo(_ id: String, _ doc: JSONValue) -> JSONValue? {
    let state = doc["_replication_state"]?.stringValue
    if state == "completed" || state == "failed" {
      var info: JSONValue = .null
      var start: JSONValue = .null
      if state == "completed", case .object(var stats)? = doc["_replication_stats"] {
        start = stats["start_time"] ?? .null
        stats["start_time"] = nil
        info = .object(stats)
      } else if state == "failed" {
        start = doc["_replication_state_time"] ?? .null
        info = .object(
          JSONObject(["error": doc["_replication_state_reason"] ?? .string("unknown")]))
      }
      return .object(
        JSONObject([
          "doc_id": .string(id),
          "database": .string(Self.databaseName),
          "id": .null,
          "source": ReplicationDocument.strippedURL(doc["source"]),
          "target": ReplicationDocument.strippedURL(doc["target"]),
          "state": .string(state ?? ""),
          "error_count": .int(state == "failed" ? 1 : 0),
          "info": info,
          "start_time": start,
          "last_updated": doc["_replication_state_time"] ?? .null,
        ]))
    }
    guard let entry = entries.withLock({ $0[id] }) else { return nil }
    if entry.state == .scheduled, let jobID = entry.jobID, let job = jobs.job(jobID) {
      return jobs.documentRow(job)
    }
    return .object(
      JSONObject([
        "doc_id": .string(id),
        "database": .string(Self.databaseName),
        "id": entry.state == .error ? .null : entry.jobID.map { .string($0) } ?? .null,
        "state": .string(entry.state == .scheduled ? "initializing" : entry.state.rawValue),
        "info": entry.info.map { .object(JSONObject(["error": .string($0)])) } ?? .null,
        "error_count": .int(entry.errorCount),
        "node": .string("nonode@nohost"),
        "last_updated": ReplicationJobs.time(entry.lastUpdated),
        "start_time": ReplicationJobs.time(entry.startTime),
      ]))
  }
}
