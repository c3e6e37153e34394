import Crypto
import Formats
public import JSON
public import Log
public import Projections
import RevTree

/// What full-text search indexes of a document: its group (the unit of access: a wiki), a
/// title and a text. A ``TextSearchProjection`` is given one; the Wiki module's is the pages
/// (`wiki_id`, the page name, the Markdown).
public struct TextSearchSchema: Sendable {
  /// The indexed parts of a live revision, nil for a document that is not searched.
  public let extract: @Sendable (_ docID: String, _ body: JSONValue) -> Searchable?

  public struct Searchable: Sendable, Hashable {
    public var group: String
    public var title: String
    public var text: String
    public init(group: String, title: String, text: String) {
      self.group = group
      self.title = title
      self.text = text
    }
  }

  /// Whether a document with this id can be searched at all, from the id alone (any id, by
  /// default): the indexer does not read the others.
  public let mayIndex: @Sendable (_ docID: String) -> Bool

  public init(
    mayIndex: @escaping @Sendable (String) -> Bool = { _ in true },
    extract: @escaping @Sendable (String, JSONValue) -> Searchable?
  ) {
    self.mayIndex = mayIndex
    self.extract = extract
  }
}

/// Full-text search (`search.*`): an inverted index per group, in LMDB, kept behind the log by
/// the store's `IndexFollower` in an environment of its own (`<database>/search/`), not in the append
/// transaction: a write does not wait for it, and a search first brings it up to the log's end.
///
/// "group" in keys is ``groupKey(_:)``: the group's bytes, or a hash of a long one.
///
/// Each document of a group has a number in it (`num`, given from the group's counter in the
/// order the indexer meets the document, kept while the document lives); numbers are grouped
/// in buckets of 128 (`bucket` = num / 128, 4 bytes big-endian; `slot` = num % 128, one byte).
///
/// | database | key | value |
/// | --- | --- | --- |
/// | `search.terms` | group · 0x00 · term · 0x00 · bucket | the bucket's documents with the term: (slot, term frequency) pairs, by slot |
/// | `search.lengths` | group · 0x00 · bucket | the bucket's documents: (slot, length in words) pairs, by slot |
/// | `search.forward` | group · 0x00 · num (4 bytes) | document id, length, and each term (sorted) with its positions, delta-coded |
/// | `search.ids` | doc id | group, num |
/// | `search.stats` | group | documents, total length in words, next num (8 + 8 + 8 bytes), then the group's name when its key is hashed |
///
/// A posting list is thus one row per (group, term, bucket), not one per (term, document): a
/// batch of pages of one wiki writes each of its words once per bucket, and a query reads a
/// common word's list in rows of up to 128 documents. What the rows say (each document's
/// terms, frequencies, positions and length, each group's totals) is a function of the winning
/// revisions alone; which number a document has depends on the order the indexer met it, so
/// `IndexFollower.verify(maxDifferences:)` compares a rebuilt index with the live one by
/// document, not byte for byte. Writes are gathered per transaction
/// (``WriteTransaction/buffer(_:make:)``) and written in key order before it commits; an update
/// changes only the rows of the words whose frequency changed (and its length's row if it
/// changed), and a page whose indexed text did not change writes nothing.
///
/// ``index(_:_:)`` tokenizes on UTF-8 bytes, sorts the words in one byte arena and builds the
/// forward record and each term's hash (``Indexed``); ``SearchWrites`` interns each (group,
/// term) once per flush and chains slot changes to it, and the flush merges each row's changes
/// into the stored row where it lies.
///
/// Terms are the words of the title and then the text (``Tokenizer``: Unicode letters and
/// digits, case-folded; terms of one document that are canonically equivalent, `é` and `e` +
/// U+0301, are one, spelt as the first of them), positions counted across both, with a gap of 1
/// between them so a phrase does not cross from title to text. Statistics are per group, so a query over the
/// groups a user may read ranks with their numbers only (``DocumentStore/search(_:groups:)``).
///
/// It is an index kept behind the log (``IndexBehindLog``) in the database's `search/`
/// environment: the store's ``IndexFollower`` hands it each changed document.
public final class TextSearchProjection: IndexBehindLog {
  public let name = "search"
  public let databaseNames = ["terms", "lengths", "forward", "ids", "stats"]
  /// The databases of the index when it was written inline, in the append transaction, in
  /// the log's environment (a layout of days before any release): such a store is refused.
  public let retiredDatabaseNames = [
    "search.terms", "search.lengths", "search.forward", "search.ids", "search.stats",
    "search.docs", "search.groups", "search.postings", "search.df",
  ]
  let schema: TextSearchSchema

  /// Documents per bucket of a posting row.
  static let bucketSize = 128
  /// Documents applied in one transaction before the buffer is written out (bounds its memory
  /// in a rebuild, which is one transaction).
  static let flushEvery = 4096

  public init(schema: TextSearchSchema) { self.schema = schema }

  /// Catches up once writes pause for 250 ms (or every 10,000 commits), so that a burst of
  /// writes (a replication, a `_bulk_docs` import) keeps both cores; every search catches the
  /// index up first, so none misses a write acknowledged before it.
  public var quietPeriod: Duration? { .milliseconds(250) }

