/// What the appender expects a stream's version to be: optimistic concurrency.
///
/// A stream's version is the number of events in it (0 = the stream does not exist yet); the
/// n-th event of a stream has `streamVersion` n. An append whose expectation does not hold fails
/// with ``LogError/wrongExpectedVersion(stream:expected:actual:)`` and writes nothing.
///
/// ```swift
/// let v = try log.streamVersion(of: "order-42")
/// try log.append([NewEvent(type: "Shipped", stream: "order-42", expectedVersion: .exactly(v))])
/// ```
public enum ExpectedVersion: Hashable, Sendable, CustomStringConvertible {
  /// No check.
  case any
  /// The stream must not exist yet (version 0).
  case noStream
  /// The stream must have at least one event.
  case streamExists
  /// The stream must have exactly this many events.
  case exactly(UInt64)

  /// Whether a stream at `actual` satisfies this expectation.
  public func isSatisfied(by actual: UInt64) -> Bool {
    switch self {
    case .any: true
    case .noStream: actual == 0
    case .streamExists: actual > 0
    case .exactly(let v): actual == v
    }
  }

  public var description: String {
    switch self {
    case .any: "any"
    case .noStream: "no stream"
    case .streamExists: "stream exists"
    case .exactly(let v): "version \(v)"
    }
  }
}
