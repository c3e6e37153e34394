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
/// | database | key | value |
/// | --- | --- | --- |
/// | `search.postings` | group · 0x00 · term · 0x00 · doc id | the term's positions (varints, delta-coded) |
/// | `search.df` | group · 0x00 · term | how many documents of the group have the term (8 bytes) |
/// | `search.docs` | doc id | group, length in words, and its distinct terms (to remove them) |
/// | `search.groups` | group | documents and total length in words (8 + 8 bytes) |
///
/// Terms are the words of the title and then the text (``Tokenizer``: Unicode letters and
/// digits, case-folded), positions counted across both, with a gap of 1 between them so a
/// phrase does not cross from title to text. Statistics are per group, so a query over the
/// groups a user may read ranks with their numbers only (``DocumentStore/search(_:groups:)``).
public final class TextSearchProjection: DocumentChangeProjection {
  public let name = "search"
  public let databaseNames = ["postings", "df", "docs", "groups"]
  let schema: TextSearchSchema

  public init(schema: TextSearchSchema) { self.schema = schema }

  /// A revision's group and terms with their positions, worked out off the writer thread.
  public struct Indexed: Sendable {
    let group: String
    let length: Int
    let terms: [String: [Int]]
  }

  public func prepare(_ docID: String, rev: RevID, body: JSONValue?) -> Indexed? {
    guard let body else { return nil }
    return index(docID, body)
  }

  func index(_ docID: String, _ body: JSONValue) -> Indexed? {
    guard let s = schema.extract(docID, body) else { return nil }
    var terms: [String: [Int]] = [:]
    var position = 0
    for text in [s.title, s.text] {
      for token in Tokenizer.tokens(text) {
        terms[token.term, default: []].append(position)
        position += 1
      }
      position += 1
    }
    return Indexed(group: s.group, length: max(position - 2, 0), terms: terms)
  }

  public func apply(_ event: RecordedEvent, to storage: ProjectionStorage, in txn: WriteTransaction)
  {}

  public func apply(
    _ change: DocumentChange, share: Indexed?, to storage: ProjectionStorage,
    in txn: WriteTransaction
  ) throws {
    guard change.winnerChanged else { return }
    let id = Array(change.docID.utf8)
    if let old = try txn.get(id, in: storage["docs"]) {
      try remove(change.docID, old, storage: storage, txn: txn)
      _ = try txn.delete(id, in: storage["docs"])
    }
    guard let winner = change.tree.winner, !winner.isDeleted else { return }
    let indexed: Indexed?
    if let share, winner.body == change.event.position.rawValue {
      indexed = share
    } else {
      indexed = try change.winnerBody(in: txn).flatMap { index(change.docID, $0) }
    }
    guard let indexed, !indexed.group.utf8.contains(0) else { return }
    let group = Array(indexed.group.utf8)
    var record = ByteWriter()
    record.string(indexed.group)
    record.varint(indexed.length)
    record.varint(indexed.terms.count)
    for (term, positions) in indexed.terms.sorted(by: { $0.key < $1.key }) {
      record.string(term)
      var value = ByteWriter(capacity: positions.count + 2)
      var last = 0
      for p in positions {
        value.varint(p - last)
        last = p
      }
      let termKey = group + [0] + Array(term.utf8)
      try txn.put(value.bytes, forKey: termKey + [0] + id, in: storage["postings"])
      try bump(termKey, by: 1, in: storage["df"], txn: txn)
    }
    try txn.put(record.bytes, forKey: id, in: storage["docs"])
    try bumpGroup(group, docs: 1, length: indexed.length, storage: storage, txn: txn)
  }

  /// Removes a document's postings and its part of the statistics.
  func remove(_ docID: String, _ record: [UInt8], storage: ProjectionStorage, txn: WriteTransaction)
    throws
  {
    var reader = ByteReader(record)
    let group = Array(try reader.string().utf8)
    let length = Int(try reader.varint())
    let count = Int(try reader.varint())
    let id = Array(docID.utf8)
    for _ in 0..<count {
      let termKey = group + [0] + Array(try reader.string().utf8)
      _ = try txn.delete(termKey + [0] + id, in: storage["postings"])
      try bump(termKey, by: -1, in: storage["df"], txn: txn)
    }
    try bumpGroup(group, docs: -1, length: -length, storage: storage, txn: txn)
  }

  func bump(_ key: [UInt8], by delta: Int, in db: Database, txn: WriteTransaction) throws {
    let current = try txn.get(key, in: db).flatMap { UInt64(bigEndianBytes: $0) } ?? 0
    let next = Int(current) + delta
    if next <= 0 {
      _ = try txn.delete(key, in: db)
    } else {
      try txn.put(UInt64(next).bigEndianBytes, forKey: key, in: db)
    }
  }

  func bumpGroup(
    _ group: [UInt8], docs: Int, length: Int, storage: ProjectionStorage, txn: WriteTransaction
  ) throws {
    let db = storage["groups"]
    let value = try txn.get(group, in: db)
    let n = Int(value.flatMap { UInt64(bigEndianBytes: $0) } ?? 0) + docs
    let total = Int(value.flatMap { UInt64(bigEndianBytes: $0[8...]) } ?? 0) + length
    if n <= 0 {
      _ = try txn.delete(group, in: db)
    } else {
      try txn.put(
        UInt64(n).bigEndianBytes + UInt64(max(total, 0)).bigEndianBytes, forKey: group, in: db)
    }
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
