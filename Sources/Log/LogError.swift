/// Why a log operation failed, and what to do about it.
///
/// Each case's ``description`` says what happened and what the caller can do. Match the cases
/// you handle:
///
/// ```swift
/// do {
///   try log.append([event])
/// } catch LogError.wrongExpectedVersion(let stream, _, let actual) {
///   // reload `stream` at `actual` and retry
/// }
/// ```
public enum LogError: Error, Sendable, Equatable, CustomStringConvertible {
  /// The map could not grow: it reached `limit` (``EventLog/Options/maxMapSize``).
  case mapFull(mapSize: Int, limit: Int)
  /// The file system has no space left for the log.
  case diskFull(path: String)
  /// A stored event does not decode or fails its checksum.
  case corruptRecord(position: LogPosition, reason: String)
  /// LMDB reports structural corruption of the data file.
  case corruptDatabase(path: String, reason: String)
  /// The data file at `path` is damaged (cut short, or pages overwritten), found by the checks
  /// made at open and by ``EventLog/checkPages(directory:)``; `reason` says what is wrong.
  case damaged(path: String, reason: String)
  /// Every reader slot of the environment is taken.
  case readersFull(maxReaders: UInt32)
  /// The log was written in a format this build does not read.
  case versionMismatch(found: UInt32, supported: UInt32)
  /// This process already has the environment open.
  case alreadyOpen(path: String)
  /// The directory holds no log (read-only open), or something that is not one.
  case notALog(path: String, reason: String)
  /// An expected stream version did not hold; nothing was written.
  case wrongExpectedVersion(stream: String, expected: ExpectedVersion, actual: UInt64)
  /// An idempotency key was reused for different events.
  case idempotencyConflict(key: String)
  /// The log was opened read-only.
  case readOnly(path: String)
  /// The log has been closed.
  case closed
  /// Another process has the log open, and the operation (a compaction) needs it alone.
  case inUse(path: String)
  /// A caller-supplied value is unusable.
  case invalidArgument(String)
  /// One write transaction grew past what LMDB can hold in memory.
  case transactionTooLarge
  /// The operating system refused access to the directory.
  case permissionDenied(path: String)
  /// The directory is on a file system mounted read-only.
  case readOnlyFileSystem(path: String)
  /// The directory cannot be made or used, for the reason given (an ancestor is a file, say).
  case unusableDirectory(path: String, reason: String)
  /// Any other storage failure.
  case storage(code: Int32, operation: String, message: String)

  /// The file or directory the error names, if any: ``description`` shows it, which a server
  /// tells its own operator but not a remote caller.
  public var path: String? {
    switch self {
    case .diskFull(let path), .corruptDatabase(let path, _), .damaged(let path, _),
      .alreadyOpen(let path), .notALog(let path, _), .readOnly(let path), .inUse(let path),
      .permissionDenied(let path), .readOnlyFileSystem(let path), .unusableDirectory(let path, _):
      path
    default: nil
    }
  }

  public var description: String {
    switch self {
    case .mapFull(let size, let limit):
      "the log's map is full at \(size) bytes and may not grow past its limit of \(limit) bytes; open it with a larger maxMapSize"
    case .diskFull(let path):
      "the disk is full: no space left on the device holding \(path)\(FileSystem.availableBytes(path).map { " (\($0) bytes free)" } ?? ""); free disk space, then retry (nothing of the failed write was stored; writes resume once there is room)"
    case .unusableDirectory(let path, let reason):
      "cannot use \(path) for a log: \(reason)"
    case .readOnlyFileSystem(let path):
      "\(path) is on a read-only file system; remount it read-write, or open the log read-only"
    case .corruptRecord(let position, let reason):
      "the event at position \(position) is corrupt (\(reason)); restore the log from a backup or a replica"
    case .corruptDatabase(let path, let reason):
      "the log at \(path) is corrupt (\(reason)); restore it from a backup or a replica"
    case .damaged(let path, let reason):
      "\(path) is damaged: \(reason); restore it from a backup"
    case .readersFull(let max):
      "all \(max) reader slots are in use; end long-running readers or open the log with more maxReaders"
    case .versionMismatch(let found, let supported):
      "the log is in format version \(found) but this build reads version \(supported); use a matching wikilog build"
    case .alreadyOpen(let path):
      "the log at \(path) is already open in this process; share the open EventLog instead of opening it twice"
    case .notALog(let path, let reason):
      "\(path) is not a wikilog log (\(reason)); check the path, or open it writable to create a new log"
    case .wrongExpectedVersion(let stream, let expected, let actual):
      "stream '\(stream)' is at version \(actual) but the append expected \(expected); nothing was written: re-read the stream and retry"
    case .idempotencyConflict(let key):
      "idempotency key '\(key)' was already used for different events; use a new key for a new append"
    case .readOnly(let path):
      "the log at \(path) is open read-only; open it writable to append"
    case .closed:
      "the log is closed"
    case .inUse(let path):
      "another process has the log at \(path) open; compaction replaces its files and needs it alone"
    case .invalidArgument(let reason):
      "invalid argument: \(reason)"
    case .transactionTooLarge:
      "the write transaction is too large for LMDB; split it into smaller batches"
    case .permissionDenied(let path):
      "permission denied on \(path); check the directory's owner and mode"
    case .storage(let code, let operation, let message):
      "storage error in \(operation): \(message) (\(code))"
    }
  }
}
