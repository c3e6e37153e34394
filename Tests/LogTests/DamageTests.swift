import Foundation
import TestSupport
import Testing

@testable import Log

/// A damaged `data.mdb` is refused at open with ``LogError/damaged(path:reason:)`` (before LMDB
/// reads a page of it), and ``EventLog/checkPages(directory:maxProblems:)`` finds damaged pages
/// with plain file reads. This process never reads a damaged file through LMDB, which could
/// crash it: a file the checks pass is read whole by a child process (LogTestWorker readAll),
/// which must not die of a signal.
@Suite struct DamageTests {
  /// A closed log of 3,000 events in a few transactions (about 100 pages); its data file.
  func makeLog(_ dir: TemporaryDirectory) throws -> String {
    let log = try EventLog(directory: dir.path)
    for batch in 0..<6 {
      try log.append((1...500).map { event(batch * 500 + $0, stream: "s\($0 % 7)") })
    }
    log.close()
    // The writer recorded its file as sound (``PagesChecked/recordWritten(_:for:)``); these
    // tests damage it within milliseconds, inside one tick of the file system's clock, which a
    // stamp cannot tell apart (damage between runs changes it): they test the walk.
    try? FileManager.default.removeItem(atPath: dir.path + "/data.mdb.checked")
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

  @Test(
    "a file its writer left, or a walk found sound, is not walked again; a change behind wikilog's back makes the next open walk"
  )
  func pagesCheckedStamp() async throws {
    let dir = TemporaryDirectory()
    let readOnly = EventLog.Options(durability: .synced, readOnly: true)
    // The writer records its file as sound after each synced commit: the next open, in this
    // process or another, walks nothing.
    do {
      let writer = try EventLog(directory: dir.path)
      try await writer.append((1...200).map { event($0, stream: "s\($0 % 7)") })
      writer.close()
    }
    var opened = try EventLog(directory: dir.path, options: readOnly)
    #expect(!opened.walkedPagesAtOpen)
    opened.close()
    // An unsynced writer records nothing until it syncs.
    do {
      let writer = try EventLog(directory: dir.path, options: .init(durability: .unsynced))
      try? FileManager.default.removeItem(atPath: dir.path + "/data.mdb.checked")
      try await writer.append([event(1_000, stream: "u")])
      #expect(!FileManager.default.fileExists(atPath: dir.path + "/data.mdb.checked"))
      try writer.sync()
      #expect(FileManager.default.fileExists(atPath: dir.path + "/data.mdb.checked"))
      writer.close()
    }
    opened = try EventLog(directory: dir.path, options: readOnly)
    #expect(!opened.walkedPagesAtOpen)
    opened.close()

    // A file whose record is gone (or stale) is walked; the walk records it again, for a file
    // that was still for longer than the clock's tick.
    let walked = TemporaryDirectory()
    let file = try makeLog(walked)
    let still = try await eventually(10) {
      guard let stamp = FileStamp(file) else { return false }
      return Int64(Date().timeIntervalSince1970) - stamp.changed.seconds > PagesChecked.quiet
    }
    #expect(still)
    var log = try EventLog(directory: walked.path, options: readOnly)
    #expect(log.walkedPagesAtOpen)
    log.close()
    #expect(FileManager.default.fileExists(atPath: file + ".checked"))
    log = try EventLog(directory: walked.path, options: readOnly)
    #expect(!log.walkedPagesAtOpen)
    log.close()

    // A page overwritten behind LMDB's back: the stamp no longer matches, the walk finds it.
    let pages = try size(file) / 4096
    try write(file, at: pages / 2 * 4096, Data(repeating: 0xA5, count: 4096))
    #expect(damageAtOpen(walked) != nil)
  }

  // MARK: Damage of every shape

  /// What became of a damaged log.
  enum Outcome: Equatable {
    /// Refused at open with this reason (one line).
    case refused(String)
    /// Opened and read whole in a child process, whose verify said this ("verify ok" or
    /// "verify N problem(s): ...").
    case opened(String)

    var verifiedOK: Bool { self == .opened("verify ok") }
  }

  /// Refused by the checks made with plain file reads (then opening it here is refused too,
  /// with the same reason, before LMDB reads a page), or else read whole by a child process,
  /// which must end normally.
  func outcome(_ dir: TemporaryDirectory, sourceLocation: SourceLocation = #_sourceLocation)
    throws -> Outcome
  {
    var reason: String?
    do {
      try EventLog.checkDataFile(dir.path + "/data.mdb")
      reason = try EventLog.checkPages(directory: dir.path, maxProblems: 1).first
    } catch {
      guard case .damaged(_, let why) = error else { throw error }
      reason = why
    }
    if let reason {
      #expect(!reason.contains("\n"), sourceLocation: sourceLocation)
      #expect(
        damageAtOpen(dir, sourceLocation: sourceLocation) == reason, sourceLocation: sourceLocation)
      return .refused(reason)
    }
    let worker = try startWorker(["readAll", dir.path])
    #expect(worker.waitForExit(timeout: 120), sourceLocation: sourceLocation)
    #expect(
      worker.process.terminationReason == .exit && worker.process.terminationStatus == 0,
      "the reader died (\(worker.process.terminationReason.rawValue), \(worker.process.terminationStatus)): \(worker.lines)",
      sourceLocation: sourceLocation)
    let line = worker.lines.last ?? ""
    #expect(line.hasPrefix("verify "), "\(worker.lines)", sourceLocation: sourceLocation)
    return .opened(line)
  }