  public func mayIndex(_ docID: String) -> Bool { schema.mayIndex(docID) }

  /// A revision's group, length and terms (sorted by their bytes) with their frequencies, and
  /// the `search.forward` record made of them, worked out off the writer thread. Flat arrays,
  /// so that handing it to the writer costs no more than a few references.
  public struct Indexed: Sendable {
    /// ``TextSearchProjection/groupKey(_:)`` of ``name``.
    let group: [UInt8]
    let name: String
    let length: Int
    /// The distinct terms, sorted by their bytes, one after the other: term `k` is
    /// `termBytes[(k == 0 ? 0 : entries[k - 1].end)..<entries[k].end]`.
    let termBytes: [UInt8]
    let entries: [Term]
    let record: [UInt8]

    struct Term {
      /// Where the term ends in ``termBytes``.
      var end: Int32
      /// How often it occurs.
      var count: Int32
      /// ``SearchBuffer/hash(_:)`` of its bytes, so that the writer does not hash them.
      var hash: Int
    }

    func termRange(_ k: Int) -> Range<Int> {
      Int(k == 0 ? 0 : entries[k - 1].end)..<Int(entries[k].end)
    }
  }

  /// A group as the first part of its keys: its UTF-8 bytes when they are at most 400 (a key
  /// then stays within LMDB's 511 bytes with a 100-byte term and a bucket) and do not start
  /// with 0x01, else 0x01 and the hex SHA-256 of them; a `search.stats` row of such a group
  /// carries its name after the numbers.
  static func groupKey(_ group: String) -> [UInt8] {
    let bytes = Array(group.utf8)
    guard bytes.count > 400 || bytes.first == 1 else { return bytes }
    return [1] + Array(Hex.encode(Array(SHA256.hash(data: bytes))).utf8)
  }

  func index(_ docID: String, _ body: JSONValue) -> Indexed? {
    guard schema.mayIndex(docID), let s = schema.extract(docID, body), !s.group.utf8.contains(0)
    else { return nil }
    // Every word's term, one after the other in `words` (word k ends at ends[k]). Title words
    // are at positions 0..<titleWords, the text's after a gap of one.
    var words: [UInt8] = []
    words.reserveCapacity(s.title.utf8.count + s.text.utf8.count)
    var ends: [Int32] = []
    ends.reserveCapacity(s.text.utf8.count / 5 + 8)
    var ascii = Self.appendWords(s.title, to: &words, ends: &ends)
    let titleWords = ends.count
    ascii = Self.appendWords(s.text, to: &words, ends: &ends) && ascii
    // The distinct terms in byte order, each with its positions.
    var terms = Terms(capacity: words.count, words: ends.count)
    if ascii {
      terms.add(words, ends, titleWords: titleWords)
    } else {
      terms.addEquivalent(words, ends, titleWords: titleWords)
    }
    var record = ByteWriter(capacity: 16 + docID.utf8.count + terms.bytes.count + ends.count * 2)
    record.string(docID)
    record.varint(ends.count)
    record.varint(terms.entries.count)
    var start = 0
    for (k, entry) in terms.entries.enumerated() {
      let term = Int(k == 0 ? 0 : terms.entries[k - 1].end)..<Int(entry.end)
      record.varint(term.count)
      record.raw(terms.bytes[term])
      record.varint(Int(entry.count))
      var last = 0
      for p in terms.positions[start..<start + Int(entry.count)] {
        record.varint(Int(p) - last)
        last = Int(p)
      }
      start += Int(entry.count)
    }
    return Indexed(
      group: Self.groupKey(s.group), name: s.group, length: ends.count, termBytes: terms.bytes,
      entries: terms.entries, record: record.bytes)
  }

  /// Appends the terms of `text`'s words to `words`, and where each ends to `ends`; true when
  /// they are all ASCII.
  static func appendWords(_ text: String, to words: inout [UInt8], ends: inout [Int32]) -> Bool {
    var ascii = true
    Tokenizer.scan(text) { span, start, end, isASCII in
      Tokenizer.appendTerm(text, span, start, end, ascii: isASCII, to: &words)
      ends.append(Int32(words.count))
      if !isASCII { ascii = false }
    }
    return ascii
  }

  /// A document's distinct terms in byte order with their positions: the terms one after the
  /// other in ``bytes``, the positions of each (ascending) one after the other in
  /// ``positions``.
  struct Terms {
    var bytes: [UInt8] = []
    var entries: [Indexed.Term] = []
    var positions: [Int32] = []

    init(capacity: Int, words: Int) {
      bytes.reserveCapacity(capacity)
      entries.reserveCapacity(words)
      positions.reserveCapacity(words)
    }

    /// A word as ``add(_:_:titleWords:)`` sorts it: its first eight bytes as a big-endian
    /// number (zeros after a shorter word's end, and no word has a zero byte), its length and
    /// its number. Most comparisons end at `prefix`, with no look at the bytes.
    struct SortKey {
      var prefix: UInt64
      var length: Int32
      var word: Int32
    }

