import Formats
import Log
import Projections
import Synchronization

/// The bytes of keys and values an index's segments were written with, merges included: the
/// work indexing costs, counted rather than timed (a test of growth checks it per page).
final class SearchWork: Sendable {
  let bytes = Atomic<Int>(0)

  func add(_ n: Int) { bytes.add(n, ordering: .relaxed) }
}

/// Keys and numbers of the search index's segmented layout (``TextSearchProjection``).
enum SearchKeys {
  static let nextNumKey = Array("next".utf8)
  static let nextSegmentKey = Array("segment".utf8)

  /// Nums per chunk of the `dead` bitmap.
  static let deadChunk: UInt64 = 4096

  @inline(__always)
  static func u32(_ v: UInt32) -> [UInt8] {
    [UInt8(v >> 24), UInt8(v >> 16 & 0xFF), UInt8(v >> 8 & 0xFF), UInt8(v & 0xFF)]
  }

  @inline(__always)
  static func u64(_ v: UInt64) -> [UInt8] { v.bigEndianBytes }

  /// The varint at `at` of `bytes`, moving past it; nil when it is cut short.
  @inline(__always)
  static func varint(_ bytes: Span<UInt8>, _ at: inout Int) -> UInt64? {
    var v: UInt64 = 0
    var shift: UInt64 = 0
    while at < bytes.count && shift < 64 {
      let b = bytes[at]
      at += 1
      v |= UInt64(b & 0x7F) << shift
      if b < 0x80 { return v }
      shift += 7
    }
    return nil
  }

  static func readU64(_ bytes: some Collection<UInt8>) -> UInt64 {
    bytes.prefix(8).reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
  }

  /// The `postings` key of `term` of group `group` in segment `segment`.
  static func postingKey(_ segment: UInt32, _ group: [UInt8], _ term: some Collection<UInt8>)
    -> [UInt8]
  {
    var key = u32(segment)
    key.reserveCapacity(5 + group.count + term.count)
    key.append(contentsOf: group)
    key.append(0)
    key.append(contentsOf: term)
    return key
  }
}

/// A segment of the index: the postings of the documents numbered `lo..<hi` (those alive when
/// it was written), `docs` of them, `dead` of which have died since (`search.segments`).
struct SearchSegment: Hashable {
  var id: UInt32
  var lo: UInt64
  var hi: UInt64
  var level: Int
  var docs: Int
  var dead: Int

  var value: [UInt8] {
    lo.bigEndianBytes + hi.bigEndianBytes + [UInt8(clamping: level)]
      + UInt64(max(docs, 0)).bigEndianBytes + UInt64(max(dead, 0)).bigEndianBytes
  }

  init(id: UInt32, lo: UInt64, hi: UInt64, level: Int, docs: Int, dead: Int) {
    self.id = id
    self.lo = lo
    self.hi = hi
    self.level = level
    self.docs = docs
    self.dead = dead
  }

  init(key: [UInt8], value: [UInt8]) throws {
    guard key.count == 4, value.count == 33 else { throw ByteReader.Truncated() }
    id = UInt32(SearchKeys.readU64([0, 0, 0, 0] + key))
    lo = SearchKeys.readU64(value[0..<8])
    hi = SearchKeys.readU64(value[8..<16])
    level = Int(value[16])
    docs = Int(truncatingIfNeeded: SearchKeys.readU64(value[17..<25]))
    dead = Int(truncatingIfNeeded: SearchKeys.readU64(value[25..<33]))
  }

  /// Every segment, by the documents they hold (`lo`); their ranges never overlap.
  static func all(_ storage: ProjectionStorage, _ txn: ReadTransaction) throws -> [SearchSegment] {
    var out: [SearchSegment] = []
    try txn.scan(storage["segments"]) { key, value in
      out.append(try SearchSegment(key: key, value: value))
      return true
    }
    return out.sorted { $0.lo < $1.lo }
  }
}

/// The documents numbered below `end` that have died but are still in a segment's postings
/// (`search.dead`, a bitmap in chunks of ``SearchKeys/deadChunk``), read into one bitset.
struct DeadSet {
  private var words: [UInt64] = []
  var isEmpty: Bool { words.isEmpty }

