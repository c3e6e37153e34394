import Dispatch
import Synchronization

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// A write waiting for the writer queue.
protocol PendingWrite: AnyObject, Sendable {
  /// False for writes that fail before they write anything (plain appends fail their expected
  /// version or idempotency checks first), which then need no nested transaction of their own.
  var needsSavepoint: Bool { get }
  func apply(_ txn: WriteTransaction) throws
  func complete(_ error: (any Error)?)
}

final class TypedPendingWrite<T: Sendable>: PendingWrite, @unchecked Sendable {
  // `result` is touched only on the writer queue, then read once when completing.
  private let body: @Sendable (WriteTransaction) throws -> T
  private let continuation: CheckedContinuation<T, any Error>
  private var result: T?
  let needsSavepoint: Bool

  init(
    body: @escaping @Sendable (WriteTransaction) throws -> T,
    continuation: CheckedContinuation<T, any Error>, needsSavepoint: Bool = true
  ) {
    self.body = body
    self.continuation = continuation
    self.needsSavepoint = needsSavepoint
  }

  func apply(_ txn: WriteTransaction) throws {
    result = try body(txn)
  }

  func complete(_ error: (any Error)?) {
    if let error {
      continuation.resume(throwing: error)
    } else if let result {
      continuation.resume(returning: result)
    } else {
      continuation.resume(
        throwing: LogError.storage(code: -1, operation: "write", message: "no result"))
    }
  }
}

/// The one writer queue behind the `async` writes: it drains everything pending and, in
/// ``EventLog/Durability/groupCommit`` and ``EventLog/Durability/unsynced`` modes, commits it in
/// one transaction — while one group's fsync runs, the next group gathers.
final class GroupWriter: Sendable {

  private let queue = DispatchQueue(label: "wikilog.log.writer", qos: .userInitiated)
  /// Marks the writer queue, so ``flush()`` knows when it is called on it.
  private let onQueue = DispatchSpecificKey<Bool>()

  init() {
    queue.setSpecific(key: onQueue, value: true)
  }
  private let pending = Mutex<(requests: [any PendingWrite], scheduled: Bool)>(([], false))

  func submit(_ request: any PendingWrite, to log: EventLog) {
    let schedule = pending.withLock { p -> Bool in
      p.requests.append(request)
      if p.scheduled { return false }
      p.scheduled = true
      return true
    }
    if schedule {
      queue.async { [weak log] in
        guard let log else { return }
        self.drain(log)
      }
    }
  }

  /// Waits until every write submitted so far has completed.
  ///
  /// On the writer queue itself it returns at once: that happens when a drain held the last
  /// reference to the log, whose `deinit` closes it after the drain has emptied the queue of
  /// requests (and no one else can submit to a log being deinitialised). A `sync` there would
  /// deadlock, which libdispatch traps.
  func flush() {
    if DispatchQueue.getSpecific(key: onQueue) == true { return }
    queue.sync {}
  }

  private func drain(_ log: EventLog) {
    var lastGroup = 0
    while true {
      if lastGroup > 1 && log.durability == .groupCommit {
        // The callers the last commit resumed are submitting their next writes: give them a
        // moment (at most ``EventLog/Options/groupCommitWindow``) to join this group rather
        // than the next one.
        let window = log.options.groupCommitWindow.components
        let deadline =
          DispatchTime.now().uptimeNanoseconds + UInt64(window.seconds) * 1_000_000_000
          + UInt64(window.attoseconds / 1_000_000_000)
        while pending.withLock({ $0.requests.count }) < lastGroup
          && DispatchTime.now().uptimeNanoseconds < deadline
        {
          usleep(10)
        }
      }
      let batch = pending.withLock { p -> [any PendingWrite] in
        if p.requests.isEmpty {
          p.scheduled = false
          return []
        }
        let n = min(p.requests.count, max(1, log.options.maxGroupSize))
        defer { p.requests.removeFirst(n) }
        return Array(p.requests.prefix(n))
      }
      if batch.isEmpty { return }
      lastGroup = batch.count
      log.commitGroup(batch)
    }
  }
}

/// Thrown inside a group commit to run the group again with a savepoint per write.
struct GroupNeedsSavepoints: Error {}

extension EventLog {
  /// A write's failure as its caller sees it: LMDB and record failures as ``LogError``, and
  /// whatever else the caller's body threw unchanged, as the synchronous ``write(_:)`` does.
  func writeFailure(_ error: any Error) -> any Error {
    switch error {
    case is LMDBError, is RecordFailure: logError(error)
    default: error
    }
  }

  /// Commits a batch of pending writes: one transaction each in ``Durability/synced`` mode, one
  /// transaction for all of them otherwise, so that one failure fails only itself: each write
  /// in a savepoint, except those that fail before writing (``PendingWrite/needsSavepoint``);
  /// if one of these throws after writing after all, the group runs again with savepoints.
  func commitGroup(_ batch: [any PendingWrite]) {
    state.withLock {
      $0.statistics.groups += 1
      $0.statistics.groupedWrites += batch.count
    }
    if durability == .synced || batch.count == 1 {
      for request in batch {
        do {
          try writeMutex.withLock { try commitWrite { txn in try request.apply(txn) } }
          request.complete(nil)
        } catch {
          request.complete(writeFailure(error))
        }
      }
      return
    }
    var failures: [ObjectIdentifier: any Error] = [:]
    var allSavepoints = false
    while true {
      do {
        try writeMutex.withLock {
          try commitWrite { txn in
            failures.removeAll()
            for request in batch {
              let savepoint = request.needsSavepoint || allSavepoints
              let before = txn.mutationCount
              do {
                if savepoint {
                  try txn.savepoint { child in try request.apply(child) }
                } else {
                  try request.apply(txn)
                }
              } catch {
                if txn.sawMapFull { throw error }
                // A write without a savepoint fails alone only if it wrote nothing; otherwise
                // the group runs again with a savepoint per write.
                if !savepoint && txn.mutationCount != before { throw GroupNeedsSavepoints() }
                failures[ObjectIdentifier(request)] = error
              }
            }
          }
        }
      } catch is GroupNeedsSavepoints where !allSavepoints {
        allSavepoints = true
        continue
      } catch {
        let failure = writeFailure(error)
        for request in batch { request.complete(failure) }
        return
      }
      break
    }
    for request in batch { request.complete(failures[ObjectIdentifier(request)]) }
  }
}
