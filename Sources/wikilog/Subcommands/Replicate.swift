import ArgumentParser
import Auth
import CouchAPI
import Formats
import Foundation
import JSON
import Logging
import Projections
import Query
import Replication
import Synchronization
import Wiki

/// `wikilog replicate SOURCE TARGET`: CouchDB's replication protocol between two databases,
/// each a database of the data directory or a URL.
struct Replicate: AsyncParsableCommand {
  static let configuration = CommandConfiguration(
    abstract: "Replicate a database to another, here or on a CouchDB-compatible server.",
    discussion: """
      SOURCE and TARGET are each a database of the data directory (--db; opened in this \
      process) or a URL http(s)://[user:password@]host[:port]/db of wikilog, CouchDB or any \
      server speaking CouchDB's replication protocol. Every revision the target lacks is copied \
      with its history, conflicts and deletions included; checkpoints on both sides (every \
      --checkpoint-interval seconds, and at the end) let the next run, or a run interrupted \
      by a crash, start from the last one. Drafts and _local documents never leave.

      Credentials for URLs without a user: --user NAME with the password from a prompt or \
      --password-stdin, or --token (a JWT goes as Bearer, anything else as a wikilog API \
      token). They are never printed or logged.

      On a terminal a progress line shows documents read and written, pending changes, the \
      rate and the time left; --json prints NDJSON events instead. Connection errors, 5xx \
      answers and timeouts are retried with exponential backoff: a one-shot replication gives \
      up after --retries, --continuous never does (stop it with Ctrl-C). A document the target \
      refuses counts as a write failure and the rest goes on.

      Exit status: 0 when everything was copied, 2 when some documents were refused (partial \
      success), 1 when the replication failed.

      Examples:
        wikilog replicate wiki http://admin@127.0.0.1:5984/wiki --create-target
        wikilog replicate https://couch.example.org/wiki wiki --user bob --continuous
        wikilog replicate wiki backup --wiki w1 --json
      """)

  @OptionGroup var data: DataDirectoryOption
  @OptionGroup var actor: ActorOptions

  @Argument(help: "The source: a database of the data directory or a URL.")
  var source: String?

  @Argument(help: "The target: a database of the data directory or a URL.")
  var target: String?

  @Flag(
    help:
      "Show the replications run from this data directory (state, counts, last error, next retry) and exit."
  )
  var status = false

  @Option(help: "The user name for URLs without one.")
  var user: String?

  @Flag(
    name: .customLong("password-stdin"),
    help: "Read --user's password from the first line of standard input.")
  var passwordStdin = false

  @Option(help: "A JWT or wikilog API token for URLs without a user.")
  var token: String?

  @Flag(help: "Keep following the source's changes until interrupted.")
  var continuous = false

  @Flag(name: .customLong("create-target"), help: "Create the target database if it is missing.")
  var createTarget = false

  @Option(
    name: .customLong("doc-ids"),
    help: ArgumentHelp(
      "Only these documents: a JSON array, or ids separated by commas.", valueName: "ids"))
  var docIDs: String?

  @Option(help: ArgumentHelp("Only documents matching this Mango selector.", valueName: "json"))
  var selector: String?

  @Option(
    help: ArgumentHelp(
      "Only this wiki and its pages (the source's wiki filter: wikilog sources only).",
      valueName: "id"))
  var wiki: String?

  @Option(
    help: ArgumentHelp(
      "Start after this source sequence instead of the checkpoint's.", valueName: "seq"))
  var since: String?

  @Option(name: .customLong("batch-size"), help: "Changes per batch.")
  var batchSize = ReplicationOptions().batchSize

  @Option(
    name: .customLong("checkpoint-interval"),
    help: ArgumentHelp(
      "Seconds between checkpoints while batches are written (one is always written at the end; 0: after every batch).",
      valueName: "seconds"))
  var checkpointInterval = ReplicationOptions().checkpointInterval / .seconds(1)

  @Option(help: "Retries of a failed request before a one-shot replication gives up.")
  var retries = 10

  @Flag(help: "Print NDJSON progress events and a summary instead of the progress line.")
  var json = false

