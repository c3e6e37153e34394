import Dispatch
import Foundation
public import JSON
public import Projections
import Synchronization

#if canImport(Glibc)
  import Glibc
#endif
#if canImport(FoundationEssentials)
  import FoundationEssentials
#endif

/// How to start the query server of a design-document language: a child process speaking
/// CouchDB's query-server protocol, one JSON command per line on its standard input and one
/// answer per line on its standard output, as CouchDB runs `couchjs`.
///
/// For `javascript`, wikilog runs its own query server, `wikilog query-server`: SpiderMonkey
/// (the engine of CouchDB's `couchjs`) with nothing but the JavaScript standard library and
/// CouchDB's helpers, each design document in a realm of its own, in a process that gives up
/// files, sockets and programs before it reads a command (docs/architecture.md, "Design
/// functions in a sandbox"). It is the `wikilog` binary of the running program, the one beside
/// it, or the one on `PATH`, in that order; `WIKILOG_QUERY_SERVER` names another `wikilog`. As in
/// CouchDB, the environment variable `COUCHDB_QUERY_SERVER_<LANGUAGE>` names another command for
/// a language (its words split on spaces): `COUCHDB_QUERY_SERVER_JAVASCRIPT=
/// "/opt/couchdb/bin/couchjs /opt/couchdb/share/server/main.js"` runs CouchDB's own.
public struct QueryServerCommand: Sendable, Hashable {
  /// The program (a path, or a name looked up on `PATH`) and its arguments.
  public var arguments: [String]
  /// Whether it is wikilog's own (`wikilog query-server`): it answers wikilog's `map_docs`
  /// (several documents per command), takes the memory limit and starts with an empty
  /// environment. Other query servers get CouchDB's `map_doc`, one document at a time, and the
  /// server's environment.
  public var mapsBatches: Bool

  /// The major version of the SpiderMonkey that wikilog's own query server runs: the
  /// `libmozjs-102` that Package.swift links into JSSandbox (the number CouchDB's
  /// `/_node/{node}/_versions` reports as `javascript_engine.version`).
  public static let spiderMonkeyVersion = "102"

  public init(arguments: [String], mapsBatches: Bool = false) {
    self.arguments = arguments
    self.mapsBatches = mapsBatches
  }

  /// The command for `language` (CouchDB's default is `javascript`): the environment's
  /// `COUCHDB_QUERY_SERVER_<LANGUAGE>` if set, else wikilog's own for JavaScript, else nil.
  public static func forLanguage(
    _ language: String,
    environment: [String: String]? = nil
  ) -> QueryServerCommand? {
    let environment = environment ?? ProcessInfo.processInfo.environment
    let variable = "COUCHDB_QUERY_SERVER_" + language.uppercased()
    if let command = environment[variable], !command.isEmpty {
      return QueryServerCommand(
        arguments: command.split(separator: " ").map(String.init), mapsBatches: false)
    }
    guard language == "javascript" else { return nil }
    let program = environment["WIKILOG_QUERY_SERVER"].flatMap { $0.isEmpty ? nil : $0 }
    return QueryServerCommand(
      arguments: [program ?? wikilogBinary ?? "wikilog", "query-server"], mapsBatches: true)
  }

  /// The `wikilog` binary that runs the query server: this program when it is `wikilog`, else
  /// the `wikilog` beside it (a test runner's, an app's build folder); nil to look on `PATH`.
  static let wikilogBinary: String? = {
    let me =
      (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe"))
      ?? CommandLine.arguments.first ?? ""
    let url = URL(fileURLWithPath: me)
    if url.lastPathComponent == "wikilog" { return url.path }
    let beside = url.deletingLastPathComponent().appendingPathComponent("wikilog").path
    return FileManager.default.isExecutableFile(atPath: beside) ? beside : nil
  }()
}

/// What a query server may use before it is stopped (CouchDB's `os_process_timeout`, 5 s by
/// default).
public struct QueryServerLimits: Sendable, Hashable {
  /// Seconds one command may take; a server that takes longer is killed, and the command
  /// fails.
  public var timeout: Double = 5
  /// The JavaScript heap of wikilog's own query server, in MiB (`wikilog query-server
  /// --memory`); a function that allocates past it fails with `out of memory`.
  public var memoryMiB: Int = 512

