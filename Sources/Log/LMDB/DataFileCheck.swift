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
/// The layout read here is mdb.c's (liblmdb 0.9.x, 64-bit, default build):
/// - A page starts with a 16-byte header: `mp_pgno` u64, `mp_pad` u16, `mp_flags` u16, then
///   `mp_lower` and `mp_upper` u16 (or, on an overflow page, `mp_pages` u32, the run's length).
///   A branch or leaf page's header is followed by `mp_ptrs`, one u16 offset per node, up to
///   `mp_lower`; the nodes sit between `mp_upper` and the end of the page.
/// - A node is `mn_lo`, `mn_hi`, `mn_flags`, `mn_ksize` (u16 each), the key, then on a leaf the
///   data: `mn_lo | mn_hi << 16` bytes of it, or with `F_BIGDATA` an 8-byte page number of the
///   overflow run holding them. A branch node's child page number is
///   `mn_lo | mn_hi << 16 | mn_flags << 32`; its node 0's key is not used.
/// - Pages 0 and 1 are meta pages whose `MDB_meta` follows the header: `mm_magic` u32,
///   `mm_version` u32, `mm_address`, `mm_mapsize`, two 48-byte `MDB_db` records for the free
///   and main databases, `mm_last_pg` u64, `mm_txnid` u64. The page size is the free database's
///   `md_pad`.
/// - An `MDB_db` record is `md_pad` u32, `md_flags` u16, `md_depth` u16, then u64s:
///   `md_branch_pages`, `md_leaf_pages`, `md_overflow_pages`, `md_entries`, `md_root`. The main
///   database holds one such record per named database (a leaf node with `F_SUBDATA`); the free
///   database maps a transaction id to the pages it freed (a count, then the page numbers).
///
/// wikilog opens no database with `MDB_DUPSORT`, so duplicate-data nodes and `P_LEAF2` pages
/// are damage here, and every named database orders its keys with `memcmp` (LMDB's default).
struct DataFileCheck {
  /// An `MDB_db` record.
  struct Database {
    var flags: UInt16
    var depth: Int
    var branchPages: UInt64
    var leafPages: UInt64
    var overflowPages: UInt64
    var entries: UInt64
    var root: UInt64

    init(_ bytes: [UInt8], at offset: Int) {
      flags = bytes.u16(offset + 4)
      depth = Int(bytes.u16(offset + 6))
      branchPages = bytes.u64(offset + 8)
      leafPages = bytes.u64(offset + 16)
      overflowPages = bytes.u64(offset + 24)
      entries = bytes.u64(offset + 32)
      root = bytes.u64(offset + 40)
    }
  }

  /// The newest valid meta page's facts.
  struct Meta {
    var pageSize: Int
    var free: Database
    var main: Database
    var lastPage: UInt64
    var txnID: UInt64
    /// Which meta page (0 or 1) these come from.
    var number: Int
  }

  static let magic: UInt32 = 0xBEEF_C0DE
  static let dataVersion: UInt32 = 1
  static let invalidPage = UInt64.max
  static let headerSize = 16
  static let nodeHeaderSize = 8
  /// LMDB's `MDB_MAXKEYSIZE` in a default build (`mdb_env_get_maxkeysize`).
  static let maxKeySize = 511
  /// `CURSOR_STACK`: LMDB cannot descend a deeper tree.
  static let maxDepth = 32
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
  // Database flags (lmdb.h).
  static let reverseKey: UInt16 = 0x02
  static let integerKey: UInt16 = 0x08
  /// `MDB_DUPSORT`, `MDB_DUPFIXED`, `MDB_INTEGERDUP`, `MDB_REVERSEDUP`.
  static let duplicateFlags: UInt16 = 0x04 | 0x10 | 0x20 | 0x40

  let path: String
  let size: Int
  let meta: Meta
  fileprivate let file: DataFileReader