  func validate() throws {
    if status {
      if source != nil || target != nil {
        throw ValidationError("--status takes no SOURCE or TARGET")
      }
      return
    }
    if source == nil || target == nil { throw ValidationError("give a SOURCE and a TARGET") }
    let filters = [docIDs != nil, selector != nil, wiki != nil].filter { $0 }.count
    if filters > 1 { throw ValidationError("use one of --doc-ids, --selector and --wiki") }
    if batchSize < 1 { throw ValidationError("--batch-size must be at least 1") }
    if retries < 0 { throw ValidationError("--retries must not be negative") }
    let longest = ReplicationOptions.maximumCheckpointInterval / .seconds(1)
    if !(checkpointInterval >= 0 && checkpointInterval <= longest) {
      throw ValidationError(
        "--checkpoint-interval must be between 0 and \(Int(longest)) seconds")
    }
    if token != nil && user != nil { throw ValidationError("use --user or --token, not both") }
    if passwordStdin && user == nil { throw ValidationError("--password-stdin needs --user") }
  }

  func run() async throws {
    if status { return try ReplicationStatusFiles(directory: data.directory).show(json: json) }
    guard let source, let target else { throw ValidationError("give a SOURCE and a TARGET") }
    var options = ReplicationOptions()
    options.continuous = continuous
    options.createTarget = createTarget
    options.batchSize = batchSize
    options.checkpointInterval = .seconds(checkpointInterval)
    options.retry.maximumRetries = retries
    if let docIDs {
      options.docIDs = try Self.ids(docIDs)
    } else if let selector {
      let value = try Input.json(Array(selector.utf8), what: "--selector")
      guard value.objectValue != nil else { throw CLIError("--selector must be a JSON object") }
      options.selector = value
    } else if let wiki {
      options.filter = "wiki"
      options.filterParameters = ["wiki": wiki]
    }
    if let since {
      options.since = (try? JSONValue(parsing: Array(since.utf8))) ?? .string(since)
    }

    let credentials = try readCredentials()
    var local: DataDirectory?
    func endpoint(_ text: String) throws -> (CouchEndpoint, String) {
      if text.contains("://") {
        guard let url = CouchURL(text) else {
          throw CLIError("'\(text)' is not an http(s) URL of a database")
        }
        var given = credentials
        if let name = url.user {
          given = .basic(user: name, password: try url.password ?? askPassword(for: name))
        }
        let transport = HTTPTransport(baseURL: url.baseURL, credentials: given)
        return (
          CouchEndpoint(transport: transport, database: url.database, identity: url.description),
          url.description
        )
      }
      let directory = data.directory
      if local == nil {
        local = DataDirectory.wiki(path: directory, systemDatabases: [.users])
      }
      do {
        try local!.check(name: text)
      } catch let error as StoreError {
        throw CLIError(error.reason)
      }
      let path = URL(fileURLWithPath: directory).standardizedFileURL.path
      let identity = "file://\(path)/\(text)"
      // A database of this data directory is asked directly, as its owner: no HTTP server in
      // between. The store must exist (or be made, with --create-target, for the target).
      let store: DocumentStore
      do {
        store = try local!.open(text, create: createTarget && text == target)
      } catch let error as StoreError where error.code == .notFound {
        throw CLIError("db_not_found: could not open \(text): no such database in \(directory)")
      }
      return (
        CouchEndpoint(
          peer: StorePeer(
            store: store, identity: identity, user: WriteAccess.user, actor: actor.name,
            filters: local!.filters)),
        text
      )
    }
    let (sourceEndpoint, sourceName) = try endpoint(source)
    let (targetEndpoint, targetName) = try endpoint(target)
    defer { local?.closeAll() }

    let replicator = Replicator(source: sourceEndpoint, target: targetEndpoint, options: options)
    let display = ReplicationDisplay(json: json, source: sourceName, target: targetName)
    let statusFile = ReplicationStatusFiles(directory: data.directory).writer(
      id: replicator.replicationID, source: sourceName, target: targetName,
      continuous: continuous)
    let task = Task {
      try await replicator.replicate { status in
        display.show(status)
        statusFile.record(status)
      }
    }
    let signals = [SIGINT, SIGTERM].map { number in
      signal(number, SIG_IGN)
      let source = DispatchSource.makeSignalSource(signal: number)
      source.setEventHandler { task.cancel() }
      source.resume()
      return source
    }
    defer { for source in signals { source.cancel() } }
    let report: ReplicationReport
    do {
      report = try await task.value
    } catch let error as ReplicatorError {
      statusFile.finish(state: "failed", error: error.description)
      display.failed(error.description)
      throw CLIError("replication failed: \(error.description)")
    }
    display.finish(report)
    statusFile.finish(state: report.cancelled ? "stopped" : "completed", error: nil)
    if report.cancelled && !continuous { throw CLIError("replication interrupted") }
    // Revisions the target still refuses after this run tried them again (each run does).
    if !report.refused.isEmpty { throw ExitCode(2) }
  }