  public init(timeout: Double = 5, memoryMiB: Int = 512) {
    self.timeout = timeout
    self.memoryMiB = memoryMiB
  }
}

/// A design function, or the query server running it, failed.
public enum QueryServerError: Error, Sendable, Equatable {
  /// The server answered `["error", error, reason]` (a function that does not compile, a
  /// reduce that throws); the process goes on.
  case failed(error: String, reason: String)
  /// A command took longer than ``QueryServerLimits/timeout``; the process was killed.
  case timeout(seconds: Double)
  /// The process could not start, or ended (a crash, memory exhausted), or answered what is
  /// not the protocol.
  case processFailed(String)
  /// No query server for the design document's language.
  case unknownLanguage(String)

  /// CouchDB's error name and reason for it.
  public var couchError: (error: String, reason: String) {
    switch self {
    case .failed(let error, let reason): (error, reason)
    case .timeout(let seconds):
      ("os_process_error", "the query server took longer than \(seconds) s (timeout)")
    case .processFailed(let reason): ("os_process_error", reason)
    case .unknownLanguage(let language):
      ("unknown_query_language", "no query server for language \(language)")
    }
  }
}

/// One running query server. Not shared: a ``QueryServerPool`` lends it to one caller at a
/// time.
public final class QueryServerProcess: @unchecked Sendable {
  /// The child's process id, 0 once it is reaped.
  var pid: pid_t
  /// Our ends of its standard input and output.
  var input: Int32
  let output: Int32
  var buffer: [UInt8] = []
  let limits: QueryServerLimits
  public let command: QueryServerCommand
  /// The design documents it has been given (`["ddoc","new",...]`), by key.
  var designDocuments: Set<String> = []
  /// For another query server, which keeps design documents by id: id → revision.
  var designDocumentRevisions: [String: String] = [:]
  /// Lines the functions logged (`["log", message]`), for the caller to pass on.
  public private(set) var logged: [String] = []

