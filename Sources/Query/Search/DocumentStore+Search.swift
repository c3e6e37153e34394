import Formats
import Foundation
public import JSON
public import Log
public import Projections

/// A full-text query: words, `"quoted phrases"` and `prefix*` words, all required.
///
/// ```swift
/// let q = try SearchQuery("\"apple pie\" cinnam*")
/// let hits = try store.search(q, groups: ["w1"])
/// ```
public struct SearchQuery: Sendable, Hashable {
  enum Clause: Sendable, Hashable {
    case term(String)
    case prefix(String)
    case phrase([String])
  }

  let clauses: [Clause]
  public var limit = 25
  public var skip = 0

  /// Parses `q`. - Throws: 400 when it has no words.
  public init(_ q: String) throws(StoreError) {
    var clauses: [Clause] = []
    var rest = Substring(q)
    while let quote = rest.firstIndex(of: "\"") {
      clauses += Self.words(rest[..<quote])
      let after = rest[rest.index(after: quote)...]
      let end = after.firstIndex(of: "\"") ?? after.endIndex
      let words = Tokenizer.terms(String(after[..<end]))
      if words.count == 1 {
        clauses.append(.term(words[0]))
      } else if words.count > 1 {
        clauses.append(.phrase(words))
      }
      rest = end == after.endIndex ? "" : after[after.index(after: end)...]
    }
    clauses += Self.words(rest)
    guard !clauses.isEmpty else {
      throw StoreError("bad_request", "the query has no words to search for", code: .badRequest)
    }
    self.clauses = clauses
  }

  static func words(_ text: Substring) -> [Clause] {
    var out: [Clause] = []
    for piece in text.split(whereSeparator: { $0.isWhitespace }) {
      let isPrefix = piece.hasSuffix("*")
      let terms = Tokenizer.terms(String(piece))
      guard !terms.isEmpty else { continue }
      for (i, t) in terms.enumerated() {
        out.append(isPrefix && i == terms.count - 1 ? .prefix(t) : .term(t))
      }
    }
    return out
  }
}

/// One document a search found.
public struct SearchHit: Sendable, Hashable {
  public let docID: String
  public let group: String
  public let score: Double
  /// The words of the query as they matched (folded), for snippets.
  public let matched: Set<String>
}

/// What a search answers: the hits of the page asked for, and how many matched in all.
public struct SearchResult: Sendable {
  public var total: Int
  public var hits: [SearchHit]
}

extension DocumentStore {
  /// The store's full-text index (a ``TextSearchProjection`` kept behind the log), if any.
  var searchIndexer: IndexFollower? {
    indexes.first { $0.index is TextSearchProjection }
  }

  var hasTextSearch: Bool { searchIndexer != nil }

  func updateSearchIndex() throws {
    try searchIndexer?.catchUp()
  }

  /// Reads the full-text index's databases (in the index's own environment), up to date
  /// unless `update` is false.
  package func readSearchIndex<T>(
    update: Bool = true, _ body: (ReadTransaction, ProjectionStorage) throws -> T
  ) throws -> T {
    guard let searchIndexer else {
      throw StoreError.notImplemented("full-text search in this database")
    }
    if update { try searchIndexer.catchUp() }
    return try searchIndexer.read { try body($0, searchIndexer.storage) }
  }

  /// Writes into the full-text index's databases directly, as no store does: for tests that
  /// damage it.
  package func writeSearchIndex(_ body: (WriteTransaction, ProjectionStorage) throws -> Void)
    throws
  {
    guard let searchIndexer else {
      throw StoreError.notImplemented("full-text search in this database")
    }
    try searchIndexer.write { try body($0, searchIndexer.storage) }
  }

  func searchCheckpoint() throws -> LogPosition? {
    try searchIndexer.map { LogPosition(try $0.checkpoint()) }
  }

