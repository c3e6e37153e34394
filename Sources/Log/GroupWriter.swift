import Dispatch
import Synchronization

/// A write waiting for the writer queue.
protocol PendingWrite: AnyObject, Sendable {
  func apply(_ txn: WriteTransaction) throws
  func complete(_ error: (any Error)?)
}

final class TypedPendingWrite<T: Sendable>: PendingWrite, @unchecked Sendable {
  // `result` is touched only on the writer queue, then read once when completing.
  private let body: @Sendable (WriteTransaction) throws -> T
  private let continuation: CheckedContinuation<T, any Error>
  private var result: T?

  init(
    body: @escaping @Sendable (WriteTransaction) throws -> T,
    continuation: CheckedContinuation<T, any Error>
  ) {
    self.body = body
    self.continuation = continuation
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
  func flush() {
    queue.sync {}
  }

  private func drain(_ log: EventLog) {
    while true {
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
      log.commitGroup(batch)
    }
  }
}

extension EventLog {
  /// Commits a batch of pending writes: one transaction each in ``Durability/synced`` mode, one
  /// transaction for all of them otherwise, each in a savepoint so one failure fails only itself.
  func commitGroup(_ batch: [any PendingWrite]) {
    if durability == .synced || batch.count == 1 {
      for request in batch {
        do {
          try writeMutex.withLock { try commitWrite { txn in try request.apply(txn) } }
          request.complete(nil)
        } catch {
          request.complete(logError(error))
        }
      }
      return
    }
    var failures: [ObjectIdentifier: any Error] = [:]
    do {
      try writeMutex.withLock {
        try commitWrite { txn in
          failures.removeAll()
          for request in batch {
            do {
              try txn.savepoint { child in try request.apply(child) }
            } catch {
              if txn.sawMapFull { throw error }
              failures[ObjectIdentifier(request)] = error
            }
          }
        }
      }
    } catch {
      let failure = logError(error)
      for request in batch { request.complete(failure) }
      return
    }
    for request in batch { request.complete(failures[ObjectIdentifier(request)]) }
  }
}
