import Foundation
import JSON
import Log
import RevTree

#if canImport(Glibc)
  import Glibc
  #if canImport(CDispatch)
    import CDispatch  // where Glibc's `struct stat` is defined on Linux, for MemberImportVisibility
  #endif
#endif

/// Bytes for standard output, written with write(2) in large chunks, or line by line when
/// following; a closed pipe (EPIPE) ends the program quietly with status 0, as `tail` does,
/// and any other failed write (a full disk) with a one-line error and status 1.
struct OutputBuffer {
  var bytes: [UInt8] = []
  var count: Int { bytes.count }
  /// Where ``flush()`` writes: standard output, or a file (see ``FileOutput``).
  var fd: Int32 = STDOUT_FILENO
  /// The file behind `fd` when it is not standard output: a failed write removes it and ends
  /// the program with a one-line error.
  var file: FileOutput?

  init() { bytes.reserveCapacity(1 << 16) }

  mutating func append(_ string: String) {
    var s = string
    s.withUTF8 { unsafe bytes.append(contentsOf: $0) }
  }

  mutating func append(_ byte: UInt8) { bytes.append(byte) }

  mutating func append(_ other: [UInt8]) { bytes.append(contentsOf: other) }

  /// Appends a number's decimal digits without making a String.
  mutating func append(decimal value: UInt64) {
    var digits: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)  // 32 bytes of scratch
    unsafe withUnsafeMutableBytes(of: &digits) { scratch in
      var v = value
      var i = scratch.count
      repeat {
        i -= 1
        unsafe scratch[i] = UInt8(ascii: "0") + UInt8(v % 10)
        v /= 10
      } while v > 0
      unsafe bytes.append(contentsOf: scratch[i...])
    }
  }

  /// Appends `value` as compact JSON and a newline.
  mutating func line(_ value: JSONValue) {
    value.serialize(into: &bytes)
    bytes.append(0x0A)
  }

  /// Appends `text` and a newline.
  mutating func line(_ text: String) {
    append(text)
    bytes.append(0x0A)
  }

  /// Writes everything once the buffer holds 64 KiB or more.
  mutating func flushIfLarge() {
    if bytes.count >= 1 << 16 { flush() }
  }

  mutating func flush() {
    if let code = Self.writeAll(bytes, to: fd) {
      let reason = unsafe String(cString: strerror(code))
      if let file {
        file.abandon()
        WikilogCommand.fail("cannot write \(file.path): \(reason); nothing written")
      }
      if code == EPIPE { exit(0) }  // the reader went away: stop like tail does
      // A full disk, say: what was written is incomplete, and the status says so.
      WikilogCommand.fail("cannot write to standard output: \(reason)")
    }
    bytes.removeAll(keepingCapacity: true)
  }

  /// Writes all of `bytes` to `fd` with write(2), again after an interruption; the `errno` of
  /// a write that failed, nil when all was written.
  static func writeAll(_ bytes: [UInt8], to fd: Int32) -> Int32? {
    var offset = 0
    while offset < bytes.count {
      let n = unsafe bytes[offset...].withUnsafeBytes { unsafe write(fd, $0.baseAddress, $0.count) }
      if n < 0 {
        if errno == EINTR { continue }
        return errno
      }
      offset += n
    }
    return nil
  }
}

/// A file written through a temporary file beside it, renamed into place by ``commit()`` so
/// that a failed command leaves no partial file. A path that exists and is not a regular file
/// (a pipe, a device) is written directly.
final class FileOutput {
  let path: String
  /// The temporary file; nil when writing `path` directly.
  let temporary: String?
  let fd: Int32

  /// Creates the temporary file, or fails with a one-line error.
  init(_ path: String) throws {
    self.path = path
    var info = stat()
    if unsafe stat(path, &info) == 0 && (info.st_mode & S_IFMT) != S_IFREG {
      temporary = nil
      fd = unsafe open(path, O_WRONLY | O_CLOEXEC)
    } else {
      let temporary = path + ".wikilog-\(getpid()).partial"
      self.temporary = temporary
      fd = unsafe open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
    }
    guard fd >= 0 else {
      throw CLIError(unsafe "cannot write \(path): \(String(cString: strerror(errno)))")
    }
  }

  /// Flushes the file to disk and renames it into place.
  func commit() throws {
    defer { close(fd) }
    guard let temporary else { return }
    guard fsync(fd) == 0, unsafe rename(temporary, path) == 0 else {
      let reason = unsafe String(cString: strerror(errno))
      unsafe unlink(temporary)
      throw CLIError("cannot write \(path): \(reason); nothing written")
    }
  }

  /// Closes and removes the temporary file.
  func abandon() {
    close(fd)
    if let temporary { unsafe unlink(temporary) }
  }
}

/// Prints one JSON value and a newline to standard output.
func printJSON(_ value: JSONValue) {
  var out = OutputBuffer()
  out.line(value)
  out.flush()
}

/// Prints text (a newline is added when missing) to standard output.
func printText(_ text: String) {
  var out = OutputBuffer()
  out.append(text)
  if !text.isEmpty && !text.hasSuffix("\n") { out.append(0x0A) }
  out.flush()
}

/// Writes a line to standard error; when that cannot be written (closed, or a full disk),
/// the line is lost and nothing else happens (FileHandle would trap on the failure).
func printError(_ text: String) {
  writeStandardError(text + "\n")
}

/// Writes `text` to standard error as it is, losing it quietly when that fails.
func writeStandardError(_ text: String) {
  _ = OutputBuffer.writeAll(Array(text.utf8), to: STDERR_FILENO)
}

/// Building JSON values briefly: `J.object(["ok": true, "id": .string(id)])`; nil members are
/// left out.
enum J {
  static func object(_ pairs: KeyValuePairs<String, JSONValue?>) -> JSONValue {
    .object(JSONObject(pairs.compactMap { k, v in v.map { JSONObject.Member(key: k, value: $0) } }))
  }

  static func string(_ s: String?) -> JSONValue? { s.map { .string($0) } }

  static func int(_ n: some BinaryInteger) -> JSONValue { .number(JSONNumber(Int64(n))) }

  static func strings(_ list: [String]) -> JSONValue { .array(list.map { .string($0) }) }
}

/// A plain text table: columns padded to their widest cell, two spaces apart.
struct TextTable {
  var rows: [[String]]

  init(header: [String]) { rows = [header] }

  mutating func add(_ row: [String]) { rows.append(row) }

  var text: String {
    var widths: [Int] = []
    for row in rows {
      for (i, cell) in row.enumerated() {
        if i >= widths.count { widths.append(0) }
        widths[i] = max(widths[i], cell.count)
      }
    }
    return rows.map { row in
      row.enumerated().map { i, cell in
        i == row.count - 1 ? cell : cell.padding(toLength: widths[i], withPad: " ", startingAt: 0)
      }.joined(separator: "  ")
    }.joined(separator: "\n") + "\n"
  }
}

/// Progress on standard error for long work, only when standard error is a terminal: one line,
/// rewritten at most ten times a second.
final class Progress {
  let enabled = isatty(STDERR_FILENO) != 0
  private var last: UInt64 = 0
  private var shown = false

  func update(_ text: @autoclosure () -> String) {
    guard enabled else { return }
    let now = DispatchTime.now().uptimeNanoseconds
    guard now - last >= 100_000_000 else { return }
    last = now
    shown = true
    writeStandardError("\r\u{1B}[K\(text())")
  }

  /// Clears the progress line.
  func finish() {
    guard enabled, shown else { return }
    writeStandardError("\r\u{1B}[K")
    shown = false
  }
}
