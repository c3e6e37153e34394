public import JSON
import Log
public import Logging
import NIOPosix
public import Projections
public import ServiceLifecycle
import Synchronization

#if canImport(FoundationEssentials)
  public import FoundationEssentials
#else
  public import Foundation
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
///  job added (`added`, pending) ─▶ a slot free (max_jobs)? ─▶ `started` ─▶ replicating
///        ▲        ▲                                                 │
///        │        └── every interval: at most max_churn ◀── `stopped` (continuous jobs that
///        │            ran longest make way for the jobs that waited longest)
///        └── pending until 30 s · 2^(crashes-1) have passed ◀── `crashed` ◀──┤ failed
///                                                                           │ one-shot done
///                                                                           ▼
///                                  `completed` written back with _replication_stats
/// document deleted or edited into another replication ─▶ its job stops and goes
/// ```
///
/// The scheduler is CouchDB's (`couch_replicator_scheduler`): at most
/// ``ReplicatorSchedulerOptions/maxJobs`` jobs replicate at once; a pending job starts as soon
/// as a slot is free (a job added, completed, crashed or removed); and every
/// ``ReplicatorSchedulerOptions/interval``, when more jobs are pending than slots are free, up
/// to ``ReplicatorSchedulerOptions/maxChurn`` running continuous jobs — those whose last start
/// is oldest — are stopped (`stopped`) and as many pending jobs — those whose last start is
/// oldest, never started first — start, so that every job gets its turn. One-shot jobs are not
/// rotated out once started (CouchDB's "normal replications"). A job that crashed stays pending
/// through its backoff.
///
/// As in CouchDB 3.4 (`update_docs = false`), only the terminal states are written to the
/// document: `completed` (with `_replication_stats`) and `failed` (with
/// `_replication_state_reason`), each with `_replication_state_time`. The live states —
/// `initializing`, `error`, `running`, `pending`, `crashing` — are shown by `/_scheduler/docs`
/// and `/_scheduler/jobs`, never written. A job's replication gives up after
/// ``ReplicatorSchedulerOptions/retriesPerRequest`` failed requests (continuous ones too);
/// the scheduler then restarts it after its backoff, indefinitely, as CouchDB does. A restart of
/// the server starts every job again from its document; the checkpoints make them resume.
///
/// A job replicates with the credentials its document gives, and nothing else: endpoints are
/// URLs (local database names are refused, as in CouchDB 3), so a job reaches what its
/// credentials reach through the server's access rules, never with the server's own identity.
public final class ReplicatorDocuments: Sendable {
  public static let databaseName = "_replicator"
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
    /// Its job was cancelled with `POST /_replicate` (`"cancel": true`): the scheduler forgot
    /// it, as CouchDB's `remove_job`; it runs again when the document changes into another
    /// replication or the server restarts.
    case unscheduled
  }

  struct Entry: Sendable {
    var key: [UInt8]
    var state: DocState
    var jobID: String?
    var info: String?
    var errorCount = 0
    var lastUpdated = Date.now
    let startTime = Date.now
    /// Waits while a transient replication holds the job's id, then adds the job.
    var supervisor: Task<Void, Never>?
  }

  /// A job the scheduler knows: pending while ``run`` is nil, running while it is not.
  struct Scheduled: Sendable {
    let docID: String
    let store: DocumentStore
    let replicator: Replicator
    let continuous: Bool
    let startTime: Date
    var run: Task<Void, Never>?
    /// What its last crash was, for people (the Sync page): transient or what to fix.
    var problem: ReplicationProblem?
    /// Bumped at each start and stop, so that a stopped run's end is not taken for a crash.
    var generation = 0
  }

  let data: DataDirectory
  let jobs: ReplicationJobs
  let options: ReplicatorSchedulerOptions
  let logger: Logger
  let entries = Mutex([String: Entry]())
  /// The scheduler's jobs by id.
  let scheduled = Mutex([String: Scheduled]())
  /// Waits that start pending jobs when a crashed one's backoff ends, by a serial number.
  let wakes = Mutex((next: 0, tasks: [Int: Task<Void, Never>]()))

  /// A document with `"wikilog_paused": true` runs no job (wikilog's own field; CouchDB
  /// ignores it).
  public static let pausedField = "wikilog_paused"

  /// What the job of a `_replicator` document is doing, for people (the web UI's Sync page):
  /// ``state`` and the job's counters, its last error, when it is tried next.
  public struct DocumentState: Sendable {
    public enum State: String, Sendable {
      /// Read, its job not started yet, or starting.
      case starting
      /// Copying changes.
      case active
      /// Caught up, waiting for changes (a continuous job), with everything sent.
      case upToDate = "up to date"
      /// Caught up, but the other side refuses some documents (``ReplicationReport/refused``,
      /// each with its reason): not up to date.
      case refused = "not all sent"
      /// Its requests fail for a while (the other side is unreachable, answers 5xx or times
      /// out): it is tried again at ``nextRetry``; ``lastError`` says why.
      case offline
      /// A side refuses it in a way waiting does not mend (``problem``: credentials refused,
      /// no rights, no such database): someone has to act. It is still tried again at
      /// ``nextRetry``, with the scheduler's backoff.
      case needsAttention = "needs attention"
      /// Waiting for a free slot of the scheduler.
      case waiting
      /// Its document cannot run (`_replication_state_reason`).
      case failed
      /// A one-shot job that finished.
      case completed
      /// No job: the document is paused (``ReplicatorDocuments/pausedField``).
      case paused
    }
    public var state: State
    /// The job's counters and feed position; nil without a job.
    public var status: ReplicationStatus?
    public var lastError: String?
    /// What kind of failure ``lastError`` is; nil when there is none.
    public var problem: ReplicationProblem?
    public var nextRetry: Date?
    /// When the job last changed (started, crashed, copied a batch).
    public var lastActivity: Date?

    public init(
      state: State, status: ReplicationStatus? = nil, lastError: String? = nil,
      nextRetry: Date? = nil, lastActivity: Date? = nil
    ) {
      self.state = state
      self.status = status
      self.lastError = lastError
      self.nextRetry = nextRetry
      self.lastActivity = lastActivity
    }
  }

  /// The state of document `id`'s job; nil when the document does not exist.
  public func state(ofDocument id: String) -> DocumentState? {
    guard let store = try? data.open(Self.databaseName),
      case .object(let doc)? = try? store.get(id)
    else { return nil }
    return state(ofDocument: id, body: doc)
  }

  /// ``state(ofDocument:)`` of a document its caller has read already (`doc`, its body).
  public func state(ofDocument id: String, body doc: JSONObject) -> DocumentState {
    if doc[Self.pausedField] == .bool(true) { return DocumentState(state: .paused) }
    switch doc["_replication_state"]?.stringValue {
    case "failed":
      return DocumentState(
        state: .failed, lastError: doc["_replication_state_reason"]?.stringValue)
    case "completed": return DocumentState(state: .completed)
    default: break
    }
    guard let entry = entries.withLock({ $0[id] }) else { return DocumentState(state: .starting) }
    guard entry.state == .scheduled, let jobID = entry.jobID, let job = jobs.job(jobID) else {
      return DocumentState(
        state: entry.state == .error ? .offline : .starting, lastError: entry.info,
        lastActivity: entry.lastUpdated)
    }
    var result = DocumentState(state: .starting, status: job.status, lastActivity: job.updated)
    if job.running {
      switch job.status.state {
      case .starting: result.state = .starting
      case .running: result.state = .active
      case .idle: result.state = job.status.report.refused.isEmpty ? .upToDate : .refused
      case .completed: result.state = .completed
      case .offline:
        // Retried inside the run: only transient failures are.
        result.state = .offline
        result.problem = .unreachable
        result.lastError = job.status.lastError
        result.nextRetry = job.status.retryAt
      }
      return result
    }
    let crashes = jobs.errorCount(of: job)
    if crashes > 0, let crash = job.history.first(where: { $0.type == "crashed" }) {
      let problem = scheduled.withLock { $0[jobID]?.problem } ?? .unreachable
      result.state = problem.isPermanent ? .needsAttention : .offline
      result.problem = problem
      result.lastError = crash.reason
      let wait = Double(Replicator.Run.milliseconds(backoff(crashes))) / 1000
      result.nextRetry = crash.time.addingTimeInterval(wait)
    } else {
      result.state = .waiting
    }
    return result
  }

  public init(
    data: DataDirectory, jobs: ReplicationJobs, options: ReplicatorSchedulerOptions,
    logger: Logger
  ) {
    self.data = data
    self.jobs = jobs
    self.options = options
    self.logger = logger
  }

  /// Whether the data directory has a `_replicator` database to run.
  public var isEnabled: Bool { data.systemDatabases[Self.databaseName] != nil }

  /// The service that runs the documents' jobs for the server's lifetime.
  public var service: any Service { ReplicatorService(documents: self) }

  struct ReplicatorService: Service {
    let documents: ReplicatorDocuments
    func run() async throws {
      let documents = self.documents
      try await cancelWhenGracefulShutdown { await documents.run() }
    }
  }

  // MARK: The document processor

  /// Follows `_replicator` until cancelled, then stops every job; rotates the jobs every
  /// ``ReplicatorSchedulerOptions/interval`` meanwhile.
  func run() async {
    let interval = options.interval
    let rotation = Task { [self] in
      while true {
        do { try await Task.sleep(for: interval) } catch { return }
        await reschedule()
      }
    }
    defer { rotation.cancel() }
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
    rotation.cancel()
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
    if body[Self.pausedField] == .bool(true) {
      // Paused (wikilog's own field, the web UI's Sync page sets it): no job until it is
      // taken away. CouchDB ignores the field and runs such a document.
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
    guard let entry = entries.withLock({ $0.removeValue(forKey: id) }) else { return }
    entry.supervisor?.cancel()
    await entry.supervisor?.value
    if let jobID = entry.jobID, scheduled.withLock({ $0[jobID]?.docID }) == id {
      await removeJob(jobID)
    }
  }

  func stopAll() async {
    let supervisors = entries.withLock { entries in
      defer { entries.removeAll() }
      return entries.values.compactMap(\.supervisor)
    }
    for supervisor in supervisors { supervisor.cancel() }
    for supervisor in supervisors { await supervisor.value }
    let all = scheduled.withLock { scheduled in
      defer { scheduled.removeAll() }
      return scheduled
    }
    for job in all.values { job.run?.cancel() }
    for (jobID, job) in all {
      await job.run?.value
      jobs.remove(jobID)
    }
    let waits = wakes.withLock { wakes in
      defer { wakes.tasks.removeAll() }
      return Array(wakes.tasks.values)
    }
    for wait in waits { wait.cancel() }
  }

  func updateEntry(_ id: String, _ change: (inout Entry) -> Void) {
    entries.withLock { entries in
      guard var entry = entries[id] else { return }
      change(&entry)
      entry.lastUpdated = .now
      entries[id] = entry
    }
  }

  /// `POST /_replicate` with `"cancel": true` for the job of a document: the scheduler forgets
  /// the job (CouchDB's `remove_job`), the document stays (``DocState/unscheduled``). False
  /// when no document's job has this id.
  public func cancel(jobID: String) async -> Bool {
    guard let docID = scheduled.withLock({ $0[jobID]?.docID }) else { return false }
    await removeJob(jobID)
    updateEntry(docID) { entry in
      guard entry.jobID == jobID else { return }
      entry.state = .unscheduled
      entry.info = nil
    }
    return true
  }

  /// Tries document `id`'s job again now: a job waiting out the backoff of its crashes starts
  /// at once, with its crashes forgotten for the backoff (its history keeps them); a running
  /// one is stopped and started again, so that a request it is retrying goes at once and what
  /// the other side refused is offered again (after its rights there changed). False when the
  /// document has no job (paused, finished, failed, or not processed yet). A job still waits
  /// for a free slot when all are taken.
  public func retryNow(documentID id: String) async -> Bool {
    guard let jobID = entries.withLock({ $0[id]?.jobID }) else { return false }
    let found: (known: Bool, run: Task<Void, Never>?) = scheduled.withLock { scheduled in
      guard var job = scheduled[jobID], job.docID == id else { return (false, nil) }
      let run = job.run
      job.run = nil
      job.generation += 1
      scheduled[jobID] = job
      return (true, run)
    }
    guard found.known else { return false }
    if let run = found.run {
      jobs.stopped(jobID)
      run.cancel()
      await run.value
    }
    jobs.forgetCrashes(jobID)
    logger.info("_replicator: job \(jobID) of document \(id) tried again on request")
    startPendingJobs()
    return true
  }

  // MARK: The scheduler

  /// Adds document `id`'s job to the scheduler, pending, and starts it when a slot is free.
  /// While a transient replication (`POST /_replicate`) has the same id the document is in
  /// CouchDB's doc processor `error` state, retried with its backoff.
  func supervise(_ id: String, _ document: ReplicationDocument, _ store: DocumentStore) async {
    let jobID = document.jobID
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
    if Task.isCancelled { return }
    var replicator = document.replicator
    replicator.options.retry.maximumRetries = options.retriesPerRequest
    replicator.options.retry.initialDelay = options.retryDelay
    replicator.options.retry.continuousGivesUp = true
    let now = Date.now
    var job = ReplicationJobs.Job(
      id: jobID, source: replicator.source.identity, target: replicator.target.identity,
      continuous: document.continuous, user: document.user, startTime: now,
      status: ReplicationStatus(
        state: .starting,
        report: ReplicationReport(sessionID: "", startSeq: .int(0), endSeq: .int(0))))
    job.database = Self.databaseName
    job.docID = id
    job.running = false
    job.checkpointInterval = replicator.options.checkpointInterval
    guard jobs.add(job) else {
      updateEntry(id) { entry in
        entry.state = .error
        entry.info = "Replication `\(jobID)` is already running"
      }
      return
    }
    scheduled.withLock { scheduled in
      scheduled[jobID] = Scheduled(
        docID: id, store: store, replicator: replicator, continuous: document.continuous,
        startTime: now)
    }
    updateEntry(id) { entry in
      entry.state = .scheduled
      entry.info = nil
      entry.errorCount = 0
    }
    startPendingJobs()
  }

  /// Takes job `jobID` out of the scheduler: its replication stops (awaited) and the job goes.
  func removeJob(_ jobID: String) async {
    let run = scheduled.withLock { $0.removeValue(forKey: jobID)?.run }
    run?.cancel()
    await run?.value
    jobs.remove(jobID)
    startPendingJobs()
  }

  /// When it last started (CouchDB's `last_started/1`); long ago when it never did.
  func lastStarted(_ jobID: String) -> Date {
    jobs.job(jobID)?.history.first { $0.type == "started" }?.time ?? .distantPast
  }

  /// Whether a pending job may start (CouchDB's `not_recently_crashed/3`): never ran, was
  /// stopped, or its last crash is older than its backoff.
  func mayStart(_ jobID: String, now: Date) -> Bool {
    guard let job = jobs.job(jobID) else { return false }
    guard let latest = job.history.first, latest.type != "stopped" else { return true }
    guard let crash = job.history.first(where: { $0.type == "crashed" }) else { return true }
    let wait = backoff(jobs.errorCount(of: job))
    return now.timeIntervalSince(crash.time) >= Double(Replicator.Run.milliseconds(wait)) / 1000
  }

  /// `ids` by their last start, oldest (or never) first; ties (never started) by when they
  /// were added, so that the job that waited longest comes first.
  func byLastStarted(_ ids: [String]) -> [String] {
    let keyed: [(id: String, last: Date, added: Date)] = ids.map { id in
      (id, lastStarted(id), jobs.job(id)?.startTime ?? .distantPast)
    }
    let sorted = keyed.sorted { a, b in
      if a.last != b.last { return a.last < b.last }
      return a.added == b.added ? a.id < b.id : a.added < b.added
    }
    return sorted.map(\.id)
  }

  /// Starts as many pending jobs as slots are free (CouchDB's `start_pending_jobs/1`): those
  /// that may start, the one whose last start is oldest first.
  func startPendingJobs() {
    let now = Date.now
    scheduled.withLock { scheduled in
      let running = scheduled.values.filter { $0.run != nil }.count
      let free = options.maxJobs - running
      guard free > 0 else { return }
      let waiting: [String] = scheduled.compactMap { entry in
        entry.value.run == nil && mayStart(entry.key, now: now) ? entry.key : nil
      }
      for id in byLastStarted(waiting).prefix(free) { start(id, in: &scheduled) }
    }
  }

  /// Starts job `jobID`'s replication (`started`).
  func start(_ jobID: String, in scheduled: inout [String: Scheduled]) {
    guard var job = scheduled[jobID], job.run == nil else { return }
    job.generation += 1
    let generation = job.generation
    let replicator = job.replicator
    let jobs = self.jobs
    jobs.started(jobID)
    job.run = Task { [self] in
      let result: Result<ReplicationReport, any Error>
      do {
        result = .success(try await replicator.replicate { jobs.update(jobID, $0) })
      } catch {
        result = .failure(error)
      }
      await finished(jobID, generation: generation, result)
    }
    scheduled[jobID] = job
  }

  /// Every ``ReplicatorSchedulerOptions/interval`` (CouchDB's `reschedule/1` and
  /// `rotate_jobs/2`): when more jobs are pending than slots are free, stops up to
  /// ``ReplicatorSchedulerOptions/maxChurn`` running continuous jobs, those whose last start is
  /// oldest, then fills the free slots with pending jobs.
  func reschedule() async {
    let stopping: [(id: String, run: Task<Void, Never>)] = scheduled.withLock { scheduled in
      let running = scheduled.filter { $0.value.run != nil }
      let pending = scheduled.count - running.count
      let free = options.maxJobs - running.count
      guard free >= 0 else { return [] }
      let count = min(pending - free, running.count, options.maxChurn)
      guard count > 0 else { return [] }
      let continuous: [String] = running.compactMap { $0.value.continuous ? $0.key : nil }
      let chosen = byLastStarted(continuous).prefix(count)
      return chosen.compactMap { (id: String) -> (id: String, run: Task<Void, Never>)? in
        guard var job = scheduled[id], let run = job.run else { return nil }
        job.run = nil
        job.generation += 1
        scheduled[id] = job
        jobs.stopped(id)
        return (id, run)
      }
    }
    for (id, run) in stopping {
      run.cancel()
      await run.value
      logger.info("_replicator: job \(id) stopped to let a pending job run")
    }
    startPendingJobs()
  }

  /// A job's replication ended: a one-shot one that completed is written back and goes; one
  /// that failed crashed (`crashed`) and waits out its backoff, pending. The end of a run the
  /// scheduler stopped itself is ignored.
  func finished(
    _ jobID: String, generation: Int, _ result: Result<ReplicationReport, any Error>
  ) async {
    let job: Scheduled? = scheduled.withLock { scheduled in
      guard var job = scheduled[jobID], job.generation == generation, job.run != nil else {
        return nil
      }
      job.run = nil
      scheduled[jobID] = job
      return job
    }
    guard let job else { return }
    switch result {
    case .success(let report) where !report.cancelled:
      // A one-shot replication is done: its document says so.
      _ = scheduled.withLock { $0.removeValue(forKey: jobID) }
      jobs.remove(jobID)
      entries.withLock { entries in
        if entries[job.docID]?.jobID == jobID { entries[job.docID] = nil }
      }
      await writeBack(job.docID, job.store, completed: report, startTime: job.startTime)
      startPendingJobs()
    case .success:
      jobs.stopped(jobID)
      startPendingJobs()
    case .failure(let error):
      let reason = Self.crashReason(error)
      scheduled.withLock { $0[jobID]?.problem = ReplicationProblem(error) }
      let crashes = jobs.crashed(jobID, reason: reason)
      logger.warning("_replicator: job \(jobID) of document \(job.docID) crashed: \(reason)")
      startPendingJobs()
      wake(after: backoff(crashes))
    }
  }

  /// Starts pending jobs once `delay` has passed (a crashed job's backoff ends).
  func wake(after delay: Duration) {
    wakes.withLock { state in
      let number = state.next
      state.next += 1
      state.tasks[number] = Task { [self] in
        // A little past the backoff, so that the crashed job counts as waited out.
        do { try await Task.sleep(for: delay + .milliseconds(5)) } catch { return }
        _ = wakes.withLock { $0.tasks.removeValue(forKey: number) }
        startPendingJobs()
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

  /// A crash's reason as CouchDB words it (`db_not_found: could not open ...`).
  static func crashReason(_ error: any Error) -> String {
    if let error = error as? ReplicatorError {
      let e = error.answer
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
      "wikilog_refused": .array(report.refused.map(\.json)),
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
  public func schedulerDocs(states: Set<String>, skip: Int, limit: Int?) throws -> JSONValue {
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
  public func schedulerDoc(_ id: String) throws -> JSONValue {
    let store = try data.open(Self.databaseName)
    guard let doc = try? store.get(id), let info = documentInfo(id, doc) else {
      throw StoreError.notFound()
    }
    return info
  }

  /// A `/_scheduler/docs` row made from the document alone (no job runs for it).
  static func rowFromDocument(
    _ id: String, _ doc: JSONValue, state: JSONValue, errorCount: Int, info: JSONValue,
    start: JSONValue, updated: JSONValue
  ) -> JSONValue {
    .object(
      JSONObject([
        "doc_id": .string(id),
        "database": .string(databaseName),
        "id": .null,
        "source": ReplicationDocument.strippedURL(doc["source"]),
        "target": ReplicationDocument.strippedURL(doc["target"]),
        "state": state,
        "error_count": .int(errorCount),
        "info": info,
        "start_time": start,
        "last_updated": updated,
      ]))
  }

  /// One document's row: its job's, its entry's (`initializing`, `error`), or the document's
  /// own terminal state; nil while it has none of them (not processed yet).
  func documentInfo(_ id: String, _ doc: JSONValue) -> JSONValue? {
    let state = doc["_replication_state"]?.stringValue
    let entry = entries.withLock { $0[id] }
    if entry?.state == .unscheduled && state != "completed" && state != "failed" {
      // Cancelled with `_replicate`: no job; shown from the document, as CouchDB's
      // `info_from_doc/2` shows one without a terminal state.
      return Self.rowFromDocument(
        id, doc, state: .null, errorCount: 0, info: .null, start: .null, updated: .null)
    }
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
      return Self.rowFromDocument(
        id, doc, state: .string(state ?? ""), errorCount: state == "failed" ? 1 : 0, info: info,
        start: start, updated: doc["_replication_state_time"] ?? .null)
    }
    guard let entry else { return nil }
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