    /// Adds the words (`words`, ending at `ends`), grouped by their bytes: a sort of the words
    /// by term and position, then one entry per run.
    mutating func add(_ words: [UInt8], _ ends: [Int32], titleWords: Int) {
      let count = ends.count
      var keys: [SortKey] = []
      keys.reserveCapacity(count)
      var start = 0
      for w in 0..<count {
        let end = Int(ends[w])
        var prefix: UInt64 = 0
        for k in 0..<8 {
          prefix = prefix << 8 | UInt64(start + k < end ? words[start + k] : 0)
        }
        keys.append(SortKey(prefix: prefix, length: Int32(end - start), word: Int32(w)))
        start = end
      }
      // The order of two words' bytes past their first eight, then of their lengths.
      func compareTails(_ a: SortKey, _ b: SortKey) -> Int {
        let ea = Int(ends[Int(a.word)])
        let eb = Int(ends[Int(b.word)])
        return TextSearchProjection.compare(
          words, ea - Int(a.length) + 8..<ea, words, eb - Int(b.length) + 8..<eb)
      }
      keys.sort { a, b in
        if a.prefix != b.prefix { return a.prefix < b.prefix }
        if a.length > 8 && b.length > 8 {
          let c = compareTails(a, b)
          if c != 0 { return c < 0 }
        } else if a.length != b.length {
          return a.length < b.length
        }
        return a.word < b.word
      }
      var i = 0
      while i < count {
        let first = keys[i]
        var j = i
        repeat {
          let p = Int(keys[j].word)
          positions.append(Int32(p < titleWords ? p : p + 1))
          j += 1
        } while j < count && keys[j].prefix == first.prefix && keys[j].length == first.length
          && (first.length <= 8 || compareTails(keys[j], first) == 0)
        let end = Int(ends[Int(first.word)])
        append(words[end - Int(first.length)..<end], count: j - i)
        i = j
      }
    }

    /// Adds the words grouped as `String`s: terms that are canonically equivalent (`é` and
    /// `e` + U+0301) are one, spelt as the first of them in the document, as the index has
    /// always grouped them. Only for documents with non-ASCII words.
    mutating func addEquivalent(_ words: [UInt8], _ ends: [Int32], titleWords: Int) {
      var byTerm: [String: [Int32]] = [:]
      for w in ends.indices {
        let term = words[Int(w == 0 ? 0 : ends[w - 1])..<Int(ends[w])]
        byTerm[String(decoding: term, as: UTF8.self), default: []].append(
          Int32(w < titleWords ? w : w + 1))
      }
      let sorted = byTerm.map { (term: Array($0.key.utf8), positions: $0.value) }
        .sorted { $0.term.lexicographicallyPrecedes($1.term) }
      for (term, termPositions) in sorted {
        positions.append(contentsOf: termPositions)
        append(term[...], count: termPositions.count)
      }
    }

    mutating func append(_ term: ArraySlice<UInt8>, count: Int) {
      bytes.append(contentsOf: term)
      entries.append(
        Indexed.Term(end: Int32(bytes.count), count: Int32(count), hash: SearchBuffer.hash(term)))
    }
  }

  /// The order of `a[ra]` and `b[rb]` by their bytes: negative, zero or positive.
  @inline(__always)
  static func compare(_ a: [UInt8], _ ra: Range<Int>, _ b: [UInt8], _ rb: Range<Int>) -> Int {
    let n = min(ra.count, rb.count)
    var i = 0
    while i < n {
      let x = a[ra.lowerBound + i]
      let y = b[rb.lowerBound + i]
      if x != y { return x < y ? -1 : 1 }
      i += 1
    }
    return ra.count - rb.count
  }

  /// Indexes document `docID` as its winning revision `winner` stands (or removes it: deleted,
  /// or not searched).
  public func update(
    _ docID: String, winner: JSONValue?, storage: ProjectionStorage, txn: WriteTransaction
  ) throws {
    try set(Array(docID.utf8), winner.flatMap { index(docID, $0) }, storage: storage, txn: txn)
  }

  /// Each document's group and forward record (terms, positions, length), each (group,
  /// term)'s postings and each group's lengths and totals, documents matched by id (their
  /// numbers may differ: they depend on the order the indexer met them).
  public func compare(
    live: ProjectionStorage, rebuilt: ProjectionStorage, txn: ReadTransaction, maxDifferences: Int
  ) throws -> [String] {
    var report = SearchComparison(max: maxDifferences)
    try report.compare(live: live, rebuilt: rebuilt, txn: txn)
    return report.differences
  }

  /// Sets the index entry of document `docID` to `indexed` (what ``index(_:_:)`` made of its
  /// winning revision), or removes it (nil: deleted, or not searched), in `txn` of the search
  /// environment; the rows are written when the transaction commits.
  func set(_ docID: [UInt8], _ indexed: Indexed?, storage: ProjectionStorage, txn: WriteTransaction)
    throws
  {
    let buffer = txn.buffer(ObjectIdentifier(self)) { SearchBuffer(storage) }
    if buffer.writes.storage["terms"].name != storage["terms"].name {
      // The same projection into other databases in this transaction (scratch copies).
      try buffer.flush(into: txn)
      buffer.writes.storage = storage
    }
    try buffer.writes.set(docID, indexed, isFirst: false, txn: txn)
    if buffer.writes.applied >= Self.flushEvery { try buffer.flush(into: txn) }
  }
}

/// A document's place in the index: its group and number.
struct SearchDocRef: Hashable {
  var group: [UInt8]
  var num: UInt32

