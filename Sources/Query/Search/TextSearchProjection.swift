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

/// Full-text search (`search.*`): an inverted index in LMDB, kept behind the log by the store's
/// `IndexFollower` in an environment of its own (`<database>/search/`), not in the append
/// transaction: a write does not wait for it, and a search first brings it up to the log's end.
///
/// The index is made of **segments**, as Lucene's and SQLite FTS5's are: the documents indexed
/// in one flush of a transaction (up to ``flushEvery``) get the next numbers (`num`, one counter
/// for the whole index, never reused) and become one segment, whose rows are built in memory
/// and written in key order after every row already there (`MDB_APPEND`: pages filled, no
/// search, no page of an older segment touched). A document that changes gets a new number in
/// the next segment; its old number is marked dead. Segments are merged in the background of
/// the catch-up (``SearchWrites/merge(_:storage:txn:)``): the newest ``SearchWrites/mergeFactor``
/// of one level become one of the next, dead documents left out, so each posting is written
/// once per level and a query reads a few dozen segments at most. So the cost of indexing a
/// page does not grow with the index (a B-tree row per (group, term) rewritten in place would
/// touch a page per word, and more distinct pages the larger the tree).
///
/// "group" in keys is ``groupKey(_:)``: the group's bytes, or a hash of a long one; neither has
/// a 0x00 byte, nor has a term.
///
/// | database | key | value |
/// | --- | --- | --- |
/// | `search.postings` | segment (4 bytes) · group · 0x00 · term | the segment's live documents of the group with the term, by num: num delta, term frequency and that many position deltas (varints) |
/// | `search.norms` | segment · group | the segment's live documents of the group: (num delta, length in words) varints |
/// | `search.records` | num (8 bytes) | a live document's id, length, and a hash of its terms with their positions |
/// | `search.refs` | doc id | num (8 bytes), group |
/// | `search.totals` | group | live documents, total length in words (8 + 8 bytes), then the group's name when its key is hashed |
/// | `search.segments` | segment | its first and end nums, level, documents, dead documents |
/// | `search.dead` | num / 4096 (8 bytes) | a bitmap of the dead nums still in a segment's rows |
/// | `search.meta` | `next`, `segment` | the next num and the next segment's id |
///
/// What the rows say (each document's terms, frequencies, positions and length, each group's
/// totals) is a function of the winning revisions alone; which number a document has, and
/// which segment holds it, depends on the order the indexer met it, so
/// `IndexFollower.verify(maxDifferences:)` compares a rebuilt index with the live one by
/// document, not byte for byte. A page whose indexed text did not change writes nothing.
///
/// ``index(_:_:)`` tokenizes on UTF-8 bytes, sorts the words in one byte arena and builds the
/// record and each term's hash (``Indexed``); ``SearchWrites`` interns each (group, term) once
/// per flush and chains the new documents' postings to it, already in number order.
///
/// Terms are the words of the title and then the text (``Tokenizer``: Unicode letters and
/// digits, case-folded; terms of one document that are canonically equivalent, `é` and `e` +
/// U+0301, are one, spelt as the first of them), positions counted across both, with a gap of 1
/// between them so a phrase does not cross from title to text. Statistics are per group, so a
/// query over the groups a user may read ranks with their numbers only
/// (``DocumentStore/search(_:groups:update:)``).
///
/// A dead document's postings stay in its segment until that segment is merged or written
/// again (when a quarter of its documents are dead); no search returns or counts them. Before
/// an erasure compacts the index's file, every segment with dead documents is written again
/// (``compacting(storage:txn:)``), so nothing of an erased page is left in it.
///
/// It is an index kept behind the log (``IndexBehindLog``) in the database's `search/`
/// environment: the store's ``IndexFollower`` hands it each changed document.
public final class TextSearchProjection: IndexBehindLog {
  public let name = "search"
  public let databaseNames = [
    "postings", "norms", "records", "refs", "totals", "segments", "dead", "meta",
  ]
  /// 3: segments with positions in the postings (2: positions in the records; 1: rows per
  /// group, term and bucket of 128 documents, rewritten in place).
  public var layoutVersion: Int { 3 }
  /// The databases of the index when it was written inline, in the append transaction, in
  /// the log's environment (a layout of days before any release): such a store is refused.
  public let retiredDatabaseNames = [
    "search.terms", "search.lengths", "search.forward", "search.ids", "search.stats",
    "search.docs", "search.groups", "search.postings", "search.df",
  ]
  let schema: TextSearchSchema

  /// Documents applied in one transaction before the buffer is written out as a segment
  /// (bounds its memory in a rebuild, which is one transaction).
  static let flushEvery = 16384