  init(
    _ storage: ProjectionStorage, _ txn: ReadTransaction, from lo: UInt64 = 0, to hi: UInt64 = .max
  )
    throws
  {
    let first = lo / SearchKeys.deadChunk
    try txn.scan(storage["dead"], from: SearchKeys.u64(first)) { key, value in
      let chunk = SearchKeys.readU64(key)
      guard chunk * SearchKeys.deadChunk < hi else { return false }
      let base = Int(chunk * SearchKeys.deadChunk / 64)
      let count = value.count / 8
      if words.count < base + count {
        words += [UInt64](repeating: 0, count: base + count - words.count)
      }
      for w in 0..<count {
        words[base + w] = SearchKeys.readU64(value[(w * 8)..<(w * 8 + 8)])
      }
      return true
    }
  }

  @inline(__always)
  func contains(_ num: UInt64) -> Bool {
    let w = Int(num >> 6)
    return w < words.count && words[w] & (1 << (num & 63)) != 0
  }
}

/// The search projection's buffer in a write transaction (``SearchWrites``): the class that
/// ``WriteTransaction/buffer(_:make:)`` keeps, holding the writes as a value, so that the
/// writer's many small changes to them need no exclusivity check each.
final class SearchBuffer: TransactionBuffer {
  var writes: SearchWrites

  init(_ storage: ProjectionStorage, work: SearchWork) {
    writes = SearchWrites(storage, work: work)
  }

  func flush(into txn: WriteTransaction) throws { try writes.flush(into: txn) }

  /// A term's hash, as ``SearchWrites/row(_:_:_:)`` uses it: eight bytes at a time into a `Hasher` (seeded
  /// per process, so that no one can choose words that collide).
  static func hash(_ bytes: ArraySlice<UInt8>) -> Int {
    var hasher = Hasher()
    var word: UInt64 = 0
    var n = 0
    for b in bytes {
      word = word << 8 | UInt64(b)
      n += 1
      if n == 8 {
        hasher.combine(word)
        word = 0
        n = 0
      }
    }
    hasher.combine(word)
    hasher.combine(bytes.count)
    return hasher.finalize()
  }

  /// The order of two byte strings: negative, zero or positive.
  @inline(__always)
  static func compare(_ a: ArraySlice<UInt8>, _ b: ArraySlice<UInt8>) -> Int {
    let n = min(a.count, b.count)
    var i = a.startIndex
    var j = b.startIndex
    for _ in 0..<n {
      let x = a[i]
      let y = b[j]
      if x != y { return x < y ? -1 : 1 }
      i += 1
      j += 1
    }
    return a.count - b.count
  }
}

/// A document's number and group, as `search.refs` keeps them by document id.
struct SearchRef: Hashable {
  var num: UInt64
  var group: [UInt8]

  var value: [UInt8] { num.bigEndianBytes + group }

  init(num: UInt64, group: [UInt8]) {
    self.num = num
    self.group = group
  }

  init(value: [UInt8]) throws {
    guard value.count >= 8 else { throw ByteReader.Truncated() }
    num = SearchKeys.readU64(value)
    group = Array(value.dropFirst(8))
  }
}

/// The search projection's writes of one transaction: the documents indexed since the last
/// flush become one new segment (their postings, lengths and records, written in key order
/// with `MDB_APPEND`), the documents they replace are marked dead, and then segments are
/// merged (``merge(txn:)``).
///
/// A new document's postings are chained to its (group, term) row in the order documents
/// come, so each row's list is sorted by number without a sort; each distinct (group, term) is
/// interned once per flush in an open-addressing table keyed by the hash that
/// ``TextSearchProjection/Indexed`` brings.
struct SearchWrites {
  var storage: ProjectionStorage
  /// Documents applied since the last flush.
  var applied = 0

  /// A document's number and a value (a term's frequency, or a length); `next` is the next
  /// entry of the same row, -1 for none.
  struct Entry {
    var num: UInt64
    var value: Int
    /// Where its `value` positions start in ``positionArena`` (-1: none, a length).
    var positions: Int32 = -1
    var next: Int32 = -1
  }

  struct Chain {
    var head: Int32 = -1
    var tail: Int32 = -1
  }

  /// A group's live documents and their total length in words (`search.totals`).
  struct Stat {
    var docs: Int
    var length: Int
  }