  /// A sound log's data file, kept to damage a fresh copy of it again and again.
  func soundFile() throws -> Data {
    let dir = TemporaryDirectory()
    return try Data(contentsOf: URL(fileURLWithPath: try makeLog(dir)))
  }

  /// A directory holding a copy of `file` as its data file, with `damage` done to the bytes.
  func damaged(_ file: Data, _ damage: (inout [UInt8]) -> Void, name: String = #function)
    throws -> TemporaryDirectory
  {
    let dir = TemporaryDirectory(name)
    var bytes = [UInt8](file)
    damage(&bytes)
    try Data(bytes).write(to: URL(fileURLWithPath: dir.path + "/data.mdb"))
    return dir
  }

  @Test(
    "16 bytes flipped at 20 places: refused at open, or read whole without a crash",
    arguments: 0..<20)
  func randomFlips(_ seed: UInt64) throws {
    let sound = try soundFile()
    let dir = try damaged(sound) { bytes in
      var random = SplitMix64(seed: 1000 + seed)
      for _ in 0..<20 {
        let at = Int(random.next() % UInt64(bytes.count - 16))
        for i in at..<(at + 16) { bytes[i] = ~bytes[i] }
      }
    }
    if case .opened(let verified) = try outcome(dir) {
      // The flips missed every page in use, or landed in records, whose checksums say so.
      #expect(verified.hasPrefix("verify "))
    }
  }

  @Test("every third page zeroed in turn: refused at open, unless it is a page no tree uses")
  func zeroedPages() throws {
    let sound = try soundFile()
    var (refused, opened) = (0, 0)
    for page in stride(from: 2, to: sound.count / 4096, by: 3) {
      let dir = try damaged(sound) { bytes in
        for i in (page * 4096)..<((page + 1) * 4096) { bytes[i] = 0 }
      }
      // No record of this log is on overflow pages, so every page in use has a header.
      let outcome = try outcome(dir)
      if case .refused = outcome {
        refused += 1
      } else {
        opened += 1
        #expect(outcome.verifiedOK, "page \(page): \(outcome)")
      }
    }
    // Both happen: the log's six transactions left free pages behind.
    #expect(refused > 0 && opened > 0, "\(refused) refused, \(opened) opened")
  }

  @Test("two pages swapped: refused at open, unless neither is in use", arguments: 0..<10)
  func swappedPages(_ seed: UInt64) throws {
    let sound = try soundFile()
    let pages = sound.count / 4096
    var random = SplitMix64(seed: 2000 + seed)
    let a = 2 + Int(random.next() % UInt64(pages - 2))
    let b = 2 + (a - 2 + 1 + Int(random.next() % UInt64(pages - 3))) % (pages - 2)
    let dir = try damaged(sound) { bytes in
      for i in 0..<4096 { bytes.swapAt(a * 4096 + i, b * 4096 + i) }
    }
    let outcome = try outcome(dir)
    if case .refused(let reason) = outcome {
      #expect(reason.contains("is overwritten (its header says page "), "\(reason)")
    } else {
      #expect(outcome.verifiedOK, "pages \(a) and \(b): \(outcome)")
    }
  }

  @Test("the root of the events swapped with another page in use is refused")
  func rootSwapped() throws {
    let sound = try soundFile()
    let layout = Layout([UInt8](sound))
    let events = try #require(layout.database("log.events"))
    let leaf = layout.firstLeaf(events)
    #expect(leaf != events.root)
    let dir = try damaged(sound) { bytes in
      for i in 0..<4096 { bytes.swapAt(events.root * 4096 + i, leaf * 4096 + i) }
    }
    let reason = try #require(try outcome(dir).refusal)
    #expect(
      reason
        == "page \(events.root) of database 'log.events' is overwritten (its header says page \(leaf))"
    )
  }