  /// Opens `path` and checks its meta pages. Returns nil when there is no such file (LMDB makes
  /// a new one there). The snapshot checked is the newest, as LMDB's, or the one of transaction
  /// `snapshot` when a meta page still names it (a read transaction's, pinned by it).
  ///
  /// - Throws: ``DataFileDamage`` with the reason in plain words; for a file of zero bytes too:
  ///   LMDB writes its two meta pages when it creates a data file, so an empty one lost what it
  ///   held (opened as it is, it would become an empty database over the lost one).
  static func open(path: String, snapshot: UInt64? = nil) throws(DataFileDamage)
    -> DataFileCheck?
  {
    guard let file = DataFileReader(path: path) else { return nil }
    guard file.size > 0 else {
      file.release()
      throw DataFileDamage(
        reason:
          "it is empty (0 bytes): LMDB writes its meta pages when it makes a data file, so this one lost its contents"
      )
    }
    do {
      let meta = try Self.readMeta(file, snapshot: snapshot)
      return DataFileCheck(path: path, size: file.size, meta: meta, file: file)
    } catch {
      file.release()
      throw error
    }
  }

  func close() { file.release() }

  private static func readMeta(_ file: DataFileReader, snapshot: UInt64?) throws(DataFileDamage)
    -> Meta
  {
    func damaged(_ reason: String) -> DataFileDamage { DataFileDamage(reason: reason) }
    guard let first = file.read(offset: 0, count: 256) else {
      throw damaged("it is \(file.size) bytes, too short to hold LMDB's two meta pages")
    }
    func parse(_ page: [UInt8], number: Int) -> Result<Meta, DataFileDamage> {
      let flags = page.u16(10)
      let m = headerSize
      if page.u32(m) != magic || flags & pMeta == 0 || page.u64(0) != UInt64(number) {
        return .failure(damaged("meta page \(number) is not an LMDB meta page (overwritten?)"))
      }
      if page.u32(m + 4) != dataVersion {
        return .failure(
          damaged("meta page \(number) has LMDB data version \(page.u32(m + 4)), not 1"))
      }
      // Each write transaction takes the next id: 2^63 of them is more than any file has seen.
      guard page.u64(m + 128) < 1 << 63 else {
        return .failure(
          damaged(
            "meta page \(number) gives an impossible transaction id, \(page.u64(m + 128))"))
      }
      let pageSize = Int(page.u32(m + 24))
      guard pageSize >= 512, pageSize <= 65536, pageSize & (pageSize - 1) == 0 else {
        return .failure(damaged("meta page \(number) gives an impossible page size, \(pageSize)"))
      }
      return .success(
        Meta(
          pageSize: pageSize, free: Database(page, at: m + 24), main: Database(page, at: m + 72),
          lastPage: page.u64(m + 120), txnID: page.u64(m + 128), number: number))
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
    var meta = meta1.txnID > meta0.txnID ? meta1 : meta0
    if let snapshot, let named = [meta0, meta1].first(where: { $0.txnID == snapshot }) {
      meta = named
    }
    let number = meta.number
    guard meta.lastPage >= 1, meta.lastPage < UInt64(Int.max / pageSize) else {
      throw damaged("meta page \(number) gives an impossible last page, \(meta.lastPage)")
    }
    for (name, root) in [("main", meta.main.root), ("free", meta.free.root)]
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
    // Each missing page would be one 8-byte entry of the free list, which is in the file.
    guard meta.lastPage + 1 - pageCountInFile <= UInt64(size / 8) else { throw damage }
    var walk = TreeWalk(check: self, maxProblems: 1)
    walk.walkFreeList()
    guard walk.problems.isEmpty else { throw damage }
    for page in pageCountInFile...meta.lastPage where !walk.free.contains(page) { throw damage }
  }

  /// The structural check made at every open and by ``EventLog/checkPages(directory:)``: every
  /// page reachable from the newest meta page, in the free list, the main database and every
  /// named database, read once and checked before anything is read through it. Returns the
  /// problems found, at most `maxProblems`.
  ///
  /// For each page: the page number in its header; branch or leaf at the right level for the
  /// database's depth; sane `mp_lower` and `mp_upper`; at least one node (two on a branch page
  /// outside the free list, which LMDB asserts); each node's offset even and within the page,
  /// its header, key and data within the page and clear of every other node; known node flags
  /// only; key sizes 1...511 (a branch's node 0 may have none); inline data no larger than LMDB
  /// puts inline; keys in ascending order, within a page and from page to page, with each
  /// branch key between the keys on either side of it. Every child and overflow page number is
  /// within 2...`mm_last_pg` and the file, and no page is reached twice. An overflow run's header
  /// (page number, `P_OVERFLOW`, length enough for the data, within the file). Each `MDB_db`
  /// record (the two in the meta page, one per named database): its flags, a root with a depth
  /// of 1...32 (or no root and depth 0), and page counts within the file. The free list's
  /// records: page numbers within the file, none listed twice, none in use.
  func checkAllPages(maxProblems: Int = 100) -> [String] {
    var walk = TreeWalk(check: self, maxProblems: maxProblems)
    walk.walkAll()
    return walk.problems
  }
}

/// A damaged data file, in plain words.
struct DataFileDamage: Error {
  let reason: String
}

/// A set of page numbers below a bound, one bit each.
private struct PageSet {
  private(set) var words: [UInt64]
  let bound: UInt64

