import Crypto
public import JSON
public import Log
public import RevTree

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

  public init(extract: @escaping @Sendable (String, JSONValue) -> Searchable?) {
    self.extract = extract
  }
}

/// Full-text search as a projection (`search.*`): an inverted index per group, in LMDB.
///
/// "group" in keys is ``groupKey(_:)``: the group's bytes, or a hash of a long one.
///
/// Each document of a group has a number in it (`num`, given in log order from the group's
/// counter, kept while the document lives); numbers are grouped in buckets of 128
/// (`bucket` = num / 128, 4 bytes big-endian; `slot` = num % 128, one byte).
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
/// common word's list in rows of up to 128 documents. Every row is a function of the set of
/// documents alone (never of the order or batching of the writes), so a replay rebuilds it
/// byte for byte and `verify` compares it. Writes are gathered per transaction
/// (``WriteTransaction/buffer(_:make:)``) and written in key order before it commits; an update
/// changes only the rows of the words whose frequency changed (and its length's row if it
/// changed), and a page whose indexed text did not change writes nothing.
///
/// Terms are the words of the title and then the text (``Tokenizer``: Unicode letters and
/// digits, case-folded), positions counted across both, with a gap of 1 between them so a
/// phrase does not cross from title to text. Statistics are per group, so a query over the
/// groups a user may read ranks with their numbers only (``DocumentStore/search(_:groups:)``).
///
/// Stores written with the layout before this one (`search.postings`, one row per term and
/// document, and `search.df`) are rebuilt when they open (``ProjectionMigration``).
public final class TextSearchProjection: DocumentChangeProjection, ProjectionMigration {
  public let name = "search"
  public let databaseNames = ["terms", "lengths", "forward", "ids", "stats"]
  public var retiredDatabaseNames: [String] { ["search.docs", "search.groups"] }
  public var rebuildingDatabaseNames: [String] { ["search.postings", "search.df"] }
  let schema: TextSearchSchema

  /// Documents per bucket of a posting row.
  static let bucketSize = 128
  /// Documents applied in one transaction before the buffer is written out (bounds its memory
  /// in a rebuild, which is one transaction).
  static let flushEvery = 4096

  public init(schema: TextSearchSchema) { self.schema = schema }

  /// A revision's group, length and terms (sorted by their bytes) with their positions, and
  /// the `search.forward` record made of them, worked out off the writer thread.
  public struct Indexed: Sendable {
    /// ``TextSearchProjection/groupKey(_:)`` of ``name``.
    let group: [UInt8]
    let name: String
    let length: Int
    let terms: [(term: [UInt8], positions: [Int])]
    /// Each term's row prefix (group · 0x00 · term · 0x00), hashed off the writer thread.
    let prefixes: [SearchRowPrefix]
    let record: [UInt8]
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

  public func prepare(_ docID: String, rev: RevID, body: JSONValue?) -> Indexed? {
    guard let body else { return nil }
    return index(docID, body)
  }

  func index(_ docID: String, _ body: JSONValue) -> Indexed? {
    guard let s = schema.extract(docID, body), !s.group.utf8.contains(0) else { return nil }
    var byTerm: [String: [Int]] = [:]
    var position = 0
    for text in [s.title, s.text] {
      for token in Tokenizer.tokens(text) {
        byTerm[token.term, default: []].append(position)
        position += 1
      }
      position += 1
    }
    let length = max(position - 2, 0)
    let terms = byTerm.map { (term: Array($0.key.utf8), positions: $0.value) }
      .sorted { $0.term.lexicographicallyPrecedes($1.term) }
    var record = ByteWriter(capacity: 32 + terms.count * 12)
    record.string(docID)
    record.varint(length)
    record.varint(terms.count)
    for (term, positions) in terms {
      record.data(term)
      record.varint(positions.count)
      var last = 0
      for p in positions {
        record.varint(p - last)
        last = p
      }
    }
    let group = Self.groupKey(s.group)
    return Indexed(
      group: group, name: s.group, length: length, terms: terms,
      prefixes: terms.map { SearchRowPrefix(group + [0] + $0.term + [0]) }, record: record.bytes)
  }

  public func apply(_ event: RecordedEvent, to storage: ProjectionStorage, in txn: WriteTransaction)
  {}