  var forwardKey: [UInt8] { group + [0] + num.bigEndianBytes4 }
  var bucket: [UInt8] { bucketNumber.bigEndianBytes4 }
  var bucketNumber: UInt32 { num / UInt32(TextSearchProjection.bucketSize) }
  var slot: UInt8 { UInt8(num % UInt32(TextSearchProjection.bucketSize)) }

  var idValue: [UInt8] {
    var w = ByteWriter(capacity: group.count + 6)
    w.data(group)
    w.varint(UInt64(num))
    return w.bytes
  }

  init(group: [UInt8], num: UInt32) {
    self.group = group
    self.num = num
  }

  init(idValue: [UInt8]) throws {
    var r = ByteReader(idValue)
    group = Array(try r.data())
    num = UInt32(truncatingIfNeeded: try r.varint())
  }
}

extension UInt32 {
  var bigEndianBytes4: [UInt8] {
    [UInt8(self >> 24), UInt8(self >> 16 & 0xFF), UInt8(self >> 8 & 0xFF), UInt8(self & 0xFF)]
  }
}

/// A `search.forward` record read back: the id, the length and each term with how often it
/// occurs (positions are skipped; ``positions(_:of:)`` reads them).
struct SearchForward {
  var docID: String
  var length: Int
  /// Each term with its number of positions, in the record's (byte) order.
  var terms: [(term: [UInt8], count: Int)]

  init(_ bytes: [UInt8]) throws {
    var r = ByteReader(bytes)
    docID = try r.string()
    length = try r.int()
    let count = try r.int()
    terms = []
    terms.reserveCapacity(count)
    for _ in 0..<count {
      let term = Array(try r.data())
      let n = try r.int()
      for _ in 0..<n { _ = try r.varint() }
      terms.append((term, n))
    }
  }

  /// The positions of `wanted`'s terms in the record (a term it does not have is left out).
  static func positions(_ bytes: [UInt8], of wanted: Set<[UInt8]>) throws -> [[UInt8]: [Int]] {
    var r = ByteReader(bytes)
    _ = try r.data()
    _ = try r.varint()
    let count = try r.int()
    var out: [[UInt8]: [Int]] = [:]
    for _ in 0..<count {
      let term = Array(try r.data())
      let n = try r.int()
      guard wanted.contains(term) else {
        for _ in 0..<n { _ = try r.varint() }
        continue
      }
      var positions: [Int] = []
      var p = 0
      for _ in 0..<n {
        p += try r.int()
        positions.append(p)
      }
      out[term] = positions
      if out.count == wanted.count { break }
    }
    return out
  }

  /// The document id alone.
  static func docID(_ bytes: [UInt8]) throws -> String {
    var r = ByteReader(bytes)
    return try r.string()
  }
}

/// (slot, number) pairs of a `search.terms` or `search.lengths` row.
enum SlotList {
  static func decode(_ bytes: [UInt8]) throws -> [(slot: UInt8, value: Int)] {
    var r = ByteReader(bytes)
    var out: [(UInt8, Int)] = []
    out.reserveCapacity(bytes.count / 2)
    while !r.isAtEnd { out.append((try r.byte(), try r.int())) }
    return out
  }

  static func encode(_ pairs: [(slot: UInt8, value: Int)]) -> [UInt8] {
    var w = ByteWriter(capacity: pairs.count * 2 + 2)
    for (slot, value) in pairs {
      w.byte(slot)
      w.varint(value)
    }
    return w.bytes
  }
}

/// The terms of a `search.forward` record (after its id and length), read one by one with
/// their frequencies.
struct ForwardTerms {
  var reader: ByteReader
  var left: Int

  mutating func next() throws -> (term: ArraySlice<UInt8>, count: Int)? {
    guard left > 0 else { return nil }
    left -= 1
    let term = try reader.data()
    let n = try reader.int()
    for _ in 0..<n { _ = try reader.varint() }
    return (term, n)
  }
}

/// The search projection's buffer in a write transaction (``SearchWrites``): the class that
/// ``WriteTransaction/buffer(_:make:)`` keeps, holding the writes as a value, so that the
/// writer's many small changes to them need no exclusivity check each.
final class SearchBuffer: TransactionBuffer {
  var writes: SearchWrites

  init(_ storage: ProjectionStorage) { writes = SearchWrites(storage) }

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

/// The search projection's writes of one transaction, written in key order by
/// ``flush(into:)``; reads in the transaction go through it (``ref(_:txn:)``, ``stat(_:txn:)``).
///
/// A `search.terms` row is a (group, term) and a bucket: each distinct (group, term) is given a
/// number once per flush (``row(_:_:_:)``, an open-addressing table using the hash that
/// ``TextSearchProjection/Indexed`` brings), and the slot changes made to it are chained to it
/// in the order they were made (``Change``; the last one of a slot wins). `search.lengths`
/// changes are chained to their group the same way. Nothing is sorted before the flush, which
/// orders the groups, then each group's terms, then each row's changes.
struct SearchWrites {
  var storage: ProjectionStorage
  /// Documents applied since the last flush.
  var applied = 0

  /// A slot's new value in a row (-1: the slot is removed); `next` is the row's (or the
  /// group's, for lengths) next change, -1 for none.
  struct Change {
    var bucket: UInt32
    var slot: UInt8
    var value: Int
    var next: Int32 = -1
  }