  struct Group {
    let key: [UInt8]
    var stat: Stat? = nil
    var changed = false
    var name: [UInt8]? = nil
    /// Its new documents' lengths.
    var norms = Chain()
  }

  struct Row {
    let group: Int32
    let hash: Int
    let start: Int32
    let end: Int32
    var postings = Chain()
  }

  var groups: [Group] = []
  var groupIDs: [[UInt8]: Int32] = [:]
  var rows: [Row] = []
  var rowTerms: [UInt8] = []
  var table = [Int32](repeating: -1, count: 1024)
  var postingEntries: [Entry] = []
  var normEntries: [Entry] = []
  /// The new documents' positions of each term.
  var positionArena: [Int32] = []

  /// The next document number (read from `search.meta` when first needed).
  var nextNum: UInt64? = nil
  /// The number of this buffer's first new document: its records are `records[num - firstNum]`.
  var firstNum: UInt64 = 0
  /// This buffer's new documents' records, nil for one replaced before the flush.
  var records: [[UInt8]?] = []
  var killedNew = 0
  /// `search.refs` rows as they now are (nil: removed).
  var refs: [[UInt8]: SearchRef?] = [:]
  /// Documents of earlier segments that died.
  var deadOld: [UInt64] = []

  /// Segments merged at once.
  static let mergeFactor = 8
  /// The most documents a merge makes one segment of (a merge holds its segments' rows in
  /// memory): segments past it stay as they are.
  static let maxMergedDocs = 1 << 19

  let work: SearchWork?

  init(_ storage: ProjectionStorage, work: SearchWork?) {
    self.storage = storage
    self.work = work
  }

  mutating func group(_ key: [UInt8]) -> Int32 {
    if let g = groupIDs[key] { return g }
    let g = Int32(groups.count)
    groups.append(Group(key: key))
    groupIDs[key] = g
    return g
  }

  /// The number of the row of `term` (whose ``SearchBuffer/hash(_:)`` is `hash`) in group `g`.
  mutating func row(_ g: Int32, _ hash: Int, _ term: ArraySlice<UInt8>) -> Int32 {
    let h = hash ^ (Int(g) &* 0x1F35_A3B1_5C79_3E8D)
    let mask = table.count - 1
    var i = h & mask
    while true {
      let r = table[i]
      if r < 0 { break }
      let row = rows[Int(r)]
      if row.hash == h && row.group == g
        && SearchBuffer.compare(rowTerms[Int(row.start)..<Int(row.end)], term) == 0
      {
        return r
      }
      i = (i + 1) & mask
    }
    let r = Int32(rows.count)
    let start = Int32(rowTerms.count)
    rowTerms.append(contentsOf: term)
    rows.append(Row(group: g, hash: h, start: start, end: Int32(rowTerms.count)))
    table[i] = r
    if rows.count * 2 > table.count {
      table = [Int32](repeating: -1, count: table.count * 2)
      let mask = table.count - 1
      for (k, row) in rows.enumerated() {
        var i = row.hash & mask
        while table[i] >= 0 { i = (i + 1) & mask }
        table[i] = Int32(k)
      }
    }
    return r
  }

  private static func append(_ entry: Entry, to chain: inout Chain, in entries: inout [Entry]) {
    let c = Int32(entries.count)
    entries.append(entry)
    if chain.tail >= 0 { entries[Int(chain.tail)].next = c } else { chain.head = c }
    chain.tail = c
  }

  func ref(_ id: [UInt8], txn: WriteTransaction) throws -> SearchRef? {
    if let pending = refs[id] { return pending }
    return try txn.get(id, in: storage["refs"]).map { try SearchRef(value: $0) }
  }

  func isNew(_ num: UInt64) -> Bool {
    num >= firstNum && num < firstNum + UInt64(records.count)
  }

  func record(_ num: UInt64, txn: WriteTransaction) throws -> [UInt8]? {
    if isNew(num) { return records[Int(num - firstNum)] }
    return try txn.get(SearchKeys.u64(num), in: storage["records"])
  }