  init(bound: UInt64) {
    self.bound = bound
    words = [UInt64](repeating: 0, count: Int((bound + 63) / 64))
  }

  func contains(_ page: UInt64) -> Bool {
    page < bound && words[Int(page >> 6)] & (1 << (page & 63)) != 0
  }

  /// Adds `page` (below the bound); false when it was there already.
  mutating func insert(_ page: UInt64) -> Bool {
    let index = Int(page >> 6)
    let bit: UInt64 = 1 << (page & 63)
    if words[index] & bit != 0 { return false }
    words[index] |= bit
    return true
  }

  /// The first page in both sets, if any.
  func firstCommon(_ other: PageSet) -> UInt64? {
    for i in 0..<min(words.count, other.words.count) where words[i] & other.words[i] != 0 {
      return UInt64(i * 64 + (words[i] & other.words[i]).trailingZeroBitCount)
    }
    return nil
  }
}

/// A walk over the B-trees of one snapshot, checking each page before looking inside it.
///
/// It descends the way LMDB's cursor does, one page per level of the tree, each read once and
/// checked where it was read to (no node is copied out), and keeps a copy of the last key seen
/// to check the order of keys from one leaf to the next. Pages are read one `pread` each, or,
/// while the walk goes forward through the file (as it does through the leaves of a log that
/// grew by appends), in runs of up to 256 KiB read ahead.
private struct TreeWalk {
  let check: DataFileCheck
  let maxProblems: Int
  let pageSize: Int
  let lastPage: UInt64
  let pagesInFile: UInt64
  /// LMDB's `me_nodemax`: a leaf node larger than this has its data on overflow pages.
  let nodeMax: Int
  var problems: [String] = []
  /// Pages reached from the meta page (tree and overflow pages).
  var inUse: PageSet
  /// Pages listed by the free list.
  var free: PageSet
  /// The pages read: the run read ahead (``runCapacity`` pages from 0), then one page-sized slot
  /// per level of the tree being walked.
  var pages: [UInt8] = []
  /// Where in ``pages`` each level's page is: in its slot, or in the run read ahead.
  var levelStart = [Int](repeating: 0, count: DataFileCheck.maxDepth)
  /// How many pages the run read ahead may hold.
  let runCapacity: Int
  /// The pages of the file in the run read ahead.
  var runFirst: UInt64 = 0
  var runCount = 0
  /// How many pages the next run reads: doubled while the walk goes forward, 1 otherwise.
  var window = 1
  /// The page read last.
  var lastRead: UInt64 = 0
  /// The path from the root: each level's page number, node count and next node to visit.
  var frames: [(page: UInt64, count: Int, next: Int)] = []
  /// Which 2-byte units of the current page the nodes seen so far cover.
  var covered: [UInt64]
  /// The last key of the last leaf walked in the current tree.
  var lastKey: [UInt8] = []
  var hasLastKey = false
  /// The branch key (level, node) the next leaf's first key must not be below.
  var lowerBound: (level: Int, node: Int)?
  /// An overflow run's bytes, when they are read.
  var scratch: [UInt8] = []
  /// The named databases found in the main database.
  var named: [(name: String, record: DataFileCheck.Database)] = []

  enum Kind { case free, main, named }

  /// A tree being walked: its name in messages, what its leaves hold, how its keys are ordered.
  struct Tree {
    let name: String
    let kind: Kind
    let record: DataFileCheck.Database
    var integerKeys: Bool { record.flags & DataFileCheck.integerKey != 0 }
    var reverseKeys: Bool { record.flags & DataFileCheck.reverseKey != 0 }
  }