  /// The first and last of a chain of changes.
  struct Chain {
    var head: Int32 = -1
    var tail: Int32 = -1
  }

  /// A group's documents, total length in words and next number (`search.stats`).
  struct Stat {
    var docs: Int
    var length: Int
    var next: UInt64
  }

  struct Group {
    /// ``TextSearchProjection/groupKey(_:)``.
    let key: [UInt8]
    /// Nil until read (from the database or made).
    var stat: Stat? = nil
    /// Whether ``stat`` changed.
    var changed = false
    /// The name of a hashed group, when a document of it was indexed in this transaction.
    var name: [UInt8]? = nil
    /// Its `search.lengths` changes.
    var lengths = Chain()
  }

  /// A (group, term): `search.terms` rows start with group · 0x00 · term · 0x00.
  struct Row {
    let group: Int32
    /// The term's hash mixed with the group.
    let hash: Int
    /// The term in ``rowTerms``.
    let start: Int32
    let end: Int32
    var changes = Chain()
  }

  var groups: [Group] = []
  var groupIDs: [[UInt8]: Int32] = [:]
  var rows: [Row] = []
  /// The terms of ``rows``, one after the other.
  var rowTerms: [UInt8] = []
  /// Row numbers by hash (-1: free), at most half full.
  var table = [Int32](repeating: -1, count: 1024)
  var termChanges: [Change] = []
  var lengthChanges: [Change] = []
  /// `search.forward` rows as they now are (nil: removed), by group number << 32 | num.
  var forward: [UInt64: [UInt8]?] = [:]
  /// `search.ids` rows as they now are (nil: removed).
  var ids: [[UInt8]: SearchDocRef?] = [:]

  init(_ storage: ProjectionStorage) { self.storage = storage }

  /// The number of group `key` in this buffer.
  mutating func group(_ key: [UInt8]) -> Int32 {
    if let g = groupIDs[key] { return g }
    let g = Int32(groups.count)
    groups.append(Group(key: key))
    groupIDs[key] = g
    return g
  }

  /// The number of the row of `term` (whose ``hash(_:)`` is `hash`) in group `g`.
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

  /// Sets the slot of `ref` in the `search.terms` row of `term` to `value` (-1: removed).
  mutating func term(_ r: Int32, _ ref: SearchDocRef, _ value: Int) {
    Self.append(
      Change(bucket: ref.bucketNumber, slot: ref.slot, value: value), to: &rows[Int(r)].changes,
      in: &termChanges)
  }

  /// Sets the slot of `ref` in its group's `search.lengths` row to `value` (-1: removed).
  mutating func length(_ g: Int32, _ ref: SearchDocRef, _ value: Int) {
    Self.append(
      Change(bucket: ref.bucketNumber, slot: ref.slot, value: value), to: &groups[Int(g)].lengths,
      in: &lengthChanges)
  }

  /// Adds `change` to `changes` as the last link of `chain`.
  private static func append(_ change: Change, to chain: inout Chain, in changes: inout [Change]) {
    let c = Int32(changes.count)
    changes.append(change)
    if chain.tail >= 0 { changes[Int(chain.tail)].next = c } else { chain.head = c }
    chain.tail = c
  }

  func ref(_ id: [UInt8], txn: WriteTransaction) throws -> SearchDocRef? {
    if let pending = ids[id] { return pending }
    return try txn.get(id, in: storage["ids"]).map { try SearchDocRef(idValue: $0) }
  }

  func forwardRecord(_ g: Int32, _ ref: SearchDocRef, txn: WriteTransaction) throws -> [UInt8]? {
    if let pending = forward[UInt64(g) << 32 | UInt64(ref.num)] { return pending }
    return try txn.get(ref.forwardKey, in: storage["forward"])
  }

  mutating func stat(_ g: Int32, txn: WriteTransaction) throws -> Stat {
    if let s = groups[Int(g)].stat { return s }
    var s = Stat(docs: 0, length: 0, next: 0)
    if let v = try txn.get(groups[Int(g)].key, in: storage["stats"]), v.count >= 24 {
      s = Stat(
        docs: Int(UInt64(bigEndianArray: v) ?? 0),
        length: Int(UInt64(bigEndianArray: Array(v[8..<16])) ?? 0),
        next: UInt64(bigEndianArray: Array(v[16..<24])) ?? 0)
    }
    groups[Int(g)].stat = s
    return s
  }

  mutating func setStat(_ g: Int32, _ s: Stat) {
    groups[Int(g)].stat = s
    groups[Int(g)].changed = true
  }

