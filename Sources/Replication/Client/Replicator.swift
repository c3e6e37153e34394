import Formats
public import JSON
import RevTree

#if canImport(FoundationEssentials)
  public import FoundationEssentials
#else
  public import Foundation
#endif

/// A CouchDB replication from a source database to a target database, one-shot or continuous,
/// following the protocol's steps (docs.couchdb.org, "Replication Protocol"):
///
/// 1. `GET` both databases (they must exist; with ``ReplicationOptions/createTarget`` a missing
///    target is created with `PUT`).
/// 2. The replication id: a digest of the source and target identities and the filter.
/// 3. Read the checkpoints `_local/<replication id>` on both sides and start from the last
///    sequence both agree on (same session, or a session both histories share; else 0), or
///    from ``ReplicationOptions/since``.
/// 4. Read `_changes?style=all_docs&since=...&limit=<batch>` (`POST` with `filter=_doc_ids` or
///    `filter=_selector`; `feed=longpoll` with a heartbeat once a continuous replication has
///    caught up), ask the target `_revs_diff` which leaf revisions it lacks,
/// 5. fetch those with their history from the source (`_bulk_get?revs=true&latest=true`, with
///    `attachments=true` and each document's possible ancestors as `atts_since`; a peer without
///    `_bulk_get` is asked per document with `open_revs`) and write them to the target with
///    `_bulk_docs` and `new_edits: false` (in batches of at most 8 MB; a batch the target
///    refuses as a whole is written one document at a time),
/// 6. when a checkpoint is due (``ReplicationOptions/checkpointInterval``, and at the end),
///    `_ensure_full_commit` on the target, then write the checkpoint to both sides;
///    repeat until the feed is exhausted (one-shot) or the task is cancelled (continuous).
///
/// Sequences are opaque JSON (CouchDB 3's are strings), passed back as they came. A revision
/// the target refuses (`forbidden`, `unauthorized`, 401, 403) is a write failure
/// (``ReplicationReport/docWriteFailures``) and the replication goes on. Connection errors,
/// timeouts, 5xx, 408, 429 and answers that are not JSON are retried with exponential backoff
/// (``RetryPolicy``): a continuous replication never gives up; a one-shot one throws
/// ``ReplicatorError/gaveUp(_:attempts:lastError:)`` after its retries. `_local` documents are
/// not in a changes feed, so they never leave; nor do wiki drafts, which are not documents.
///
/// ```swift
/// var options = ReplicationOptions()
/// options.continuous = true
/// let task = Task {
///   try await Replicator(source: a, target: b, options: options).replicate { status in
///     print(status.state, status.report.docsWritten)
///   }
/// }
/// ```
public struct Replicator: Sendable {
  public let source: CouchEndpoint
  public let target: CouchEndpoint
  public var options: ReplicationOptions
  /// Changes per batch (``ReplicationOptions/batchSize``: 2,000; CouchDB's workers read 500,
  /// PouchDB 100).
  public var batchSize: Int {
    get { options.batchSize }
    set { options.batchSize = max(1, newValue) }
  }
  /// Sessions kept in a checkpoint's history.
  public var historyLimit = 50

  public init(
    source: CouchEndpoint, target: CouchEndpoint, options: ReplicationOptions = .init()
  ) {
    self.source = source
    self.target = target
    self.options = options
    self.options.batchSize = max(1, options.batchSize)
  }

  public init(source: CouchEndpoint, target: CouchEndpoint, batchSize: Int) {
    var options = ReplicationOptions()
    options.batchSize = batchSize
    self.init(source: source, target: target, options: options)
  }

  /// The id of the checkpoint documents, from the source and target identities and the
  /// filter (so a filtered replication keeps checkpoints of its own).
  public var replicationID: String {
    var text = "wikilog-replication-1\n\(source.identity)\n\(target.identity)"
    if let filter = options.filterDescription { text += "\n" + filter }
    return MD5.hash(Array(text.utf8)).description
  }

  /// Runs until the source's feed is exhausted (one-shot) or the task is cancelled
  /// (continuous; the report then has ``ReplicationReport/cancelled`` set).
  ///
  /// - Parameter onStatus: called when the state changes and after every batch.
  /// - Throws: ``ReplicatorError`` when a database is missing, a request is refused, or a
  ///   one-shot replication's retries ran out.
  @discardableResult
  public func replicate(
    onStatus: @escaping @Sendable (ReplicationStatus) -> Void = { _ in }
  ) async throws -> ReplicationReport {
    let run = Run(replicator: self, onStatus: onStatus)
    return try await run.start()
  }

  // MARK: Checkpoints