  public func apply(
    _ change: DocumentChange, share: Indexed?, to storage: ProjectionStorage,
    in txn: WriteTransaction
  ) throws {
    guard change.winnerChanged else { return }
    let buffer = txn.buffer(ObjectIdentifier(self)) { SearchBuffer(storage) }
    if buffer.storage["terms"].name != storage["terms"].name {
      // The same projection into other databases in this transaction (scratch copies).
      try buffer.flush(into: txn)
      buffer.storage = storage
    }
    var indexed: Indexed? = nil
    if let winner = change.tree.winner, !winner.isDeleted {
      if let share, winner.body == change.event.position.rawValue {
        indexed = share
      } else {
        indexed = try change.winnerBody(in: txn).flatMap { index(change.docID, $0) }
      }
    }
    try buffer.set(Array(change.docID.utf8), indexed, txn: txn)
    if buffer.applied >= Self.flushEvery { try buffer.flush(into: txn) }
  }
}

/// The start of a `search.terms` key (group · 0x00 · term · 0x00) with its hash worked out
/// once, so that the writer's buffer looks rows up without hashing their bytes again.
struct SearchRowPrefix: Hashable, Sendable {
  let bytes: [UInt8]
  let hash: Int

  init(_ bytes: [UInt8]) {
    self.bytes = bytes
    var hasher = Hasher()
    hasher.combine(bytes)
    hash = hasher.finalize()
  }

  static func == (a: Self, b: Self) -> Bool { a.hash == b.hash && a.bytes == b.bytes }
  func hash(into hasher: inout Hasher) { hasher.combine(hash) }
}

/// A `search.terms` row: a prefix and a bucket.
struct SearchRowKey: Hashable {
  let prefix: SearchRowPrefix
  let bucket: UInt32

  var bytes: [UInt8] { prefix.bytes + bucket.bigEndianBytes4 }

  static func precedes(_ a: Self, _ b: Self) -> Bool {
    if a.prefix.bytes == b.prefix.bytes { return a.bucket < b.bucket }
    return a.prefix.bytes.lexicographicallyPrecedes(b.prefix.bytes)
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

  /// `row` with `changes` made (a nil value removes the slot): a merge of two lists sorted by
  /// slot.
  static func merged(_ row: [UInt8]?, _ changes: [UInt8: Int?]) throws -> [UInt8] {
    let old = try row.map(decode) ?? []
    let sortedChanges = changes.sorted { $0.key < $1.key }
    var out = ByteWriter(capacity: (row?.count ?? 0) + changes.count * 2)
    var i = 0
    func emit(_ slot: UInt8, _ value: Int) {
      out.byte(slot)
      out.varint(value)
    }
    for (slot, value) in sortedChanges {
      while i < old.count && old[i].slot < slot {
        emit(old[i].slot, old[i].value)
        i += 1
      }
      if i < old.count && old[i].slot == slot { i += 1 }
      if let value { emit(slot, value) }
    }
    while i < old.count {
      emit(old[i].slot, old[i].value)
      i += 1
    }
    return out.bytes
  }
}

/// The search projection's writes of one transaction: rows changed, written in key order by
/// ``flush(into:)``; reads in the transaction go through it (``current(_:txn:)``).
final class SearchBuffer: TransactionBuffer {
  var storage: ProjectionStorage
  /// Documents applied since the last flush.
  var applied = 0
  /// `search.terms` rows: slot → term frequency (nil: removed).
  var terms: [SearchRowKey: [UInt8: Int?]] = [:]
  var lengths: [[UInt8]: [UInt8: Int?]] = [:]
  /// `search.forward` and `search.ids` rows as they now are (nil: removed).
  var forward: [[UInt8]: [UInt8]?] = [:]
  var ids: [[UInt8]: SearchDocRef?] = [:]
  /// `search.stats` rows as they now are: documents, total length, next num.
  var stats: [[UInt8]: (docs: Int, length: Int, next: UInt64)] = [:]
  /// The names of hashed groups written in this transaction.
  var names: [[UInt8]: [UInt8]] = [:]

  init(_ storage: ProjectionStorage) { self.storage = storage }

  func ref(_ id: [UInt8], txn: WriteTransaction) throws -> SearchDocRef? {
    if let pending = ids[id] { return pending }
    return try txn.get(id, in: storage["ids"]).map { try SearchDocRef(idValue: $0) }
  }

  func forwardRecord(_ key: [UInt8], txn: WriteTransaction) throws -> [UInt8]? {
    if let pending = forward[key] { return pending }
    return try txn.get(key, in: storage["forward"])
  }