  @Test(
    "a node offset outside its page (past the end, odd, inside the header) is refused",
    arguments: [4094, 4093, 20])
  func nodeOffsetOutside(_ offset: Int) throws {
    let sound = try soundFile()
    let layout = Layout([UInt8](sound))
    let leaf = layout.firstLeaf(try #require(layout.database("log.events")))
    let dir = try damaged(sound) { bytes in
      Layout.put16(&bytes, leaf * 4096 + 16 + 2, offset)
    }
    let reason = try #require(try outcome(dir).refusal)
    #expect(
      reason.hasPrefix(
        "page \(leaf) of database 'log.events' has node 1 at an impossible offset, \(offset)"),
      "\(reason)")
  }

  @Test(
    "overlapping nodes are refused (two at one offset; one's data grown into the next)",
    arguments: ["same offset", "longer data"])
  func overlappingNodes(_ shape: String) throws {
    let sound = try soundFile()
    let layout = Layout([UInt8](sound))
    let leaf = layout.firstLeaf(try #require(layout.database("log.events")))
    let first = layout.nodeOffset(page: leaf, node: 0)
    let second = leaf * 4096 + layout.nodeOffset(page: leaf, node: 1)
    // LMDB adds nodes downwards from the end of the page, each of an even size: node 1 ends
    // where node 0 begins.
    #expect(
      (second + 8 + layout.u16(second + 6) + layout.u16(second) + 1) & ~1 == leaf * 4096 + first)
    let dir = try damaged(sound) { bytes in
      if shape == "same offset" {
        Layout.put16(&bytes, leaf * 4096 + 16 + 2, first)
      } else {
        Layout.put16(&bytes, second, layout.u16(second) + 40)
      }
    }
    let reason = try #require(try outcome(dir).refusal)
    #expect(reason == "page \(leaf) of database 'log.events' has node 1 overlapping another node")
  }

  @Test("a record whose data runs off its page is refused")
  func dataOffThePage() throws {
    let sound = try soundFile()
    let layout = Layout([UInt8](sound))
    let leaf = layout.firstLeaf(try #require(layout.database("log.events")))
    let node = leaf * 4096 + layout.nodeOffset(page: leaf, node: 0)
    let dir = try damaged(sound) { bytes in Layout.put16(&bytes, node, 4000) }
    let reason = try #require(try outcome(dir).refusal)
    #expect(reason.hasPrefix("page \(leaf) of database 'log.events' has node 0 "), "\(reason)")
  }

  @Test("keys out of order within a leaf are refused")
  func keysOutOfOrder() throws {
    let sound = try soundFile()
    let layout = Layout([UInt8](sound))
    let leaf = layout.firstLeaf(try #require(layout.database("log.events")))
    let first = layout.nodeOffset(page: leaf, node: 0)
    let second = layout.nodeOffset(page: leaf, node: 1)
    let dir = try damaged(sound) { bytes in
      Layout.put16(&bytes, leaf * 4096 + 16, second)
      Layout.put16(&bytes, leaf * 4096 + 16 + 2, first)
    }
    let reason = try #require(try outcome(dir).refusal)
    #expect(reason == "page \(leaf) of database 'log.events' has its keys out of order (at node 1)")
  }

  @Test(
    "a branch's child page past the last page, on a meta page or on a page in use is refused",
    arguments: ["past", "meta", "sibling"])
  func branchChild(_ target: String) throws {
    let sound = try soundFile()
    let layout = Layout([UInt8](sound))
    let events = try #require(layout.database("log.events"))
    try #require(events.depth >= 2)
    let child: Int =
      switch target {
      case "past": Int(layout.lastPage) + 7
      case "meta": 1
      default: layout.child(page: events.root, node: 0)
      }
    let node = events.root * 4096 + layout.nodeOffset(page: events.root, node: 1)
    let dir = try damaged(sound) { bytes in
      Layout.put16(&bytes, node, child & 0xFFFF)
      Layout.put16(&bytes, node + 2, child >> 16 & 0xFFFF)
      Layout.put16(&bytes, node + 4, child >> 32 & 0xFFFF)
    }
    let reason = try #require(try outcome(dir).refusal)
    switch target {
    case "sibling":
      #expect(reason == "page \(child) is reached twice (from database 'log.events')")
    default:
      #expect(
        reason
          == "database 'log.events' points to page \(child), outside pages 2...\(layout.lastPage)")
    }
  }

  @Test("a database record with an impossible depth is refused")
  func recordDepth() throws {
    let sound = try soundFile()
    let layout = Layout([UInt8](sound))
    let record = try #require(layout.databaseRecord("log.events"))
    let dir = try damaged(sound) { bytes in Layout.put16(&bytes, record + 6, 40) }
    let reason = try #require(try outcome(dir).refusal)
    #expect(reason == "the main database gives database 'log.events' an impossible depth, 40")
    // One level off: a leaf where the record says a branch should be.
    let events = try #require(layout.database("log.events"))
    let deeper = try damaged(sound) { bytes in Layout.put16(&bytes, record + 6, events.depth + 1) }
    let off = try #require(try outcome(deeper).refusal)
    #expect(
      off.contains("is a leaf at level \(events.depth) of a tree \(events.depth + 1) deep"),
      "\(off)")
  }