  mutating func stat(_ g: Int32, txn: WriteTransaction) throws -> Stat {
    if let s = groups[Int(g)].stat { return s }
    var s = Stat(docs: 0, length: 0)
    if let v = try txn.get(groups[Int(g)].key, in: storage["totals"]), v.count >= 16 {
      s = Stat(
        docs: Int(truncatingIfNeeded: SearchKeys.readU64(v)),
        length: Int(truncatingIfNeeded: SearchKeys.readU64(v[8..<16])))
    }
    groups[Int(g)].stat = s
    return s
  }

  mutating func setStat(_ g: Int32, _ s: Stat) {
    groups[Int(g)].stat = s
    groups[Int(g)].changed = true
  }

  mutating func takeNum(txn: WriteTransaction) throws -> UInt64 {
    if nextNum == nil {
      let stored = try txn.get(SearchKeys.nextNumKey, in: storage["meta"])
      nextNum = stored.map { SearchKeys.readU64($0) } ?? 0
      firstNum = nextNum!
    }
    let num = nextNum!
    nextNum = num + 1
    return num
  }

  /// Makes document `id` indexed as `new` (nil: not indexed).
  mutating func set(_ id: [UInt8], _ new: TextSearchProjection.Indexed?, txn: WriteTransaction)
    throws
  {
    applied += 1
    let old = try ref(id, txn: txn)
    var oldRecord: [UInt8]? = nil
    if let old { oldRecord = try record(old.num, txn: txn) }
    if let old, let new, old.group == new.group, oldRecord == new.record { return }
    if let old {
      let g = group(old.group)
      var s = try stat(g, txn: txn)
      s.docs -= 1
      if let oldRecord {
        var reader = ByteReader(oldRecord)
        _ = try reader.data()
        s.length -= try reader.int()
      }
      if s.docs <= 0 { s = Stat(docs: 0, length: 0) }
      setStat(g, s)
      if isNew(old.num) {
        records[Int(old.num - firstNum)] = nil
        killedNew += 1
      } else {
        deadOld.append(old.num)
      }
      refs[id] = .some(nil)
    }
    guard let new else { return }
    let num = try takeNum(txn: txn)
    let g = group(new.group)
    var s = try stat(g, txn: txn)
    s.docs += 1
    s.length += new.length
    setStat(g, s)
    let arena = Int32(positionArena.count)
    positionArena.append(contentsOf: new.positions)
    var start = arena
    for (k, entry) in new.entries.enumerated() {
      let r = row(g, entry.hash, new.termBytes[new.termRange(k)])
      Self.append(
        Entry(num: num, value: Int(entry.count), positions: start), to: &rows[Int(r)].postings,
        in: &postingEntries)
      start += entry.count
    }
    Self.append(Entry(num: num, value: new.length), to: &groups[Int(g)].norms, in: &normEntries)
    records.append(new.record)
    refs[id] = SearchRef(num: num, group: new.group)
    if new.group.first == 1 { groups[Int(g)].name = Array(new.name.utf8) }
  }

  /// Encodes the chain's entries of documents still alive as (number delta, value) varints,
  /// the first delta from `base`; empty when none is.
  func encode(_ chain: Chain, of entries: [Entry], base: UInt64, into out: inout [UInt8]) {
    out.removeAll(keepingCapacity: true)
    var last = base
    var c = chain.head
    while c >= 0 {
      let e = entries[Int(c)]
      c = e.next
      guard records[Int(e.num - firstNum)] != nil else { continue }
      Varint.append(e.num - last, to: &out)
      Varint.append(UInt64(e.value), to: &out)
      if e.positions >= 0 {
        var p: Int32 = 0
        for q in positionArena[Int(e.positions)..<Int(e.positions) + e.value] {
          Varint.append(UInt64(q - p), to: &out)
          p = q
        }
      }
      last = e.num
    }
  }

  /// Takes the next segment id from the index's counter.
  static func nextSegmentID(_ storage: ProjectionStorage, _ txn: WriteTransaction) throws -> UInt32
  {
    let stored = try txn.get(SearchKeys.nextSegmentKey, in: storage["meta"])
    let id = stored.map { UInt32(truncatingIfNeeded: SearchKeys.readU64($0)) } ?? 0
    guard id < UInt32.max else {
      throw StoreError(
        "database_damaged",
        "the search index's segment counter is at its end: its row is damaged (wikilog rebuild search)",
        code: .internalError)
    }
    try txn.put(
      UInt64(id + 1).bigEndianBytes, forKey: SearchKeys.nextSegmentKey, in: storage["meta"])
    return id
  }