  /// Makes document `id` indexed as `new` (nil: not indexed); `isFirst` when it is not indexed
  /// yet (the document's first event), which spares looking it up.
  mutating func set(
    _ id: [UInt8], _ new: TextSearchProjection.Indexed?, isFirst: Bool = false,
    txn: WriteTransaction
  ) throws {
    applied += 1
    let oldRef = isFirst ? nil : try ref(id, txn: txn)
    var oldGroup: Int32 = -1
    var oldRecord: [UInt8]? = nil
    if let oldRef {
      oldGroup = group(oldRef.group)
      oldRecord = try forwardRecord(oldGroup, oldRef, txn: txn)
    }
    if let oldRef, let new, oldRef.group == new.group, oldRecord == new.record { return }
    let sameGroup = oldRecord != nil && new != nil && oldRef?.group == new?.group
    // The old record's terms (sorted by their bytes) with their frequencies.
    var old = ForwardTerms(reader: ByteReader([]), left: 0)
    var oldLength = 0
    if let oldRef, let oldRecord {
      var reader = ByteReader(oldRecord)
      _ = try reader.data()
      oldLength = try reader.int()
      let count = try reader.int()
      old = ForwardTerms(reader: reader, left: count)
      var s = try stat(oldGroup, txn: txn)
      s.length -= oldLength
      if !sameGroup {
        // Removed, or moved to another group: every row goes.
        while let (term, _) = try old.next() {
          let r = row(oldGroup, SearchBuffer.hash(term), term)
          self.term(r, oldRef, -1)
        }
        length(oldGroup, oldRef, -1)
        forward[UInt64(oldGroup) << 32 | UInt64(oldRef.num)] = .some(nil)
        ids[id] = .some(nil)
        s.docs -= 1
        // A group left empty starts its numbers again (whatever the transactions' bounds).
        if s.docs <= 0 { s = Stat(docs: 0, length: 0, next: 0) }
      }
      setStat(oldGroup, s)
    }
    guard let new else { return }
    let g = sameGroup ? oldGroup : group(new.group)
    var s = try stat(g, txn: txn)
    let ref: SearchDocRef
    if sameGroup, let oldRef {
      ref = oldRef
    } else {
      // Numbers are 32 bits, and a group never reaches 2^32 documents: a counter there was
      // read from a damaged row (an error, never a trap: the write is refused).
      guard s.next < UInt64(UInt32.max) else {
        throw StoreError(
          "database_damaged",
          "the search projection's document counter of a group is \(s.next), past 2^32: its row is damaged (wikilog verify; wikilog rebuild search)",
          code: .internalError)
      }
      ref = SearchDocRef(group: new.group, num: UInt32(truncatingIfNeeded: s.next))
      s.next += 1
      s.docs += 1
    }
    // The new terms against the old ones (both sorted): only frequencies that changed are written.
    var o = try old.next()
    for (k, entry) in new.entries.enumerated() {
      let term = new.termBytes[new.termRange(k)]
      while let (oldTerm, _) = o, SearchBuffer.compare(oldTerm, term) < 0 {
        let r = row(g, SearchBuffer.hash(oldTerm), oldTerm)
        self.term(r, ref, -1)
        o = try old.next()
      }
      if let (oldTerm, count) = o, SearchBuffer.compare(oldTerm, term) == 0 {
        o = try old.next()
        if count == Int(entry.count) { continue }
      }
      let r = row(g, entry.hash, term)
      self.term(r, ref, Int(entry.count))
    }
    while let (oldTerm, _) = o {
      let r = row(g, SearchBuffer.hash(oldTerm), oldTerm)
      self.term(r, ref, -1)
      o = try old.next()
    }
    if !sameGroup || oldLength != new.length { length(g, ref, new.length) }
    forward[UInt64(g) << 32 | UInt64(ref.num)] = new.record
    if !sameGroup { ids[id] = ref }
    s.length += new.length
    setStat(g, s)
    if new.group.first == 1 { groups[Int(g)].name = Array(new.name.utf8) }
  }

  mutating func flush(into txn: WriteTransaction) throws {
    // Groups, then each group's terms, in key order (group · 0x00 · term: neither has a 0x00
    // byte, so comparing the group, then the term, is comparing the keys).
    let groupOrder = groups.indices.sorted {
      groups[$0].key.lexicographicallyPrecedes(groups[$1].key)
    }
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
    var next: [UInt8] = []
    var pending: [Pending] = []
    let terms = storage["terms"]
    for r in order {
      let row = rows[Int(r)]
      key.removeAll(keepingCapacity: true)
      key.append(contentsOf: groups[Int(row.group)].key)
      key.append(0)
      key.append(contentsOf: rowTerms[Int(row.start)..<Int(row.end)])
      key.append(0)
      try write(row.changes, of: termChanges, under: &key, in: terms, &pending, &next, txn: txn)
    }
    let lengths = storage["lengths"]
    for g in groupOrder {
      key.removeAll(keepingCapacity: true)
      key.append(contentsOf: groups[g].key)
      key.append(0)
      try write(
        groups[g].lengths, of: lengthChanges, under: &key, in: lengths, &pending, &next, txn: txn)
    }
    let forwardDB = storage["forward"]
    let forwardKeys = forward.keys.sorted {
      (UInt64(rank[Int($0 >> 32)]) << 32 | $0 & 0xFFFF_FFFF)
        < (UInt64(rank[Int($1 >> 32)]) << 32 | $1 & 0xFFFF_FFFF)
    }
    for k in forwardKeys {
      let ref = SearchDocRef(
        group: groups[Int(k >> 32)].key, num: UInt32(truncatingIfNeeded: k & 0xFFFF_FFFF))
      if let value = forward[k]! {
        try txn.put(value, forKey: ref.forwardKey, in: forwardDB)
      } else {
        _ = try txn.delete(ref.forwardKey, in: forwardDB)
      }
    }
    for (key, value) in ids.sorted(by: { $0.key.lexicographicallyPrecedes($1.key) }) {
      if let value {
        try txn.put(value.idValue, forKey: key, in: storage["ids"])
      } else {
        _ = try txn.delete(key, in: storage["ids"])
      }
    }
    for g in groupOrder where groups[g].changed {
      let group = groups[g].key
      guard let s = groups[g].stat, s.docs > 0 else {
        _ = try txn.delete(group, in: storage["stats"])
        continue
      }
      // A hashed group's row ends with its name (``TextSearchProjection/groupKey(_:)``).
      var name: [UInt8] = []
      if group.first == 1 {
        name =
          try groups[g].name
          ?? txn.get(group, in: storage["stats"]).map { Array($0.dropFirst(24)) } ?? []
      }
      try txn.put(
        UInt64(s.docs).bigEndianBytes + UInt64(max(s.length, 0)).bigEndianBytes
          + s.next.bigEndianBytes + name, forKey: group, in: storage["stats"])
    }
    groups.removeAll(keepingCapacity: true)
    groupIDs.removeAll(keepingCapacity: true)
    rows.removeAll(keepingCapacity: true)
    rowTerms.removeAll(keepingCapacity: true)
    for i in table.indices { table[i] = -1 }
    termChanges.removeAll(keepingCapacity: true)
    lengthChanges.removeAll(keepingCapacity: true)
    forward.removeAll(keepingCapacity: true)
    ids.removeAll(keepingCapacity: true)
    applied = 0
  }

