#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// Checks of an LMDB data file made with plain `pread` calls, never through LMDB's map.
///
/// liblmdb 0.9 trusts its file: a page number past the end of the file is a SIGBUS when the map
/// is touched there, and a page whose header or node offsets were overwritten sends it through
/// garbage pointers (SIGSEGV) or into an assertion. These checks read the same structures from
/// the file with bounds-checked arrays, so a damaged file becomes a sentence instead of a crash.
///
/// The layout read here is mdb.c's (liblmdb 0.9.x, 64-bit): a page starts with a 16-byte header
/// (`mp_pgno` u64, `mp_pad` u16, `mp_flags` u16, `mp_lower`/`mp_upper` u16, or `mp_pages` u32
/// on an overflow page); pages 0 and 1 are meta pages whose `MDB_meta` follows the header
/// (`mm_magic` u32, `mm_version` u32, `mm_address`, `mm_mapsize`, two 48-byte `MDB_db` records
/// for the free and main databases, `mm_last_pg` u64, `mm_txnid` u64). The page size is the free
/// database's `md_pad`; a database's `md_depth` is at 6 and `md_root` at 40 of its record.
struct DataFileCheck {
  /// The newest valid meta page's facts.
  struct Meta {
    var pageSize: Int
    var freeRoot: UInt64
    var freeDepth: Int
    var mainRoot: UInt64
    var mainDepth: Int
    var lastPage: UInt64
    var txnID: UInt64
  }

  static let magic: UInt32 = 0xBEEF_C0DE
  static let dataVersion: UInt32 = 1
  static let invalidPage = UInt64.max
  static let headerSize = 16
  // Page flags (mdb.c).
  static let pBranch: UInt16 = 0x01
  static let pLeaf: UInt16 = 0x02
  static let pOverflow: UInt16 = 0x04
  static let pMeta: UInt16 = 0x08
  static let pLeaf2: UInt16 = 0x20
  // Node flags.
  static let fBigData: UInt16 = 0x01
  static let fSubData: UInt16 = 0x02
  static let fDupData: UInt16 = 0x04

  let path: String
  let size: Int
  let meta: Meta
  private let file: DataFileReader

  /// Opens `path` and checks its meta pages and its length. Returns nil when there is no such
  /// file (LMDB makes a new one there).
  ///
  /// - Throws: ``DataFileDamage`` with the reason in plain words; for a file of zero bytes too:
  ///   LMDB writes its two meta pages when it creates a data file, so an empty one lost what it
  ///   held (opened as it is, it would become an empty database over the lost one).
  static func open(path: String) throws(DataFileDamage) -> DataFileCheck? {
    guard let file = DataFileReader(path: path) else { return nil }
    guard file.size > 0 else {
      file.release()
      throw DataFileDamage(
        reason:
          "it is empty (0 bytes): LMDB writes its meta pages when it makes a data file, so this one lost its contents"
      )
    }
    do {
      let meta = try Self.readMeta(file)
      return DataFileCheck(path: path, size: file.size, meta: meta, file: file)
    } catch {
      file.release()
      throw error
    }
  }

  func close() { file.release() }