  /// `--doc-ids`: a JSON array of strings, or ids separated by commas.
  static func ids(_ text: String) throws -> [String] {
    if text.hasPrefix("[") {
      let value = try Input.json(Array(text.utf8), what: "--doc-ids")
      guard let list = value.arrayValue, list.allSatisfy({ $0.stringValue != nil }) else {
        throw CLIError("--doc-ids must be a JSON array of strings")
      }
      return list.compactMap(\.stringValue)
    }
    let ids = text.split(separator: ",").map(String.init)
    guard !ids.isEmpty else { throw CLIError("--doc-ids is empty") }
    return ids
  }

  /// `--user` with its password, or `--token`; nil without either.
  func readCredentials() throws -> HTTPTransport.Credentials? {
    if let token {
      let parts = token.split(separator: ".", omittingEmptySubsequences: false)
      return parts.count == 3 ? .bearer(token) : .token(token)
    }
    guard let user else { return nil }
    return .basic(user: user, password: try askPassword(for: user))
  }

  func askPassword(for name: String) throws -> String {
    if passwordStdin {
      guard let line = Swift.readLine(strippingNewline: true), !line.isEmpty else {
        throw CLIError("no password on standard input")
      }
      return line
    }
    guard isatty(0) == 1 else {
      throw CLIError(
        "standard input is not a terminal to ask for \(name)'s password; pass it with --password-stdin"
      )
    }
    return try Terminal.askSecret("Password for \(name): ")
  }
}

/// The progress line (on a terminal), the NDJSON events (`--json`) and the summary.
final class ReplicationDisplay: Sendable {
  let json: Bool
  let source: String
  let target: String
  let started = ContinuousClock.now
  let progress = Mutex(ProgressState())
  let terminal = isatty(STDERR_FILENO) != 0

  struct ProgressState {
    var lastLine: ContinuousClock.Instant?
    var shown = false
    var lastState: ReplicationStatus.State?
  }

  init(json: Bool, source: String, target: String) {
    self.json = json
    self.source = source
    self.target = target
  }

  func show(_ status: ReplicationStatus) {
    if json {
      printJSON(event("status", status))
      return
    }
    guard terminal else { return }
    let now = ContinuousClock.now
    let text: String? = progress.withLock { state in
      let changed = state.lastState != status.state
      state.lastState = status.state
      if !changed, let last = state.lastLine, now - last < .milliseconds(100) { return nil }
      state.lastLine = now
      state.shown = true
      return line(status)
    }
    if let text { writeStandardError("\r\u{1B}[K\(text)") }
  }

  func line(_ status: ReplicationStatus) -> String {
    let report = status.report
    let seconds = max(0.001, Self.seconds(ContinuousClock.now - started))
    let rate = Double(report.docsRead) / seconds
    var parts = [
      "\(report.docsRead) read", "\(report.docsWritten) written",
    ]
    if !report.refused.isEmpty { parts.append("\(report.refused.count) refused") }
    if let pending = status.pending {
      parts.append("\(pending) pending")
      if rate > 0, pending > 0 { parts.append("~\(Self.duration(Double(pending) / rate)) left") }
    }
    parts.append("\(Int(rate)) docs/s")
    var bar = ""
    if let pending = status.pending, report.docsRead + pending > 0 {
      let done = Double(report.docsRead) / Double(report.docsRead + pending)
      let filled = Int(done * 20)
      bar =
        "[" + String(repeating: "#", count: filled) + String(repeating: ".", count: 20 - filled)
        + "] "
    }
    var text = "\(status.state.rawValue) \(bar)" + parts.joined(separator: ", ")
    if status.state == .offline, let error = status.lastError {
      let retry = status.retryAt.map { " (retry in \(Self.duration($0.timeIntervalSinceNow)))" }
      text += " — " + String(error.prefix(80)) + (retry ?? "")
    }
    return text
  }