  static let noRow: [UInt8] = []

  /// A change of a row as ``write(_:of:under:in:_:_:txn:)`` orders them.
  struct Pending {
    var bucket: UInt32
    var slot: UInt8
    var value: Int
    var seq: Int32

    static func precedes(_ a: Self, _ b: Self) -> Bool {
      (a.bucket, a.slot, a.seq) < (b.bucket, b.slot, b.seq)
    }
  }

  /// Writes the rows `key` · bucket that the `chain` of `changes` changes: each row's stored
  /// (slot, value) pairs merged with the last change of each slot. `key` is given back as it
  /// came.
  func write(
    _ chain: Chain, of changes: [Change], under key: inout [UInt8], in db: Database,
    _ pending: inout [Pending], _ next: inout [UInt8], txn: WriteTransaction
  ) throws {
    pending.removeAll(keepingCapacity: true)
    var c = chain.head
    var sorted = true
    while c >= 0 {
      let change = changes[Int(c)]
      let p = Pending(bucket: change.bucket, slot: change.slot, value: change.value, seq: c)
      if let last = pending.last, !Pending.precedes(last, p) {
        sorted = false
      }
      pending.append(p)
      c = change.next
    }
    if !sorted { pending.sort(by: Pending.precedes) }
    let prefixCount = key.count
    var i = 0
    while i < pending.count {
      let bucket = pending[i].bucket
      var j = i
      while j < pending.count && pending[j].bucket == bucket { j += 1 }
      key.removeSubrange(prefixCount...)
      key.append(contentsOf: bucket.bigEndianBytes4)
      next.removeAll(keepingCapacity: true)
      let changes = pending[i..<j]
      // Merged from the stored row where it lies; nil when there is none.
      let same = try txn.withValue(forKey: key, in: db) { row in
        try SlotList.merge(row, changes, into: &next)
      }
      if same == nil { _ = try SlotList.merge(Self.noRow.span, changes, into: &next) }
      i = j
      if same == true { continue }
      if next.isEmpty {
        if same != nil { _ = try txn.delete(key, in: db) }
      } else {
        try txn.put(next, forKey: key, in: db)
      }
    }
    key.removeSubrange(prefixCount...)
  }
}

extension SlotList {
  /// Writes into `out` the (slot, value) pairs of `row` with `changes` (sorted by slot, the
  /// last of a slot winning; a value of -1 removes the slot) made; true when that is `row`.
  static func merge(
    _ row: Span<UInt8>, _ changes: ArraySlice<SearchWrites.Pending>, into out: inout [UInt8]
  ) throws -> Bool {
    var at = 0
    var (oldSlot, oldValue) = try pair(row, &at)
    var k = changes.startIndex
    while k < changes.endIndex {
      let change = changes[k]
      k += 1
      // The last change of a slot wins.
      if k < changes.endIndex && changes[k].slot == change.slot { continue }
      let slot = Int(change.slot)
      while oldSlot < slot {
        emit(oldSlot, oldValue, &out)
        (oldSlot, oldValue) = try pair(row, &at)
      }
      if oldSlot == slot { (oldSlot, oldValue) = try pair(row, &at) }
      if change.value >= 0 { emit(slot, change.value, &out) }
    }
    while oldSlot < 256 {
      emit(oldSlot, oldValue, &out)
      (oldSlot, oldValue) = try pair(row, &at)
    }
    guard out.count == row.count else { return false }
    for i in 0..<row.count where row[i] != out[i] { return false }
    return true
  }

