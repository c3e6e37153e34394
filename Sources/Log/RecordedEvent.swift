#if canImport(FoundationEssentials)
  public import FoundationEssentials
#else
  public import Foundation
#endif

/// An event as stored: what comes out of the log.
///
/// Immutable once written, except on purpose: an erasure replaces its payload and sets
/// ``erasedBy`` (``WriteTransaction/erase(_:payload:by:)``). `position` is the dense global sequence number; `streamVersion` is
/// the event's 1-based place in its stream (0 for events with no stream); `timestamp` is the
/// commit time, made non-decreasing along the log so that time lookups are binary searches.
public struct RecordedEvent: Sendable, Hashable {
  public let position: LogPosition
  public let streamVersion: UInt64
  /// Microseconds since 1970-01-01 UTC.
  public let timestampMicroseconds: Int64
  public let type: String
  public let stream: String
  public let actor: String
  public let payload: [UInt8]
  /// The event that erased this one's original payload (``WriteTransaction/erase(_:payload:by:)``);
  /// nil for an event as it was appended.
  public let erasedBy: LogPosition?

  public init(
    position: LogPosition, streamVersion: UInt64, timestampMicroseconds: Int64, type: String,
    stream: String, actor: String, payload: [UInt8], erasedBy: LogPosition? = nil
  ) {
    self.erasedBy = erasedBy
    self.position = position
    self.streamVersion = streamVersion
    self.timestampMicroseconds = timestampMicroseconds
    self.type = type
    self.stream = stream
    self.actor = actor
    self.payload = payload
  }

  /// The commit time as a `Date`.
  public var timestamp: Date {
    Date(timeIntervalSince1970: Double(timestampMicroseconds) / 1_000_000)
  }
}

/// What an event is about, without its payload: its position, type and stream.
///
/// Read from a record's head (``EventLog/readHeadings(after:limit:)``,
/// ``EventLog/headings(after:)``) without checking its checksum: a hint for a follower deciding
/// whom to wake, never the event itself (read that with ``EventLog/read(after:limit:)``, which
/// checks every record).
public struct EventHeading: Sendable, Hashable {
  public let position: LogPosition
  public let type: String
  public let stream: String

  public init(position: LogPosition, type: String, stream: String) {
    self.position = position
    self.type = type
    self.stream = stream
  }
}