  init(check: DataFileCheck, maxProblems: Int) {
    self.check = check
    self.maxProblems = maxProblems
    pageSize = check.meta.pageSize
    lastPage = check.meta.lastPage
    pagesInFile = check.pageCountInFile
    nodeMax = ((pageSize - DataFileCheck.headerSize) / 2) & ~1 - 2
    // A free-list entry past the file is legitimate (see checkLength), but there cannot be
    // more of them than the file holds 8-byte entries.
    let bound = min(lastPage + 1, pagesInFile + UInt64(check.size / 8))
    inUse = PageSet(bound: bound)
    free = PageSet(bound: bound)
    covered = [UInt64](repeating: 0, count: (pageSize / 2 + 63) / 64)
    runCapacity = max(1, (256 << 10) / pageSize)
  }

  /// Where level `level`'s own slot is in ``pages``.
  func slot(_ level: Int) -> Int { (runCapacity + level) * pageSize }

  /// Puts page `number` (in the file) in ``pages`` for level `level`, at ``levelStart``.
  mutating func fetch(_ number: UInt64, level: Int) -> Bool {
    defer { lastRead = number }
    if number >= runFirst, number < runFirst + UInt64(runCount) {
      levelStart[level] = Int(number - runFirst) * pageSize
      return true
    }
    let forward = number > lastRead && number <= lastRead + UInt64(runCapacity)
    window = forward ? min(2 * window, runCapacity) : 1
    if window == 1 {
      levelStart[level] = slot(level)
      return check.file.read(
        into: &pages, at: slot(level), offset: Int(number) * pageSize, count: pageSize)
    }
    // The levels above keep their pages: those in the run move to their slots first.
    for above in 0..<level where levelStart[above] < slot(0) {
      let (from, to) = (levelStart[above], slot(above))
      for i in 0..<pageSize { pages[to + i] = pages[from + i] }
      levelStart[above] = to
    }
    let count = Int(min(UInt64(window), pagesInFile - number))
    runCount = 0
    guard
      check.file.read(into: &pages, at: 0, offset: Int(number) * pageSize, count: count * pageSize)
    else { return false }
    runFirst = number
    runCount = count
    levelStart[level] = 0
    return true
  }

  var full: Bool { problems.count >= maxProblems }

  mutating func problem(_ text: String) {
    if problems.count < maxProblems { problems.append(text) }
  }

  /// A database's name from its key in the main database, printable and on one line.
  static func databaseName(_ key: ArraySlice<UInt8>) -> String {
    var name = ""
    for scalar in String(decoding: key, as: UTF8.self).unicodeScalars {
      if scalar.properties.generalCategory == .control || scalar == "\u{FFFD}" {
        name += "\\u{\(String(scalar.value, radix: 16))}"
      } else {
        name.unicodeScalars.append(scalar)
      }
    }
    return "database '\(name)'"
  }

  // MARK: Whole snapshot

  mutating func walkAll() {
    let meta = check.meta
    let free = Tree(name: "the free list", kind: .free, record: meta.free)
    let main = Tree(name: "the main database", kind: .main, record: meta.main)
    if checkRecord(free, origin: "meta page \(meta.number)") { walk(free) }
    if !full, checkRecord(main, origin: "meta page \(meta.number)") { walk(main) }
    for (name, record) in named where !full {
      let tree = Tree(name: name, kind: .named, record: record)
      if checkRecord(tree, origin: "the main database") { walk(tree) }
    }
    // A page both in use and free would be handed out again by the next write.
    if !full, let page = inUse.firstCommon(self.free) {
      problem("page \(page) is in use and also on the free list")
    }
  }

  /// Walks the free list only, collecting its pages in ``free``.
  mutating func walkFreeList() {
    let free = Tree(name: "the free list", kind: .free, record: check.meta.free)
    if checkRecord(free, origin: "meta page \(check.meta.number)") { walk(free) }
  }

