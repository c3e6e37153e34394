import Foundation
import JSON
import Log
import RevTree
import Testing
import Wiki

@testable import Projections

// The search projection as it was before its write path was made flat (issue 21), kept as the
// reference the live one must equal row for row: the layout is a function of the documents.

final class LegacyTextSearchProjection: DocumentChangeProjection {
  let name = "legacysearch"
  let databaseNames = ["terms", "lengths", "forward", "ids", "stats"]
  let schema: TextSearchSchema

  /// Documents per bucket of a posting row.
  static let bucketSize = 128
  /// Documents applied in one transaction before the buffer is written out (bounds its memory
  /// in a rebuild, which is one transaction).
  static let flushEvery = 4096

  init(schema: TextSearchSchema) { self.schema = schema }

  /// A revision's group, length and terms (sorted by their bytes) with their positions, and
  /// the `search.forward` record made of them, worked out off the writer thread.
  struct Indexed: Sendable {
    /// ``TextSearchProjection/groupKey(_:)`` of ``name``.
    let group: [UInt8]
    let name: String
    let length: Int
    let terms: [(term: [UInt8], positions: [Int])]
    /// Each term's row prefix (group · 0x00 · term · 0x00), hashed off the writer thread.
    let prefixes: [LegacyRowPrefix]
    let record: [UInt8]
  }

  func prepare(_ docID: String, rev: RevID, body: JSONValue?) -> Indexed? {
    guard let body else { return nil }
    return index(docID, body)
  }

  func index(_ docID: String, _ body: JSONValue) -> Indexed? {
    guard let s = schema.extract(docID, body), !s.group.utf8.contains(0) else { return nil }
    var byTerm: [String: [Int]] = [:]
    var position = 0
    for text in [s.title, s.text] {
      for token in LegacyTokenizer.tokens(text) {
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
    let group = TextSearchProjection.groupKey(s.group)
    return Indexed(
      group: group, name: s.group, length: length, terms: terms,
      prefixes: terms.map { LegacyRowPrefix(group + [0] + $0.term + [0]) }, record: record.bytes)
  }

  func apply(_ event: RecordedEvent, to storage: ProjectionStorage, in txn: WriteTransaction) {}

  func apply(
    _ change: DocumentChange, share: Indexed?, to storage: ProjectionStorage,
    in txn: WriteTransaction
  ) throws {
    guard change.winnerChanged else { return }
    let buffer = txn.buffer(ObjectIdentifier(self)) { LegacySearchBuffer(storage) }
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
    if buffer.applied >= TextSearchProjection.flushEvery { try buffer.flush(into: txn) }
  }
}

struct LegacyRowPrefix: Hashable, Sendable {
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
struct LegacyRowKey: Hashable {
  let prefix: LegacyRowPrefix
  let bucket: UInt32

  var bytes: [UInt8] { prefix.bytes + bucket.bigEndianBytes4 }

  static func precedes(_ a: Self, _ b: Self) -> Bool {
    if a.prefix.bytes == b.prefix.bytes { return a.bucket < b.bucket }
    return a.prefix.bytes.lexicographicallyPrecedes(b.prefix.bytes)
  }
}

enum LegacySlotList {
  /// `row` with `changes` made (a nil value removes the slot): a merge of two lists sorted by
  /// slot.
  static func merged(_ row: [UInt8]?, _ changes: [UInt8: Int?]) throws -> [UInt8] {
    let old = try row.map(SlotList.decode) ?? []
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

final class LegacySearchBuffer: TransactionBuffer {
  var storage: ProjectionStorage
  /// Documents applied since the last flush.
  var applied = 0
  /// `search.terms` rows: slot → term frequency (nil: removed).
  var terms: [LegacyRowKey: [UInt8: Int?]] = [:]
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
  func set(_ id: [UInt8], _ new: LegacyTextSearchProjection.Indexed?, txn: WriteTransaction) throws
  {
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
          let row = LegacyRowKey(
            prefix: LegacyRowPrefix(oldRef.group + [0] + term + [0]), bucket: oldRef.bucketNumber)
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
      let row = LegacyRowKey(prefix: new.prefixes[k], bucket: ref.bucketNumber)
      terms[row, default: [:]][ref.slot] = positions.count
    }
    for (term, _) in oldTF {
      let row = LegacyRowKey(
        prefix: LegacyRowPrefix(new.group + [0] + term + [0]), bucket: ref.bucketNumber)
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
    let termRows = terms.sorted { LegacyRowKey.precedes($0.key, $1.key) }.map {
      ($0.key.bytes, $0.value)
    }
    let lengthRows = lengths.sorted { $0.key.lexicographicallyPrecedes($1.key) }.map {
      ($0.key, $0.value)
    }
    for (db, rows) in [(storage["terms"], termRows), (storage["lengths"], lengthRows)] {
      for (key, changes) in rows {
        let row = try txn.get(key, in: db)
        let next = try LegacySlotList.merged(row, changes)
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

enum LegacyTokenizer {
  struct Token: Sendable, Hashable {
    let term: String
    /// Where the word is in the text.
    let range: Range<String.Index>
  }

  static func tokens(_ text: String) -> [Token] {
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
  static func terms(_ text: String) -> [String] { tokens(text).map(\.term) }
}
