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
    var follower: LogFollower<RecordedEvent>

    init(log: EventLog, position: LogPosition, batchSize: Int) {
      follower = LogFollower(
        log: log, position: position, batchSize: batchSize, positionOf: { $0.position }
      ) { log, after, limit throws(LogError) in try log.read(after: after, limit: limit) }
    }

    public mutating func next() async throws -> Item? {
      switch try await follower.next() {
      case nil: return nil
      case .item(let event): return .event(event)
      case .caughtUp(let position): return .caughtUp(position)
      }
    }
  }
}

/// Reads a log in batches from a position, then waits for appends: what ``LogSubscription``
/// and ``EventHeadings`` share, over what each reads of an event (`read`).
struct LogFollower<Element: Sendable>: Sendable {
  enum Step {
    case item(Element)
    case caughtUp(LogPosition)
  }

  let log: EventLog
  /// The last position delivered.
  var position: LogPosition
  let batchSize: Int
  let read: @Sendable (EventLog, LogPosition, Int) throws(LogError) -> [Element]
  let positionOf: @Sendable (Element) -> LogPosition
  var buffer: [Element] = []
  var index = 0
  var caughtUpSent = false

  init(
    log: EventLog, position: LogPosition, batchSize: Int,
    positionOf: @escaping @Sendable (Element) -> LogPosition,
    read: @escaping @Sendable (EventLog, LogPosition, Int) throws(LogError) -> [Element]
  ) {
    self.log = log
    self.position = position
    self.batchSize = batchSize
    self.read = read
    self.positionOf = positionOf
  }

  mutating func next() async throws -> Step? {
    while true {
      if index < buffer.count {
        let element = buffer[index]
        index += 1
        position = positionOf(element)
        return .item(element)
      }
      if Task.isCancelled || log.isClosed { return nil }
      let generation = log.notifier.generation
      let (log, position, batchSize, read) = (self.log, self.position, self.batchSize, self.read)
      let result = Result { () throws(LogError) in try read(log, position, batchSize) }
      switch result {
      case .success(let elements): buffer = elements
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
    var follower: LogFollower<EventHeading>

    init(log: EventLog, position: LogPosition, batchSize: Int) {
      follower = LogFollower(
        log: log, position: position, batchSize: batchSize, positionOf: { $0.position }
      ) { log, after, limit throws(LogError) in try log.readHeadings(after: after, limit: limit) }
    }

    public mutating func next() async throws -> Item? {
      switch try await follower.next() {
      case nil: return nil
      case .item(let heading): return .heading(heading)
      case .caughtUp(let position): return .caughtUp(position)
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
