import CLMDB

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// One line written to standard error when the process dies of a fatal signal or an LMDB
/// assertion, followed by `_exit(1)`.
///
/// liblmdb 0.9 follows a damaged page's garbage offsets (SIGSEGV, SIGBUS) or stops at an
/// assertion (SIGABRT). The checks made at open read every page in use before LMDB does and
/// refuse a damaged file, but a page damaged after a process opened the file can still crash
/// it when LMDB reads it. A command-line tool working on one database
/// installs this so that such a crash ends with the one line it prints for any other error, and
/// exit status 1, instead of a core dump. The handler only calls `write(2)` and `_exit(2)`, both
/// async-signal-safe; the lines are formatted up front.
public enum FatalSignal {
  /// What liblmdb dies of on a damaged page. (Not SIGILL or SIGTRAP: those are Swift's own
  /// traps, which print their message and are no sign of a damaged file.)
  static let signals: [(Int32, String)] = [
    (SIGSEGV, "SIGSEGV"), (SIGBUS, "SIGBUS"), (SIGABRT, "SIGABRT"),
  ]

  /// Installs the handlers; `line` is given the signal's name (`SIGSEGV`...) and ends the
  /// process's output. Later calls replace the lines.
  public static func install(_ line: @escaping (String) -> String) {
    for (number, name) in signals where number >= 0 && number < 64 {
      let bytes = Array((line(name) + "\n").utf8)
      let buffer = UnsafeMutablePointer<UInt8>.allocate(capacity: bytes.count)
      unsafe buffer.initialize(from: bytes, count: bytes.count)
      // The previous buffer (if any) is left allocated: a handler may be reading it.
      unsafe fatalLines[Int(number)] = (buffer, bytes.count)
      _ = signal(number, fatalSignalHandler)
    }
  }
}

/// The line for each signal number, read by the handler.
nonisolated(unsafe) private var fatalLines =
  unsafe [(UnsafeMutablePointer<UInt8>, Int)?](repeating: nil, count: 64)

private func fatalSignalHandler(_ number: Int32) {
  if number >= 0, number < 64, let (buffer, count) = unsafe fatalLines[Int(number)] {
    _ = unsafe write(2, buffer, count)
    _exit(1)
  }
  _ = signal(number, SIG_DFL)
  _ = raise(number)
}

/// LMDB's assertion callback (`mdb_env_set_assert`): with a line installed for SIGABRT, it is
/// written and the process exits 1; otherwise LMDB prints its message and aborts as usual.
func lmdbAssertionFailed(_ env: OpaquePointer?, _ message: UnsafePointer<CChar>?) {
  if let (buffer, count) = unsafe fatalLines[Int(SIGABRT)] {
    _ = unsafe write(2, buffer, count)
    _exit(1)
  }
}
