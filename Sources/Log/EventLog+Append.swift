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
    try await write { txn in
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
    guard !options.readOnly else { throw LogError.readOnly(path: path) }
    guard !isClosed else { throw LogError.closed }
    return try await withCheckedThrowingContinuation { continuation in
      groupWriter.submit(TypedPendingWrite(body: body, continuation: continuation), to: self)
    }
  }
}
