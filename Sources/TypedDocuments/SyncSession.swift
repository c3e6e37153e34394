public import Foundation
import JSON
import Projections
public import Replication
import Synchronization

extension DocumentDatabase {
  /// A two-way, continuous sync of this database with the CouchDB database at `url` (a
  /// `wikilog serve`, a CouchDB, anything that speaks CouchDB's replication protocol), started.
  ///
  /// ```swift
  /// let sync = try db.sync(
  ///   with: "https://wiki.example.com/notes", credentials: .basic(user: "ann", password: pw))
  /// for await status in sync.statuses {
  ///   print(status.state, status.pushed, status.pulled)
  /// }
  /// ```
  ///
  /// - Throws: `bad_request` when `url` is not an `http(s)` URL naming a database.
  public func sync(
    with url: String, credentials: SyncSession.Credentials? = nil,
    options: SyncSession.Options = SyncSession.Options()
  ) throws -> SyncSession {
    let session = try SyncSession(
      database: self, url: url, credentials: credentials, options: options)
    session.start()
    return session
  }
}

/// Keeps a ``DocumentDatabase`` and a remote database in step: two continuous replications
/// (push and pull) that start where the last session left off (CouchDB's checkpoints, on both
/// sides), retry with exponential backoff when the network goes (the remote's down time is an
/// ``State/offline(retryAt:reason:)`` state, never an end), and report what they do.
///
/// Saving while offline is simply saving: the local write is durable at once, and the push
/// carries it when the remote is reachable again (what PingPong calls `saveEventually`). An app
/// that slept calls ``retryNow()`` when it wakes or the network comes back, so as not to wait for
/// the backoff's next try.
///
/// Filters (``Options/types``, ``Options/wiki``) are Mango selectors on both directions, so a
/// CouchDB peer applies them too. A deletion made through ``DocumentDatabase/delete(_:)``
/// keeps its type field and passes a type filter; a deletion another client made without one
/// does not (as with CouchDB's selector replication).
public final class SyncSession: Sendable {
  /// How the session signs in to the remote.
  public enum Credentials: Sendable, Hashable {
    /// HTTP Basic: a user's name and password.
    case basic(user: String, password: String)
    /// `Authorization: Bearer` (a JWT).
    case bearer(String)
    /// `Authorization: Token token=...` (a wikilog API token).
    case token(String)

    var transport: HTTPTransport.Credentials {
      switch self {
      case .basic(let user, let password): .basic(user: user, password: password)
      case .bearer(let token): .bearer(token)
      case .token(let token): .token(token)
      }
    }
  }

  /// What to sync, and how.
  public struct Options: Sendable {
    /// Send local changes to the remote.
    public var push = true
    /// Bring the remote's changes here.
    public var pull = true
    /// Only documents of these types (``StoredDocument/documentType``; all when nil).
    public var types: [String]?
    /// The member ``types`` are read from.
    public var typeField = "type"
    /// Only the documents of this wiki (its document and its pages, `<wiki>:<Page>`).
    public var wiki: String?
    /// Create the remote database when it is missing (needs a server admin).
    public var createRemote = false
    /// Changes per batch.
    public var batchSize = 100
    /// Backoff between tries after a failure (a continuous replication never gives up).
    public var retry = RetryPolicy(initialDelay: .milliseconds(500), maximumDelay: .seconds(60))
    /// How long the remote may keep a feed request open while nothing changes.
    public var heartbeat: Duration = .seconds(10)

    public init() {}

    /// Only documents of these types.
    public static func types(_ types: [any StoredDocument.Type]) -> Options {
      var options = Options()
      options.types = types.map { $0.documentType }
      return options
    }
  }

  /// What the session is doing, both directions together.
  public enum State: Sendable, Hashable {
    /// Reading checkpoints, or copying changes.
    case active
    /// Caught up both ways, waiting for changes.
    case idle
    /// The remote cannot be reached; the next try is at `retryAt`.
    case offline(retryAt: Date?, reason: String)
    /// A direction failed in a way retrying the same request does not mend (refused
    /// credentials, a missing database): it starts again at `retryAt` or on ``retryNow()``.
    case error(reason: String, retryAt: Date?)
    /// ``stop()`` was called.
    case stopped
  }

  /// The session's state and counts.
  public struct Status: Sendable, Hashable {
    public var state: State
    /// Revisions written to the remote since the session started.
    public var pushed = 0
    /// Revisions written here from the remote since the session started.
    public var pulled = 0
    /// Revisions either side refused (a validation function, access rules).
    public var refused = 0
    /// Changes the source of each direction still had to send at its last batch.
    public var pushPending: Int?
    public var pullPending: Int?
  }

