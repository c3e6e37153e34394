#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// What the file system says about a path: free space, and why a directory cannot be made or
/// written, in words a user can act on.
public enum FileSystem {
  /// Bytes free for unprivileged users on the file system holding `path` (or its nearest
  /// existing ancestor), or nil when it cannot be asked.
  public static func availableBytes(_ path: String) -> Int64? {
    var info = statvfs()
    guard let existing = nearestExisting(path), unsafe statvfs(existing, &info) == 0 else {
      return nil
    }
    return Int64(info.f_bavail) * Int64(info.f_frsize)
  }

  /// Everything left to read from file descriptor `fd` (standard input, say), read straight
  /// into arrays: a file redirected to standard input is read into one array of its size; a
  /// pipe's bytes come in chunks that double. Throws ``ReadError/tooLarge`` past `limit` bytes
  /// (nothing more is read then), ``ReadError/failed(_:)`` when `read` fails.
  public static func readAll(_ fd: Int32, limit: Int) throws(ReadError) -> [UInt8] {
    var info = stat()
    var chunk = 1 << 16
    if unsafe fstat(fd, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG, info.st_size > 0 {
      // One byte more than the file, so that its end is read in the same chunk.
      chunk = Int(clamping: info.st_size) + 1
    }
    var bytes: [UInt8] = []
    while true {
      let size = max(1, min(chunk, limit + 1 - bytes.count))
      var ended = false
      var failed = false
      let part = unsafe [UInt8](unsafeUninitializedCapacity: size) { buffer, count in
        count = 0
        while count < buffer.count {
          let n = unsafe read(
            fd, buffer.baseAddress.unsafelyUnwrapped + count, buffer.count - count)
          if n < 0 && errno == EINTR { continue }
          if n < 0 { failed = true }
          if n <= 0 {
            ended = true
            break
          }
          count += n
        }
      }
      if failed { throw .failed(unsafe String(cString: strerror(errno))) }
      if bytes.isEmpty { bytes = part } else { bytes.append(contentsOf: part) }
      if bytes.count > limit { throw .tooLarge }
      if ended { return bytes }
      chunk = max(chunk, bytes.count)
    }
  }

  /// Why ``readAll(_:limit:)`` stopped.
  public enum ReadError: Error {
    /// More bytes than it was allowed to read.
    case tooLarge
    /// `read` failed, for this reason.
    case failed(String)
  }

  /// Whether the file system holding `path` is mounted read-only.
  public static func isReadOnly(_ path: String) -> Bool {
    var info = statvfs()
    guard let existing = nearestExisting(path), unsafe statvfs(existing, &info) == 0 else {
      return false
    }
    return info.f_flag & UInt(ST_RDONLY) != 0
  }

  /// Why a data directory at `path` cannot be created or written, or nil when nothing is wrong
  /// that the file system shows: an ancestor that is a file, a read-only file system, a
  /// directory the user may not write, a full disk.
  public static func problem(creating path: String) -> String? {
    var ancestor = path
    while !ancestor.isEmpty {
      var info = stat()
      if unsafe stat(ancestor, &info) == 0 {
        if info.st_mode & S_IFMT != S_IFDIR {
          return "\(ancestor) is a file, not a directory"
        }
        if isReadOnly(ancestor) {
          return "\(ancestor) is on a read-only file system"
        }
        if unsafe access(ancestor, W_OK | X_OK) != 0 {
          return
            "permission denied: \(ancestor) is not writable by this user; check its owner and mode"
        }
        if let free = availableBytes(ancestor), free < 1 << 20 {
          return "the disk holding \(ancestor) is full (\(free) bytes free)"
        }
        return nil
      }
      ancestor = parent(ancestor)
    }
    return nil
  }

  /// The nearest existing ancestor of `path` (itself when it exists).
  static func nearestExisting(_ path: String) -> String? {
    var candidate = path.isEmpty ? "." : path
    while true {
      if unsafe access(candidate, F_OK) == 0 { return candidate }
      let up = parent(candidate)
      if up == candidate || up.isEmpty { return nil }
      candidate = up
    }
  }

  static func parent(_ path: String) -> String {
    var trimmed = Substring(path)
    while trimmed.count > 1, trimmed.hasSuffix("/") { trimmed = trimmed.dropLast() }
    guard let slash = trimmed.lastIndex(of: "/") else { return "." }
    if slash == trimmed.startIndex { return "/" }
    return String(trimmed[..<slash])
  }
}

/// A file's identity and last change as `stat(2)` reports them: any write to the file, or its
/// replacement, changes the stamp (once the file has been still for longer than the file
/// system's timestamp granularity, see ``PagesChecked``).
struct FileStamp: Equatable {
  var device: UInt64
  var inode: UInt64
  var size: Int64
  var modified: (seconds: Int64, nanoseconds: Int64)
  var changed: (seconds: Int64, nanoseconds: Int64)

