import Foundation
import Synchronization

#if canImport(Glibc)
  import Glibc
#endif

/// Notices writes to data files, by any process, without polling: one inotify instance for the
/// process and one thread blocked reading it (Linux only; elsewhere ``shared`` is nil and the
/// log's notifier polls).
///
/// LMDB writes a commit's pages and then its meta page with `pwrite` (wikilog opens no
/// environment with `MDB_WRITEMAP`), and the kernel reports each write once it is done
/// (`IN_MODIFY`, merged while unread). So after the event of a commit's last write, the newest
/// meta page read through the map shows the commit: a watcher that compares LMDB's last
/// transaction id on each event misses none, and costs nothing while no one writes.
final class DataFileWatch: Sendable {
  /// One watcher of one file, to remove it with.
  struct Token: Sendable, Hashable {
    let descriptor: Int32
    let id: Int
  }

  /// The process's watcher; nil where inotify is not to be had.
  static let shared: DataFileWatch? = DataFileWatch()

  private struct State {
    /// Each watched file's callbacks, by the watch descriptor inotify gave it (the same one for
    /// every watch of the same file).
    var callbacks: [Int32: [Int: @Sendable () -> Void]] = [:]
    var nextID = 0
    var readerStarted = false
  }

  private let descriptor: Int32
  private let state = Mutex(State())

  private init?() {
    #if os(Linux)
      let fd = inotify_init1(Int32(IN_CLOEXEC))
      guard fd >= 0 else { return nil }
      descriptor = fd
    #else
      return nil
    #endif
  }

  /// Calls `changed` after each write to the file at `path` (on the watcher's thread: it must
  /// be quick), until ``remove(_:)``. Nil when the file cannot be watched.
  func add(_ path: String, _ changed: @escaping @Sendable () -> Void) -> Token? {
    #if os(Linux)
      return state.withLock { s -> Token? in
        let watch = unsafe inotify_add_watch(descriptor, path, UInt32(IN_MODIFY))
        guard watch >= 0 else { return nil }
        s.nextID += 1
        s.callbacks[watch, default: [:]][s.nextID] = changed
        if !s.readerStarted {
          s.readerStarted = true
          let thread = Thread { [self] in read() }
          thread.name = "wikilog-data-file-watch"
          thread.start()
        }
        return Token(descriptor: watch, id: s.nextID)
      }
    #else
      return nil
    #endif
  }

  /// Stops the calls of `token`'s watcher; the file's watch goes with its last watcher.
  func remove(_ token: Token) {
    #if os(Linux)
      state.withLock { s in
        s.callbacks[token.descriptor]?[token.id] = nil
        if s.callbacks[token.descriptor]?.isEmpty == true {
          s.callbacks[token.descriptor] = nil
          _ = inotify_rm_watch(descriptor, token.descriptor)
        }
      }
    #endif
  }

  /// The watcher's thread: blocked in `read` until the kernel reports writes, then calls the
  /// watchers of the files written.
  private func read() {
    #if os(Linux)
      var buffer = [UInt8](repeating: 0, count: 64 << 10)
      let header = 16  // struct inotify_event: wd, mask, cookie, len; then the name
      while true {
        let count = unsafe buffer.withUnsafeMutableBytes {
          unsafe Glibc.read(descriptor, $0.baseAddress, $0.count)
        }
        if count < 0 {
          if errno == EINTR { continue }
          return
        }
        var written = Set<Int32>()
        var offset = 0
        while offset + header <= count {
          func u32(_ at: Int) -> UInt32 {
            (0..<4).reduce(UInt32(0)) { $0 | UInt32(buffer[offset + at + $1]) << (8 * $1) }
          }
          let mask = u32(4)
          if mask & UInt32(IN_MODIFY) != 0 { written.insert(Int32(bitPattern: u32(0))) }
          offset += header + Int(u32(12))
        }
        let calls = state.withLock { s in
          written.flatMap { s.callbacks[$0].map { Array($0.values) } ?? [] }
        }
        for call in calls { call() }
      }
    #endif
  }
}
