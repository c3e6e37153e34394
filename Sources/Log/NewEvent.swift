/// An event to append: what goes into the log.
///
/// The log assigns the position, the stream version and the timestamp when the event is appended
/// and gives them back as a ``RecordedEvent``. The log stores the payload as bytes and never looks
/// inside it; encoding (JSON, Codable, ...) belongs to the layers above.
///
/// ```swift
/// let edit = NewEvent(
///   type: "doc.updated", stream: "wiki1:Home", actor: "alice",
///   payload: Array(#"{"markdown":"# Home"}"#.utf8))
/// ```
public struct NewEvent: Sendable, Hashable {
  /// What happened, e.g. `"doc.updated"`.
  public var type: String
  /// The stream the event belongs to (a document id, say). Empty means no stream: the event is
  /// only in the global order.
  public var stream: String
  /// Who caused the event (a user id, a replication peer).
  public var actor: String
  /// The event's data, opaque to the log.
  public var payload: [UInt8]
  /// Checked against the stream's version before anything of the append is written.
  public var expectedVersion: ExpectedVersion

  public init(
    type: String, stream: String = "", actor: String = "", payload: [UInt8] = [],
    expectedVersion: ExpectedVersion = .any
  ) {
    self.type = type
    self.stream = stream
    self.actor = actor
    self.payload = payload
    self.expectedVersion = expectedVersion
  }
}
