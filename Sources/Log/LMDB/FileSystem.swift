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
        if access(ancestor, W_OK | X_OK) != 0 {
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
      if access(candidate, F_OK) == 0 { return candidate }
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
