#if canImport(FoundationEssentials)
  public import FoundationEssentials
#else
  public import Foundation
#endif

extension EventLog {
  /// The event at `position`, or nil.
  public func event(at position: LogPosition) throws(LogError) -> RecordedEvent? {
    try readLog { txn throws(LogError) in try txn.event(at: position) }
  }

  /// Up to `limit` events starting at `position` (inclusive), in `direction`.
  ///
  /// ```swift
  /// let newest = try log.read(from: log.committedPosition, direction: .backward, limit: 10)
  /// ```
  public func read(
    from position: LogPosition, direction: ReadDirection = .forward, limit: Int = .max
  )
    throws(LogError) -> [RecordedEvent]
  {
    guard limit > 0 else { return [] }
    return try readLog { txn throws(LogError) in
      try txn.perform {
        try txn.raw.readEvents(
          dbs.events, from: position.rawValue, forward: direction == .forward, limit: limit)
      }
    }
  }

  /// Up to `limit` events after `position` (exclusive), forwards: what a subscriber that has seen
  /// `position` reads next.
  public func read(after position: LogPosition, limit: Int = .max) throws(LogError)
    -> [RecordedEvent]
  {
    try read(from: position.next, limit: limit)
  }

  /// The position, type and stream of up to `limit` events after `position`, read from the
  /// records' heads: no payload is copied and no checksum checked (``EventHeading``).
  public func readHeadings(after position: LogPosition, limit: Int = .max) throws(LogError)
    -> [EventHeading]
  {
    guard limit > 0 else { return [] }
    return try readLog { txn throws(LogError) in
      try txn.perform {
        try txn.raw.readEventHeadings(dbs.events, from: position.next.rawValue, limit: limit)
      }
    }
  }

  /// Up to `limit` events of `stream`, from `version` (1-based, inclusive), in `direction`.
  public func read(
    stream: String, fromVersion version: UInt64 = 1, direction: ReadDirection = .forward,
    limit: Int = .max
  ) throws(LogError) -> [RecordedEvent] {
    guard limit > 0 else { return [] }
    return try readLog { txn throws(LogError) in
      var events: [RecordedEvent] = []
      do {
        try txn.forEachEvent(inStream: stream, fromVersion: version, direction: direction) {
          event in
          events.append(event)
          return events.count < limit
        }
      } catch {
        throw logError(error)
      }
      return events
    }
  }

  /// The number of events in `stream`.
  public func streamVersion(of stream: String) throws(LogError) -> UInt64 {
    try readLog { txn throws(LogError) in try txn.streamVersion(of: stream) }
  }

  /// The first position committed at or after `date`, or nil if every event is older.
  public func firstPosition(atOrAfter date: Date) throws(LogError) -> LogPosition? {
    let micros = Int64((date.timeIntervalSince1970 * 1_000_000).rounded(.up))
    return try readLog { txn throws(LogError) in
      try txn.firstPosition(atOrAfterMicroseconds: micros)
    }
  }
}