  enum Direction: Int, CaseIterable {
    case push, pull
  }

  struct Leg {
    var status: ReplicationStatus?
    /// Counts of the runs before the current one.
    var written = 0
    var refused = 0
    var failure: (reason: String, retryAt: Date?)?
    var task: Task<Void, Never>?
    /// Which run the callbacks come from (a run ``retryNow()`` replaced reports nothing more).
    var generation = 0
  }

  struct Inner {
    var legs: [Leg] = [Leg(), Leg()]
    var stopped = false
    var watchers: [UInt64: AsyncStream<Status>.Continuation] = [:]
    var nextWatcher: UInt64 = 0
    var last: Status?
  }

  let database: DocumentDatabase
  let options: Options
  let remote: CouchEndpoint
  let local: CouchEndpoint
  let inner = Mutex(Inner())

  init(database: DocumentDatabase, url: String, credentials: Credentials?, options: Options) throws
  {
    guard let parsed = CouchURL(url) else {
      throw StoreError.badRequest("\(url) is not an http(s) URL naming a database")
    }
    var given = credentials
    if given == nil, let user = parsed.user {
      given = .basic(user: user, password: parsed.password ?? "")
    }
    self.database = database
    self.options = options
    remote = CouchEndpoint(
      transport: HTTPTransport(baseURL: parsed.baseURL, credentials: given?.transport),
      database: parsed.database, identity: parsed.description)
    let path = URL(fileURLWithPath: database.data.path).standardizedFileURL.path
    // This side is the app's own store, asked directly (no HTTP server in between), as its
    // owner; what arrives is written through the store's validation.
    local = CouchEndpoint(
      peer: StorePeer(
        store: database.store, identity: "file://\(path)/\(database.name)",
        actor: database.actor, origin: parsed.description))
  }

  /// The selector both directions filter by, nil for everything.
  var selector: JSONValue? {
    var clauses: [JSONValue] = []
    if let types = options.types {
      clauses.append(
        .object(
          JSONObject([
            options.typeField: .object(JSONObject(["$in": .array(types.map { .string($0) })]))
          ])))
    }
    if let wiki = options.wiki {
      let escaped = wiki.unicodeScalars.map { c in
        "\\^$.|?*+()[]{}".unicodeScalars.contains(c) ? "\\\(c)" : String(c)
      }.joined()
      clauses.append(
        .object(
          JSONObject(["_id": .object(JSONObject(["$regex": .string("^\(escaped)(:|$)")]))])))
    }
    switch clauses.count {
    case 0: return nil
    case 1: return clauses[0]
    default: return .object(JSONObject(["$and": .array(clauses)]))
    }
  }

  func replicator(_ direction: Direction) -> Replicator {
    var replication = ReplicationOptions()
    replication.continuous = true
    replication.selector = selector
    replication.batchSize = options.batchSize
    replication.retry = options.retry
    replication.retry.continuousGivesUp = false
    replication.heartbeat = options.heartbeat
    replication.createTarget = direction == .push && options.createRemote
    return direction == .push
      ? Replicator(source: local, target: remote, options: replication)
      : Replicator(source: remote, target: local, options: replication)
  }

  var directions: [Direction] {
    Direction.allCases.filter { $0 == .push ? options.push : options.pull }
  }

  /// Starts the directions not running (``DocumentDatabase/sync(with:credentials:options:)``
  /// does).
  func start() {
    for direction in directions { run(direction) }
  }

  func run(_ direction: Direction) {
    let replicator = replicator(direction)
    let retry = options.retry
    inner.withLock { inner in
      guard !inner.stopped, inner.legs[direction.rawValue].task == nil else { return }
      inner.legs[direction.rawValue].generation += 1
      let generation = inner.legs[direction.rawValue].generation
      let weak = WeakSession(self)
      inner.legs[direction.rawValue].task = Task {
        var attempt = 1
        while !Task.isCancelled {
          do {
            try await replicator.replicate { status in
              weak.session?.update(direction, generation) {
                $0.status = status
                $0.failure = nil
              }
            }
            return
          } catch {
            if Task.isCancelled { return }
            let delay = retry.delay(attempt: attempt)
            attempt += 1
            let reason = (error as? ReplicatorError)?.description ?? "\(error)"
            weak.session?.update(direction, generation) { leg in
              leg.written += leg.status?.report.docsWritten ?? 0
              leg.refused += leg.status?.report.docWriteFailures ?? 0
              leg.status = nil
              leg.failure = (reason, Date.now + Double(delay.components.seconds))
            }
            try? await Task.sleep(for: delay)
          }
        }
      }
    }
  }

