/// A position in the log: the global sequence number of an event.
///
/// Positions are dense: the first event is at 1, and every appended event takes the next number,
/// with no gaps after a failed append or a crash. ``LogPosition/start`` (0) is the position before
/// the first event, so "everything after `.start`" is the whole log.
///
/// ```swift
/// let events = try log.read(after: .start, limit: 10)   // positions 1...10
/// ```
public struct LogPosition: RawRepresentable, Hashable, Comparable, Sendable,
  CustomStringConvertible,
  ExpressibleByIntegerLiteral
{
  public var rawValue: UInt64

  public init(rawValue: UInt64) { self.rawValue = rawValue }
  public init(_ value: UInt64) { self.rawValue = value }
  public init(integerLiteral value: UInt64) { self.rawValue = value }

  /// The position before the first event.
  public static let start = LogPosition(0)

  /// The position after this one; the last possible position is its own next (no log reaches
  /// it, and a position read from a request such as `since` may be any 64-bit number).
  public var next: LogPosition { LogPosition(rawValue == .max ? .max : rawValue + 1) }

  public static func < (lhs: LogPosition, rhs: LogPosition) -> Bool { lhs.rawValue < rhs.rawValue }

  public var description: String { String(rawValue) }
}