  func stat(_ group: [UInt8], txn: WriteTransaction) throws -> (
    docs: Int, length: Int, next: UInt64
  ) {
    if let s = stats[group] { return s }
    guard let v = try txn.get(group, in: storage["stats"]), v.count >= 24 else { return (0, 0, 0) }
    return (
      Int(UInt64(bigEndianArray: v) ?? 0), Int(UInt64(bigEndianArray: Array(v[8..<16])) ?? 0),
      UInt64(bigEndianArray: Array(v[16..<24])) ?? 0
    )
  }

  /// Makes document `id` indexed as `new` (nil: not indexed).
  func set(_ id: [UInt8], _ new: TextSearchProjection.Indexed?, txn: WriteTransaction) throws {
    applied += 1
    let oldRef = try ref(id, txn: txn)
    var old: SearchForward? = nil
    var oldRecord: [UInt8]? = nil
    if let oldRef {
      oldRecord = try forwardRecord(oldRef.forwardKey, txn: txn)
      old = try oldRecord.map { try SearchForward($0) }
    }
    if let oldRef, let new, oldRef.group == new.group, oldRecord == new.record { return }
    var oldTF: [[UInt8]: Int] = [:]
    let sameGroup = old != nil && new != nil && oldRef?.group == new?.group
    if let oldRef, let old {
      var s = try stat(oldRef.group, txn: txn)
      s.length -= old.length
      if sameGroup {
        for (term, count) in old.terms { oldTF[term] = count }
      } else {
        // Removed, or moved to another group: every row goes.
        for (term, _) in old.terms {
          let row = SearchRowKey(
            prefix: SearchRowPrefix(oldRef.group + [0] + term + [0]), bucket: oldRef.bucketNumber)
          terms[row, default: [:]][oldRef.slot] = .some(nil)
        }
        lengths[oldRef.group + [0] + oldRef.bucket, default: [:]][oldRef.slot] = .some(nil)
        forward[oldRef.forwardKey] = .some(nil)
        ids[id] = .some(nil)
        s.docs -= 1
        // A group left empty starts its numbers again (whatever the transactions' bounds).
        if s.docs <= 0 { s = (0, 0, 0) }
      }
      stats[oldRef.group] = s
    }
    guard let new else { return }
    var s = try stat(new.group, txn: txn)
    let ref: SearchDocRef
    if sameGroup, let oldRef {
      ref = oldRef
    } else {
      precondition(s.next < UInt64(UInt32.max), "more than 2^32 documents in one search group")
      ref = SearchDocRef(group: new.group, num: UInt32(truncatingIfNeeded: s.next))
      s.next += 1
      s.docs += 1
    }
    for (k, (term, positions)) in new.terms.enumerated() {
      if oldTF.removeValue(forKey: term) == positions.count { continue }
      let row = SearchRowKey(prefix: new.prefixes[k], bucket: ref.bucketNumber)
      terms[row, default: [:]][ref.slot] = positions.count
    }
    for (term, _) in oldTF {
      let row = SearchRowKey(
        prefix: SearchRowPrefix(new.group + [0] + term + [0]), bucket: ref.bucketNumber)
      terms[row, default: [:]][ref.slot] = .some(nil)
    }
    if !sameGroup || old?.length != new.length {
      lengths[new.group + [0] + ref.bucket, default: [:]][ref.slot] = new.length
    }
    forward[ref.forwardKey] = new.record
    if !sameGroup { ids[id] = ref }
    s.length += new.length
    stats[new.group] = s
    if new.group.first == 1 { names[new.group] = Array(new.name.utf8) }
  }