  func update(_ direction: Direction, _ generation: Int, _ change: (inout Leg) -> Void) {
    let (status, watchers) = inner.withLock {
      inner -> (Status?, [AsyncStream<Status>.Continuation]) in
      guard !inner.stopped, inner.legs[direction.rawValue].generation == generation else {
        return (nil, [])
      }
      change(&inner.legs[direction.rawValue])
      let status = Self.combined(inner, directions: directions)
      guard status != inner.last else { return (nil, []) }
      inner.last = status
      return (status, Array(inner.watchers.values))
    }
    if let status { for watcher in watchers { watcher.yield(status) } }
  }

  static func combined(_ inner: Inner, directions: [Direction]) -> Status {
    var status = Status(state: .idle)
    if inner.stopped { status.state = .stopped }
    var offline: (Date?, String)?
    var failure: (String, Date?)?
    var active = false
    for direction in directions {
      let leg = inner.legs[direction.rawValue]
      let written = leg.written + (leg.status?.report.docsWritten ?? 0)
      let refused = leg.refused + (leg.status?.report.docWriteFailures ?? 0)
      status.refused += refused
      if direction == .push {
        status.pushed = written
        status.pushPending = leg.status?.pending
      } else {
        status.pulled = written
        status.pullPending = leg.status?.pending
      }
      if let f = leg.failure {
        failure = failure ?? (f.reason, f.retryAt)
        continue
      }
      switch leg.status?.state {
      case .offline?:
        let retryAt = leg.status?.retryAt
        offline = (
          [offline?.0, retryAt].compactMap { $0 }.min(), leg.status?.lastError ?? "unreachable"
        )
      case .idle?: break
      default: active = true
      }
    }
    guard !inner.stopped else { return status }
    if let failure {
      status.state = .error(reason: failure.0, retryAt: failure.1)
    } else if let offline {
      status.state = .offline(retryAt: offline.0, reason: offline.1)
    } else if active {
      status.state = .active
    }
    return status
  }

  /// The session's state and counts now.
  public var status: Status {
    inner.withLock { Self.combined($0, directions: directions) }
  }

  /// The status now, then each change of it, until the session stops (then the stream ends
  /// after ``State/stopped``).
  public var statuses: AsyncStream<Status> {
    let (stream, continuation) = AsyncStream<Status>.makeStream(
      bufferingPolicy: .bufferingNewest(64))
    let id = inner.withLock { inner -> UInt64? in
      continuation.yield(Self.combined(inner, directions: directions))
      guard !inner.stopped else { return nil }
      let id = inner.nextWatcher
      inner.nextWatcher += 1
      inner.watchers[id] = continuation
      return id
    }
    guard let id else {
      continuation.finish()
      return stream
    }
    continuation.onTermination = { [weak self] _ in
      _ = self?.inner.withLock { $0.watchers.removeValue(forKey: id) }
    }
    return stream
  }

  /// Tries at once what waits for its backoff (after a sleep, or when the network is back):
  /// both directions start again from their checkpoints.
  public func retryNow() {
    let tasks = inner.withLock { inner -> [Task<Void, Never>] in
      guard !inner.stopped else { return [] }
      var tasks: [Task<Void, Never>] = []
      for i in inner.legs.indices {
        if let task = inner.legs[i].task { tasks.append(task) }
        inner.legs[i].written += inner.legs[i].status?.report.docsWritten ?? 0
        inner.legs[i].refused += inner.legs[i].status?.report.docWriteFailures ?? 0
        inner.legs[i].status = nil
        inner.legs[i].task = nil
        inner.legs[i].generation += 1
      }
      return tasks
    }
    for task in tasks { task.cancel() }
    start()
  }

  /// Stops both directions (their checkpoints stay: the next session resumes from them) and
  /// returns once they have.
  public func stop() async {
    let (tasks, watchers, status) = inner.withLock {
      inner -> ([Task<Void, Never>], [AsyncStream<Status>.Continuation], Status) in
      inner.stopped = true
      let tasks = inner.legs.compactMap(\.task)
      let watchers = Array(inner.watchers.values)
      inner.watchers = [:]
      return (tasks, watchers, Self.combined(inner, directions: directions))
    }
    for task in tasks { task.cancel() }
    for task in tasks { await task.value }
    for watcher in watchers {
      watcher.yield(status)
      watcher.finish()
    }
  }

  deinit {
    inner.withLock { inner in
      for leg in inner.legs { leg.task?.cancel() }
      for watcher in inner.watchers.values { watcher.finish() }
    }
  }
}

/// The session as its replications' callbacks see it: not kept alive by them (its `deinit`
/// cancels them).
final class WeakSession: @unchecked Sendable {
  weak var session: SyncSession?
  init(_ session: SyncSession) { self.session = session }
}