  /// Checks a database's `MDB_db` record; false (with a problem noted) when it is unusable.
  mutating func checkRecord(_ tree: Tree, origin: String) -> Bool {
    let record = tree.record
    let flags = record.flags
    switch tree.kind {
    case .free:
      // `mm_flags`: the environment's own low flags, and MDB_INTEGERKEY.
      guard flags & DataFileCheck.integerKey != 0,
        flags & (DataFileCheck.duplicateFlags | DataFileCheck.reverseKey) == 0
      else {
        problem("\(origin) gives \(tree.name) flags 0x\(String(flags, radix: 16))")
        return false
      }
    case .main, .named:
      // A database wikilog made has none of these flags; LMDB follows the duplicate-data ones
      // into sub-pages, and with them on the main database it has no named databases.
      let unusable =
        tree.kind == .main
        ? DataFileCheck.duplicateFlags | DataFileCheck.integerKey : DataFileCheck.duplicateFlags
      guard flags & ~(0x7E as UInt16) == 0, flags & unusable == 0 else {
        problem("\(origin) gives \(tree.name) flags 0x\(String(flags, radix: 16))")
        return false
      }
    }
    if record.root == DataFileCheck.invalidPage {
      guard record.depth == 0 else {
        problem("\(origin) gives \(tree.name) no root page but a depth of \(record.depth)")
        return false
      }
    } else {
      guard record.depth >= 1, record.depth <= DataFileCheck.maxDepth else {
        problem("\(origin) gives \(tree.name) an impossible depth, \(record.depth)")
        return false
      }
    }
    for (what, count) in [
      ("branch pages", record.branchPages), ("leaf pages", record.leafPages),
      ("overflow pages", record.overflowPages),
    ] where count > lastPage {
      problem("\(origin) gives \(tree.name) \(count) \(what), more than the file has")
      return false
    }
    // Each entry takes at least a 2-byte pointer and an 8-byte node on some page.
    guard record.entries <= (lastPage + 1) * UInt64(pageSize / 10) else {
      problem("\(origin) gives \(tree.name) \(record.entries) entries, more than the file holds")
      return false
    }
    return true
  }

  // MARK: One tree

  /// Walks one tree depth-first, in key order.
  mutating func walk(_ tree: Tree) {
    let root = tree.record.root
    guard root != DataFileCheck.invalidPage else { return }
    let depth = tree.record.depth
    if pages.count < slot(depth) {
      pages.append(contentsOf: repeatElement(0, count: slot(depth) - pages.count))
    }
    frames.removeAll(keepingCapacity: true)
    hasLastKey = false
    lowerBound = nil
    guard let count = load(root, level: 0, tree: tree) else { return }
    frames.append((root, count, 0))
    while !full, let top = frames.last {
      let level = frames.count - 1
      // A leaf was checked whole when it was loaded; a branch is done after its last child.
      guard level + 1 < depth, top.next < top.count else {
        frames.removeLast()
        continue
      }
      let index = top.next
      frames[level].next += 1
      let base = levelStart[level]
      let node = base + Int(pages.u16(base + DataFileCheck.headerSize + 2 * index))
      let child =
        UInt64(pages.u16(node)) | UInt64(pages.u16(node + 2)) << 16
        | UInt64(pages.u16(node + 4)) << 32
      if index > 0 {
        // This key separates the subtree before it from the one it leads to.
        let keySize = Int(pages.u16(node + 6))
        if hasLastKey,
          compare(pages, node + 8, keySize, lastKey, 0, lastKey.count, tree) <= 0
        {
          problem(
            "page \(top.page) of \(tree.name) has its keys out of order (node \(index) is not above the keys before it)"
          )
          continue
        }
        lowerBound = (level, index)
      }
      guard let count = load(child, level: level + 1, tree: tree) else {
        lowerBound = nil
        continue
      }
      frames.append((child, count, 0))
    }
  }