  mutating func flush(into txn: WriteTransaction) throws {
    guard applied > 0 else { return }
    let groupOrder = groups.indices.sorted {
      groups[$0].key.lexicographicallyPrecedes(groups[$1].key)
    }
    var segments = try SearchSegment.all(storage, txn)
    let live = records.count - killedNew
    var written = 0
    if live > 0 {
      let id = try Self.nextSegmentID(storage, txn)
      let segmentKey = SearchKeys.u32(id)
      var rank = [Int32](repeating: 0, count: groups.count)
      for (k, g) in groupOrder.enumerated() { rank[g] = Int32(k) }
      var order = Array(0..<Int32(rows.count))
      order.sort { a, b in
        let x = rows[Int(a)]
        let y = rows[Int(b)]
        if x.group != y.group { return rank[Int(x.group)] < rank[Int(y.group)] }
        return SearchBuffer.compare(
          rowTerms[Int(x.start)..<Int(x.end)], rowTerms[Int(y.start)..<Int(y.end)]) < 0
      }
      var key: [UInt8] = []
      var value: [UInt8] = []
      let postings = storage["postings"]
      for r in order {
        let row = rows[Int(r)]
        encode(row.postings, of: postingEntries, base: firstNum, into: &value)
        guard !value.isEmpty else { continue }
        key.removeAll(keepingCapacity: true)
        key.append(contentsOf: segmentKey)
        key.append(contentsOf: groups[Int(row.group)].key)
        key.append(0)
        key.append(contentsOf: rowTerms[Int(row.start)..<Int(row.end)])
        try txn.putLast(value, forKey: key, in: postings)
        written += key.count + value.count
      }
      for g in groupOrder {
        encode(groups[g].norms, of: normEntries, base: firstNum, into: &value)
        guard !value.isEmpty else { continue }
        try txn.putLast(value, forKey: segmentKey + groups[g].key, in: storage["norms"])
        written += 4 + groups[g].key.count + value.count
      }
      for (i, record) in records.enumerated() {
        guard let record else { continue }
        try txn.putLast(
          record, forKey: SearchKeys.u64(firstNum + UInt64(i)), in: storage["records"])
        written += 8 + record.count
      }
      let segment = SearchSegment(
        id: id, lo: firstNum, hi: firstNum + UInt64(records.count), level: 0, docs: live, dead: 0)
      try txn.put(segment.value, forKey: segmentKey, in: storage["segments"])
      segments.append(segment)
    }
    if let nextNum {
      try txn.put(nextNum.bigEndianBytes, forKey: SearchKeys.nextNumKey, in: storage["meta"])
    }
    // Documents of earlier segments that died: their records go, their bits are set, and
    // their segments count them.
    if !deadOld.isEmpty {
      deadOld.sort()
      var changed: Set<Int> = []
      var i = 0
      while i < deadOld.count {
        let chunk = deadOld[i] / SearchKeys.deadChunk
        let chunkKey = SearchKeys.u64(chunk)
        var bits =
          try txn.get(chunkKey, in: storage["dead"])
          ?? [UInt8](repeating: 0, count: Int(SearchKeys.deadChunk / 8))
        while i < deadOld.count && deadOld[i] / SearchKeys.deadChunk == chunk {
          let num = deadOld[i]
          i += 1
          _ = try txn.delete(SearchKeys.u64(num), in: storage["records"])
          let bit = Int(num % SearchKeys.deadChunk)
          // Bytes of a big-endian word per 64 bits: bit b of word w is in byte w*8 + 7 - (b%64)/8.
          let byte = bit / 64 * 8 + 7 - bit % 64 / 8
          let mask = UInt8(1) << UInt8(bit % 8)
          guard bits[byte] & mask == 0 else { continue }
          bits[byte] |= mask
          if let s = Self.segmentIndex(segments, num) {
            segments[s].dead += 1
            changed.insert(s)
          }
        }
        try txn.put(bits, forKey: chunkKey, in: storage["dead"])
      }
      for s in changed {
        try txn.put(
          segments[s].value, forKey: SearchKeys.u32(segments[s].id), in: storage["segments"])
      }
    }
    for (key, value) in refs.sorted(by: { $0.key.lexicographicallyPrecedes($1.key) }) {
      if let value {
        try txn.put(value.value, forKey: key, in: storage["refs"])
      } else {
        _ = try txn.delete(key, in: storage["refs"])
      }
    }
    for g in groupOrder where groups[g].changed {
      let group = groups[g].key
      guard let s = groups[g].stat, s.docs > 0 else {
        _ = try txn.delete(group, in: storage["totals"])
        continue
      }
      var name: [UInt8] = []
      if group.first == 1 {
        name =
          try groups[g].name
          ?? txn.get(group, in: storage["totals"]).map { Array($0.dropFirst(16)) } ?? []
      }
      try txn.put(
        UInt64(s.docs).bigEndianBytes + UInt64(max(s.length, 0)).bigEndianBytes + name,
        forKey: group, in: storage["totals"])
    }
    groups.removeAll(keepingCapacity: true)
    groupIDs.removeAll(keepingCapacity: true)
    rows.removeAll(keepingCapacity: true)
    rowTerms.removeAll(keepingCapacity: true)
    for i in table.indices { table[i] = -1 }
    postingEntries.removeAll(keepingCapacity: true)
    normEntries.removeAll(keepingCapacity: true)
    positionArena.removeAll(keepingCapacity: true)
    records.removeAll(keepingCapacity: true)
    killedNew = 0
    refs.removeAll(keepingCapacity: true)
    deadOld.removeAll(keepingCapacity: true)
    if let nextNum { firstNum = nextNum }
    applied = 0
    written += try Self.merge(segments, storage: storage, txn: txn)
    work?.add(written)
  }