  func failed(_ message: String) {
    clear()
    if json {
      printJSON(
        J.object(["event": JSONValue.string("failed"), "error": JSONValue.string(message)]))
    }
  }

  func finish(_ report: ReplicationReport) {
    clear()
    let seconds = Self.seconds(ContinuousClock.now - started)
    if json {
      var status = ReplicationStatus(state: .completed, report: report)
      status.checkpointedSeq = report.endSeq
      printJSON(event("done", status))
      return
    }
    var text =
      "\(source) -> \(target): \(report.docsRead) changes read, \(report.missingFound) revisions missing, \(report.docsWritten) written"
    if !report.refused.isEmpty { text += ", \(report.refused.count) refused" }
    text += " in \(Self.duration(seconds))"
    if report.retries > 0 { text += " (\(report.retries) retries)" }
    if report.cancelled { text += " (stopped)" }
    writeStandardError((text + "\n"))
    for revision in report.refused {
      writeStandardError("  refused: \(revision.description)\n")
    }
  }

  func clear() {
    let shown = progress.withLock { state in
      defer { state.shown = false }
      return state.shown
    }
    if shown { writeStandardError("\r\u{1B}[K") }
  }

  /// One NDJSON event with CouchDB's task field names.
  func event(_ name: String, _ status: ReplicationStatus) -> JSONValue {
    let report = status.report
    return J.object([
      "event": JSONValue.string(name),
      "state": JSONValue.string(status.state.rawValue),
      "source": JSONValue.string(source),
      "target": JSONValue.string(target),
      "docs_read": J.int(report.docsRead),
      "docs_written": J.int(report.docsWritten),
      "doc_write_failures": J.int(report.docWriteFailures),
      "missing_revisions_found": J.int(report.missingFound),
      "revisions_checked": J.int(report.missingChecked),
      "changes_pending": status.pending.map { J.int($0) } ?? .null,
      "checkpointed_source_seq": status.checkpointedSeq,
      "start_seq": report.startSeq,
      "end_seq": report.endSeq,
      "retries": J.int(report.retries),
      "last_error": J.string(status.lastError),
      "retry_at": J.string(status.retryAt.map { ISO8601.format($0) }),
      "failures": name == "done" ? J.strings(report.failures) : nil,
      "refused": name == "done" ? .array(report.refused.map(\.json)) : nil,
      "elapsed_ms": J.int(Int(Self.seconds(ContinuousClock.now - started) * 1000)),
    ])
  }

  static func seconds(_ duration: Duration) -> Double {
    let (s, atto) = duration.components
    return Double(s) + Double(atto) / 1e18
  }

  static func duration(_ seconds: Double) -> String {
    let s = max(0, seconds)
    if s < 10 { return String(format: "%.1fs", s) }
    if s < 3600 { return "\(Int(s) / 60)m\(Int(s) % 60)s" }
    return "\(Int(s) / 3600)h\(Int(s) % 3600 / 60)m"
  }
}

/// The state of the replications run from a data directory, one JSON file each in
/// `DIR/.replications/` (written atomically on every state change and at most five times a
/// second otherwise), for `wikilog replicate --status`. A file whose process is gone while it
/// says running, idle or offline shows as `stopped`.
struct ReplicationStatusFiles {
  let directory: String
  var folder: String { directory + "/.replications" }

  func writer(id: String, source: String, target: String, continuous: Bool)
    -> ReplicationStatusWriter
  {
    ReplicationStatusWriter(
      path: folder + "/" + id + ".json", folder: folder, source: source, target: target,
      continuous: continuous)
  }

