extension EventLog {
  /// Appends events atomically on the calling thread and returns them as recorded.
  ///
  /// Durable when it returns, unless the log is ``Durability/unsynced``.
  ///
  /// ```swift
  /// let recorded = try log.append([
  ///   NewEvent(type: "wiki.created", stream: "wiki1", actor: "alice", expectedVersion: .noStream)
  /// ])
  /// ```
  /// - Throws: ``LogError/wrongExpectedVersion(stream:expected:actual:)`` (nothing written),
  ///   ``LogError/idempotencyConflict(key:)``, and storage errors.
  @discardableResult
  public func append(_ events: [NewEvent], idempotencyKey: String? = nil) throws(LogError)
    -> [RecordedEvent]
  {
    try writeLog { txn throws(LogError) in
      try txn.append(contentsOf: events, idempotencyKey: idempotencyKey).events
    }
  }

  /// Appends events atomically through the writer queue.
  ///
  /// In ``Durability/groupCommit`` mode, appends from concurrent tasks share one synced
  /// transaction; this call resumes once its events are durable.
  @discardableResult
  public func append(_ events: [NewEvent], idempotencyKey: String? = nil) async throws
    -> [RecordedEvent]
  {
    // An append checks expected versions and its idempotency key before it writes anything.
    try await write(failsOnlyBeforeWriting: true) { txn in
      try txn.append(contentsOf: events, idempotencyKey: idempotencyKey).events
    }
  }

  /// Runs `body` in a write transaction on the writer queue and resumes with its result once it
  /// is committed (and durable, in the synced modes).
  ///
  /// Once submitted, the write is carried out even if the calling task is cancelled. `body` may
  /// run more than once (see ``WriteTransaction``).
  public func write<T: Sendable>(_ body: @escaping @Sendable (WriteTransaction) throws -> T)
    async throws -> T
  {
    try await write(failsOnlyBeforeWriting: false, body)
  }

  /// ``write(_:)`` for a body that makes all its checks before its first write, so that when it
  /// throws it has (almost always) written nothing.
  ///
  /// In a group commit each write normally runs in a savepoint of its own, so that a failing
  /// one fails alone; LMDB makes savepoints costly (a nested transaction copies every page it
  /// touches). With `failsOnlyBeforeWriting` the body runs without one: when it throws before
  /// writing, it fails alone as usual; when it throws after writing, the whole group runs again
  /// with a savepoint per write, so the outcome is the same either way.
  public func write<T: Sendable>(
    failsOnlyBeforeWriting: Bool, _ body: @escaping @Sendable (WriteTransaction) throws -> T
  ) async throws -> T {
    guard !options.readOnly else { throw LogError.readOnly(path: path) }
    guard !isClosed else { throw LogError.closed }
    return try await withCheckedThrowingContinuation { continuation in
      groupWriter.submit(
        TypedPendingWrite(
          body: body, continuation: continuation, needsSavepoint: !failsOnlyBeforeWriting),
        to: self)
    }
  }
}
