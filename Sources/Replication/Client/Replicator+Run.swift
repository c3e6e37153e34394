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
    /// Set when the source answered `_bulk_get` with "not supported".
    var noBulkGet = false
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
      let checkpointPath = "/_local/" + PercentDecoding.encode(replicator.replicationID)
      let sourceLog = try await retrying("GET checkpoint") {
        try await self.checkpoint(self.source, checkpointPath)
      }
      let targetLog = try await retrying("GET checkpoint") {
        try await self.checkpoint(self.target, checkpointPath)
      }
      sourceRev = sourceLog?.rev
      targetRev = targetLog?.rev
      previousLog = sourceLog?.document ?? targetLog?.document
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
      let docs: [JSONValue]
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
      guard let results = changes["results"]?.arrayValue, let lastSeq = changes["last_seq"]
      else {
        throw ReplicatorError.malformed("_changes answer without results and last_seq")
      }
      let pending = changes["pending"]?.numberValue?.int64Value.map { Int($0) }
      status.pending = pending
      if results.isEmpty { return Fetched(docs: [], lastSeq: lastSeq, isEmpty: true) }
      return Fetched(docs: try await fetch(results), lastSeq: lastSeq, pending: pending)
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

    /// `GET` both databases; a missing target is created with ``ReplicationOptions/createTarget``.
    func openDatabases() async throws {
      // The endpoints' identities name them in errors (the server and the CLI give URLs
      // without credentials).
      _ = try await retrying("GET source database \(source.identity)") {
        try await self.request(self.source, "GET", self.source.path())
      }
      do {
        _ = try await retrying("GET target database \(target.identity)") {
          try await self.request(self.target, "GET", self.target.path())
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
            try await self.request(self.target, "PUT", self.target.path())
          }
        } catch ReplicatorError.http(412, _, _) {
          // Created meanwhile.
        }
      }
    }

    /// One batch of the changes feed.
    func readChanges(since: JSONValue, longpoll: Bool) async throws -> JSONValue {
      var query = "style=all_docs&since=\(Replicator.queryText(since))&limit=\(options.batchSize)"
      if longpoll {
        query +=
          "&feed=longpoll&timeout=\(Self.milliseconds(options.feedTimeout))&heartbeat=\(Self.milliseconds(options.heartbeat))"
      }
      var body: JSONValue?
      if let docIDs = options.docIDs {
        query += "&filter=_doc_ids"
        body = .object(JSONObject(["doc_ids": .array(docIDs.map { .string($0) })]))
      } else if let selector = options.selector {
        query += "&filter=_selector"
        body = .object(JSONObject(["selector": selector]))
      } else if let filter = options.filter {
        query += "&filter=" + PercentDecoding.encode(filter)
        for (key, value) in options.filterParameters.sorted(by: { $0.key < $1.key }) {
          query += "&" + PercentDecoding.encode(key) + "=" + PercentDecoding.encode(value)
        }
      }
      return try await request(
        source, body == nil ? "GET" : "POST", source.path("/_changes?" + query), body: body)
    }

    static func milliseconds(_ duration: Duration) -> Int64 {
      let (seconds, attoseconds) = duration.components
      return seconds * 1000 + attoseconds / 1_000_000_000_000_000
    }

    /// Copies what the target lacks of one batch of changes.
    /// The revisions of `_changes` rows the target lacks (`_revs_diff`), fetched from the
    /// source with their histories and attachments.
    func fetch(_ results: [JSONValue]) async throws -> [JSONValue] {
      report.batches += 1
      report.docsRead += results.count
      var asked = JSONObject()
      for row in results {
        guard let id = row["id"]?.stringValue, let changes = row["changes"]?.arrayValue else {
          throw ReplicatorError.malformed("_changes row without id and changes")
        }
        let revs = changes.compactMap { $0["rev"]?.stringValue }
        report.missingChecked += revs.count
        asked.members.append(.init(key: id, value: .array(revs.map { .string($0) })))
      }
      let diff = try await retrying("POST _revs_diff") {
        try await self.request(
          self.target, "POST", self.target.path("/_revs_diff"), body: JSONValue.object(asked))
      }
      var wanted: [Wanted] = []
      for member in diff.objectValue?.members ?? [] {
        // As CouchDB's replicator: attachments the target's possible ancestors have come as
        // stubs, the rest with their data (`atts_since`).
        let ancestors = member.value["possible_ancestors"]?.arrayValue ?? []
        let missing = member.value["missing"]?.arrayValue ?? []
        if !missing.isEmpty {
          wanted.append(Wanted(id: member.key, revs: missing, ancestors: ancestors))
        }
      }
      report.missingFound += wanted.reduce(0) { $0 + $1.revs.count }
      guard !wanted.isEmpty else { return [] }
      return try await fetch(wanted)
    }

    struct Wanted {
      let id: String
      let revs: [JSONValue]
      let ancestors: [JSONValue]
    }

    /// The wanted revisions with their history and attachments: `_bulk_get`, or per document
    /// `GET ?open_revs=` when the source has no `_bulk_get`.
    func fetch(_ wanted: [Wanted]) async throws -> [JSONValue] {
      if !noBulkGet {
        let entries: [JSONValue] = wanted.flatMap { want in
          want.revs.map { rev in
            var entry = JSONObject(["id": .string(want.id), "rev": rev])
            if !want.ancestors.isEmpty {
              entry.members.append(.init(key: "atts_since", value: .array(want.ancestors)))
            }
            return JSONValue.object(entry)
          }
        }
        do {
          let fetched = try await retrying("POST _bulk_get") {
            try await self.request(
              self.source, "POST",
              self.source.path("/_bulk_get?revs=true&latest=true&attachments=true"),
              body: .object(JSONObject(["docs": .array(entries)])))
          }
          var docs: [JSONValue] = []
          for result in fetched["results"]?.arrayValue ?? [] {
            for entry in result["docs"]?.arrayValue ?? [] {
              if let doc = entry["ok"] {
                docs.append(doc)
              } else if let error = entry["error"], error.objectValue != nil {
                fail(
                  result["id"]?.stringValue ?? "?", error["error"], error["reason"],
                  rev: error["rev"]?.stringValue)
              } else {
                fail(result["id"]?.stringValue ?? "?", entry["error"])
              }
            }
          }
          return docs
        } catch ReplicatorError.http(let status, _, _)
          where [400, 404, 405, 406, 415, 501].contains(status)
        {
          // CouchDB before 2.3 and other peers without `_bulk_get`.
          noBulkGet = true
        }
      }
      var docs: [JSONValue] = []
      for want in wanted {
        var query = "revs=true&latest=true&attachments=true&open_revs="
        query += PercentDecoding.encode(
          String(decoding: JSONValue.array(want.revs).serialized(), as: UTF8.self))
        if !want.ancestors.isEmpty {
          query +=
            "&atts_since="
            + PercentDecoding.encode(
              String(decoding: JSONValue.array(want.ancestors).serialized(), as: UTF8.self))
        }
        let path = source.path("/" + PercentDecoding.encode(want.id) + "?" + query)
        let answer = try await retrying("GET open_revs") {
          try await self.request(self.source, "GET", path)
        }
        for entry in answer.arrayValue ?? [] {
          if let doc = entry["ok"] {
            docs.append(doc)
          } else {
            fail(
              want.id, entry["missing"].map { _ in JSONValue.string("not_found") },
              .string("missing"), rev: entry["missing"]?.stringValue)
          }
        }
      }
      return docs
    }

    /// Writes `docs` with `new_edits: false` in batches of at most ``maximumWriteBytes``,
    /// each document serialized once (off the actor).
    func write(_ docs: [JSONValue]) async throws {
      let limit = replicator.maximumWriteBytes
      let batches = await Self.bulkDocsBodies(docs, limit: limit)
      for batch in batches { try await writeBatch(docs[batch.range], body: batch.body) }
    }

    /// The `_bulk_docs` bodies of `docs`: consecutive runs of them, each body at most `limit`
    /// bytes unless one document alone is larger.
    nonisolated static func bulkDocsBodies(_ docs: [JSONValue], limit: Int) async -> [(
      range: Range<Int>, body: [UInt8]
    )] {
      let head = Array(#"{"docs":["#.utf8)
      let tail = Array(#"],"new_edits":false}"#.utf8)
      var out: [(range: Range<Int>, body: [UInt8])] = []
      var body = head
      var start = 0
      for (i, doc) in docs.enumerated() {
        let bytes = doc.serialized()
        if i > start, body.count + bytes.count + tail.count > limit {
          out.append((start..<i, body + tail))
          body = head
          start = i
        }
        if i > start { body.append(UInt8(ascii: ",")) }
        body.append(contentsOf: bytes)
      }
      if start < docs.count { out.append((start..<docs.count, body + tail)) }
      return out
    }

    func writeBatch(_ docs: ArraySlice<JSONValue>, body: [UInt8]) async throws {
      do {
        let written = try await retrying("POST _bulk_docs") {
          try await self.send(self.target, "POST", self.target.path("/_bulk_docs"), body: body)
        }
        var failures = 0
        for row in written.arrayValue ?? [] where row["error"] != nil {
          failures += 1
          let id = row["id"]?.stringValue ?? "?"
          let rev =
            row["rev"]?.stringValue
            ?? docs.first { $0["_id"]?.stringValue == id }?["_rev"]?.stringValue
          fail(id, row["error"], row["reason"], rev: rev)
        }
        report.docsWritten += docs.count - failures
      } catch ReplicatorError.http(let status, _, _) where [401, 403, 413].contains(status) {
        // Refused or too large as a whole: one document at a time, as CouchDB's replicator
        // writes documents with attachments.
        for doc in docs { try await writeOne(doc) }
      }
    }

    func writeOne(_ doc: JSONValue) async throws {
      let id = doc["_id"]?.stringValue ?? ""
      do {
        _ = try await retrying("PUT document") {
          try await self.request(
            self.target, "PUT",
            self.target.path("/" + PercentDecoding.encode(id) + "?new_edits=false"), body: doc)
        }
        report.docsWritten += 1
      } catch ReplicatorError.http(let status, let error, let reason) where status < 500 {
        // The reason without the request's name that ``Replicator/check(_:_:)`` put before it.
        let plain = reason.split(separator: ": ", maxSplits: 1).dropFirst().first.map(String.init)
        fail(id, .string(error), .string(plain ?? reason), rev: doc["_rev"]?.stringValue)
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
      var asked = JSONObject()
      var revs: [String: [JSONValue]] = [:]
      var order: [String] = []
      for revision in before {
        if revs[revision.id] == nil { order.append(revision.id) }
        revs[revision.id, default: []].append(.string(revision.rev))
      }
      for id in order { asked.members.append(.init(key: id, value: .array(revs[id]!))) }
      let diff = try await retrying("POST _revs_diff") {
        try await self.request(
          self.target, "POST", self.target.path("/_revs_diff"), body: JSONValue.object(asked))
      }
      var wanted: [Wanted] = []
      for member in diff.objectValue?.members ?? [] {
        let missing = member.value["missing"]?.arrayValue ?? []
        if !missing.isEmpty {
          wanted.append(
            Wanted(
              id: member.key, revs: missing,
              ancestors: member.value["possible_ancestors"]?.arrayValue ?? []))
        }
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
    func checkpoint(_ endpoint: CouchEndpoint, _ path: String) async throws -> (
      document: JSONValue, rev: String?
    )? {
      let response = try await endpoint.transport.send("GET", endpoint.path(path), body: nil)
      if response.status == 404 { return nil }
      let value = try Replicator.check(response, "GET \(endpoint.path(path))")
      return (value, value["_rev"]?.stringValue)
    }

    /// Makes what was written durable on the target (`_ensure_full_commit`, as CouchDB's
    /// replicator does before each checkpoint rather than after each batch), then writes the
    /// checkpoint to both sides.
    func writeCheckpoints(_ path: String, _ log: JSONObject) async throws {
      _ = try await retrying("POST _ensure_full_commit") {
        try await self.request(
          self.target, "POST", self.target.path("/_ensure_full_commit"),
          body: .object(JSONObject()))
      }
      sourceRev = try await writeCheckpoint(source, path, log, rev: sourceRev)
      targetRev = try await writeCheckpoint(target, path, log, rev: targetRev)
    }

    /// Writes the checkpoint; a conflict (an earlier attempt that succeeded unseen, or another
    /// run) is resolved by reading the current revision and writing again.
    func writeCheckpoint(
      _ endpoint: CouchEndpoint, _ path: String, _ log: JSONObject, rev: String?
    ) async throws -> String? {
      var rev = rev
      for attempt in 0..<3 {
        var doc = log
        if let rev { doc.members.insert(.init(key: "_rev", value: .string(rev)), at: 0) }
        do {
          let answer = try await retrying("PUT checkpoint") {
            try await self.request(endpoint, "PUT", endpoint.path(path), body: .object(doc))
          }
          return answer["rev"]?.stringValue
        } catch ReplicatorError.http(409, let error, let reason) {
          if attempt == 2 { throw ReplicatorError.http(status: 409, error: error, reason: reason) }
          rev = try await retrying("GET checkpoint") {
            try await self.checkpoint(endpoint, path)?.rev
          }
        }
      }
      return rev
    }

    // MARK: HTTP and retries

    /// Sends a request; its body is serialized and the answer parsed off the actor (a
    /// `nonisolated` async function runs on the global executor), so that a batch being read
    /// and one being written work on two cores.
    nonisolated func request(
      _ endpoint: CouchEndpoint, _ method: String, _ path: String, body: JSONValue? = nil
    ) async throws -> JSONValue {
      try await send(endpoint, method, path, body: body?.serialized())
    }

    /// ``request(_:_:_:body:)`` with a body already serialized.
    nonisolated func send(
      _ endpoint: CouchEndpoint, _ method: String, _ path: String, body: [UInt8]?
    ) async throws -> JSONValue {
      let response = try await endpoint.transport.send(method, path, body: body)
      return try Replicator.check(response, "\(method) \(Self.location(endpoint, path))")
    }

    /// Where a request goes, for its errors: the endpoint's identity (a URL without
    /// credentials) with what follows the database in `path`, so that an error says which side
    /// answered (as CouchDB's `could not open http://host/db/` does).
    nonisolated static func location(_ endpoint: CouchEndpoint, _ path: String) -> String {
      let database = endpoint.path()
      guard path.hasPrefix(database) else { return path }
      var base = endpoint.identity
      if base.hasSuffix("/") { base.removeLast() }
      return base + path.dropFirst(database.count)
    }

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