  init?(_ path: String) {
    var info = stat()
    guard unsafe stat(path, &info) == 0 else { return nil }
    device = UInt64(info.st_dev)
    inode = UInt64(info.st_ino)
    size = Int64(info.st_size)
    modified = (Int64(info.st_mtim.tv_sec), Int64(info.st_mtim.tv_nsec))
    changed = (Int64(info.st_ctim.tv_sec), Int64(info.st_ctim.tv_nsec))
  }

  init?(text: String) {
    let f = text.split(separator: " ").compactMap { Int64($0) }
    guard f.count == 7 else { return nil }
    device = UInt64(bitPattern: f[0])
    inode = UInt64(bitPattern: f[1])
    size = f[2]
    modified = (f[3], f[4])
    changed = (f[5], f[6])
  }

  var text: String {
    "\(Int64(bitPattern: device)) \(Int64(bitPattern: inode)) \(size) \(modified.seconds) "
      + "\(modified.nanoseconds) \(changed.seconds) \(changed.nanoseconds)"
  }

  static func == (a: FileStamp, b: FileStamp) -> Bool {
    a.device == b.device && a.inode == b.inode && a.size == b.size
      && a.modified == b.modified && a.changed == b.changed
  }
}

/// The record that every page of a data file was walked and found sound
/// (`data.mdb.checked` beside it): the file's ``FileStamp`` when the walk began. An open finds
/// the file unchanged since then and skips the walk; any write, a copy or a replacement
/// changes the stamp and the next open walks again.
///
/// A stamp is written only for a file that had not been written for `quiet` seconds when the
/// walk began, so that a later write cannot fall in the same tick of the file system's clock
/// and leave the stamp as it was. The record is a plain file: whoever may write the data
/// directory can forge it, as they can damage the data itself.
enum PagesChecked {
  static let quiet: Int64 = 2

  static func path(_ file: String) -> String { file + ".checked" }

  /// Whether `file`, whose stamp is `stamp` now, stands as a walk or its writer left it: the
  /// recorded stamp is `stamp`, or the record names a writer that is still running (the same
  /// process, by its id and start time, on this boot) on the same file (device and inode).
  static func recorded(_ stamp: FileStamp, for file: String) -> Bool {
    guard let (recorded, writer) = read(file) else { return false }
    if recorded == stamp { return true }
    return writer != nil && recorded.device == stamp.device && recorded.inode == stamp.inode
  }