  func searchGroups(update: Bool = true) throws -> [String] {
    guard hasTextSearch else { return [] }
    return try readSearchIndex(update: update) { txn, storage in
      var out: [String] = []
      try txn.scan(storage["totals"]) { key, value in
        // A hashed group's name follows the numbers (``TextSearchProjection/groupKey(_:)``).
        let name = key.first == 1 ? Array(value.dropFirst(16)) : key
        out.append(String(decoding: name, as: UTF8.self))
        return true
      }
      return out
    }
  }

  func search(_ query: SearchQuery, groups: [String], update: Bool = true) throws
    -> SearchResult
  {
    let groups = Array(Set(groups.filter { !$0.utf8.contains(0) })).sorted {
      $0.utf8.lexicographicallyPrecedes($1.utf8)
    }
    let groupBytes = groups.map { TextSearchProjection.groupKey($0) }
    return try readSearchIndex(update: update) { txn, storage in
      var n = 0
      var totalLength = 0
      for g in groupBytes {
        if let v = try txn.get(g, in: storage["totals"]), v.count >= 16 {
          n += Int(truncatingIfNeeded: SearchKeys.readU64(v))
          totalLength += Int(truncatingIfNeeded: SearchKeys.readU64(v[8..<16]))
        }
      }
      guard n > 0 else { return SearchResult(total: 0, hits: []) }
      let avgdl = max(Double(totalLength) / Double(n), 1)
      let segments = try SearchSegment.all(storage, txn)
      let dead = try DeadSet(storage, txn)
      let numBits: UInt64 = 40
      let numMask: UInt64 = 1 << numBits - 1

      // The distinct terms of the query, each with its postings: (doc, tf) sorted by doc,
      // where doc = group index << 40 | num.
      var termIndex: [[UInt8]: Int] = [:]
      var termNames: [String] = []
      var postings: [[(doc: UInt64, tf: Int)]] = []
      // Positions are kept only for the words of phrases: per term (parallel to `postings`),
      // where each posting's positions start in the term's arena.
      var positionStarts: [[Int32]] = []
      var positionArenas: [[Int32]] = []
      func add(_ term: [UInt8]) -> Int {
        if let i = termIndex[term] { return i }
        termIndex[term] = termNames.count
        termNames.append(String(decoding: term, as: UTF8.self))
        postings.append([])
        positionStarts.append([])
        positionArenas.append([])
        return termNames.count - 1
      }
      /// Appends a row's postings (the row of segment `segment`, group `gi`) to term `t`'s.
      var phraseWords: Set<[UInt8]> = []
      for case .phrase(let words) in query.clauses {
        for w in words { phraseWords.insert(Array(w.utf8)) }
      }
      func decode(
        _ value: Span<UInt8>, _ segment: SearchSegment, _ gi: Int, into t: Int, positions: Bool
      ) {
        var i = 0
        var num = segment.lo
        let base = UInt64(gi) << numBits
        while i < value.count {
          guard let delta = SearchKeys.varint(value, &i), let tf = SearchKeys.varint(value, &i)
          else { return }
          num += delta
          let isDead = dead.contains(num)
          if positions && !isDead {
            positionStarts[t].append(Int32(positionArenas[t].count))
            var p: UInt64 = 0
            for _ in 0..<tf {
              guard let d = SearchKeys.varint(value, &i) else { return }
              p += d
              positionArenas[t].append(Int32(truncatingIfNeeded: p))
            }
          } else {
            for _ in 0..<tf { guard SearchKeys.varint(value, &i) != nil else { return } }
          }
          if isDead { continue }
          postings[t].append((base | num & numMask, Int(truncatingIfNeeded: tf)))
        }
      }
      /// Reads the rows of `word` (or of every term it begins, for a prefix); the indexes of
      /// the terms found.
      func read(_ word: String, prefix: Bool) throws -> [Int] {
        let wordBytes = Array(word.utf8)
        var found: [Int] = []
        var seen: Set<Int> = []
        // A term read before (a word and then a prefix of it) keeps the postings it has.
        let new = termNames.count
        if !prefix {
          let t = add(wordBytes)
          let fresh = t >= new
          for (gi, g) in groupBytes.enumerated() where fresh {
            for segment in segments {
              let key = SearchKeys.postingKey(segment.id, g, wordBytes)
              _ = try txn.withValue(forKey: key, in: storage["postings"]) { value in
                decode(value, segment, gi, into: t, positions: phraseWords.contains(wordBytes))
              }
            }
          }
          return postings[t].isEmpty ? [] : [t]
        }
        // Terms with the prefix, group by group and segment by segment: each term's postings
        // stay in document order.
        for (gi, g) in groupBytes.enumerated() {
          for segment in segments {
            let start = SearchKeys.postingKey(segment.id, g, wordBytes)
            let termStart = 4 + g.count + 1
            try txn.scanBorrowed(storage["postings"], from: start) { key, value in
              guard key.count >= start.count else { return false }
              for k in 0..<start.count where key[k] != start[k] { return false }
              var term: [UInt8] = []
              term.reserveCapacity(key.count - termStart)
              for k in termStart..<key.count { term.append(key[k]) }
              let t = add(term)
              if seen.insert(t).inserted { found.append(t) }
              if t >= new {
                decode(value, segment, gi, into: t, positions: phraseWords.contains(term))
              }
              return true
            }
          }
        }
        return found.filter { !postings[$0].isEmpty }
      }
      var terms: [[UInt8]: [Int]] = [:]
      func termsOf(_ word: String, prefix: Bool) throws -> [Int] {
        let key = Array(word.utf8) + (prefix ? [1] : [0])
        if let known = terms[key] { return known }
        let found = try read(word, prefix: prefix)
        terms[key] = found
        return found
      }

      // Each clause's documents, sorted; the candidates are their intersection.
      var candidates: [UInt64]? = nil
      var phrases: [[Int]] = []
      for clause in query.clauses {
        var docs: [UInt64]
        switch clause {
        case .term(let t):
          docs = try termsOf(t, prefix: false).first.map { postings[$0].map(\.doc) } ?? []
        case .prefix(let t):
          let found = try termsOf(t, prefix: true)
          docs =
            found.count == 1
            ? postings[found[0]].map(\.doc)
            : Array(Set(found.flatMap { postings[$0].map(\.doc) })).sorted()
        case .phrase(let words):
          var indices: [Int] = []
          docs = []
          for (i, w) in words.enumerated() {
            guard let t = try termsOf(w, prefix: false).first else {
              indices = []
              docs = []
              break
            }
            indices.append(t)
            let these = postings[t].map(\.doc)
            docs = i == 0 ? these : Self.intersect(docs, these)
          }
          if indices.isEmpty { docs = [] } else { phrases.append(indices) }
        }
        candidates = candidates.map { Self.intersect($0, docs) } ?? docs
        if candidates!.isEmpty { break }
      }
      var docs = candidates ?? []

      // Records, read once per document.
      var records: [UInt64: [UInt8]] = [:]
      func record(_ doc: UInt64) throws -> [UInt8]? {
        if let r = records[doc] { return r }
        let r = try txn.get(SearchKeys.u64(doc & numMask), in: storage["records"])
        records[doc] = r
        return r
      }
      // Phrases: their words at consecutive positions.
      /// Term `t`'s positions in `doc` (a posting of it).
      func positions(_ t: Int, _ doc: UInt64) -> [Int32] {
        let starts = positionStarts[t]
        let arena = positionArenas[t]
        guard let k = Self.index(postings[t], doc), k < starts.count else { return [] }
        let end = k + 1 < starts.count ? Int(starts[k + 1]) : arena.count
        return Array(arena[Int(starts[k])..<end])
      }
      for words in phrases where !docs.isEmpty {
        docs = docs.filter { doc in
          let lists = words.map { positions($0, doc) }
          let sets = lists.map(Set.init)
          return lists[0].contains { s in
            sets.indices.allSatisfy { i in sets[i].contains(s + Int32(i)) }
          }
        }
      }
      guard !docs.isEmpty else { return SearchResult(total: 0, hits: []) }

      // Lengths: each group's norms rows, segment by segment (in number order), walked beside
      // the candidates (sorted by group, then number).
      var dl = [Double](repeating: 1, count: docs.count)
      var i = 0
      while i < docs.count {
        let gi = Int(docs[i] >> numBits)
        var j = i
        while j < docs.count && Int(docs[j] >> numBits) == gi { j += 1 }
        var k = i
        for segment in segments where k < j {
          // Candidates of this group in this segment.
          guard docs[k] & numMask < segment.hi else { continue }
          _ = try txn.withValue(
            forKey: SearchKeys.u32(segment.id) + groupBytes[gi], in: storage["norms"]
          ) { value in
            var at = 0
            var num = segment.lo
            while at < value.count && k < j {
              guard let delta = SearchKeys.varint(value, &at),
                let length = SearchKeys.varint(value, &at)
              else { return }
              num += delta
              while k < j && docs[k] & numMask < num { k += 1 }
              if k < j && docs[k] & numMask == num {
                dl[k] = Double(length)
                k += 1
              }
            }
          }
          while k < j && docs[k] & numMask < segment.hi { k += 1 }
        }
        i = j
      }

      // BM25: each term of the query the document has, once.
      var scores = [Double](repeating: 0, count: docs.count)
      let k1 = 1.2
      let b = 0.75
      for list in postings where !list.isEmpty {
        let d = Double(list.count)
        let idf = Foundation.log(1 + (Double(n) - d + 0.5) / (d + 0.5))
        var i = 0
        for (doc, tf) in list {
          while i < docs.count && docs[i] < doc { i += 1 }
          if i == docs.count { break }
          guard docs[i] == doc else { continue }
          let f = Double(tf)
          scores[i] += idf * f * (k1 + 1) / (f + k1 * (1 - b + b * dl[i] / avgdl))
        }
      }

      // The page: the best skip + limit, with those tied with the last, ordered by score and
      // then document id.
      let wanted = query.skip + query.limit
      var order = Array(docs.indices)
      if wanted < docs.count {
        let cut = Self.largest(scores, max(wanted, 1))
        order = order.filter { scores[$0] >= cut }
      }
      var ranked: [(index: Int, id: String)] = []
      for i in order {
        guard let bytes = try record(docs[i]) else { continue }
        ranked.append((i, try SearchForward.docID(bytes)))
      }
      ranked.sort { (scores[$0.index], $1.id) > (scores[$1.index], $0.id) }
      var hits: [SearchHit] = []
      for (i, id) in ranked.dropFirst(query.skip).prefix(query.limit) {
        let doc = docs[i]
        var matched: Set<String> = []
        for (t, list) in postings.enumerated() where Self.contains(list, doc) {
          matched.insert(termNames[t])
        }
        hits.append(
          SearchHit(
            docID: id, group: groups[Int(doc >> numBits)], score: scores[i], matched: matched))
      }
      return SearchResult(total: docs.count, hits: hits)
    }
  }