  /// CouchDB's replication log: the current session and a history of earlier ones.
  public func checkpointDocument(
    sessionID: String, startTime: String, report: ReplicationReport, previous: JSONValue?
  ) -> JSONObject {
    var history = (previous?["history"]?.arrayValue ?? []).filter {
      $0["session_id"]?.stringValue != sessionID
    }
    // As CouchDB's scheduler job, which starts its stats from the checkpoint's: the counts of
    // a session are those of the replication so far, earlier sessions included.
    func total(_ key: String, _ count: Int) -> JSONValue {
      let before = history.first?[key]?.numberValue?.int64Value ?? 0
      return .number(JSONNumber(before + Int64(count)))
    }
    let entry = JSONValue.object(
      JSONObject([
        "session_id": .string(sessionID),
        "start_time": .string(startTime),
        "end_time": .string(ISO8601.format(Date.now)),
        "start_last_seq": report.startSeq,
        "end_last_seq": report.endSeq,
        "recorded_seq": report.endSeq,
        "missing_checked": total("missing_checked", report.missingChecked),
        "missing_found": total("missing_found", report.missingFound),
        "docs_read": total("docs_read", report.docsRead),
        "docs_written": total("docs_written", report.docsWritten),
        "doc_write_failures": total("doc_write_failures", report.docWriteFailures),
      ]))
    history.insert(entry, at: 0)
    var log = JSONObject([
      "session_id": .string(sessionID),
      "source_last_seq": report.endSeq,
      "replication_id_version": .number(1),
      "history": .array(Array(history.prefix(historyLimit))),
    ])
    if !report.refused.isEmpty {
      // wikilog's own field (CouchDB's replicator ignores it): what the next run tries again.
      log.members.append(
        .init(key: "wikilog_refused", value: .array(report.refused.map(\.json))))
    }
    return log
  }

  /// The refused revisions a checkpoint kept (``ReplicationReport/refused``).
  static func refused(in log: JSONValue?) -> [RefusedRevision] {
    (log?["wikilog_refused"]?.arrayValue ?? []).compactMap(RefusedRevision.init(json:))
  }

  /// Where to start: the source's last seq when both logs end with the same session, else the
  /// recorded seq of the newest session both histories share, else 0 (CouchDB's
  /// `compare_replication_logs`).
  static func startSequence(_ sourceLog: JSONValue?, _ targetLog: JSONValue?) -> JSONValue {
    guard let sourceLog, let targetLog else { return .number(0) }
    if let session = sourceLog["session_id"]?.stringValue,
      session == targetLog["session_id"]?.stringValue,
      let seq = sourceLog["source_last_seq"]
    {
      return seq
    }
    let targetSessions = Set(
      (targetLog["history"]?.arrayValue ?? []).compactMap { $0["session_id"]?.stringValue })
    for entry in sourceLog["history"]?.arrayValue ?? [] {
      if let session = entry["session_id"]?.stringValue, targetSessions.contains(session),
        let seq = entry["recorded_seq"]
      {
        return seq
      }
    }
    return .number(0)
  }

  // MARK: HTTP

  static func check(_ response: CouchTransportResponse, _ what: String) throws -> JSONValue {
    let value: JSONValue
    do {
      value = try JSONValue(parsing: response.body)
    } catch {
      throw ReplicatorError.malformed(
        "\(what) answered \(response.status) with a body that is not JSON")
    }
    guard (200..<300).contains(response.status) else {
      throw ReplicatorError.http(
        status: response.status, error: value["error"]?.stringValue ?? "",
        reason: "\(what): " + (value["reason"]?.stringValue ?? ""))
    }
    return value
  }

  /// A seq as a query value: numbers as they are, strings percent-encoded.
  static func queryText(_ seq: JSONValue) -> String {
    if let s = seq.stringValue { return PercentDecoding.encode(s) }
    return PercentDecoding.encode(String(decoding: seq.serialized(), as: UTF8.self))
  }
}