  /// The (slot, value) pair of `row` at `at`, moving past it; slot 256 at the end.
  @inline(__always)
  static func pair(_ row: Span<UInt8>, _ at: inout Int) throws -> (Int, Int) {
    guard at < row.count else { return (256, 0) }
    let slot = Int(row[at])
    at += 1
    var v: UInt64 = 0
    var shift: UInt64 = 0
    while true {
      guard at < row.count, shift < 64 else { throw ByteReader.Truncated() }
      let b = row[at]
      at += 1
      v |= UInt64(b & 0x7F) << shift
      if b < 0x80 { return (slot, Int(truncatingIfNeeded: v)) }
      shift += 7
    }
  }

  @inline(__always)
  static func emit(_ slot: Int, _ value: Int, _ out: inout [UInt8]) {
    out.append(UInt8(slot))
    Varint.append(UInt64(value), to: &out)
  }
}

/// Words for search: maximal runs of letters, digits and combining marks (Unicode
/// properties, by grapheme cluster), case-folded with Unicode's lowercase mapping. Terms longer
/// than 100 bytes are cut (at a character boundary).
///
/// ```
/// "Crème brûlée, 2 ÉGGS"  →  crème · brûlée · 2 · éggs
/// ```
///
/// One scan (``scan(_:_:)``) finds the words by their UTF-8 offsets: an ASCII byte followed by
/// another (or the end) is a grapheme of its own and is decided by its value, the rest goes by
/// `Character`. The index takes the terms as bytes (``appendTerm(_:_:_:_:ascii:to:)``): an ASCII
/// word is folded byte by byte, with no `String` made of it.
public enum Tokenizer {
  public struct Token: Sendable, Hashable {
    public let term: String
    /// Where the word is in the text.
    public let range: Range<String.Index>
  }

  public static func tokens(_ text: String) -> [Token] {
    var out: [Token] = []
    let utf8 = text.utf8
    var term: [UInt8] = []
    scan(text) { bytes, start, end, ascii in
      term.removeAll(keepingCapacity: true)
      appendTerm(text, bytes, start, end, ascii: ascii, to: &term)
      let range =
        utf8.index(utf8.startIndex, offsetBy: start)..<utf8.index(utf8.startIndex, offsetBy: end)
      out.append(Token(term: String(decoding: term, as: UTF8.self), range: range))
    }
    return out
  }

  /// Calls `word` with each word of `text`: the text's bytes, the word's UTF-8 offsets in them
  /// and whether its bytes are all ASCII.
  static func scan(
    _ text: String, _ word: (_ bytes: Span<UInt8>, _ start: Int, _ end: Int, _ ascii: Bool) -> Void
  ) {
    let utf8 = text.utf8
    let bytes = utf8.span
    let n = bytes.count
    var start = -1
    var ascii = true
    var i = 0
    while i < n {
      let byte = bytes[i]
      if byte < 0x80 && (i + 1 == n || bytes[i + 1] < 0x80) {
        // An ASCII character followed by another (or the end) is a grapheme of its own: the
        // fast path most of a page's text takes, with the same answer as the one below.
        if isASCIIWordByte(byte) {
          if start < 0 {
            start = i
            ascii = true
          }
        } else if start >= 0 {
          word(bytes, start, i, ascii)
          start = -1
        }
        i += 1
        continue
      }
      let index = utf8.index(utf8.startIndex, offsetBy: i)
      let c = text[index]
      let next = utf8.distance(from: utf8.startIndex, to: text.index(after: index))
      if c.isLetter || c.isNumber || c.unicodeScalars.first!.properties.isAlphabetic {
        if start < 0 {
          start = i
          ascii = true
        }
        if ascii {
          for k in i..<next where bytes[k] >= 0x80 {
            ascii = false
            break
          }
        }
      } else if start >= 0 {
        word(bytes, start, i, ascii)
        start = -1
      }
      i = next
    }
    if start >= 0 { word(bytes, start, n, ascii) }
  }

  @inline(__always)
  static func isASCIIWordByte(_ byte: UInt8) -> Bool {
    (byte >= 0x30 && byte <= 0x39) || (byte | 0x20 >= 0x61 && byte | 0x20 <= 0x7A)
  }

  /// Appends the term of the word at UTF-8 offsets `start..<end` of `text` (whose bytes are
  /// `bytes`) to `out`.
  static func appendTerm(
    _ text: String, _ bytes: Span<UInt8>, _ start: Int, _ end: Int, ascii: Bool,
    to out: inout [UInt8]
  ) {
    if ascii {
      // ASCII folds by itself, and its terms are cut at 100 bytes = 100 characters.
      for k in start..<min(end, start + 100) {
        let b = bytes[k]
        out.append(b >= 0x41 && b <= 0x5A ? b | 0x20 : b)
      }
      return
    }
    let utf8 = text.utf8
    let word =
      text[
        utf8.index(utf8.startIndex, offsetBy: start)..<utf8.index(utf8.startIndex, offsetBy: end)]
    var term = word.lowercased()
    if term.utf8.count > 100 {
      var cut = term.startIndex
      for idx in term.indices {
        if term.utf8.distance(from: term.startIndex, to: idx) > 100 { break }
        cut = idx
      }
      term = String(term[..<cut])
    }
    out.append(contentsOf: term.utf8)
  }

  /// A query's words, folded as the index folds them.
  public static func terms(_ text: String) -> [String] { tokens(text).map(\.term) }
}