  /// The `k`-th largest of `values` (1 ≤ `k` ≤ its count), kept in a min-heap of `k`: the page
  /// of a search that matched a million documents costs no sort of them all.
  static func largest(_ values: [Double], _ k: Int) -> Double {
    var heap: [Double] = []
    heap.reserveCapacity(k)
    func siftDown(_ start: Int) {
      var i = start
      while true {
        let l = 2 * i + 1
        let r = l + 1
        var m = i
        if l < heap.count && heap[l] < heap[m] { m = l }
        if r < heap.count && heap[r] < heap[m] { m = r }
        if m == i { return }
        heap.swapAt(i, m)
        i = m
      }
    }
    for v in values {
      if heap.count < k {
        heap.append(v)
        var i = heap.count - 1
        while i > 0 && heap[(i - 1) / 2] > heap[i] {
          heap.swapAt(i, (i - 1) / 2)
          i = (i - 1) / 2
        }
      } else if v > heap[0] {
        heap[0] = v
        siftDown(0)
      }
    }
    return heap[0]
  }

  /// The elements of two sorted lists both have.
  static func intersect(_ a: [UInt64], _ b: [UInt64]) -> [UInt64] {
    var out: [UInt64] = []
    out.reserveCapacity(min(a.count, b.count))
    var i = 0
    var j = 0
    while i < a.count && j < b.count {
      if a[i] < b[j] {
        i += 1
      } else if a[i] > b[j] {
        j += 1
      } else {
        out.append(a[i])
        i += 1
        j += 1
      }
    }
    return out
  }