  /// The index in `segments` (sorted by `lo`) of the one holding `num`.
  static func segmentIndex(_ segments: [SearchSegment], _ num: UInt64) -> Int? {
    var lo = 0
    var hi = segments.count
    while lo < hi {
      let mid = (lo + hi) / 2
      if segments[mid].hi <= num { lo = mid + 1 } else { hi = mid }
    }
    return lo < segments.count && segments[lo].lo <= num ? lo : nil
  }

  // MARK: Merging

  /// Merges segments the way a log-structured index does: whenever the newest
  /// ``mergeFactor`` segments are of one level (and together hold at most ``maxMergedDocs``),
  /// they become one segment of the next level; a segment a quarter of whose documents have
  /// died is written again without them. Each posting is thus written once per level it
  /// passes (a logarithm of the index's size), and a query reads at most `mergeFactor - 1`
  /// segments per level.
  @discardableResult
  static func merge(_ start: [SearchSegment], storage: ProjectionStorage, txn: WriteTransaction)
    throws -> Int
  {
    var segments = start
    var written = 0
    while true {
      if let i = segments.firstIndex(where: { $0.dead > 0 && $0.dead * 4 >= $0.docs }) {
        let merged = try mergeRun([segments[i]], level: segments[i].level, storage, txn, &written)
        segments.replaceSubrange(i...i, with: merged.map { [$0] } ?? [])
        continue
      }
      let n = segments.count
      guard n >= mergeFactor else { return written }
      let run = Array(segments[(n - mergeFactor)...])
      guard run.allSatisfy({ $0.level == run[0].level }),
        run.reduce(0, { $0 + $1.docs - $1.dead }) <= maxMergedDocs
      else { return written }
      let merged = try mergeRun(run, level: run[0].level + 1, storage, txn, &written)
      segments.replaceSubrange((n - mergeFactor)..., with: merged.map { [$0] } ?? [])
    }
  }