  /// Reads page `number` into the buffer of `level` and checks it whole (for a leaf, its
  /// records too); returns its node count, or nil (with a problem noted) when it is unusable.
  mutating func load(_ number: UInt64, level: Int, tree: Tree) -> Int? {
    let name = tree.name
    guard number >= 2, number <= lastPage else {
      problem("\(name) points to page \(number), outside pages 2...\(lastPage)")
      return nil
    }
    guard number < pagesInFile else {
      problem("\(name) points to page \(number), past the end of the file (\(check.size) bytes)")
      return nil
    }
    guard inUse.insert(number) else {
      problem("page \(number) is reached twice (from \(name))")
      return nil
    }
    guard fetch(number, level: level) else {
      problem("page \(number) of \(name) cannot be read")
      return nil
    }
    let base = levelStart[level]
    let stored = pages.u64(base)
    guard stored == number else {
      problem("page \(number) of \(name) is overwritten (its header says page \(stored))")
      return nil
    }
    let flags = pages.u16(base + 10)
    guard flags == DataFileCheck.pBranch || flags == DataFileCheck.pLeaf else {
      problem("page \(number) of \(name) has flags 0x\(String(flags, radix: 16)), not a tree page")
      return nil
    }
    let isLeaf = flags == DataFileCheck.pLeaf
    let depth = tree.record.depth
    if isLeaf != (level + 1 == depth) {
      problem(
        "page \(number) of \(name) is a \(isLeaf ? "leaf" : "branch") at level \(level + 1) of a tree \(depth) deep"
      )
      return nil
    }
    let lower = Int(pages.u16(base + 12))
    let upper = Int(pages.u16(base + 14))
    guard lower >= DataFileCheck.headerSize, lower % 2 == 0, lower <= upper, upper <= pageSize
    else {
      problem("page \(number) of \(name) has impossible bounds (lower \(lower), upper \(upper))")
      return nil
    }
    let count = (lower - DataFileCheck.headerSize) / 2
    // LMDB removes an emptied page and asserts that a branch page it descends (outside the
    // free list) has two keys or more.
    let fewest = isLeaf || tree.kind == .free ? 1 : 2
    guard count >= fewest else {
      problem("page \(number) of \(name) has \(count) nodes, fewer than \(fewest)")
      return nil
    }
    guard checkNodes(number, base: base, count: count, upper: upper, isLeaf: isLeaf, tree: tree)
    else { return nil }
    if isLeaf {
      guard checkLeaf(number, base: base, count: count, tree: tree) else { return nil }
    }
    return count
  }

  /// Each node's place and size within the page, and its flags; false (with a problem noted)
  /// on the first that is wrong.
  mutating func checkNodes(
    _ number: UInt64, base: Int, count: Int, upper: Int, isLeaf: Bool, tree: Tree
  ) -> Bool {
    let name = tree.name
    for i in covered.indices { covered[i] = 0 }
    for i in 0..<count {
      let offset = Int(pages.u16(base + DataFileCheck.headerSize + 2 * i))
      guard offset % 2 == 0, offset >= upper, offset + DataFileCheck.nodeHeaderSize <= pageSize
      else {
        problem(
          "page \(number) of \(name) has node \(i) at an impossible offset, \(offset) (nodes start at \(upper))"
        )
        return false
      }
      let node = base + offset
      let keySize = Int(pages.u16(node + 6))
      var extent = DataFileCheck.nodeHeaderSize + keySize
      let fewestKeyBytes = isLeaf || i > 0 ? 1 : 0
      let integerKey = tree.kind == .free && (isLeaf || i > 0)
      guard keySize >= fewestKeyBytes, keySize <= DataFileCheck.maxKeySize,
        !integerKey || keySize == 8
      else {
        problem("page \(number) of \(name) has node \(i) with a key of \(keySize) bytes")
        return false
      }
      if isLeaf {
        let flags = pages.u16(node + 4)
        let allowed: Bool
        switch tree.kind {
        case .main: allowed = flags == DataFileCheck.fSubData
        case .free, .named: allowed = flags & ~DataFileCheck.fBigData == 0
        }
        guard allowed else {
          problem(
            "page \(number) of \(name) has node \(i) with flags 0x\(String(flags, radix: 16))")
          return false
        }
        if flags & DataFileCheck.fBigData != 0 {
          extent += 8
        } else {
          extent += Int(pages.u16(node)) | Int(pages.u16(node + 2)) << 16
          guard extent <= nodeMax else {
            problem(
              "page \(number) of \(name) has node \(i) of \(extent) bytes, more than LMDB keeps on a page (\(nodeMax))"
            )
            return false
          }
        }
      }
      guard offset + extent <= pageSize else {
        problem("page \(number) of \(name) has node \(i) running off the page")
        return false
      }
      guard cover(from: offset / 2, to: (offset + extent + 1) / 2) else {
        problem("page \(number) of \(name) has node \(i) overlapping another node")
        return false
      }
    }
    return true
  }

