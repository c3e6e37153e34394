import Foundation
import TestSupport
import Testing

@testable import Log

/// A damaged `data.mdb` is refused at open with ``LogError/damaged(path:reason:)`` (before LMDB
/// maps it), and ``EventLog/checkPages(directory:maxProblems:)`` finds damaged pages with plain
/// file reads. Nothing here reads a damaged file through LMDB, which could crash the process
/// (the CLI tests do that, in child processes).
@Suite struct DamageTests {
  /// A closed log of 3,000 events in a few transactions (about 100 pages); its data file.
  func makeLog(_ dir: TemporaryDirectory) throws -> String {
    let log = try EventLog(directory: dir.path)
    for batch in 0..<6 {
      try log.append((1...500).map { event(batch * 500 + $0, stream: "s\($0 % 7)") })
    }
    log.close()
    return dir.path + "/data.mdb"
  }

  func size(_ file: String) throws -> Int {
    try FileManager.default.attributesOfItem(atPath: file)[.size] as! Int
  }

  func truncate(_ file: String, to length: Int) throws {
    let handle = try FileHandle(forUpdating: URL(fileURLWithPath: file))
    try handle.truncate(atOffset: UInt64(length))
    try handle.close()
  }

  func write(_ file: String, at offset: Int, _ bytes: Data) throws {
    let handle = try FileHandle(forUpdating: URL(fileURLWithPath: file))
    try handle.seek(toOffset: UInt64(offset))
    handle.write(bytes)
    try handle.close()
  }

  /// The reason of the `damaged` error thrown by opening `dir` (read-only and writable).
  func damageAtOpen(_ dir: TemporaryDirectory, sourceLocation: SourceLocation = #_sourceLocation)
    -> String?
  {
    var reason: String?
    for readOnly in [true, false] {
      do {
        let log = try EventLog(
          directory: dir.path, options: .init(durability: .synced, readOnly: readOnly))
        log.close()
        Issue.record("opened a damaged log (readOnly: \(readOnly))", sourceLocation: sourceLocation)
      } catch LogError.damaged(let path, let why) {
        #expect(path.hasSuffix("/data.mdb"), sourceLocation: sourceLocation)
        let text = LogError.damaged(path: path, reason: why).description
        #expect(text.hasPrefix(path + " is damaged: "), sourceLocation: sourceLocation)
        #expect(text.hasSuffix("; restore it from a backup"), sourceLocation: sourceLocation)
        #expect(!text.contains("\n"), sourceLocation: sourceLocation)
        reason = why
      } catch {
        Issue.record("\(error)", sourceLocation: sourceLocation)
      }
    }
    return reason
  }

  @Test("a sound log passes the page check, before and after reopening")
  func soundLog() throws {
    let dir = TemporaryDirectory()
    _ = try makeLog(dir)
    #expect(try EventLog.checkPages(directory: dir.path) == [])
    let log = try EventLog(directory: dir.path)
    try log.append([event(1)])
    #expect(try log.verify().isValid)
    log.close()
    #expect(try EventLog.checkPages(directory: dir.path) == [])
  }

  @Test("a file cut to half is refused at open, naming both sizes")
  func truncatedToHalf() throws {
    let dir = TemporaryDirectory()
    let file = try makeLog(dir)
    let half = try size(file) / 2
    try truncate(file, to: half)
    let reason = try #require(damageAtOpen(dir))
    #expect(reason.hasPrefix("it is \(half) bytes but its meta page says the data runs to page "))
    #expect(throws: LogError.self) { try EventLog.checkPages(directory: dir.path) }
  }

  @Test("a file shorter than two pages is refused")
  func tooShort() throws {
    let dir = TemporaryDirectory()
    let file = try makeLog(dir)
    try truncate(file, to: 5000)
    let reason = try #require(damageAtOpen(dir))
    #expect(reason.contains("shorter than LMDB's two meta pages"), "\(reason)")
  }

  @Test("an emptied file is refused, never opened as a new, empty log over the lost one")
  func emptied() throws {
    let dir = TemporaryDirectory()
    let file = try makeLog(dir)
    try truncate(file, to: 0)
    let reason = try #require(damageAtOpen(dir))
    #expect(reason.contains("empty (0 bytes)"), "\(reason)")
    #expect(try size(file) == 0)
    // A new log still starts from no file at all.
    let fresh = TemporaryDirectory()
    let log = try EventLog(directory: fresh.path)
    #expect(try log.committedPosition == .start)
  }

  @Test("overwritten meta pages are refused", arguments: [0, 1])
  func metaOverwritten(_ page: Int) throws {
    let dir = TemporaryDirectory()
    let file = try makeLog(dir)
    try write(file, at: page * 4096, Data(repeating: 0xA5, count: 4096))
    let reason = try #require(damageAtOpen(dir))
    #expect(reason.contains("meta page \(page) is not an LMDB meta page"), "\(reason)")
  }

  @Test("a last page past the end of the file is refused")
  func lastPagePastTheEnd() throws {
    let dir = TemporaryDirectory()
    let file = try makeLog(dir)
    // mm_last_pg of both meta pages (16-byte header, then 120 bytes into MDB_meta).
    for page in 0..<2 {
      var value = UInt64(10_000).littleEndian
      try write(file, at: page * 4096 + 16 + 120, Data(bytes: &value, count: 8))
    }
    let reason = try #require(damageAtOpen(dir))
    #expect(reason.contains("data runs to page 10000 (40964096 bytes)"), "\(reason)")
  }

  @Test("a root page number past the last page is refused")
  func rootPastTheEnd() throws {
    let dir = TemporaryDirectory()
    let file = try makeLog(dir)
    for page in 0..<2 {
      var value = UInt64(1 << 40).littleEndian
      try write(file, at: page * 4096 + 16 + 72 + 40, Data(bytes: &value, count: 8))
    }
    let reason = try #require(damageAtOpen(dir))
    #expect(reason.contains("main database's root at page 1099511627776"), "\(reason)")
  }

  @Test("the last quarter zeroed: refused at open or found by the page check")
  func lastQuarterZeroed() throws {
    let dir = TemporaryDirectory()
    let file = try makeLog(dir)
    let size = try size(file)
    try write(file, at: size - size / 4, Data(count: size / 4))
    // The newest pages (the roots among them) are at the end of the file.
    let reason = try #require(damageAtOpen(dir))
    #expect(reason.contains("page "), "\(reason)")
    let problems = try EventLog.checkPages(directory: dir.path)
    #expect(!problems.isEmpty)
  }

  @Test("pages overwritten in the middle are found by the page check and by verify")
  func pagesOverwritten() throws {
    let dir = TemporaryDirectory()
    let file = try makeLog(dir)
    let pages = try size(file) / 4096
    var random = SplitMix64(seed: 7)
    for page in [pages / 3, pages / 2] {
      try write(
        file, at: page * 4096,
        Data((0..<4096).map { _ in UInt8.random(in: 0...255, using: &random) }))
    }
    let problems = try EventLog.checkPages(directory: dir.path)
    #expect(problems.contains { $0.contains("is overwritten") }, "\(problems)")
    // verify checks the pages before reading records through LMDB.
    do {
      let log = try EventLog(
        directory: dir.path, options: .init(durability: .synced, readOnly: true))
      defer { log.close() }
      let report = try log.verify()
      #expect(!report.isValid)
      #expect(report.problems.allSatisfy { $0.hasPrefix(file + " is damaged: ") }, "\(report)")
    } catch LogError.damaged {
      // Refused at open: a damaged page was among those read there.
    }
  }
}