  private static func readMeta(_ file: DataFileReader) throws(DataFileDamage) -> Meta {
    func damaged(_ reason: String) -> DataFileDamage { DataFileDamage(reason: reason) }
    guard let first = file.read(offset: 0, count: 256) else {
      throw damaged("it is \(file.size) bytes, too short to hold LMDB's two meta pages")
    }
    func parse(_ page: [UInt8], number: UInt64) -> Result<Meta, DataFileDamage> {
      let flags = page.u16(10)
      let m = headerSize
      if page.u32(m) != magic || flags & pMeta == 0 || page.u64(0) != number {
        return .failure(damaged("meta page \(number) is not an LMDB meta page (overwritten?)"))
      }
      if page.u32(m + 4) != dataVersion {
        return .failure(
          damaged("meta page \(number) has LMDB data version \(page.u32(m + 4)), not 1"))
      }
      let pageSize = Int(page.u32(m + 24))
      guard pageSize >= 512, pageSize <= 65536, pageSize & (pageSize - 1) == 0 else {
        return .failure(damaged("meta page \(number) gives an impossible page size, \(pageSize)"))
      }
      return .success(
        Meta(
          pageSize: pageSize, freeRoot: page.u64(m + 24 + 40), freeDepth: Int(page.u16(m + 24 + 6)),
          mainRoot: page.u64(m + 72 + 40), mainDepth: Int(page.u16(m + 72 + 6)),
          lastPage: page.u64(m + 120), txnID: page.u64(m + 128)))
    }
    let meta0 = try parse(first, number: 0).get()
    let pageSize = meta0.pageSize
    guard file.size >= 2 * pageSize else {
      throw damaged(
        "it is \(file.size) bytes, shorter than LMDB's two meta pages (\(2 * pageSize) bytes)")
    }
    guard let second = file.read(offset: pageSize, count: 256) else {
      throw damaged("its second meta page cannot be read")
    }
    let meta1 = try parse(second, number: 1).get()
    guard meta1.pageSize == pageSize else {
      throw damaged("its meta pages disagree on the page size (\(pageSize), \(meta1.pageSize))")
    }
    // LMDB uses the meta page with the larger transaction id.
    let meta = meta1.txnID > meta0.txnID ? meta1 : meta0
    let number = meta1.txnID > meta0.txnID ? 1 : 0
    guard meta.lastPage >= 1, meta.lastPage < UInt64(Int.max / pageSize) else {
      throw damaged("meta page \(number) gives an impossible last page, \(meta.lastPage)")
    }
    for (name, root) in [("main", meta.mainRoot), ("free", meta.freeRoot)]
    where root != invalidPage && (root < 2 || root > meta.lastPage) {
      throw damaged(
        "meta page \(number) puts the \(name) database's root at page \(root), outside pages 2...\(meta.lastPage)"
      )
    }
    return meta
  }

  var pageCountInFile: UInt64 { UInt64(size / meta.pageSize) }

  /// The length check: every page up to `mm_last_pg` is in the file. LMDB does not write a page
  /// freed in the transaction that allocated it (a "loose" page), so the tail may legitimately
  /// be missing when every missing page is on the free list; that is checked only then.
  func checkLength() throws(DataFileDamage) {
    let needed = (meta.lastPage + 1) * UInt64(meta.pageSize)
    guard UInt64(size) < needed else { return }
    let damage = DataFileDamage(
      reason:
        "it is \(size) bytes but its meta page says the data runs to page \(meta.lastPage) (\(needed) bytes)"
    )
    var walk = TreeWalk(check: self, maxProblems: 1)
    var free = Set<UInt64>()
    walk.walk(root: meta.freeRoot, depth: meta.freeDepth, name: "the free list", readOverflow: true)
    { _, data in
      // A free-list record is an IDL: a count, then that many page numbers.
      guard data.count >= 8 else { return }
      let count = Int(min(data.u64(0), UInt64(data.count / 8 - 1)))
      for i in 0..<count { free.insert(data.u64(8 + 8 * i)) }
    }
    guard walk.problems.isEmpty else { throw damage }
    for page in pageCountInFile...meta.lastPage where !free.contains(page) { throw damage }
  }

  /// The cheap structural check made at every open: the main database's pages (it holds one
  /// record per named database) and the root page of every named database and of the free list.
  func checkRoots() throws(DataFileDamage) {
    var walk = TreeWalk(check: self, maxProblems: 1)
    var roots: [(String, UInt64, Int)] = [("the free list", meta.freeRoot, meta.freeDepth)]
    walk.walk(
      root: meta.mainRoot, depth: meta.mainDepth, name: "the main database", databasesOnly: true
    ) { key, data in
      roots.append((TreeWalk.databaseName(key), data.u64(40), Int(data.u16(6))))
    }
    for (name, root, depth) in roots
    where walk.problems.isEmpty && root != DataFileCheck.invalidPage {
      walk.checkPage(root, level: 1, depth: depth, name: name)
    }
    if let first = walk.problems.first { throw DataFileDamage(reason: first) }
  }

  /// The full structural check: every page reachable from the newest meta page, in every
  /// database, read and checked (page number, kind, offsets, depth, overflow runs). Returns the
  /// problems found, at most `maxProblems`.
  func checkAllPages(maxProblems: Int = 100) -> [String] {
    var walk = TreeWalk(check: self, maxProblems: maxProblems)
    walk.walk(root: meta.freeRoot, depth: meta.freeDepth, name: "the free list") { _, _ in }
    var named: [(String, UInt64, Int)] = []
    walk.walk(
      root: meta.mainRoot, depth: meta.mainDepth, name: "the main database", databasesOnly: true
    ) { key, data in
      named.append((TreeWalk.databaseName(key), data.u64(40), Int(data.u16(6))))
    }
    for (name, root, depth) in named {
      walk.walk(root: root, depth: depth, name: name) { _, _ in }
    }
    return walk.problems
  }

