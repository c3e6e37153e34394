/// A caller-owned named LMDB database inside the log's environment.
///
/// Get one with ``EventLog/database(named:)``; write it with a ``WriteTransaction`` (in the same
/// transaction as an append, so a projection never drifts from the log) and read it with a
/// ``ReadTransaction``, which sees the log and every database at one consistent snapshot.
/// Keys sort as bytes (`memcmp`), at most 511 bytes long.
public struct Database: Hashable, Sendable, CustomStringConvertible {
  public let name: String
  let handle: UInt32

  public var description: String { name }
}
