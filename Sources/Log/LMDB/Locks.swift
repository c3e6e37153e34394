#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// A `pthread_rwlock_t` on the heap, for the map-size lock.
@safe final class ReadWriteLock: @unchecked Sendable {
  private let lock: UnsafeMutablePointer<pthread_rwlock_t>

  init() {
    unsafe lock = .allocate(capacity: 1)
    unsafe lock.initialize(to: pthread_rwlock_t())
    unsafe _ = pthread_rwlock_init(lock, nil)
  }

  deinit {
    unsafe _ = pthread_rwlock_destroy(lock)
    unsafe lock.deallocate()
  }

  func withShared<T>(_ body: () throws -> T) rethrows -> T {
    unsafe _ = pthread_rwlock_rdlock(lock)
    defer { unsafe _ = pthread_rwlock_unlock(lock) }
    return try body()
  }

  func withExclusive<T>(_ body: () throws -> T) rethrows -> T {
    unsafe _ = pthread_rwlock_wrlock(lock)
    defer { unsafe _ = pthread_rwlock_unlock(lock) }
    return try body()
  }
}

/// A `pthread_mutex_t` on the heap: serialises this process's write transactions, which
/// lmdb.h requires to begin and commit on one thread ("A transaction and its cursors must only be
/// used by a single thread").
@safe final class PThreadMutex: @unchecked Sendable {
  private let mutex: UnsafeMutablePointer<pthread_mutex_t>

  init() {
    unsafe mutex = .allocate(capacity: 1)
    unsafe mutex.initialize(to: pthread_mutex_t())
    unsafe _ = pthread_mutex_init(mutex, nil)
  }

  deinit {
    unsafe _ = pthread_mutex_destroy(mutex)
    unsafe mutex.deallocate()
  }

  func withLock<T>(_ body: () throws -> T) rethrows -> T {
    unsafe _ = pthread_mutex_lock(mutex)
    defer { unsafe _ = pthread_mutex_unlock(mutex) }
    return try body()
  }
}

/// A shared `flock` on `open.lock` in a log's directory, held by every process that has the log
/// open, so that a compaction (which replaces the files) can tell that it is alone: it upgrades
/// its own lock to exclusive without waiting, which fails while any other process holds one,
/// and a process opening the log meanwhile waits until the new files are in place.
///
/// `flock` locks belong to the open file description, so two locks of one process on two
/// descriptors conflict like two processes' locks; ``OpenPaths`` keeps this process to one.
@safe final class OpenLock: @unchecked Sendable {
  private let fd: Int32

  /// Opens (creating when `create`) `open.lock` in `directory` and takes the shared lock,
  /// waiting for a compaction in another process to finish. Nil when the file cannot be opened
  /// (a read-only directory without one): then there is nothing to coordinate with.
  init?(directory: String, create: Bool) {
    let path = directory + "/open.lock"
    let flags = create ? (O_RDWR | O_CREAT | O_CLOEXEC) : (O_RDONLY | O_CLOEXEC)
    let fd = unsafe open(path, flags, 0o644)
    guard fd >= 0 else { return nil }
    self.fd = fd
    while flock(fd, LOCK_SH) != 0 && errno == EINTR {}
  }

  /// Tries to make the lock exclusive at once; false while another process holds it.
  func tryExclusive() -> Bool {
    flock(fd, LOCK_EX | LOCK_NB) == 0
  }

  /// Goes back to the shared lock.
  func share() {
    while flock(fd, LOCK_SH) != 0 && errno == EINTR {}
  }

  /// Releases the lock and the descriptor.
  func release() {
    _ = Glibc.close(fd)
  }
}

/// File system calls that take paths, for ``EventLog/compact()``.
enum FileOperations {
  /// Flushes a file or a directory to disk.
  static func fsync(_ path: String) throws(LogError) {
    let fd = unsafe open(path, O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else {
      throw .storage(code: errno, operation: "open", message: "cannot open \(path) to sync it")
    }
    defer { _ = Glibc.close(fd) }
    guard Glibc.fsync(fd) == 0 else {
      throw .storage(code: errno, operation: "fsync", message: "cannot sync \(path)")
    }
  }

  /// Creates `path` with `bytes` and `mode` (`O_CREAT | O_EXCL`) and syncs it; false when the
  /// file exists already (another process made it first).
  static func createExclusive(_ path: String, _ bytes: [UInt8], mode: mode_t) throws(LogError)
    -> Bool
  {
    let fd = unsafe open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode)
    if fd < 0 {
      if errno == EEXIST { return false }
      throw .permissionDenied(path: path)
    }
    let written = unsafe bytes.withUnsafeBytes { unsafe Glibc.write(fd, $0.baseAddress, $0.count) }
    let synced = Glibc.fsync(fd)
    _ = Glibc.close(fd)
    guard written == bytes.count, synced == 0 else {
      _ = unsafe unlink(path)
      throw .diskFull(path: path)
    }
    return true
  }

  /// Renames `from` to `to` atomically, replacing `to`.
  static func rename(_ from: String, to: String) throws(LogError) {
    guard unsafe Glibc.rename(from, to) == 0 else {
      throw .storage(code: errno, operation: "rename", message: "cannot rename \(from) to \(to)")
    }
  }
}