  fileprivate func readPage(_ number: UInt64, count: Int? = nil) -> [UInt8]? {
    file.read(offset: Int(number) * meta.pageSize, count: count ?? meta.pageSize)
  }
}

/// A damaged data file, in plain words.
struct DataFileDamage: Error {
  let reason: String
}

/// A depth-first walk over one B-tree's pages, checking each before looking inside it.
private struct TreeWalk {
  let check: DataFileCheck
  let maxProblems: Int
  var problems: [String] = []
  var seen = Set<UInt64>()

  init(check: DataFileCheck, maxProblems: Int) {
    self.check = check
    self.maxProblems = maxProblems
  }

  var full: Bool { problems.count >= maxProblems }

  mutating func problem(_ text: String) {
    if problems.count < maxProblems { problems.append(text) }
  }

  static func databaseName(_ key: [UInt8]) -> String {
    "database '\(String(decoding: key, as: UTF8.self))'"
  }

  /// Reads page `number` and checks its header; nil (with a problem noted) when it is unusable.
  @discardableResult
  mutating func checkPage(_ number: UInt64, level: Int, depth: Int, name: String) -> [UInt8]? {
    let meta = check.meta
    guard number >= 2, number <= meta.lastPage else {
      problem("\(name) points to page \(number), outside pages 2...\(meta.lastPage)")
      return nil
    }
    guard number < check.pageCountInFile, let page = check.readPage(number) else {
      problem(
        "\(name) points to page \(number), past the end of the file (\(check.size) bytes)")
      return nil
    }
    let stored = page.u64(0)
    guard stored == number else {
      problem("page \(number) of \(name) is overwritten (its header says page \(stored))")
      return nil
    }
    let flags = page.u16(10)
    let isLeaf = flags == DataFileCheck.pLeaf || flags == DataFileCheck.pLeaf | DataFileCheck.pLeaf2
    guard flags == DataFileCheck.pBranch || isLeaf else {
      problem("page \(number) of \(name) has flags 0x\(String(flags, radix: 16)), not a tree page")
      return nil
    }
    if isLeaf != (level == depth) {
      problem(
        "page \(number) of \(name) is a \(isLeaf ? "leaf" : "branch") at level \(level) of a tree \(depth) deep"
      )
      return nil
    }
    let lower = Int(page.u16(12))
    let upper = Int(page.u16(14))
    guard lower >= DataFileCheck.headerSize, lower % 2 == 0, lower <= upper,
      upper <= meta.pageSize
    else {
      problem("page \(number) of \(name) has impossible bounds (lower \(lower), upper \(upper))")
      return nil
    }
    return page
  }

  /// Walks the tree rooted at `root`: each leaf record's key and data go to `record`, or with
  /// `databasesOnly` only the named-database records (their data is the 48-byte `MDB_db`).
  /// Overflow runs are checked by their header, and read whole with `readOverflow`.
  mutating func walk(
    root: UInt64, depth: Int, name: String, databasesOnly: Bool = false,
    readOverflow: Bool = false, record: (_ key: [UInt8], _ data: [UInt8]) -> Void
  ) {
    guard root != DataFileCheck.invalidPage else { return }
    guard depth >= 1, depth <= 32 else {
      problem("\(name) has an impossible depth, \(depth)")
      return
    }
    let pageSize = check.meta.pageSize
    var stack: [(UInt64, Int)] = [(root, 1)]
    while let (number, level) = stack.popLast(), !full {
      guard seen.insert(number).inserted else {
        problem("page \(number) is reached twice (from \(name))")
        continue
      }
      guard let page = checkPage(number, level: level, depth: depth, name: name) else { continue }
      let flags = page.u16(10)
      if flags & DataFileCheck.pLeaf2 != 0 { continue }
      let lower = Int(page.u16(12))
      let upper = Int(page.u16(14))
      let count = (lower - DataFileCheck.headerSize) / 2
      var children: [(UInt64, Int)] = []
      for i in 0..<count {
        let offset = Int(page.u16(DataFileCheck.headerSize + 2 * i))
        let keySize = offset + 8 <= pageSize ? Int(page.u16(offset + 6)) : 0
        guard offset >= upper, offset + 8 + keySize <= pageSize else {
          problem("page \(number) of \(name) has node \(i) at an impossible offset, \(offset)")
          break
        }
        let lo = UInt64(page.u16(offset))
        let hi = UInt64(page.u16(offset + 2))
        let nodeFlags = page.u16(offset + 4)
        if flags == DataFileCheck.pBranch {
          children.append((lo | hi << 16 | UInt64(nodeFlags) << 32, level + 1))
          continue
        }
        let dataSize = Int(lo | hi << 16)
        let dataStart = offset + 8 + keySize
        let key = Array(page[(offset + 8)..<dataStart])
        if nodeFlags & DataFileCheck.fBigData != 0 {
          guard dataStart + 8 <= pageSize else {
            problem("page \(number) of \(name) has a record running off the page")
            break
          }
          if let data = overflow(
            page.u64(dataStart), size: dataSize, name: name, read: readOverflow),
            !databasesOnly
          {
            record(key, data)
          }
          continue
        }
        guard dataStart + dataSize <= pageSize else {
          problem("page \(number) of \(name) has a record running off the page")
          break
        }
        let data = Array(page[dataStart..<(dataStart + dataSize)])
        if nodeFlags & DataFileCheck.fSubData != 0 && nodeFlags & DataFileCheck.fDupData == 0 {
          guard dataSize == 48 else {
            problem("page \(number) of \(name) has a database record of \(dataSize) bytes, not 48")
            continue
          }
          if databasesOnly { record(key, data) }
          continue
        }
        if !databasesOnly { record(key, data) }
      }
      stack.append(contentsOf: children.reversed())
    }
  }

