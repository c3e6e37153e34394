import Foundation

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// The server secret that keys session cookies (CouchDB's `[chttpd_auth] secret`): 32 random hex
/// digits, made once and kept in the data directory as `session.secret`, mode 0600 — outside
/// every log, so it is never replicated, exported or shown by `wikilog log tail`.
public enum ServerSecret {
  /// The file's name in the data directory.
  public static let fileName = "session.secret"

  /// The secret of the data directory at `directory`, made when missing. Concurrent callers
  /// (processes too) all get the same one: it is written to a private temporary file first and
  /// linked into place, which fails when another caller got there first.
  public static func load(directory: String) throws -> String {
    let path = directory + "/" + fileName
    if let existing = try read(path) { return existing }
    try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    let temporary = directory + "/.\(fileName).\(Password.newSalt())"
    let fd = unsafe open(temporary, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0o600)
    guard fd >= 0 else { throw error("cannot create \(temporary)") }
    defer { unsafe _ = unlink(temporary) }
    let secret = Password.newSalt()
    let bytes = Array((secret + "\n").utf8)
    let written = unsafe bytes.withUnsafeBufferPointer {
      unsafe write(fd, $0.baseAddress, $0.count)
    }
    let synced = fsync(fd)
    close(fd)
    guard written == bytes.count, synced == 0 else { throw error("cannot write \(temporary)") }
    if unsafe link(temporary, path) != 0 && errno != EEXIST { throw error("cannot create \(path)") }
    guard let stored = try read(path) else { throw error("cannot read \(path)") }
    return stored
  }

  private static func read(_ path: String) throws -> String? {
    guard FileManager.default.fileExists(atPath: path) else { return nil }
    let text = try String(contentsOfFile: path, encoding: .utf8)
      .trimmingCharacters(in: .whitespacesAndNewlines)
    guard text.count >= 32 else {
      throw error("\(path) does not hold a secret; remove it to make a new one")
    }
    return text
  }

  private static func error(_ message: String) -> any Error {
    CocoaError(.fileWriteUnknown, userInfo: [NSLocalizedDescriptionKey: message])
  }
}
