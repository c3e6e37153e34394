import Synchronization

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// Wakes waiting subscriptions when the log changes.
///
/// Appends in this process bump the generation directly. Appends by other processes on the same
/// directory are noticed, while anyone waits, by comparing LMDB's last transaction id
/// (`mdb_env_info`, read from the newest meta page): on Linux when the kernel reports a write to
/// the data file (``DataFileWatch``, inotify), so that nothing runs while nothing is written;
/// elsewhere, or when the file cannot be watched, every `pollInterval`.
final class Notifier: Sendable {
  struct State {
    var generation: UInt64 = 0
    var waiters: [Int: CheckedContinuation<Void, Never>] = [:]
    var nextID = 0
    var closed = false
    var polling = false
    /// The data file's watch, while one is kept (it is dropped at the first write that finds
    /// no one waiting).
    var watch: DataFileWatch.Token?
    var seenTransactionID = -1
  }

  private let state = Mutex(State())
  private let pollInterval: Duration
  /// The log compared, held weakly. A plain reference in a box, not a closure: a closure kept in
  /// the generic `Mutex` and read back through `withLock` is re-abstracted on each access, and
  /// that grew a chain of thunks, one more per poll, so an idle poller cost more each time.
  private let source = Mutex(WeakLog())

  struct WeakLog {
    weak var log: EventLog?
    var dataFile: String?
  }

  init(pollInterval: Duration) {
    self.pollInterval = pollInterval
  }

  /// Connects the notifier to the log, weakly: the notifier never keeps a log open.
  func attach(_ log: EventLog) {
    let current = log.lastTransactionID ?? -1
    source.withLock {
      $0.log = log
      $0.dataFile = log.path + "/data.mdb"
    }
    state.withLock { $0.seenTransactionID = current }
  }

  var generation: UInt64 { state.withLock { $0.generation } }

  /// Whether something watches for other processes' writes for the waiters: the poller, or the
  /// data file's watch (for the tests: neither stays once no one waits).
  var isPolling: Bool { state.withLock { $0.polling || ($0.watch != nil && !$0.waiters.isEmpty) } }

  /// Whether the poller runs.
  var isPollerRunning: Bool { state.withLock { $0.polling } }

  /// Whether the data file is watched.
  var isWatching: Bool { state.withLock { $0.watch != nil } }

  /// Wakes every waiter. `transactionID`, the commit's own, is taken as seen: the waiters read
  /// the log anew, so no other process's commit before it needs a wake of its own.
  func bump(transactionID: Int? = nil) {
    let waiters = state.withLock { s in
      s.generation &+= 1
      if let transactionID { s.seenTransactionID = max(s.seenTransactionID, transactionID) }
      defer { s.waiters.removeAll() }
      return Array(s.waiters.values)
    }
    for waiter in waiters { waiter.resume() }
  }

  /// Ends every wait, now and later.
  func close() {
    let (waiters, watch) = state.withLock { s in
      s.closed = true
      defer {
        s.waiters.removeAll()
        s.watch = nil
      }
      return (Array(s.waiters.values), s.watch)
    }
    for waiter in waiters { waiter.resume() }
    if let watch { DataFileWatch.shared?.remove(watch) }
  }

  /// Returns once the generation differs from `generation`, the notifier closes, or the task is
  /// cancelled.
  func wait(since generation: UInt64) async {
    let id = state.withLock { s in
      s.nextID += 1
      return s.nextID
    }
    await withTaskCancellationHandler {
      await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
        let (resumeNow, follow) = state.withLock { s -> (Bool, Bool) in
          if s.closed || s.generation != generation || Task.isCancelled { return (true, false) }
          s.waiters[id] = continuation
          return (false, s.watch == nil && !s.polling)
        }
        if resumeNow { continuation.resume() }
        if follow { startFollowing() }
      }
    } onCancel: {
      let waiter = state.withLock { $0.waiters.removeValue(forKey: id) }
      waiter?.resume()
    }
  }

  /// Starts noticing other processes' writes: the data file's watch, else the poller. Then
  /// compares once, for a write made before the watch was in place.
  private func startFollowing() {
    let file = source.withLock { $0.dataFile }
    if let file, let watcher = DataFileWatch.shared,
      let token = watcher.add(file, { [weak self] in self?.dataFileWritten() })
    {
      let kept = state.withLock { s -> Bool in
        guard s.watch == nil, !s.closed else { return false }
        s.watch = token
        return true
      }
      if !kept { watcher.remove(token) }
      compare()
      return
    }
    let start = state.withLock { s -> Bool in
      guard !s.polling else { return false }
      s.polling = true
      return true
    }
    if start { Task.detached { await self.poll() } }
  }

  /// The data file was written (by any process): compares, or drops the watch when no one
  /// waits any more.
  private func dataFileWritten() {
    let idle = state.withLock { s -> DataFileWatch.Token? in
      guard s.waiters.isEmpty || s.closed, let watch = s.watch else { return nil }
      s.watch = nil
      return watch
    }
    if let idle {
      DataFileWatch.shared?.remove(idle)
      return
    }
    compare()
  }

  /// Bumps when LMDB's last transaction id moved since last seen; closes once the log has.
  ///
  /// The id is the newest meta page's, which another process's commit writes (and the kernel
  /// reports) a moment before it publishes the transaction to new readers (LMDB sets the lock
  /// file's `mti_txnid` right after the meta page's `pwrite`). A waiter woken in that moment
  /// would read the snapshot before, find nothing, and wait for a write that already came; so
  /// the bump waits, briefly, until a new read transaction sees the commit.
  private func compare() {
    guard let log = source.withLock({ $0.log }), let id = log.lastTransactionID else {
      close()
      return
    }
    let changed = state.withLock { id > $0.seenTransactionID }
    guard changed else { return }
    var waited = 0
    while let readable = log.readableTransactionID, readable < id, waited < 200 {
      usleep(50)
      waited += 1
    }
    state.withLock { $0.seenTransactionID = max($0.seenTransactionID, id) }
    bump()
  }

  private func poll() async {
    while true {
      try? await Task.sleep(for: pollInterval)
      let keepGoing = state.withLock { s -> Bool in
        if s.closed || s.waiters.isEmpty {
          s.polling = false
          return false
        }
        return true
      }
      guard keepGoing else { return }
      compare()
    }
  }
}

extension EventLog {
  /// LMDB's last committed transaction id (any process), or nil once closed.
  var lastTransactionID: Int? {
    env.mapLock.withShared { isClosed ? nil : env.lastTransactionID }
  }

  /// The transaction a read transaction begun now would see, or nil once closed.
  var readableTransactionID: Int? {
    try? readLog { txn in txn.raw.id }
  }
}