  /// Marks 2-byte units `start..<end` of the page covered; false when one already was.
  mutating func cover(from start: Int, to end: Int) -> Bool {
    var unit = start
    while unit < end {
      let word = unit >> 6
      let bits = min(64 - unit & 63, end - unit)
      let mask: UInt64 = (bits == 64 ? ~0 : (1 << UInt64(bits)) - 1) << UInt64(unit & 63)
      if covered[word] & mask != 0 { return false }
      covered[word] |= mask
      unit += bits
    }
    return true
  }

  /// A leaf's keys in order (after the last leaf's, not below the branch key leading here), and
  /// its records: overflow runs, named-database records, free-list entries.
  mutating func checkLeaf(_ number: UInt64, base: Int, count: Int, tree: Tree) -> Bool {
    let name = tree.name
    var previous = 0
    var previousSize = 0
    for i in 0..<count {
      let node = base + Int(pages.u16(base + DataFileCheck.headerSize + 2 * i))
      let keySize = Int(pages.u16(node + 6))
      let key = node + 8
      let inOrder: Bool
      if i > 0 {
        inOrder = compare(pages, key, keySize, pages, previous, previousSize, tree) > 0
      } else {
        var above = true
        if let (level, index) = lowerBound {
          let parent = levelStart[level]
          let separator = parent + Int(pages.u16(parent + DataFileCheck.headerSize + 2 * index))
          above =
            compare(pages, key, keySize, pages, separator + 8, Int(pages.u16(separator + 6)), tree)
            >= 0
        }
        inOrder =
          above
          && (!hasLastKey || compare(pages, key, keySize, lastKey, 0, lastKey.count, tree) > 0)
      }
      guard inOrder else {
        problem("page \(number) of \(name) has its keys out of order (at node \(i))")
        return false
      }
      previous = key
      previousSize = keySize
      let flags = pages.u16(node + 4)
      let dataSize = Int(pages.u16(node)) | Int(pages.u16(node + 2)) << 16
      let data = key + keySize
      switch tree.kind {
      case .main:
        guard dataSize == 48 else {
          problem("page \(number) of \(name) has a database record of \(dataSize) bytes, not 48")
          return false
        }
        named.append(
          (Self.databaseName(pages[key..<data]), DataFileCheck.Database(pages, at: data)))
      case .named:
        if flags & DataFileCheck.fBigData != 0 {
          guard overflow(pages.u64(data), size: dataSize, name: name, read: false) else {
            return false
          }
        }
      case .free:
        if flags & DataFileCheck.fBigData != 0 {
          guard overflow(pages.u64(data), size: dataSize, name: name, read: true),
            freePages(in: scratch, at: 0, size: dataSize, name: name, page: number)
          else { return false }
        } else {
          let bytes = pages
          guard freePages(in: bytes, at: data, size: dataSize, name: name, page: number) else {
            return false
          }
        }
      }
    }
    lastKey.removeAll(keepingCapacity: true)
    lastKey.append(contentsOf: pages[previous..<(previous + previousSize)])
    hasLastKey = true
    lowerBound = nil
    return true
  }

  /// A free-list record: a count, then that many page numbers, each a page LMDB may hand out.
  mutating func freePages(in bytes: [UInt8], at start: Int, size: Int, name: String, page: UInt64)
    -> Bool
  {
    let count = size >= 8 ? bytes.u64(start) : 0
    guard size >= 8, size % 8 == 0, count <= UInt64(size / 8 - 1) else {
      problem("page \(page) of \(name) has a record of \(size) bytes listing \(count) pages")
      return false
    }
    for i in 0..<Int(count) {
      let listed = bytes.u64(start + 8 + 8 * i)
      guard listed >= 2, listed <= lastPage, listed < free.bound else {
        problem("\(name) lists page \(listed), outside pages 2...\(lastPage)")
        return false
      }
      guard free.insert(listed) else {
        problem("\(name) lists page \(listed) twice")
        return false
      }
    }
    return true
  }

