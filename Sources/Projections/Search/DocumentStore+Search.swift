import Foundation
public import JSON
import Log

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
  var searchStorage: ProjectionStorage? { projections.storage(of: "search") }

  /// Whether the store keeps a full-text index (a ``TextSearchProjection``).
  public var hasTextSearch: Bool { searchStorage != nil }

  /// The groups (wikis) the index holds.
  public func searchGroups() throws -> [String] {
    guard let storage = searchStorage else { return [] }
    return try read { txn in
      var out: [String] = []
      try txn.scan(storage["groups"]) { key, _ in
        out.append(String(decoding: key, as: UTF8.self))
        return true
      }
      return out
    }
  }

  /// Runs `query` over the documents of `groups`, ranked by BM25 (k1 1.2, b 0.75) with the
  /// statistics of those groups alone (documents, their mean length, each term's document
  /// frequency), so documents outside them neither appear nor change a score. Every clause
  /// must match: a word, any word with a prefix (each scored), or a phrase (its words at
  /// consecutive positions, scored as its words). Ties go by document id.
  ///
  /// - Throws: 501 when the store has no full-text index.
  public func search(_ query: SearchQuery, groups: [String]) throws -> SearchResult {
    guard let storage = searchStorage else {
      throw StoreError.notImplemented("full-text search in this database")
    }
    return try read { txn in
      var n = 0
      var totalLength = 0
      for g in groups {
        if let v = try txn.get(Array(g.utf8), in: storage["groups"]) {
          n += Int(UInt64(bigEndianBytes: v) ?? 0)
          totalLength += Int(UInt64(bigEndianBytes: v[8...]) ?? 0)
        }
      }
      guard n > 0 else { return SearchResult(total: 0, hits: []) }
      let avgdl = max(Double(totalLength) / Double(n), 1)

      /// doc key (group 0 id) → positions, for one term across the groups.
      func postings(_ term: String, prefix: Bool) throws -> [String: [(String, [Int])]] {
        var out: [String: [(String, [Int])]] = [:]
        for g in groups {
          let base = Array(g.utf8) + [0] + Array(term.utf8)
          try txn.scan(storage["postings"], from: base) { key, value in
            guard key.starts(with: base) else { return false }
            let rest = key[base.count...]
            guard let zero = rest.firstIndex(of: 0) else { return true }
            if !prefix && zero != rest.startIndex { return false }
            let fullTerm = term + String(decoding: rest[rest.startIndex..<zero], as: UTF8.self)
            let id = String(decoding: rest[(zero + 1)...], as: UTF8.self)
            var reader = ByteReader(value)
            var positions: [Int] = []
            var p = 0
            while !reader.isAtEnd {
              p += Int(try reader.varint())
              positions.append(p)
            }
            out["\(g)\u{0}\(id)", default: []].append((fullTerm, positions))
            return true
          }
        }
        return out
      }
      func df(_ term: String) throws -> Int {
        var total = 0
        for g in groups {
          if let v = try txn.get(Array(g.utf8) + [0] + Array(term.utf8), in: storage["df"]) {
            total += Int(UInt64(bigEndianBytes: v) ?? 0)
          }
        }
        return total
      }
      var candidates: [String: (score: [String: Double], matched: Set<String>)]?
      var lengths: [String: Int] = [:]
      func length(_ key: String) throws -> Int {
        if let l = lengths[key] { return l }
        let id = String(key[key.index(after: key.firstIndex(of: "\u{0}")!)...])
        var l = 1
        if let record = try txn.get(Array(id.utf8), in: storage["docs"]) {
          var reader = ByteReader(record)
          _ = try reader.string()
          l = Int(try reader.varint())
        }
        lengths[key] = l
        return l
      }
      var idfs: [String: Double] = [:]
      func bm25(_ term: String, tf: Int, key: String) throws -> Double {
        let idf: Double
        if let known = idfs[term] {
          idf = known
        } else {
          let d = Double(try df(term))
          idf = Foundation.log(1 + (Double(n) - d + 0.5) / (d + 0.5))
          idfs[term] = idf
        }
        let dl = Double(try length(key))
        let k1 = 1.2
        let b = 0.75
        return idf * Double(tf) * (k1 + 1) / (Double(tf) + k1 * (1 - b + b * dl / avgdl))
      }
      for clause in query.clauses {
        var found: [String: (score: [String: Double], matched: Set<String>)] = [:]
        switch clause {
        case .term(let t), .prefix(let t):
          let isPrefix = { if case .prefix = clause { true } else { false } }()
          for (key, entries) in try postings(t, prefix: isPrefix) {
            if let candidates, candidates[key] == nil { continue }
            for (term, positions) in entries {
              found[key, default: ([:], [])].score[term] = try bm25(
                term, tf: positions.count, key: key)
              found[key, default: ([:], [])].matched.insert(term)
            }
          }
        case .phrase(let words):
          var perWord: [[String: [Int]]] = []
          for w in words {
            var map: [String: [Int]] = [:]
            for (key, entries) in try postings(w, prefix: false) {
              if let candidates, candidates[key] == nil { continue }
              map[key] = entries.first?.1
            }
            perWord.append(map)
          }
          guard let first = perWord.first else { break }
          for (key, starts) in first {
            let hits = starts.filter { s in
              perWord.indices.allSatisfy { i in perWord[i][key]?.contains(s + i) ?? false }
            }
            guard !hits.isEmpty else { continue }
            var entry: (score: [String: Double], matched: Set<String>) = ([:], [])
            for (i, w) in words.enumerated() {
              entry.score[w] = try bm25(w, tf: perWord[i][key]?.count ?? hits.count, key: key)
              entry.matched.insert(w)
            }
            found[key] = entry
          }
        }
        if var merged = candidates {
          for key in merged.keys {
            guard let f = found[key] else {
              merged[key] = nil
              continue
            }
            merged[key]!.score.merge(f.score) { a, _ in a }
            merged[key]!.matched.formUnion(f.matched)
          }
          candidates = merged
        } else {
          candidates = found
        }
        if candidates!.isEmpty { break }
      }
      let ranked = (candidates ?? [:]).map { key, value -> SearchHit in
        let zero = key.firstIndex(of: "\u{0}")!
        return SearchHit(
          docID: String(key[key.index(after: zero)...]), group: String(key[..<zero]),
          score: value.score.values.reduce(0, +), matched: value.matched)
      }.sorted { ($0.score, $1.docID) > ($1.score, $0.docID) }
      let page = ranked.dropFirst(query.skip).prefix(query.limit)
      return SearchResult(total: ranked.count, hits: Array(page))
    }
  }

  /// A snippet of `text` around the first matched word: about `words` words, with each
  /// matched word (or a word a matched prefix found) between `<mark>` and `</mark>`, the rest
  /// HTML-escaped, `…` where text was cut.
  public static func snippet(_ text: String, matched: Set<String>, words: Int = 24) -> String {
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
    return out.replacingOccurrences(of: "\n", with: " ")
  }

  static func escape(_ s: String) -> String {
    s.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
      .replacingOccurrences(of: ">", with: "&gt;").replacingOccurrences(of: "\"", with: "&quot;")
  }
}

extension DocumentStore {
  /// What the full-text index takes of document `docID`'s winning revision (its group, title
  /// and text), for a result's title and snippet; nil when it is not searched.
  public func searchable(_ docID: String) throws -> TextSearchSchema.Searchable? {
    guard
      let projection = others.first(where: { $0.projection.name == "search" })?.projection
        as? TextSearchProjection,
      let doc = try? get(docID)
    else { return nil }
    return projection.schema.extract(docID, doc)
  }

  /// A search's answer as `GET /db/_search` gives it: `total_rows` and per hit its `id`,
  /// `wiki` (the group), `title`, `score` and `snippet` (HTML, matched words in `<mark>`).
  public func searchJSON(_ result: SearchResult) throws -> JSONValue {
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