  /// The record's stamp, and the writer it names if that process still runs.
  static func read(_ file: String) -> (stamp: FileStamp, liveWriter: Int32?)? {
    let fd = unsafe open(path(file), O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { return nil }
    defer { close(fd) }
    var buffer = [UInt8](repeating: 0, count: 512)
    let n = unsafe buffer.withUnsafeMutableBytes { unsafe Glibc.read(fd, $0.baseAddress, $0.count) }
    guard n > 0, n < buffer.count else { return nil }
    let lines = String(decoding: buffer[..<n], as: UTF8.self).split(separator: "\n")
    guard lines.count == 2 || lines.count == 3, lines[0] == "wikilog pages-checked 1",
      let recorded = FileStamp(text: String(lines[1]))
    else { return nil }
    guard lines.count == 3 else { return (recorded, nil) }
    let writer = lines[2].split(separator: " ")
    guard writer.count == 4, writer[0] == "writer", let pid = Int32(writer[1]),
      let identity = ProcessIdentity.of(pid), identity.text == writer[2] + " " + writer[3]
    else { return (recorded, nil) }
    return (recorded, pid)
  }

  /// Whether a writer other than this process is named by `file`'s record and still runs
  /// (its record is then left as it is: it covers this process's writes too).
  static func anotherWriter(of file: String) -> Bool {
    guard let writer = read(file)?.liveWriter else { return false }
    return writer != getpid()
  }

  /// Records that this process writes `file` from now on, found sound at `stamp` (its open
  /// walked it, or found it as a walk or a writer left it): while this process runs, every
  /// change of the file is its commits (or another wikilog writer's, which records itself the
  /// same way), so an open in another process — a `wikilog get` beside a busy `wikilog
  /// serve` — need not walk it. Nothing is written per commit. A writer that ends without
  /// ``recordWritten(_:for:)`` (killed, the machine down) leaves a record naming a process
  /// that no longer runs, and the next open walks.
  static func recordWriter(_ stamp: FileStamp, for file: String) {
    guard !anotherWriter(of: file), let me = ProcessIdentity.of(getpid()) else { return }
    store(stamp, writer: "writer \(getpid()) \(me.text)", for: file)
  }

  /// Records `stamp` for `file` when the file had been still long enough; any failure (a
  /// read-only directory, say) leaves it unrecorded, and the next open walks again.
  static func record(_ stamp: FileStamp, for file: String) {
    var now = timespec()
    unsafe clock_gettime(CLOCK_REALTIME, &now)
    guard Int64(now.tv_sec) - stamp.changed.seconds > quiet else { return }
    store(stamp, for: file)
  }

  /// Records `stamp`, taken by the writer after its last durable commit (as it closes), for `file`:
  /// the file was sound when this process opened it (walked, or found as a walk left it), and
  /// since then it holds what LMDB wrote for wikilog's commits, synced to disk before this is
  /// written. So the next open of the file as it stands needs no walk. Not for a writer whose
  /// commits are not synced (``EventLog/Durability/unsynced``: a crash could leave pages
  /// torn under a stamp that still matches). What this trusts: that nothing but wikilog writes
  /// the file while a writer has it open, and that such a write, were it to happen, would not
  /// fall within the same tick of the file system's clock as the writer's own last commit
  /// without changing the size (a copy, a restore or a replacement between runs changes the
  /// stamp, and the next open walks).
  static func recordWritten(_ stamp: FileStamp, for file: String) {
    guard !anotherWriter(of: file) else { return }
    store(stamp, for: file)
  }

  /// The record's size: the text padded with newlines (which reading skips), so that every
  /// record overwrites the whole of the one before.
  static let recordSize = 320

  /// Writes the record in place (no temporary file and no rename: a writer records after
  /// every commit, and a rename is a change of the directory that the next commit's sync
  /// would carry). A record torn by a crash, or read while it is written, does not parse or
  /// does not match, and that open walks.
  private static func store(_ stamp: FileStamp, writer: String? = nil, for file: String) {
    var text = "wikilog pages-checked 1\n\(stamp.text)\n"
    if let writer { text += writer + "\n" }
    var bytes = Array(text.utf8)
    guard bytes.count <= recordSize else { return }
    bytes += [UInt8](repeating: UInt8(ascii: "\n"), count: recordSize - bytes.count)
    let fd = unsafe open(path(file), O_WRONLY | O_CREAT | O_CLOEXEC, 0o644)
    guard fd >= 0 else { return }
    defer { close(fd) }
    _ = unsafe bytes.withUnsafeBytes { unsafe pwrite(fd, $0.baseAddress, $0.count, 0) }
  }
}

/// A process as the kernel tells it apart from a later one with the same id: its start time
/// (clock ticks since boot, `/proc/PID/stat` field 22) and the boot it started in.
struct ProcessIdentity {
  let text: String

  static let bootID: String? = {
    guard let data = contents("/proc/sys/kernel/random/boot_id") else { return nil }
    let id = String(decoding: data, as: UTF8.self).filter { !$0.isWhitespace }
    return id.isEmpty ? nil : id
  }()

  /// A small file's bytes (`/proc` files report no size: read until the end).
  static func contents(_ path: String) -> [UInt8]? {
    let fd = unsafe open(path, O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { return nil }
    defer { close(fd) }
    var out: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 1024)
    while true {
      let n = unsafe buffer.withUnsafeMutableBytes {
        unsafe Glibc.read(fd, $0.baseAddress, $0.count)
      }
      if n <= 0 { break }
      out += buffer[..<n]
      if out.count > 1 << 16 { break }
    }
    return out
  }

  /// Process `pid`'s identity; nil when it does not run (or `/proc` is not there).
  static func of(_ pid: Int32) -> ProcessIdentity? {
    guard pid > 0, let boot = bootID,
      let data = contents("/proc/\(pid)/stat")
    else { return nil }
    let stat = String(decoding: data, as: UTF8.self)
    // The command name (field 2) is in parentheses and may hold spaces: count after it.
    guard let close = stat.lastIndex(of: ")") else { return nil }
    let fields = stat[stat.index(after: close)...].split(separator: " ")
    // Fields from 3 on; the start time is field 22, the 20th of these. A zombie has ended.
    guard fields.count > 19, fields[0] != "Z", fields[0] != "X" else { return nil }
    return ProcessIdentity(text: "\(fields[19]) \(boot)")
  }
}