  /// Where a sorted posting list has `doc`, if it does.
  static func index(_ list: [(doc: UInt64, tf: Int)], _ doc: UInt64) -> Int? {
    var lo = 0
    var hi = list.count
    while lo < hi {
      let mid = (lo + hi) / 2
      if list[mid].doc < doc { lo = mid + 1 } else { hi = mid }
    }
    return lo < list.count && list[lo].doc == doc ? lo : nil
  }

  /// Whether a sorted posting list has `doc`.
  static func contains(_ list: [(doc: UInt64, tf: Int)], _ doc: UInt64) -> Bool {
    var lo = 0
    var hi = list.count
    while lo < hi {
      let mid = (lo + hi) / 2
      if list[mid].doc < doc { lo = mid + 1 } else { hi = mid }
    }
    return lo < list.count && list[lo].doc == doc
  }

  static func snippet(_ text: String, matched: Set<String>, words: Int = 24) -> String {
    let tokens = Tokenizer.tokens(text)
    let firstMatch = tokens.firstIndex { matched.contains($0.term) } ?? 0
    let from = max(0, firstMatch - words / 3)
    let to = min(tokens.count, from + words)
    guard from < to else { return escape(String(text.prefix(200))) }
    var out = from > 0 ? "…" : ""
    var cursor = tokens[from].range.lowerBound
    for t in tokens[from..<to] {
      out += escape(String(text[cursor..<t.range.lowerBound]))
      let word = escape(String(text[t.range]))
      out += matched.contains(t.term) ? "<mark>\(word)</mark>" : word
      cursor = t.range.upperBound
    }
    if to < tokens.count { out += "…" } else { out += escape(String(text[cursor...])) }
    return out.contains("\n") ? out.replacingOccurrences(of: "\n", with: " ") : out
  }