  /// Checks the overflow run starting at page `number` holding `size` bytes, and with `read`
  /// reads them into ``scratch``; false (with a problem noted) when the run is damaged.
  mutating func overflow(_ number: UInt64, size: Int, name: String, read: Bool) -> Bool {
    guard number >= 2, number <= lastPage, number < pagesInFile else {
      problem("\(name) points to overflow page \(number), outside the file")
      return false
    }
    if number >= runFirst, number < runFirst + UInt64(runCount) {
      let start = Int(number - runFirst) * pageSize
      scratch.removeAll(keepingCapacity: true)
      scratch.append(contentsOf: pages[start..<(start + DataFileCheck.headerSize)])
    } else {
      guard
        check.file.read(
          into: &scratch, at: 0, offset: Int(number) * pageSize, count: DataFileCheck.headerSize)
      else {
        problem("overflow page \(number) of \(name) cannot be read")
        return false
      }
    }
    let pages = UInt64(scratch.u32(12))
    guard scratch.u64(0) == number, scratch.u16(10) == DataFileCheck.pOverflow, pages >= 1,
      pages * UInt64(pageSize) - UInt64(DataFileCheck.headerSize) >= UInt64(size),
      number + pages - 1 <= lastPage, number + pages <= pagesInFile
    else {
      problem("overflow page \(number) of \(name) is overwritten or runs past the file")
      return false
    }
    for page in number..<(number + pages) where !inUse.insert(page) {
      problem("overflow page \(page) is reached twice (from \(name))")
      return false
    }
    guard read else { return true }
    guard
      check.file.read(
        into: &scratch, at: 0, offset: Int(number) * pageSize + DataFileCheck.headerSize,
        count: size)
    else {
      problem("overflow page \(number) of \(name) cannot be read")
      return false
    }
    return true
  }

  /// How the key at `x[xStart..<xStart + xCount]` compares with the one in `y`, in the tree's
  /// order (LMDB's `mdb_cmp_memn`, `mdb_cmp_memnr` or, for integer keys, `mdb_cmp_cint` and
  /// `mdb_cmp_long`): negative, zero or positive. Integer keys of different sizes compare as
  /// unequal in the order of their sizes.
  func compare(
    _ x: [UInt8], _ xStart: Int, _ xCount: Int, _ y: [UInt8], _ yStart: Int, _ yCount: Int,
    _ tree: Tree
  ) -> Int {
    if tree.kind == .free || tree.integerKeys {
      // Little-endian unsigned integers: compare from the most significant byte.
      if xCount != yCount { return xCount < yCount ? -1 : 1 }
      var i = xCount - 1
      while i >= 0 {
        let a = x[xStart + i]
        let b = y[yStart + i]
        if a != b { return a < b ? -1 : 1 }
        i -= 1
      }
      return 0
    }
    let common = min(xCount, yCount)
    if tree.reverseKeys {
      var i = 1
      while i <= common {
        let a = x[xStart + xCount - i]
        let b = y[yStart + yCount - i]
        if a != b { return a < b ? -1 : 1 }
        i += 1
      }
    } else {
      var i = 0
      while i < common {
        let a = x[xStart + i]
        let b = y[yStart + i]
        if a != b { return a < b ? -1 : 1 }
        i += 1
      }
    }
    return xCount == yCount ? 0 : (xCount < yCount ? -1 : 1)
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
    var bytes: [UInt8] = []
    guard read(into: &bytes, at: 0, offset: offset, count: count) else { return nil }
    return bytes
  }

  /// Reads `count` bytes at `offset` into `buffer[start...]`, growing it when it is shorter;
  /// false when the file is shorter or the read fails.
  func read(into buffer: inout [UInt8], at start: Int, offset: Int, count: Int) -> Bool {
    guard count >= 0, offset >= 0, start >= 0, offset <= size - count else { return false }
    if buffer.count < start + count {
      buffer.append(contentsOf: repeatElement(0, count: start + count - buffer.count))
    }
    var done = 0
    while done < count {
      let n = unsafe buffer.withUnsafeMutableBytes { bytes in
        unsafe pread(
          descriptor, bytes.baseAddress.unsafelyUnwrapped + start + done, count - done,
          off_t(offset + done))
      }
      if n < 0 && errno == EINTR { continue }
      guard n > 0 else { return false }
      done += n
    }
    return true
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