  func flush(into txn: WriteTransaction) throws {
    let termRows = terms.sorted { SearchRowKey.precedes($0.key, $1.key) }.map {
      ($0.key.bytes, $0.value)
    }
    let lengthRows = lengths.sorted { $0.key.lexicographicallyPrecedes($1.key) }.map {
      ($0.key, $0.value)
    }
    for (db, rows) in [(storage["terms"], termRows), (storage["lengths"], lengthRows)] {
      for (key, changes) in rows {
        let row = try txn.get(key, in: db)
        let next = try SlotList.merged(row, changes)
        if next == row { continue }
        if next.isEmpty {
          _ = try txn.delete(key, in: db)
        } else {
          try txn.put(next, forKey: key, in: db)
        }
      }
    }
    for (key, value) in forward.sorted(by: { $0.key.lexicographicallyPrecedes($1.key) }) {
      if let value {
        try txn.put(value, forKey: key, in: storage["forward"])
      } else {
        _ = try txn.delete(key, in: storage["forward"])
      }
    }
    for (key, value) in ids.sorted(by: { $0.key.lexicographicallyPrecedes($1.key) }) {
      if let value {
        try txn.put(value.idValue, forKey: key, in: storage["ids"])
      } else {
        _ = try txn.delete(key, in: storage["ids"])
      }
    }
    for (group, s) in stats {
      if s.docs <= 0 {
        _ = try txn.delete(group, in: storage["stats"])
      } else {
        // A hashed group's row ends with its name (``TextSearchProjection/groupKey(_:)``).
        var name: [UInt8] = []
        if group.first == 1 {
          name =
            try names[group]
            ?? txn.get(group, in: storage["stats"]).map { Array($0.dropFirst(24)) } ?? []
        }
        try txn.put(
          UInt64(s.docs).bigEndianBytes + UInt64(max(s.length, 0)).bigEndianBytes
            + s.next.bigEndianBytes + name, forKey: group, in: storage["stats"])
      }
    }
    names.removeAll(keepingCapacity: true)
    terms.removeAll(keepingCapacity: true)
    lengths.removeAll(keepingCapacity: true)
    forward.removeAll(keepingCapacity: true)
    ids.removeAll(keepingCapacity: true)
    stats.removeAll(keepingCapacity: true)
    applied = 0
  }
}

/// Words for search: maximal runs of letters, digits and combining marks (Unicode
/// properties, by grapheme cluster), case-folded with Unicode's lowercase mapping. Terms longer
/// than 100 bytes are cut.
///
/// ```
/// "Crème brûlée, 2 ÉGGS"  →  crème · brûlée · 2 · éggs
/// ```
public enum Tokenizer {
  public struct Token: Sendable, Hashable {
    public let term: String
    /// Where the word is in the text.
    public let range: Range<String.Index>
  }

  public static func tokens(_ text: String) -> [Token] {
    var out: [Token] = []
    var start: String.Index?
    let utf8 = text.utf8
    var i = text.startIndex
    while i < text.endIndex {
      let byte = utf8[i]
      let next = utf8.index(after: i)
      let isWord: Bool
      if byte < 0x80 && (next == utf8.endIndex || utf8[next] < 0x80) {
        // An ASCII character followed by another (or the end) is a grapheme of its own: the
        // fast path most of a page's text takes, with the same answer as the one below.
        isWord = Self.isASCIIWordByte(byte)
        if isWord {
          if start == nil { start = i }
        } else if let s = start {
          out.append(token(text, s..<i))
          start = nil
        }
        i = next
        continue
      }
      let c = text[i]
      isWord = c.isLetter || c.isNumber || c.unicodeScalars.first!.properties.isAlphabetic
      if isWord {
        if start == nil { start = i }
      } else if let s = start {
        out.append(token(text, s..<i))
        start = nil
      }
      i = text.index(after: i)
    }
    if let s = start { out.append(token(text, s..<text.endIndex)) }
    return out
  }

  @inline(__always)
  static func isASCIIWordByte(_ byte: UInt8) -> Bool {
    (byte >= 0x30 && byte <= 0x39) || (byte | 0x20 >= 0x61 && byte | 0x20 <= 0x7A)
  }

  static func token(_ text: String, _ range: Range<String.Index>) -> Token {
    let word = text[range]
    if word.utf8.allSatisfy({ $0 < 0x80 }) {
      // ASCII folds by itself, and its terms are cut at 100 bytes = 100 characters.
      let bytes = word.utf8.prefix(100).map { $0 >= 0x41 && $0 <= 0x5A ? $0 | 0x20 : $0 }
      return Token(term: String(decoding: bytes, as: UTF8.self), range: range)
    }
    var term = word.lowercased()
    if term.utf8.count > 100 {
      var cut = term.startIndex
      for idx in term.indices {
        if term.utf8.distance(from: term.startIndex, to: idx) > 100 { break }
        cut = idx
      }
      term = String(term[..<cut])
    }
    return Token(term: term, range: range)
  }

  /// A query's words, folded as the index folds them.
  public static func terms(_ text: String) -> [String] { tokens(text).map(\.term) }
}