  /// Rewrites the adjacent segments `run` (sorted by `lo`) as one new segment of `level`, their
  /// rows concatenated without the dead documents, and removes them; nil when no document of
  /// theirs is alive (nothing is written).
  static func mergeRun(
    _ run: [SearchSegment], level: Int, _ storage: ProjectionStorage, _ txn: WriteTransaction,
    _ written: inout Int
  ) throws -> SearchSegment? {
    let lo = run.first!.lo
    let hi = run.last!.hi
    let dead = try DeadSet(storage, txn, from: lo, to: hi)
    let id = try Self.nextSegmentID(storage, txn)
    let target = SearchKeys.u32(id)
    var docs = 0
    for name in ["postings", "norms"] {
      let db = storage[name]
      // Each segment's rows, without its id: (suffix, value), in key order.
      var sources: [[(suffix: [UInt8], value: [UInt8])]] = []
      for segment in run {
        let prefix = SearchKeys.u32(segment.id)
        var rows: [(suffix: [UInt8], value: [UInt8])] = []
        try txn.scan(db, from: prefix) { key, value in
          guard key.starts(with: prefix) else { return false }
          rows.append((Array(key.dropFirst(4)), value))
          return true
        }
        sources.append(rows)
      }
      var at = [Int](repeating: 0, count: run.count)
      var out: [UInt8] = []
      while true {
        // The smallest suffix among the sources' next rows.
        var smallest: [UInt8]? = nil
        for s in sources.indices where at[s] < sources[s].count {
          let suffix = sources[s][at[s]].suffix
          if smallest == nil || suffix.lexicographicallyPrecedes(smallest!) { smallest = suffix }
        }
        guard let suffix = smallest else { break }
        out.removeAll(keepingCapacity: true)
        var last = lo
        for s in sources.indices
        where at[s] < sources[s].count && sources[s][at[s]].suffix == suffix {
          let value = sources[s][at[s]].value
          at[s] += 1
          var i = 0
          var num = run[s].lo
          while i < value.count {
            guard let delta = Varint.read(value, at: &i), let v = Varint.read(value, at: &i) else {
              throw StoreError(
                "database_damaged",
                "a row of the search index's \(name) cannot be read (wikilog rebuild search)",
                code: .internalError)
            }
            num += delta
            // A posting's positions follow its frequency.
            let from = i
            if name == "postings" {
              for _ in 0..<v {
                guard Varint.read(value, at: &i) != nil else {
                  throw StoreError(
                    "database_damaged",
                    "a row of the search index's postings cannot be read (wikilog rebuild search)",
                    code: .internalError)
                }
              }
            }
            if dead.contains(num) { continue }
            Varint.append(num - last, to: &out)
            Varint.append(v, to: &out)
            out.append(contentsOf: value[from..<i])
            last = num
            if name == "norms" { docs += 1 }
          }
        }
        if !out.isEmpty {
          try txn.putLast(out, forKey: target + suffix, in: db)
          written += 4 + suffix.count + out.count
        }
      }
      for segment in run { try txn.removeAll(withPrefix: SearchKeys.u32(segment.id), in: db) }
    }
    for segment in run { _ = try txn.delete(SearchKeys.u32(segment.id), in: storage["segments"]) }
    // The dead documents of the range are in no segment any more.
    var chunk = lo / SearchKeys.deadChunk
    while chunk * SearchKeys.deadChunk < hi {
      let key = SearchKeys.u64(chunk)
      if var bits = try txn.get(key, in: storage["dead"]) {
        for w in 0..<(bits.count / 8) {
          for b in 0..<64 {
            let num = chunk * SearchKeys.deadChunk + UInt64(w * 64 + b)
            if num >= lo && num < hi { bits[w * 8 + 7 - b / 8] &= ~(UInt8(1) << UInt8(b % 8)) }
          }
        }
        if bits.allSatisfy({ $0 == 0 }) {
          _ = try txn.delete(key, in: storage["dead"])
        } else {
          try txn.put(bits, forKey: key, in: storage["dead"])
        }
      }
      chunk += 1
    }
    guard docs > 0 else { return nil }
    let merged = SearchSegment(id: id, lo: lo, hi: hi, level: level, docs: docs, dead: 0)
    try txn.put(merged.value, forKey: target, in: storage["segments"])
    return merged
  }

  /// Writes every segment with dead documents again without them: before the index's file is
  /// compacted for an erasure, so that no posting of an erased document is left in it.
  static func purgeDead(_ storage: ProjectionStorage, _ txn: WriteTransaction) throws {
    var written = 0
    for segment in try SearchSegment.all(storage, txn) where segment.dead > 0 {
      _ = try mergeRun([segment], level: segment.level, storage, txn, &written)
    }
  }
}
