/// A catch-up subscription: every event after a position, then live appends as they commit.
///
/// Yields ``Item/event(_:)`` for each event in order and ``Item/caughtUp(_:)`` once, when it
/// first reaches the end of the log; after that it waits for new events, including those appended
/// by other processes on the same directory. It ends (returns nil) when the task is cancelled or
/// the log closes.
///
/// ```swift
/// for try await item in log.subscribe(after: checkpoint) {
///   switch item {
///   case .event(let e): try apply(e)
///   case .caughtUp(let p): print("live from", p)
///   }
/// }
/// ```
public struct LogSubscription: AsyncSequence, Sendable {
  public enum Item: Sendable, Hashable {
    case event(RecordedEvent)
    /// Every event up to this position has been delivered; what follows is live.
    case caughtUp(LogPosition)
  }
  public typealias Element = Item

  let log: EventLog
  let start: LogPosition
  let batchSize: Int

  public func makeAsyncIterator() -> Iterator {
    Iterator(log: log, position: start, batchSize: batchSize)
  }

  public struct Iterator: AsyncIteratorProtocol {
    let log: EventLog
    /// The last position delivered.
    var position: LogPosition
    let batchSize: Int
    var buffer: [RecordedEvent] = []
    var index = 0
    var caughtUpSent = false

    public mutating func next() async throws -> Item? {
      while true {
        if index < buffer.count {
          let event = buffer[index]
          index += 1
          position = event.position
          return .event(event)
        }
        if Task.isCancelled || log.isClosed { return nil }
        let generation = log.notifier.generation
        let result = Result { () throws(LogError) in try log.read(after: position, limit: batchSize)
        }
        switch result {
        case .success(let events): buffer = events
        case .failure(.closed): return nil
        case .failure(let error): throw error
        }
        index = 0
        if !buffer.isEmpty { continue }
        if !caughtUpSent {
          caughtUpSent = true
          return .caughtUp(position)
        }
        await log.notifier.wait(since: generation)
      }
    }
  }
}

extension EventLog {
  /// Subscribes to every event after `position` (``LogPosition/start`` for the whole log), then
  /// to live appends.
  public func subscribe(after position: LogPosition = .start, batchSize: Int = 1024)
    -> LogSubscription
  {
    LogSubscription(log: self, start: position, batchSize: max(1, batchSize))
  }
}

/// The headings of every event after a position, then of live appends as they commit: what
/// ``LogSubscription`` yields, without the payloads (``EventHeading``), and
/// ``LogSubscription/Item/caughtUp(_:)`` once at the end of the log. It ends (returns nil) when
/// the task is cancelled or the log closes.
public struct EventHeadings: AsyncSequence, Sendable {
  public enum Item: Sendable, Hashable {
    case heading(EventHeading)
    /// Every event up to this position has been delivered; what follows is live.
    case caughtUp(LogPosition)
  }
  public typealias Element = Item

  let log: EventLog
  let start: LogPosition
  let batchSize: Int

  public func makeAsyncIterator() -> Iterator {
    Iterator(log: log, position: start, batchSize: batchSize)
  }

  public struct Iterator: AsyncIteratorProtocol {
    let log: EventLog
    var position: LogPosition
    let batchSize: Int
    var buffer: [EventHeading] = []
    var index = 0
    var caughtUpSent = false

    public mutating func next() async throws -> Item? {
      while true {
        if index < buffer.count {
          let heading = buffer[index]
          index += 1
          position = heading.position
          return .heading(heading)
        }
        if Task.isCancelled || log.isClosed { return nil }
        let generation = log.notifier.generation
        let result = Result { () throws(LogError) in
          try log.readHeadings(after: position, limit: batchSize)
        }
        switch result {
        case .success(let headings): buffer = headings
        case .failure(.closed): return nil
        case .failure(let error): throw error
        }
        index = 0
        if !buffer.isEmpty { continue }
        if !caughtUpSent {
          caughtUpSent = true
          return .caughtUp(position)
        }
        await log.notifier.wait(since: generation)
      }
    }
  }
}

extension EventLog {
  /// Follows the headings of the events after `position`, then of live appends.
  public func headings(after position: LogPosition = .start, batchSize: Int = 1024)
    -> EventHeadings
  {
    EventHeadings(log: self, start: position, batchSize: max(1, batchSize))
  }
}