  static func escape(_ s: String) -> String {
    var out: [UInt8] = []
    out.reserveCapacity(s.utf8.count + 8)
    for byte in s.utf8 {
      switch byte {
      case UInt8(ascii: "&"): out += Array("&amp;".utf8)
      case UInt8(ascii: "<"): out += Array("&lt;".utf8)
      case UInt8(ascii: ">"): out += Array("&gt;".utf8)
      case UInt8(ascii: "\""): out += Array("&quot;".utf8)
      default: out.append(byte)
      }
    }
    return String(decoding: out, as: UTF8.self)
  }
}

extension DocumentStore {
  func searchable(_ docID: String) throws -> TextSearchSchema.Searchable? {
    guard
      let projection = searchIndexer?.index as? TextSearchProjection,
      let doc = try? get(docID)
    else { return nil }
    return projection.schema.extract(docID, doc)
  }

  func searchJSON(_ result: SearchResult) throws -> JSONValue {
    var rows: [JSONValue] = []
    for hit in result.hits {
      let s = try searchable(hit.docID)
      rows.append(
        .object(
          JSONObject([
            .init(key: "id", value: .string(hit.docID)),
            .init(key: "wiki", value: .string(hit.group)),
            .init(key: "title", value: .string(s?.title ?? "")),
            .init(
              key: "score", value: .number(JSONNumber((hit.score * 10000).rounded() / 10000) ?? 0)),
            .init(
              key: "snippet", value: .string(Self.snippet(s?.text ?? "", matched: hit.matched))),
          ])))
    }
    return .object(
      JSONObject([
        .init(key: "total_rows", value: .number(JSONNumber(Int64(result.total)))),
        .init(key: "rows", value: .array(rows)),
      ]))
  }
}
