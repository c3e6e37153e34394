import Synchronization

/// Values derived from what a log holds, each kept until the log commits again: a read that
/// every request repeats (a user's document, a database's security object) costs one look at
/// the log's last committed position while nothing has changed, and is made again after any
/// commit, by this process or another. At most `capacity` entries; when it is full the cache
/// starts over.
///
/// ```swift
/// let users = CommittedCache<String, User?>()
/// let user = try users.value(for: name, in: store.log) { try readUser(name) }
/// ```
public final class CommittedCache<Key: Hashable & Sendable, Value: Sendable>: Sendable {
  private let entries = Mutex<[Key: (position: LogPosition, value: Value)]>([:])
  public let capacity: Int

  public init(capacity: Int = 10_000) {
    self.capacity = capacity
  }

  /// The value for `key`: the one made since `log`'s last commit, else `make()`'s, kept.
  public func value(for key: Key, in log: EventLog, make: () throws -> Value) throws -> Value {
    let position = try log.committedPosition
    if let hit = entries.withLock({ $0[key] }), hit.position == position { return hit.value }
    let value = try make()
    entries.withLock { entries in
      if entries.count >= capacity { entries.removeAll() }
      entries[key] = (position, value)
    }
    return value
  }
}