  func show(json: Bool) throws {
    let files = ((try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? [])
      .filter { $0.hasSuffix(".json") }.sorted()
    var rows: [JSONObject] = []
    for file in files {
      guard let data = FileManager.default.contents(atPath: folder + "/" + file),
        var object = (try? JSONValue(parsing: Array(data)))?.objectValue
      else { continue }
      let state = object["state"]?.stringValue ?? ""
      if ["starting", "running", "idle", "offline"].contains(state),
        let pid = object["pid"]?.numberValue?.int64Value, kill(pid_t(pid), 0) != 0, errno == ESRCH
      {
        object["state"] = .string("stopped")
      }
      rows.append(object)
    }
    if json {
      for row in rows { printJSON(.object(row)) }
      return
    }
    if rows.isEmpty {
      printText("no replications were run from \(directory)")
      return
    }
    var table = TextTable(header: [
      "STATE", "SOURCE -> TARGET", "READ", "WRITTEN", "REFUSED", "PENDING", "UPDATED", "LAST ERROR",
    ])
    for row in rows {
      func int(_ key: String) -> String {
        row[key]?.numberValue?.int64Value.map { String($0) } ?? "-"
      }
      var error = row["last_error"]?.stringValue ?? ""
      if let retry = row["retry_at"]?.stringValue, row["state"]?.stringValue == "offline" {
        error += " (retry at \(retry))"
      }
      table.add([
        row["state"]?.stringValue ?? "?",
        "\(row["source"]?.stringValue ?? "?") -> \(row["target"]?.stringValue ?? "?")",
        int("docs_read"), int("docs_written"), int("doc_write_failures"), int("changes_pending"),
        row["updated_at"]?.stringValue ?? "", error,
      ])
    }
    printText(table.text)
  }
}

/// Writes one replication's status file (see ``ReplicationStatusFiles``).
final class ReplicationStatusWriter: Sendable {
  let path: String
  let folder: String
  let base: JSONObject
  let last = Mutex<(state: String?, time: ContinuousClock.Instant?, status: JSONObject?)>(
    (nil, nil, nil))

  init(path: String, folder: String, source: String, target: String, continuous: Bool) {
    self.path = path
    self.folder = folder
    base = JSONObject([
      "source": .string(source), "target": .string(target), "continuous": .bool(continuous),
      "pid": J.int(Int(getpid())), "started_at": .string(ISO8601.format(Date.now)),
    ])
  }

  func record(_ status: ReplicationStatus) {
    let report = status.report
    var object = base
    object["state"] = .string(status.state.rawValue)
    object["docs_read"] = J.int(report.docsRead)
    object["docs_written"] = J.int(report.docsWritten)
    object["doc_write_failures"] = J.int(report.docWriteFailures)
    object["changes_pending"] = status.pending.map { J.int($0) } ?? .null
    object["checkpointed_source_seq"] = status.checkpointedSeq ?? .null
    object["last_error"] = status.lastError.map { .string($0) } ?? .null
    object["retry_at"] = status.retryAt.map { .string(ISO8601.format($0)) } ?? .null
    object["updated_at"] = .string(ISO8601.format(Date.now))
    let now = ContinuousClock.now
    let write = last.withLock { last -> Bool in
      defer { last.status = object }
      if last.state == status.state.rawValue, let time = last.time,
        now - time < .milliseconds(200)
      {
        return false
      }
      last.state = status.state.rawValue
      last.time = now
      return true
    }
    if write { save(object) }
  }

  /// The final state: `completed`, `stopped` or `failed` (with its error).
  func finish(state: String, error: String?) {
    var object = last.withLock { $0.status } ?? base
    object["state"] = .string(state)
    if let error { object["last_error"] = .string(error) }
    object["retry_at"] = .null
    object["updated_at"] = .string(ISO8601.format(Date.now))
    save(object)
  }

  func save(_ object: JSONObject) {
    guard
      (try? FileManager.default.createDirectory(
        atPath: folder, withIntermediateDirectories: true)) != nil
    else { return }
    // `.atomic`: written to a temporary file, then renamed over the state before.
    try? Data(JSONValue.object(object).serialized()).write(
      to: URL(fileURLWithPath: path), options: .atomic)
  }
}
