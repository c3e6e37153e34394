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