/// What a replication does besides copying everything once.
public struct ReplicationOptions: Sendable, Hashable {
  /// Keep following the source's changes until cancelled.
  public var continuous = false
  /// Create the target database when it does not exist.
  public var createTarget = false
  /// Only these documents (`filter=_doc_ids`).
  public var docIDs: [String]?
  /// Only documents matching this Mango selector (`filter=_selector`).
  public var selector: JSONValue?
  /// A named filter of the source and its query parameters (wikilog's `wiki` filter:
  /// `("wiki", [("wiki", id)])`, a wiki and its pages).
  public var filter: String?
  public var filterParameters: [String: String] = [:]
  /// Start after this source sequence instead of the checkpoint's.
  public var since: JSONValue?
  /// Changes per batch. CouchDB's replicator reads batches of 500 (`worker_batch_size`) with
  /// four workers at once; this one runs one pipeline (a batch read while the one before is
  /// written), so its batches are 2,000: as much in flight, a quarter of the round trips.
  public var batchSize = 2_000
  /// How often the checkpoint is written while batches are (CouchDB's `checkpoint_interval`,
  /// 30 s by default). It is always written when the replication ends and when a continuous
  /// one catches up; zero writes it after every batch. A run interrupted in between starts
  /// again from the last checkpoint written: what it copies again the target has already, so
  /// `_revs_diff` passes it over.
  public var checkpointInterval: Duration = .seconds(30)
  /// The longest ``checkpointInterval`` that `checkpoint_interval` and
  /// `wikilog replicate --checkpoint-interval` take: a day.
  public static let maximumCheckpointInterval: Duration = .seconds(86_400)
  public var retry = RetryPolicy()
  /// How long a caught-up continuous replication's longpoll waits, and how often the source
  /// sends a heartbeat meanwhile.
  public var feedTimeout: Duration = .seconds(60)
  public var heartbeat: Duration = .seconds(10)

  public init() {}

  /// The filter in the replication id; nil when there is none.
  var filterDescription: String? {
    if let docIDs {
      return "doc_ids:"
        + String(decoding: JSONValue.array(docIDs.map { .string($0) }).serialized(), as: UTF8.self)
    }
    if let selector { return "selector:" + String(decoding: selector.serialized(), as: UTF8.self) }
    if let filter {
      let parameters = filterParameters.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }
      return "filter:\(filter)?" + parameters.joined(separator: "&")
    }
    return nil
  }
}

/// Retries of failed requests: `initialDelay`, doubled after each failure up to `maximumDelay`.
public struct RetryPolicy: Sendable, Hashable {
  /// Retries of one request before a one-shot replication gives up (continuous ones never do,
  /// unless ``continuousGivesUp`` is set).
  public var maximumRetries = 10
  /// Whether a continuous replication gives up after ``maximumRetries`` too, as the jobs of
  /// the `_replicator` database do (CouchDB's `retries_per_request`): its scheduler then
  /// restarts the job with a backoff of its own.
  public var continuousGivesUp = false
  public var initialDelay: Duration = .milliseconds(250)
  public var maximumDelay: Duration = .seconds(60)

  public init(
    maximumRetries: Int = 10, initialDelay: Duration = .milliseconds(250),
    maximumDelay: Duration = .seconds(60)
  ) {
    self.maximumRetries = maximumRetries
    self.initialDelay = initialDelay
    self.maximumDelay = maximumDelay
  }

  /// The wait before retry number `attempt` (1 for the first).
  public func delay(attempt: Int) -> Duration {
    var delay = initialDelay
    for _ in 1..<max(1, attempt) {
      delay *= 2
      if delay >= maximumDelay { return maximumDelay }
    }
    return min(delay, maximumDelay)
  }
}

/// What a replication is doing, as its ``Replicator/replicate(onStatus:)`` callback sees it.
public struct ReplicationStatus: Sendable, Hashable {
  public enum State: String, Sendable, Hashable {
    /// Reading the databases and checkpoints.
    case starting
    /// Copying a batch.
    case running
    /// Caught up, waiting for changes (continuous).
    case idle
    /// A request failed; it is retried at ``ReplicationStatus/retryAt``.
    case offline
    /// Done (one-shot), or cancelled (continuous).
    case completed
  }

  public var state: State
  public var report: ReplicationReport
  /// Changes the source reports after the last batch read (its `_changes` `pending`).
  public var pending: Int?
  /// The source sequence both checkpoints record.
  public var checkpointedSeq: JSONValue?
  /// The failure a request is being retried after, and when it is tried again; both nil once
  /// a request succeeds again (the jobs' history keeps the failures).
  public var lastError: String?
  public var retryAt: Date?

  public init(
    state: State, report: ReplicationReport, pending: Int? = nil, checkpointedSeq: JSONValue? = nil,
    lastError: String? = nil, retryAt: Date? = nil
  ) {
    self.state = state
    self.report = report
    self.pending = pending
    self.checkpointedSeq = checkpointedSeq
    self.lastError = lastError
    self.retryAt = retryAt
  }
}