  /// The bytes its segments were written with so far in this process (merges included).
  let work = SearchWork()

  public init(schema: TextSearchSchema) { self.schema = schema }

  /// Catches up once writes pause for 250 ms (or every 10,000 commits), so that a burst of
  /// writes (a replication, a `_bulk_docs` import) keeps both cores; every search catches the
  /// index up first, so none misses a write acknowledged before it.
  public var quietPeriod: Duration? { .milliseconds(250) }

  public func mayIndex(_ docID: String) -> Bool { schema.mayIndex(docID) }

  /// A revision's group, length and terms (sorted by their bytes) with their frequencies, and
  /// the `records` row made of them, worked out off the writer thread. Flat arrays,
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
    /// Each term's positions (ascending), one term's after the other's.
    let positions: [Int32]
    /// The `search.records` value: the id, the length and ``contentHash(_:)`` of the terms
    /// with their positions.
    let record: [UInt8]

    /// Each term with its positions.
    func positionsByTerm() -> [[UInt8]: [Int]] {
      var out: [[UInt8]: [Int]] = [:]
      var start = 0
      for k in entries.indices {
        let n = Int(entries[k].count)
        out[Array(termBytes[termRange(k)])] = positions[start..<start + n].map(Int.init)
        start += n
      }
      return out
    }

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
    // The record: the id, the length, and a hash of the terms with their positions (what the
    // postings hold of the document), so that an unchanged page is known without reading them.
    var content = ByteWriter(capacity: terms.bytes.count + ends.count * 2 + 16)
    content.varint(ends.count)
    var start = 0
    for (k, entry) in terms.entries.enumerated() {
      let term = Int(k == 0 ? 0 : terms.entries[k - 1].end)..<Int(entry.end)
      content.varint(term.count)
      content.raw(terms.bytes[term])
      content.varint(Int(entry.count))
      for p in terms.positions[start..<start + Int(entry.count)] { content.varint(Int(p)) }
      start += Int(entry.count)
    }
    var record = ByteWriter(capacity: 20 + docID.utf8.count)
    record.string(docID)
    record.varint(ends.count)
    record.raw(Self.contentHash(content.bytes).bigEndianBytes)
    return Indexed(
      group: Self.groupKey(s.group), name: s.group, length: ends.count, termBytes: terms.bytes,
      entries: terms.entries, positions: terms.positions, record: record.bytes)
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

  /// FNV-1a, 64 bits: the same in every process (a record written by one is compared by
  /// another), enough to tell an edited page from an unchanged one.
  static func contentHash(_ bytes: [UInt8]) -> UInt64 {
    var h: UInt64 = 0xcbf2_9ce4_8422_2325
    for b in bytes {
      h ^= UInt64(b)
      h = h &* 0x100_0000_01b3
    }
    return h
  }

  /// Indexes document `docID` as its winning revision `winner` stands (or removes it: deleted,
  /// or not searched).
  public func update(
    _ docID: String, winner: JSONValue?, storage: ProjectionStorage, txn: WriteTransaction
  ) throws {
    try set(Array(docID.utf8), winner.flatMap { index(docID, $0) }, storage: storage, txn: txn)
  }

  /// Writes every segment with dead documents again without them (an erasure compacts the
  /// file next, and nothing of an erased page may stay in it).
  public func compacting(storage: ProjectionStorage, txn: WriteTransaction) throws {
    try SearchWrites.purgeDead(storage, txn)
  }

  /// Each document's group and record (terms, positions, length), each (group, term)'s
  /// postings and each group's lengths and totals, documents matched by id (their numbers may
  /// differ: they depend on the order the indexer met them).
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
    let buffer = txn.buffer(ObjectIdentifier(self)) { SearchBuffer(storage, work: work) }
    if buffer.writes.storage["postings"].name != storage["postings"].name {
      // The same projection into other databases in this transaction (scratch copies).
      try buffer.flush(into: txn)
      buffer.writes.storage = storage
    }
    try buffer.writes.set(docID, indexed, txn: txn)
    if buffer.writes.applied >= Self.flushEvery { try buffer.flush(into: txn) }
  }
}

extension UInt32 {
  var bigEndianBytes4: [UInt8] {
    [UInt8(self >> 24), UInt8(self >> 16 & 0xFF), UInt8(self >> 8 & 0xFF), UInt8(self & 0xFF)]
  }
}

/// A `search.records` record read back: the document id, then its length.
enum SearchForward {
  /// The document id alone.
  static func docID(_ bytes: [UInt8]) throws -> String {
    var r = ByteReader(bytes)
    return try r.string()
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