  /// Started with `posix_spawn` (not Foundation's `Process`, whose dispatch sources and
  /// run loops are not safe to share with other launches in the same program).
  init(command: QueryServerCommand, limits: QueryServerLimits) throws(QueryServerError) {
    self.command = command
    self.limits = limits
    var arguments = command.arguments
    guard let program = arguments.first, let path = Self.find(program) else {
      throw .processFailed(
        "query server \(command.arguments.first ?? "") not found"
          + (command.mapsBatches ? " (the wikilog binary runs it: put it on PATH)" : ""))
    }
    arguments.removeFirst()
    if command.mapsBatches {
      arguments.append(contentsOf: ["--memory", "\(limits.memoryMiB)"])
    }
    // A query server that dies must not take the server with it on its next write.
    _ = signal(SIGPIPE, SIG_IGN)
    var toChild: [Int32] = [-1, -1]
    var fromChild: [Int32] = [-1, -1]
    guard unsafe pipe(&toChild) == 0 else {
      throw .processFailed("pipe failed (errno \(errno))")
    }
    guard unsafe pipe(&fromChild) == 0 else {
      close(toChild[0])
      close(toChild[1])
      throw .processFailed("pipe failed (errno \(errno))")
    }
    // Not inherited by other children this process starts.
    for fd in toChild + fromChild { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
    var actions = unsafe posix_spawn_file_actions_t()
    unsafe posix_spawn_file_actions_init(&actions)
    unsafe posix_spawn_file_actions_adddup2(&actions, toChild[0], 0)
    unsafe posix_spawn_file_actions_adddup2(&actions, fromChild[1], 1)
    unsafe posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
    let argv = unsafe ([path] + arguments).map { unsafe strdup($0) }
    // wikilog's own gets no environment: nothing of the server's (secrets included) is there
    // to read, whatever a function or a flaw of the engine reaches.
    let noEnvironment: [UnsafeMutablePointer<CChar>?] = [nil]
    var child: pid_t = 0
    let spawned = unsafe (argv + [nil]).withUnsafeBufferPointer { args in
      unsafe noEnvironment.withUnsafeBufferPointer { empty in
        unsafe posix_spawn(
          &child, path, &actions, nil, args.baseAddress!,
          command.mapsBatches ? UnsafeMutablePointer(mutating: empty.baseAddress!) : environ)
      }
    }
    unsafe posix_spawn_file_actions_destroy(&actions)
    unsafe argv.forEach { unsafe free($0) }
    close(toChild[0])
    close(fromChild[1])
    guard spawned == 0 else {
      close(toChild[1])
      close(fromChild[0])
      throw .processFailed("query server \(path) did not start (error \(spawned))")
    }
    pid = child
    input = toChild[1]
    output = fromChild[0]
  }

  deinit {
    stop()
    close(output)
  }

  static func find(_ program: String) -> String? {
    if program.contains("/") {
      return FileManager.default.isExecutableFile(atPath: program) ? program : nil
    }
    let names = [program]
    let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/local/bin:/usr/bin:/bin"
    for name in names {
      for dir in path.split(separator: ":") {
        let candidate = "\(dir)/\(name)"
        if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
      }
    }
    return nil
  }

  /// Ends the process (killed, and reaped).
  func stop() {
    if pid > 0 {
      kill(pid, SIGKILL)
      var status: Int32 = 0
      while unsafe waitpid(pid, &status, 0) < 0 && errno == EINTR {}
      pid = 0
    }
    if input >= 0 {
      close(input)
      input = -1
    }
  }

  /// Whether the process is still there (not ended, not stopped).
  var isRunning: Bool {
    guard pid > 0 else { return false }
    var status: Int32 = 0
    if unsafe waitpid(pid, &status, WNOHANG) == pid {
      pid = 0
      return false
    }
    return true
  }

  /// Sends `command` and returns the answer (lines the functions logged first go to
  /// ``logged``); an `["error", …]` answer throws ``QueryServerError/failed(error:reason:)``.
  public func call(_ command: JSONValue) throws(QueryServerError) -> JSONValue {
    try send(command)
    return try receive()
  }

  /// Writes one command line.
  func send(_ command: JSONValue) throws(QueryServerError) {
    var line = command.serialized()
    line.append(10)
    var written = 0
    while written < line.count {
      guard input >= 0 else { throw .processFailed("the query server has ended") }
      let n = unsafe line.withUnsafeBytes { bytes in
        unsafe write(input, bytes.baseAddress! + written, bytes.count - written)
      }
      if n < 0 {
        if errno == EINTR || errno == EAGAIN { continue }
        stop()
        throw .processFailed("the query server has ended (errno \(errno))")
      }
      written += n
    }
  }

  /// Reads the next answer, passing over log lines.
  func receive() throws(QueryServerError) -> JSONValue {
    let deadline = Date().addingTimeInterval(limits.timeout)
    while true {
      let line = try readLine(deadline: deadline)
      let answer: JSONValue
      do {
        answer = try JSONValue(parsing: line)
      } catch {
        stop()
        throw .processFailed("the query server answered what is not JSON")
      }
      if case .array(let items) = answer, items.first == .string("log") {
        if items.count > 1, case .string(let message) = items[1] { logged.append(message) }
        continue
      }
      if case .array(let items) = answer, items.first == .string("error"), items.count >= 3 {
        throw .failed(
          error: items[1].stringValue ?? "error",
          reason: items[2].stringValue ?? String(decoding: items[2].serialized(), as: UTF8.self))
      }
      return answer
    }
  }

  /// Takes the messages logged so far.
  public func takeLogged() -> [String] {
    defer { logged = [] }
    return logged
  }

  private func readLine(deadline: Date) throws(QueryServerError) -> [UInt8] {
    var scanned = 0
    while true {
      if let newline = buffer[scanned...].firstIndex(of: 10) {
        let line = Array(buffer[..<newline])
        buffer.removeSubrange(...newline)
        return line
      }
      scanned = buffer.count
      let left = deadline.timeIntervalSinceNow
      if left <= 0 {
        stop()
        throw .timeout(seconds: limits.timeout)
      }
      var poller = pollfd(fd: output, events: Int16(POLLIN), revents: 0)
      let ready = unsafe poll(&poller, 1, Int32(min(left * 1000 + 1, 60_000)))
      if ready < 0 {
        if errno == EINTR { continue }
        stop()
        throw .processFailed("poll failed (errno \(errno))")
      }
      if ready == 0 { continue }
      var chunk = [UInt8](repeating: 0, count: 1 << 16)
      let n = unsafe chunk.withUnsafeMutableBytes { unsafe read(output, $0.baseAddress, $0.count) }
      if n < 0 {
        if errno == EINTR || errno == EAGAIN { continue }
        stop()
        throw .processFailed("reading the query server failed (errno \(errno))")
      }
      if n == 0 {
        var status: Int32 = 0
        if pid > 0 {
          while unsafe waitpid(pid, &status, 0) < 0 && errno == EINTR {}
          pid = 0
        }
        status = (status >> 8) & 0xFF
        stop()
        throw .processFailed(
          "the query server ended (exit status \(status)): a function crashed it or ran out of memory"
        )
      }
      buffer.append(contentsOf: chunk[..<n])
    }
  }

  /// Makes sure the process has design document `ddoc` under `key`.
  func load(designDocument ddoc: JSONValue, key: String) throws(QueryServerError) {
    guard !designDocuments.contains(key) else { return }
    _ = try call(.array([.string("ddoc"), .string("new"), .string(key), ddoc]))
    designDocuments.insert(key)
  }

  /// Runs the function at `path` of design document `ddoc` (`["validate_doc_update"]`,
  /// `["filters", name]`, …) with `arguments`.
  ///
  /// `scope` names where the design document lives (its database): the query server keeps
  /// each design document under its scope, id and revision, so that two databases' design
  /// documents of the same id and revision (one replicated with a forged revision, say) never
  /// share a realm or each other's functions.
  public func callDesignFunction(
    ddoc: JSONValue, id: String, rev: String, scope: String = "", path: [String],
    arguments: [JSONValue]
  ) throws(QueryServerError) -> JSONValue {
    let key = command.mapsBatches ? scope + "\u{1F}" + id + "\u{1F}" + rev : id
    let request = JSONValue.array([
      .string("ddoc"), .string(key), .array(path.map(JSONValue.string)), .array(arguments),
    ])
    if !command.mapsBatches, designDocumentRevisions[id] != rev {
      // Another query server keeps one design document per id.
      _ = try call(.array([.string("ddoc"), .string("new"), .string(id), ddoc]))
      designDocumentRevisions[id] = rev
    } else if command.mapsBatches {
      try load(designDocument: ddoc, key: key)
    }
    do {
      return try call(request)
    } catch .failed("query_protocol_error", let reason)
      where command.mapsBatches && reason.hasPrefix("uncached")
    {
      // The query server let it go (it keeps the most recently used ones): load it again.
      designDocuments.remove(key)
      try load(designDocument: ddoc, key: key)
      return try call(request)
    }
  }
}

/// Running query servers, lent one caller at a time and kept for the next (CouchDB's
/// `couch_proc_manager`): a view build, a `validate_doc_update`, a filter each take one. Each
/// data directory has its own (``Projections/DirectoryState/queryServers``), with its own
/// limits: two servers in one process share no process and no setting.
public final class QueryServerPool: Sendable {
  private let idle = Mutex<[QueryServerCommand: [QueryServerProcess]]>([:])
  /// Processes lent at once, per command: callers beyond wait for one to come back.
  private let slots = Mutex<[QueryServerCommand: DispatchSemaphore]>([:])
  /// The most processes of one command at once.
  static let maxProcesses = max(4, ProcessInfo.processInfo.activeProcessorCount * 2)
  private let configured = Mutex(QueryServerLimits())
  /// Idle processes kept per command.
  static let keptIdle = maxProcesses