  @Test(
    "an overflow run's header overwritten is refused", arguments: ["flags", "length", "number"])
  func overflowHeader(_ field: String) throws {
    let dir = TemporaryDirectory()
    let log = try EventLog(directory: dir.path)
    try log.append([event(1)])
    try log.append([
      NewEvent(type: "big", stream: "s", actor: "t", payload: [UInt8](repeating: 7, count: 10_000))
    ])
    log.close()
    let sound = try Data(contentsOf: URL(fileURLWithPath: dir.path + "/data.mdb"))
    let layout = Layout([UInt8](sound))
    // The run holding the big event: the one overflow page of the file.
    let run = try #require(
      (2..<(sound.count / 4096)).first {
        layout.u16($0 * 4096 + 10) == 0x04 && layout.u64($0 * 4096) == UInt64($0)
      })
    let damagedDir = try damaged(sound) { bytes in
      switch field {
      case "flags": Layout.put16(&bytes, run * 4096 + 10, 0x02)
      case "length": Layout.put16(&bytes, run * 4096 + 12, 1)
      default: Layout.put16(&bytes, run * 4096, run + 1)
      }
    }
    let reason = try #require(try outcome(damagedDir).refusal)
    #expect(
      reason == "overflow page \(run) of database 'log.events' is overwritten or runs past the file"
    )
  }

  @Test(
    "a file cut short anywhere: refused at open, unless what is cut is free",
    arguments: [1, 100, 4096, 3 * 4096 + 5])
  func truncated(_ cut: Int) throws {
    let sound = try soundFile()
    for length in [sound.count - cut, sound.count * 3 / 4, 3 * 4096, 2 * 4096 + 100] {
      let dir = try damaged(sound) { bytes in bytes.removeLast(bytes.count - length) }
      let outcome = try outcome(dir)
      if case .opened = outcome { #expect(outcome.verifiedOK, "cut to \(length): \(outcome)") }
    }
  }
}

extension DamageTests.Outcome {
  var refusal: String? {
    if case .refused(let reason) = self { return reason }
    return nil
  }
}

/// The layout of a data file read from its bytes (LMDB 0.9, 64-bit, 4 KiB pages; see
/// DataFileCheck), to damage chosen parts of it.
struct Layout {
  let bytes: [UInt8]

  init(_ bytes: [UInt8]) { self.bytes = bytes }

  func u16(_ at: Int) -> Int { Int(bytes[at]) | Int(bytes[at + 1]) << 8 }
  func u64(_ at: Int) -> UInt64 {
    (0..<8).reduce(0) { $0 | UInt64(bytes[at + $1]) << (8 * UInt64($1)) }
  }
  static func put16(_ bytes: inout [UInt8], _ at: Int, _ value: Int) {
    bytes[at] = UInt8(value & 0xFF)
    bytes[at + 1] = UInt8(value >> 8 & 0xFF)
  }

  /// The newest meta page's `MDB_meta`.
  var meta: Int { u64(4096 + 16 + 128) > u64(16 + 128) ? 4096 + 16 : 16 }
  var lastPage: UInt64 { u64(meta + 120) }

  func nodeCount(page: Int) -> Int { (u16(page * 4096 + 12) - 16) / 2 }
  func nodeOffset(page: Int, node: Int) -> Int { u16(page * 4096 + 16 + 2 * node) }
  func child(page: Int, node: Int) -> Int {
    let at = page * 4096 + nodeOffset(page: page, node: node)
    return u16(at) | u16(at + 2) << 16 | u16(at + 4) << 32
  }

  /// Where in the file the `MDB_db` record of named database `name` is (the main database being
  /// one leaf page).
  func databaseRecord(_ name: String) -> Int? {
    let main = Int(u64(meta + 72 + 40))
    for node in 0..<nodeCount(page: main) {
      let at = main * 4096 + nodeOffset(page: main, node: node)
      let keySize = u16(at + 6)
      if Array(bytes[(at + 8)..<(at + 8 + keySize)]) == Array(name.utf8) { return at + 8 + keySize }
    }
    return nil
  }

  func database(_ name: String) -> (root: Int, depth: Int)? {
    databaseRecord(name).map { (Int(u64($0 + 40)), u16($0 + 6)) }
  }

  /// The leftmost leaf of a database.
  func firstLeaf(_ database: (root: Int, depth: Int)) -> Int {
    var page = database.root
    for _ in 1..<database.depth { page = child(page: page, node: 0) }
    return page
  }
}
