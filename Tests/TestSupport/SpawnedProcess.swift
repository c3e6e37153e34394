public import Foundation

#if canImport(Glibc)
  import Glibc
#endif

/// A child process started with `posix_spawn`, with the part of Foundation's `Process` API the
/// tests use. Foundation's `Process.run()` on Linux (Swift 6.3) crashes now and then while it
/// looks for the highest open descriptor: it copies a whole 256-byte `d_name` out of each
/// `/proc/self/fd` entry, reading past the end of glibc's directory buffer when an entry sits
/// at its end (swiftlang/swift-corelibs-foundation#5472). A test process keeps many descriptors
/// open (databases, sockets), and the suite crashed in it. This closes the child's other
/// descriptors with `posix_spawn_file_actions_addclosefrom_np` instead, and reads no directory.
///
/// Standard streams: a `Pipe` (the child gets the matching end; the parent's copy of that end
/// is closed once the child runs, so that the other end sees its end of file), a `FileHandle`,
/// or nil for this process's own.
public final class SpawnedProcess: @unchecked Sendable {
  public var executableURL: URL?
  public var arguments: [String]?
  /// The child's environment; nil for this process's.
  public var environment: [String: String]?
  public var currentDirectoryURL: URL?
  public var standardInput: Any?
  public var standardOutput: Any?
  public var standardError: Any?

  private let lock = NSLock()
  private var pid: pid_t = 0
  /// The raw `waitpid` status once the child has ended.
  private var status: Int32?

  public init() {}

  typealias CloseFrom =
    @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32)
    -> Int32
  typealias ChangeDirectory =
    @convention(c) (
      UnsafeMutablePointer<posix_spawn_file_actions_t>, UnsafePointer<CChar>
    ) -> Int32
  static let closeFrom: CloseFrom? = dlsym(nil, "posix_spawn_file_actions_addclosefrom_np").map {
    unsafeBitCast($0, to: CloseFrom.self)
  }
  static let changeDirectory: ChangeDirectory? = dlsym(nil, "posix_spawn_file_actions_addchdir_np")
    .map { unsafeBitCast($0, to: ChangeDirectory.self) }

  public var processIdentifier: Int32 { lock.withLock { pid } }

  /// Starts the child.
  public func run() throws {
    guard let path = executableURL?.path else {
      throw CocoaError(.fileNoSuchFile)
    }
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    func descriptor(_ stream: Any?, childReads: Bool) -> Int32? {
      if let pipe = stream as? Pipe {
        return childReads
          ? pipe.fileHandleForReading.fileDescriptor : pipe.fileHandleForWriting.fileDescriptor
      }
      return (stream as? FileHandle)?.fileDescriptor
    }
    for (stream, target, reads) in [
      (standardInput, Int32(0), true), (standardOutput, 1, false), (standardError, 2, false),
    ] {
      if let fd = descriptor(stream, childReads: reads) {
        posix_spawn_file_actions_adddup2(&actions, fd, target)
      }
    }
    // Nothing else of this process's reaches the child. (glibc's `_np` actions are not in
    // Swift's Glibc module: looked up by name.)
    guard let closeFrom = Self.closeFrom, let changeDirectory = Self.changeDirectory else {
      throw CocoaError(.featureUnsupported)
    }
    _ = closeFrom(&actions, 3)
    if let directory = currentDirectoryURL?.path { _ = changeDirectory(&actions, directory) }
    var attributes = posix_spawnattr_t()
    posix_spawnattr_init(&attributes)
    defer { posix_spawnattr_destroy(&attributes) }
    var none = sigset_t()
    sigemptyset(&none)
    var all = sigset_t()
    sigfillset(&all)
    posix_spawnattr_setsigmask(&attributes, &none)
    posix_spawnattr_setsigdefault(&attributes, &all)
    posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))

    let argv = [path] + (arguments ?? [])
    let env = (environment ?? ProcessInfo.processInfo.environment).map { "\($0.key)=\($0.value)" }
    let cArguments = argv.map { strdup($0) } + [nil]
    let cEnvironment = env.map { strdup($0) } + [nil]
    defer {
      for p in cArguments { free(p) }
      for p in cEnvironment { free(p) }
    }
    var child: pid_t = 0
    let result = posix_spawn(&child, path, &actions, &attributes, cArguments, cEnvironment)
    guard result == 0 else {
      throw NSError(
        domain: NSPOSIXErrorDomain, code: Int(result), userInfo: [NSFilePathErrorKey: path])
    }
    lock.withLock { pid = child }
    // The child's ends of pipes are the child's now.
    if let pipe = standardInput as? Pipe { try? pipe.fileHandleForReading.close() }
    if let pipe = standardOutput as? Pipe { try? pipe.fileHandleForWriting.close() }
    if let pipe = standardError as? Pipe { try? pipe.fileHandleForWriting.close() }
  }

  /// Whether the child has not ended yet (it is reaped when it has).
  public var isRunning: Bool {
    lock.withLock {
      guard pid > 0, status == nil else { return false }
      var raw: Int32 = 0
      let reaped = waitpid(pid, &raw, WNOHANG)
      if reaped == pid {
        status = raw
        return false
      }
      return reaped == 0
    }
  }

  /// Waits for the child to end.
  public func waitUntilExit() {
    while isRunning { usleep(1_000) }
  }

  /// Its exit status, or the signal that ended it.
  public var terminationStatus: Int32 {
    let raw = lock.withLock { status } ?? 0
    return raw & 0x7f == 0 ? (raw >> 8) & 0xff : raw & 0x7f
  }

  public var terminationReason: Process.TerminationReason {
    let raw = lock.withLock { status } ?? 0
    return raw & 0x7f == 0 ? .exit : .uncaughtSignal
  }
}