/// What one ``Replicator/replicate(onStatus:)`` did (CouchDB's replication history fields).
public struct ReplicationReport: Sendable, Hashable {
  public var sessionID: String
  /// The source seq replication started after, and the last one it reached.
  public var startSeq: JSONValue
  public var endSeq: JSONValue
  public var batches = 0
  /// Rows read from the source's changes feed.
  public var docsRead = 0
  /// Leaf revisions asked about with `_revs_diff`, and how many the target lacked.
  public var missingChecked = 0
  public var missingFound = 0
  /// Revisions written to the target, and those that could not be fetched or written.
  public var docsWritten = 0
  public var docWriteFailures = 0
  /// Requests retried after a failure.
  public var retries = 0
  /// A continuous replication stopped by cancellation.
  public var cancelled = false
  /// The reasons of the first write failures (at most 10).
  public var failures: [String] = []
  /// The revisions the target refused (or the source would not give) that it still lacks:
  /// those of earlier runs, kept in the checkpoint and tried again by every run, and this
  /// run's. At the end of a run, each was tried again after everything else was written (a
  /// page refused because its wiki came later in the feed gets in then), and what is left is
  /// what the user could not send. At most ``RefusedRevision/limit``.
  public var refused: [RefusedRevision] = []
  /// The replication log the run started from (the checkpoint of earlier runs), nil for a
  /// first run: its history is kept in this run's log.
  public var previousLog: JSONValue? = nil

  public init(sessionID: String, startSeq: JSONValue, endSeq: JSONValue) {
    self.sessionID = sessionID
    self.startSeq = startSeq
    self.endSeq = endSeq
  }
}

/// A revision a replication could not write to its target, and why (the target's `error` and
/// `reason`).
public struct RefusedRevision: Sendable, Hashable {
  public var id: String
  public var rev: String
  public var error: String
  public var reason: String

  /// The most a report and a checkpoint keep.
  public static let limit = 1_000

  public init(id: String, rev: String, error: String, reason: String) {
    self.id = id
    self.rev = rev
    self.error = error
    self.reason = reason
  }

  /// `{"id","rev","error","reason"}`, as a checkpoint, `_scheduler/docs` and `_active_tasks`
  /// show it.
  public var json: JSONValue {
    .object(
      JSONObject([
        "id": .string(id), "rev": .string(rev), "error": .string(error),
        "reason": .string(reason),
      ]))
  }

  public init?(json: JSONValue) {
    guard let id = json["id"]?.stringValue, let rev = json["rev"]?.stringValue else {
      return nil
    }
    self.init(
      id: id, rev: rev, error: json["error"]?.stringValue ?? "",
      reason: json["reason"]?.stringValue ?? "")
  }

  /// "id: error: reason", as the command line lists it.
  public var description: String {
    let text = [error, reason].filter { !$0.isEmpty }.joined(separator: ": ")
    return "\(id): \(text.isEmpty ? "not written" : text)"
  }
}

/// Why a replication stopped.
public enum ReplicatorError: Error, Sendable, Hashable, CustomStringConvertible {
  /// A non-2xx answer, with CouchDB's error name and reason.
  case http(status: Int, error: String, reason: String)
  /// An answer that is not in CouchDB's shape.
  case malformed(String)
  /// A one-shot replication's request failed `attempts` times.
  case gaveUp(String, attempts: Int, lastError: String)

  public var description: String {
    switch self {
    case .http(let status, let error, let reason): "HTTP \(status) \(error): \(reason)"
    case .malformed(let what): "malformed answer: \(what)"
    case .gaveUp(let what, let attempts, let lastError):
      "\(what) failed \(attempts) times in a row; last error: \(lastError)"
    }
  }

  /// What kind of failure this is for whoever has to fix it (``ReplicationProblem``).
  public var problem: ReplicationProblem {
    switch self {
    case .http(401, _, _): .unauthorized
    case .http(403, _, _): .forbidden
    case .http(404, _, _): .missingDatabase
    case .http: isTransient ? .unreachable : .rejected
    case .malformed, .gaveUp: .unreachable
    }
  }

  /// Whether trying again may help: 5xx, 408, 429 and answers that are not JSON (a
  /// truncated body).
  var isTransient: Bool {
    switch self {
    case .http(let status, _, _): status >= 500 || status == 408 || status == 429
    case .malformed: true
    case .gaveUp: false
    }
  }
}

/// Why a replication fails, in the terms of what fixes it: ``unreachable`` passes by itself
/// (the network, a server restarting, a timeout), the others need someone to act.
public enum ReplicationProblem: String, Sendable, Hashable {
  /// The network or the other server: tried again with backoff until it answers.
  case unreachable
  /// A side refuses the credentials (401): they must be changed.
  case unauthorized
  /// A side refuses this user the database (403): they need rights there.
  case forbidden
  /// A database does not exist (404): the URL is wrong, or it must be created.
  case missingDatabase = "missing database"
  /// A side refuses the request itself (another 4xx).
  case rejected

  /// Whether waiting does not help: someone has to change something.
  public var isPermanent: Bool { self != .unreachable }

  /// The problem `error`, a replication's failure, is: a ``ReplicatorError``'s
  /// ``ReplicatorError/problem``; anything else (the network's errors) ``unreachable``.
  public init(_ error: any Error) {
    self = (error as? ReplicatorError)?.problem ?? .unreachable
  }
}