  public init() {}

  /// The limits new processes get (``QueryServerLimits``).
  public var limits: QueryServerLimits {
    get { configured.withLock { $0 } }
    set {
      configured.withLock { $0 = newValue }
      // Running processes were started with the old ones.
      let old = idle.withLock { all in
        defer { all = [:] }
        return all.values.flatMap { $0 }
      }
      for process in old { process.stop() }
    }
  }

  /// Runs `body` with a query server for `language`: an idle one, or a new one. A process
  /// that timed out or ended is not kept.
  public func with<T>(
    language: String, _ body: (QueryServerProcess) throws(QueryServerError) -> T
  ) throws(QueryServerError) -> T {
    guard let command = QueryServerCommand.forLanguage(language) else {
      throw .unknownLanguage(language)
    }
    let slot = slots.withLock { all in
      if let s = all[command] { return s }
      let s = DispatchSemaphore(value: Self.maxProcesses)
      all[command] = s
      return s
    }
    slot.wait()
    defer { slot.signal() }
    let process: QueryServerProcess
    if let kept = idle.withLock({ $0[command]?.popLast() }), kept.isRunning {
      process = kept
    } else {
      process = try QueryServerProcess(command: command, limits: limits)
    }
    do {
      let value = try body(process)
      keep(process)
      return value
    } catch {
      if case .failed = error { keep(process) } else { process.stop() }
      throw error
    }
  }

  deinit {
    for process in idle.withLock({ $0.values.flatMap { $0 } }) { process.stop() }
  }

  private func keep(_ process: QueryServerProcess) {
    guard process.isRunning else { return }
    _ = process.takeLogged()
    let extra = idle.withLock { all -> QueryServerProcess? in
      var list = all[process.command] ?? []
      if list.count >= Self.keptIdle { return process }
      list.append(process)
      all[process.command] = list
      return nil
    }
    extra?.stop()
  }
}

extension DirectoryState {
  /// The data directory's query servers (one pool per directory, made when first used).
  public var queryServers: QueryServerPool { shared { QueryServerPool() } }
}