  /// Checks the overflow run starting at page `number` holding `size` bytes, and returns them
  /// when `read` (else no bytes); nil when the run is damaged.
  mutating func overflow(_ number: UInt64, size: Int, name: String, read: Bool) -> [UInt8]? {
    let meta = check.meta
    let pageSize = meta.pageSize
    guard number >= 2, number <= meta.lastPage, number < check.pageCountInFile,
      let header = check.readPage(number, count: DataFileCheck.headerSize)
    else {
      problem("\(name) points to overflow page \(number), outside the file")
      return nil
    }
    let pages = UInt64(header.u32(12))
    guard header.u64(0) == number, header.u16(10) == DataFileCheck.pOverflow, pages >= 1,
      pages * UInt64(pageSize) - UInt64(DataFileCheck.headerSize) >= UInt64(size),
      number + pages - 1 <= meta.lastPage, number + pages <= check.pageCountInFile
    else {
      problem("overflow page \(number) of \(name) is overwritten or runs past the file")
      return nil
    }
    guard seen.insert(number).inserted else {
      problem("overflow page \(number) is reached twice (from \(name))")
      return nil
    }
    guard read,
      let run = check.readPage(number, count: DataFileCheck.headerSize + size)
    else { return [] }
    return Array(run[DataFileCheck.headerSize...])
  }
}

/// A read-only file descriptor read with `pread`.
@safe private final class DataFileReader {
  let descriptor: Int32
  let size: Int

  init?(path: String) {
    let fd = unsafe open(path, O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { return nil }
    var info = stat()
    guard unsafe fstat(fd, &info) == 0 else {
      _ = close(fd)
      return nil
    }
    descriptor = fd
    size = Int(info.st_size)
  }

  func release() { _ = close(descriptor) }

  /// `count` bytes at `offset`, or nil when the file is shorter or the read fails.
  func read(offset: Int, count: Int) -> [UInt8]? {
    guard count >= 0, offset >= 0, offset <= size - count else { return nil }
    var bytes = [UInt8](repeating: 0, count: count)
    var done = 0
    while done < count {
      let n = unsafe bytes.withUnsafeMutableBytes { buffer in
        unsafe pread(
          descriptor, buffer.baseAddress.unsafelyUnwrapped + done, count - done,
          off_t(offset + done))
      }
      if n < 0 && errno == EINTR { continue }
      guard n > 0 else { return nil }
      done += n
    }
    return bytes
  }
}

extension [UInt8] {
  fileprivate func u16(_ at: Int) -> UInt16 {
    guard at >= 0, at + 2 <= count else { return 0 }
    return UInt16(self[at]) | UInt16(self[at + 1]) << 8
  }
  fileprivate func u32(_ at: Int) -> UInt32 {
    guard at >= 0, at + 4 <= count else { return 0 }
    var v: UInt32 = 0
    for i in (0..<4).reversed() { v = v << 8 | UInt32(self[at + i]) }
    return v
  }
  fileprivate func u64(_ at: Int) -> UInt64 {
    guard at >= 0, at + 8 <= count else { return 0 }
    var v: UInt64 = 0
    for i in (0..<8).reversed() { v = v << 8 | UInt64(self[at + i]) }
    return v
  }
}
