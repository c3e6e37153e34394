import Formats
import JSON

#if canImport(FoundationEssentials)
  import FoundationEssentials
#else
  import Foundation
#endif

extension Replicator {
  /// One run of a replication: its counters, checkpoint revisions and retry state. An actor,
  /// so that a batch can be fetched from the source while the one before it is written to the
  /// target (``run()``): their steps interleave where they wait for the network.
  actor Run {
    let replicator: Replicator
    let onStatus: @Sendable (ReplicationStatus) -> Void
    var status: ReplicationStatus
    let sessionID = String(UUID().uuidString.lowercased().filter { $0 != "-" })
    let startTime = ISO8601.format(Date.now)
    var sourceRev: String?
    var targetRev: String?
    var previousLog: JSONValue?
    /// The checkpoint of the last batch written, being written to both sides while the next
    /// batch is written.
    var checkpointing: Task<Void, any Error>?
    /// When the last checkpoint was begun (the run's start before the first): the next is due
    /// ``ReplicationOptions/checkpointInterval`` later.
    var lastCheckpoint = ContinuousClock.now
    /// The seq of the last batch written when its checkpoint was not due yet.
    var owed: JSONValue?
    /// The revisions refused, by id and rev, in the order met: those the checkpoint kept from
    /// earlier runs, then this run's (``ReplicationReport/refused``).
    var refused: [String: RefusedRevision] = [:]
    var refusedOrder: [String] = []
    /// Whether the refused revisions are to be tried again when the run catches up: there are
    /// some, and something was written or refused since they last were.
    var recheckDue = false
    /// The refused revisions this run counted in ``ReplicationReport/docWriteFailures``.
    var counted: Set<String> = []

    var source: CouchEndpoint { replicator.source }
    var target: CouchEndpoint { replicator.target }
    var options: ReplicationOptions { replicator.options }

    init(replicator: Replicator, onStatus: @escaping @Sendable (ReplicationStatus) -> Void) {
      self.replicator = replicator
      self.onStatus = onStatus
      status = ReplicationStatus(
        state: .starting,
        report: ReplicationReport(sessionID: sessionID, startSeq: .number(0), endSeq: .number(0)))
    }

    var report: ReplicationReport {
      get { status.report }
      set { status.report = newValue }
    }

    func start() async throws -> ReplicationReport {
      onStatus(status)
      do {
        try await run()
      } catch  where Task.isCancelled || error is CancellationError {
        report.cancelled = true
      }
      status.state = .completed
      status.retryAt = nil
      onStatus(status)
      return report
    }

    func run() async throws {
      try await openDatabases()
      let checkpointPath = replicator.replicationID
      let sourceLog = try await retrying("GET checkpoint") {
        try await self.checkpoint(self.source, checkpointPath)
      }
      let targetLog = try await retrying("GET checkpoint") {
        try await self.checkpoint(self.target, checkpointPath)
      }
      sourceRev = sourceLog?.rev
      targetRev = targetLog?.rev
      previousLog = sourceLog?.document ?? targetLog?.document
      report.previousLog = previousLog
      for revision in Replicator.refused(in: previousLog) { remember(revision) }
      recheckDue = !refused.isEmpty
      let startSeq =
        options.since ?? Replicator.startSequence(sourceLog?.document, targetLog?.document)
      report.startSeq = startSeq
      report.endSeq = startSeq
      status.checkpointedSeq = startSeq
      status.state = .running
      onStatus(status)

      // The batch after the one being written is read meanwhile (its `_changes` rows, which of
      // them the target lacks, `_revs_diff`, and those revisions, `_bulk_get`), as CouchDB's
      // replicator keeps its workers busy; JSON is parsed and serialized off this actor
      // (``send(_:_:_:body:)``), so that both run at once. Batches are written, and
      // checkpointed, in order; a revision read twice because its document changed between two
      // batches is written twice, which changes nothing.
      var reading = Task { try await self.readBatch(since: startSeq, longpoll: false) }
      do {
        while true {
          try Task.checkCancellation()
          let current = reading
          let batch = try await withTaskCancellationHandler {
            try await current.value
          } onCancel: {
            current.cancel()
          }
          if batch.isEmpty {
            // The batches written before it are checkpointed now if they were not (a source
            // whose `pending` overstated what was left, a filter that passed over the rest).
            try await checkpointOwed(checkpointPath)
            if !options.continuous { break }
            try await checkpointWritten()
            try await recheckRefused(checkpointPath)
            setState(.idle)
            // Nothing (more) for this replication: a filter may have skipped changes, and a
            // longpoll's timeout ends with the source's current seq. Wait from there.
            let since = batch.lastSeq
            reading = Task { try await self.readBatch(since: since, longpoll: true) }
            continue
          }
          setState(.running)
          let caughtUp = batch.pending == 0
          let more = options.continuous || !caughtUp
          if more {
            let since = batch.lastSeq
            let longpoll = options.continuous && caughtUp
            reading = Task { try await self.readBatch(since: since, longpoll: longpoll) }
          }
          // The checkpoint is written when it is due, when the replication ends, and when a
          // continuous one has caught up (it then waits for changes).
          try await commit(
            batch, checkpointPath, checkpoint: !more || (options.continuous && caughtUp))
          // Idle once what the source had is written and checkpointed (the next read waits
          // for changes).
          if options.continuous && caughtUp {
            try await checkpointWritten()
            try await recheckRefused(checkpointPath)
            // Unless the read of the next batch, under way, found the source unreachable.
            if status.state != .offline { setState(.idle) }
          }
          if !more { break }
        }
        try await checkpointWritten()
        // What was refused is tried again now that everything else is written (a page whose
        // wiki came after it), and the checkpoint keeps what is still refused.
        try await recheckRefused(checkpointPath)
      } catch {
        reading.cancel()
        checkpointing?.cancel()
        throw error
      }
    }

    func setState(_ state: ReplicationStatus.State) {
      guard status.state != state else { return }
      status.state = state
      onStatus(status)
    }

    /// A batch's missing revisions, fetched, and the source seq it ends at; empty when the
    /// changes feed had no rows.
    struct Fetched: Sendable {
      let docs: [PeerDocument]
      let lastSeq: JSONValue
      var pending: Int? = nil
      var isEmpty = false
    }

    /// Reads the batch of changes after `since` (waiting for one with `longpoll`) and fetches
    /// the revisions of it that the target lacks.
    func readBatch(since: JSONValue, longpoll: Bool) async throws -> Fetched {
      let changes = try await retrying("GET _changes") {
        try await self.readChanges(since: since, longpoll: longpoll)
      }
      status.pending = changes.pending
      if changes.rows.isEmpty {
        return Fetched(docs: [], lastSeq: changes.lastSeq, isEmpty: true)
      }
      return Fetched(
        docs: try await fetch(changes.rows), lastSeq: changes.lastSeq, pending: changes.pending)
    }

    /// Writes a fetched batch to the target and checkpoints its seq on both sides (after
    /// making the target durable) when `checkpoint` says so or the last checkpoint is older
    /// than ``ReplicationOptions/checkpointInterval``.
    func commit(_ batch: Fetched, _ checkpointPath: String, checkpoint: Bool) async throws {
      if !batch.docs.isEmpty {
        try await write(batch.docs)
        if !refused.isEmpty { recheckDue = true }
      }
      report.endSeq = batch.lastSeq
      guard checkpoint || ContinuousClock.now - lastCheckpoint >= options.checkpointInterval
      else {
        owed = batch.lastSeq
        return
      }
      try await startCheckpoint(at: batch.lastSeq, checkpointPath)
    }

    /// Checkpoints the last batch written if its checkpoint was not due then (``owed``): when
    /// the run ends or a continuous one waits for changes after an empty batch.
    func checkpointOwed(_ checkpointPath: String) async throws {
      guard let seq = owed else { return }
      try await startCheckpoint(at: seq, checkpointPath)
    }

    /// Starts writing the checkpoint of the batches written through `seq` to both sides, once
    /// the one before it is written (a checkpoint document's revisions chain); it is written
    /// while the next batch is.
    func startCheckpoint(at seq: JSONValue, _ checkpointPath: String) async throws {
      owed = nil
      lastCheckpoint = ContinuousClock.now
      try await checkpointWritten()
      let log = replicator.checkpointDocument(
        sessionID: sessionID, startTime: startTime, report: report, previous: previousLog)
      checkpointing = Task {
        try await self.writeCheckpoints(checkpointPath, log)
        self.status.checkpointedSeq = seq
        self.onStatus(self.status)
      }
    }

    /// Waits for the checkpoint being written, if any.
    func checkpointWritten() async throws {
      guard let task = checkpointing else { return }
      checkpointing = nil
      try await withTaskCancellationHandler {
        try await task.value
      } onCancel: {
        task.cancel()
      }
    }

    /// Opens both databases; a missing target is created with ``ReplicationOptions/createTarget``.
    func openDatabases() async throws {
      // The endpoints' identities name them in errors (the server and the CLI give URLs
      // without credentials).
      _ = try await retrying("GET source database \(source.identity)") {
        try await self.source.peer.open()
      }
      do {
        _ = try await retrying("GET target database \(target.identity)") {
          try await self.target.peer.open()
        }
      } catch ReplicatorError.http(403, "forbidden", _) {
        // The target exists, and its user may read nothing of it yet (a wiki database where
        // they are in no wiki, as a non-member of a CouchDB database): a push may still write
        // what is theirs, each document checked on its own.
      } catch ReplicatorError.http(404, let error, let reason) {
        guard options.createTarget else {
          throw ReplicatorError.http(status: 404, error: error, reason: reason)
        }
        do {
          _ = try await retrying("PUT target database") {
            try await self.target.peer.create()
          }
        } catch ReplicatorError.http(412, _, _) {
          // Created meanwhile.
        }
      }
    }

    /// One batch of the changes feed.
    func readChanges(since: JSONValue, longpoll: Bool) async throws -> PeerChanges {
      var request = PeerChangesRequest(since: since, limit: options.batchSize)
      request.longpoll = longpoll
      request.timeout = options.feedTimeout
      request.heartbeat = options.heartbeat
      request.docIDs = options.docIDs
      request.selector = options.docIDs == nil ? options.selector : nil
      if options.docIDs == nil && options.selector == nil {
        request.filter = options.filter
        request.filterParameters = options.filterParameters
      }
      let peer = source.peer
      return try await peer.changes(request)
    }

    static func milliseconds(_ duration: Duration) -> Int64 {
      let (seconds, attoseconds) = duration.components
      return seconds * 1000 + attoseconds / 1_000_000_000_000_000
    }

    /// The revisions of `_changes` rows the target lacks (`_revs_diff`), fetched from the
    /// source with their histories and attachments.
    func fetch(_ rows: [(id: String, revs: [String])]) async throws -> [PeerDocument] {
      report.batches += 1
      report.docsRead += rows.count
      for row in rows { report.missingChecked += row.revs.count }
      let target = self.target.peer
      let diff = try await retrying("POST _revs_diff") { try await target.revsDiff(rows) }
      // As CouchDB's replicator: attachments the target's possible ancestors have come as
      // stubs, the rest with their data (`atts_since`).
      let wanted = diff.compactMap { m in
        m.missing.isEmpty
          ? nil : PeerWanted(id: m.id, revs: m.missing, attsSince: m.possibleAncestors)
      }
      report.missingFound += wanted.reduce(0) { $0 + $1.revs.count }
      guard !wanted.isEmpty else { return [] }
      return try await fetch(wanted)
    }

    /// The wanted revisions with their history and attachments; those the source would not
    /// give are failures.
    func fetch(_ wanted: [PeerWanted]) async throws -> [PeerDocument] {
      let source = self.source.peer
      let fetched = try await retrying("POST _bulk_get") { try await source.revisions(wanted) }
      var docs: [PeerDocument] = []
      for revision in fetched {
        switch revision {
        case .document(let doc): docs.append(doc)
        case .failed(let refusal):
          fail(
            refusal.id, refusal.error.isEmpty ? nil : .string(refusal.error),
            .string(refusal.reason), rev: refusal.rev)
        }
      }
      return docs
    }

    /// Writes `docs` with `new_edits: false` (the peer splits them into requests of its
    /// size); a batch refused as a whole (401, 403, 413) is written one document at a time, as
    /// CouchDB's replicator writes documents with attachments.
    func write(_ docs: [PeerDocument]) async throws {
      let target = self.target.peer
      do {
        let refused = try await retrying("POST _bulk_docs") { try await target.write(docs[...]) }
        for refusal in refused {
          fail(refusal.id, .string(refusal.error), .string(refusal.reason), rev: refusal.rev)
        }
        report.docsWritten += docs.count - refused.count
      } catch ReplicatorError.http(let status, _, _) where [401, 403, 413].contains(status) {
        for doc in docs { try await writeOne(doc) }
      }
    }

    func writeOne(_ doc: PeerDocument) async throws {
      let id = doc.id
      let target = self.target.peer
      do {
        _ = try await retrying("PUT document") { try await target.writeOne(doc) }
        report.docsWritten += 1
      } catch ReplicatorError.http(let status, let error, let reason) where status < 500 {
        // The reason without the request's name that ``Replicator/check(_:_:)`` put before it.
        let plain = reason.split(separator: ": ", maxSplits: 1).dropFirst().first.map(String.init)
        fail(id, .string(error), .string(plain ?? reason), rev: doc.rev)
      }
    }

    /// Counts a write failure, keeps its reason among the first few, and the revision among
    /// the refused ones (``ReplicationReport/refused``).
    func fail(
      _ id: String, _ error: JSONValue?, _ reason: JSONValue? = nil, rev: String? = nil
    ) {
      // A revision refused again when it is tried again counts once per run.
      let key = rev.map { id + "\n" + $0 }
      if let key, !counted.insert(key).inserted { return retain(id, error, reason, rev) }
      report.docWriteFailures += 1
      if report.failures.count < 10 {
        let text = [error?.stringValue, reason?.stringValue].compactMap { $0 }.joined(
          separator: ": ")
        report.failures.append("\(id): \(text.isEmpty ? "not written" : text)")
      }
      retain(id, error, reason, rev)
    }

    /// Keeps a refused revision (``remember(_:)``) and has it tried again.
    func retain(_ id: String, _ error: JSONValue?, _ reason: JSONValue?, _ rev: String?) {
      guard let rev else { return }
      remember(
        RefusedRevision(
          id: id, rev: rev, error: error?.stringValue ?? "", reason: reason?.stringValue ?? ""))
      recheckDue = true
    }

    /// Keeps `revision` among the refused ones (its reason replaced when it was there).
    func remember(_ revision: RefusedRevision) {
      let key = revision.id + "\n" + revision.rev
      if refused[key] == nil {
        guard refused.count < RefusedRevision.limit else { return }
        refusedOrder.append(key)
      }
      refused[key] = revision
      report.refused = refusedOrder.compactMap { refused[$0] }
    }

    /// Tries the refused revisions again, when due: those the target now has (a held page its
    /// wiki let in, say) are dropped; those it still lacks are fetched and written again, and
    /// the ones refused again stay, with the new reason. Then the checkpoint is written, so that
    /// it keeps what is still refused (for the next run to try again).
    func recheckRefused(_ checkpointPath: String) async throws {
      guard recheckDue, !refused.isEmpty else { return }
      let before = report.refused
      var revs: [String: [String]] = [:]
      var order: [String] = []
      for revision in before {
        if revs[revision.id] == nil { order.append(revision.id) }
        revs[revision.id, default: []].append(revision.rev)
      }
      let asked = order.map { (id: $0, revs: revs[$0]!) }
      let target = self.target.peer
      let diff = try await retrying("POST _revs_diff") { try await target.revsDiff(asked) }
      let wanted = diff.compactMap { m in
        m.missing.isEmpty
          ? nil : PeerWanted(id: m.id, revs: m.missing, attsSince: m.possibleAncestors)
      }
      // What the target has now is no longer refused; the rest is tried again from scratch.
      refused = [:]
      refusedOrder = []
      report.refused = []
      if !wanted.isEmpty {
        let docs = try await fetch(wanted)
        if !docs.isEmpty { try await write(docs) }
      }
      recheckDue = false
      if report.refused != before {
        try await startCheckpoint(at: report.endSeq, checkpointPath)
        try await checkpointWritten()
      }
    }

    // MARK: Checkpoints

    /// Reads `_local/<id>`; nil when absent.
    func checkpoint(_ endpoint: CouchEndpoint, _ id: String) async throws -> (
      document: JSONValue, rev: String?
    )? {
      guard let value = try await endpoint.peer.localDocument(id) else { return nil }
      return (value, value["_rev"]?.stringValue)
    }

    /// Makes what was written durable on the target (`_ensure_full_commit`, as CouchDB's
    /// replicator does before each checkpoint rather than after each batch), then writes the
    /// checkpoint to both sides.
    func writeCheckpoints(_ id: String, _ log: JSONObject) async throws {
      let target = self.target.peer
      _ = try await retrying("POST _ensure_full_commit") { try await target.ensureFullCommit() }
      sourceRev = try await writeCheckpoint(source, id, log, rev: sourceRev)
      targetRev = try await writeCheckpoint(self.target, id, log, rev: targetRev)
    }

    /// Writes the checkpoint; a conflict (an earlier attempt that succeeded unseen, or another
    /// run) is resolved by reading the current revision and writing again.
    func writeCheckpoint(
      _ endpoint: CouchEndpoint, _ id: String, _ log: JSONObject, rev: String?
    ) async throws -> String? {
      var rev = rev
      for attempt in 0..<3 {
        var doc = log
        if let rev { doc.members.insert(.init(key: "_rev", value: .string(rev)), at: 0) }
        do {
          let body = doc
          return try await retrying("PUT checkpoint") {
            try await endpoint.peer.putLocalDocument(id, body)
          }
        } catch ReplicatorError.http(409, let error, let reason) {
          if attempt == 2 { throw ReplicatorError.http(status: 409, error: error, reason: reason) }
          rev = try await retrying("GET checkpoint") {
            try await self.checkpoint(endpoint, id)?.rev
          }
        }
      }
      return rev
    }

    // MARK: Retries

    /// Runs `body`, retrying transient failures with exponential backoff: forever when
    /// continuous, else up to the policy's retries.
    func retrying<T>(_ what: String, _ body: () async throws -> T) async throws -> T {
      var attempt = 0
      while true {
        do {
          let value = try await body()
          if attempt > 0 {
            // Recovered: the failure is history (the jobs keep it in theirs), not the state.
            status.state = .running
            status.retryAt = nil
            status.lastError = nil
            onStatus(status)
          }
          return value
        } catch {
          if Task.isCancelled || error is CancellationError { throw CancellationError() }
          if let error = error as? ReplicatorError, !error.isTransient { throw error }
          attempt += 1
          let message = Self.describe(error)
          if !options.continuous || options.retry.continuousGivesUp,
            attempt > options.retry.maximumRetries
          {
            throw ReplicatorError.gaveUp(what, attempts: attempt, lastError: message)
          }
          let delay = options.retry.delay(attempt: attempt)
          report.retries += 1
          status.state = .offline
          status.lastError = "\(what): \(message)"
          status.retryAt = Date.now.addingTimeInterval(
            Double(Self.milliseconds(delay)) / 1000)
          onStatus(status)
          try await Task.sleep(for: delay)
        }
      }
    }

    /// A failure in one line, without credentials (transports never put them in errors), in
    /// plain words for the network's usual failures (NIO's own texts read "connection reset
    /// (error set): Connection refused (errno: 111)" for a refused connection).
    static func describe(_ error: any Error) -> String {
      if let error = error as? ReplicatorError { return error.description }
      return NetworkFailure.describe(error) ?? String(describing: error)
    }
  }
}
