import Synchronization

/// Wakes waiting subscriptions when the log changes.
///
/// Appends in this process bump the generation directly. Appends by other processes on the same
/// directory are noticed by a poller that, while anyone waits, compares LMDB's last transaction id
/// (`mdb_env_info`, read from the shared lock file) every `pollInterval`.
final class Notifier: Sendable {
  struct State {
    var generation: UInt64 = 0
    var waiters: [Int: CheckedContinuation<Void, Never>] = [:]
    var nextID = 0
    var closed = false
    var polling = false
    var seenTransactionID = -1
  }

  private let state = Mutex(State())
  private let pollInterval: Duration
  /// The log polled, held weakly. A plain reference in a box, not a closure: a closure kept in
  /// the generic `Mutex` and read back through `withLock` is re-abstracted on each access, and
  /// that grew a chain of thunks, one more per poll, so an idle poller cost more each time.
  private let source = Mutex(WeakLog())

  struct WeakLog {
    weak var log: EventLog?
  }

  init(pollInterval: Duration) {
    self.pollInterval = pollInterval
  }

  /// Connects the poller to the log, weakly: the notifier never keeps a log open.
  func attach(_ log: EventLog) {
    let current = log.lastTransactionID ?? -1
    source.withLock { $0.log = log }
    state.withLock { $0.seenTransactionID = current }
  }

  var generation: UInt64 { state.withLock { $0.generation } }

  /// Whether the poller runs (for the tests: it stops once no one waits).
  var isPolling: Bool { state.withLock { $0.polling } }

  /// Wakes every waiter.
  func bump() {
    let waiters = state.withLock { s in
      s.generation &+= 1
      defer { s.waiters.removeAll() }
      return Array(s.waiters.values)
    }
    for waiter in waiters { waiter.resume() }
  }

  /// Ends every wait, now and later.
  func close() {
    let waiters = state.withLock { s in
      s.closed = true
      defer { s.waiters.removeAll() }
      return Array(s.waiters.values)
    }
    for waiter in waiters { waiter.resume() }
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
        let (resumeNow, startPoller) = state.withLock { s -> (Bool, Bool) in
          if s.closed || s.generation != generation || Task.isCancelled { return (true, false) }
          s.waiters[id] = continuation
          let start = !s.polling
          s.polling = true
          return (false, start)
        }
        if resumeNow { continuation.resume() }
        if startPoller { Task.detached { await self.poll() } }
      }
    } onCancel: {
      let waiter = state.withLock { $0.waiters.removeValue(forKey: id) }
      waiter?.resume()
    }
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
      guard let log = source.withLock({ $0.log }), let id = log.lastTransactionID else {
        close()
        return
      }
      let changed = state.withLock { s -> Bool in
        defer { s.seenTransactionID = id }
        return s.seenTransactionID != id
      }
      if changed { bump() }
    }
  }
}

extension EventLog {
  /// LMDB's last committed transaction id (any process), or nil once closed.
  var lastTransactionID: Int? {
    env.mapLock.withShared { isClosed ? nil : env.lastTransactionID }
  }
}
