import Foundation
import JSON
import Log
import TestSupport
import Testing

@testable import Projections

/// The search projection's write path against the reference it replaced
/// (``LegacyTextSearchProjection``): the same words, and the same rows byte for byte.
@Suite struct TextSearchLayoutTests {
  /// Pieces of text that exercise the tokenizer: ASCII, Latin letters with precomposed and
  /// combining accents, CR LF, emoji (with modifiers and joiners), CJK, Arabic, digits of other
  /// scripts, letters whose lowercase mapping changes their length (İ, ẞ), punctuation.
  static let pieces: [String] = [
    "apple", "Apple", "APPLE", "pie", "a", "Z", "42", "x9", " ", " ", "  ", ", ", ".", "-", "_",
    "\n", "\r\n", "\r", "\t", "crème", "CRÈME", "e\u{301}", "E\u{301}", "\u{301}", "a\u{308}",
    "brûlée", "😀", "👍🏽", "👨‍👩‍👧", "日本語", "中文", "مرحبا", "٣٤", "१२", "İstanbul", "ẞ", "ß", "Σ",
    "ΟΔΟΣ", "ﬁ", "ǅ", "\u{200D}", "\u{FEFF}", "½", "Ⅻ", "[[Link]]", "#", "é", "ø",
    String(repeating: "long", count: 30), String(repeating: "é", count: 60),
    String(repeating: "x", count: 99) + "é", String(repeating: "y", count: 100) + "e\u{301}z",
    String(repeating: "İ", count: 40), "a" + String(repeating: "\u{301}", count: 5),
  ]

  static func randomText(_ rng: inout SplitMix64, pieces count: Int) -> String {
    var s = ""
    for _ in 0..<count { s += pieces[Int(rng.next() % UInt64(pieces.count))] }
    return s
  }

  @Test(
    "an ASCII page's terms: each distinct word once, in byte order, with its count and positions"
  )
  func asciiTermsSortLikeBytes() throws {
    // Words over two letters and lengths 1 to 12: most share their first eight bytes, or all
    // of a shorter word's, with others.
    var rng = SplitMix64(seed: 8)
    let projection = TextSearchProjection(schema: Self.schema)
    for _ in 0..<300 {
      var words: [String] = []
      for _ in 0..<(1 + rng.next() % 60) {
        let length = 1 + Int(rng.next() % 12)
        words.append(String((0..<length).map { _ in rng.next() % 2 == 0 ? "a" : "B" }))
      }
      let text = words.joined(separator: " ")
      let doc = JSONValue.object(
        JSONObject([.init(key: "g", value: .string("g")), .init(key: "x", value: .string(text))]))
      let indexed = try #require(projection.index("d", doc))
      // The reference: the folded words grouped and sorted by their bytes; positions count
      // from 1, after the (empty) title and its gap.
      var positions: [[UInt8]: [Int]] = [:]
      for (p, word) in words.enumerated() {
        positions[Array(word.lowercased().utf8), default: []].append(p + 1)
      }
      let expected = positions.keys.sorted { $0.lexicographicallyPrecedes($1) }
      let terms = indexed.entries.indices.map { Array(indexed.termBytes[indexed.termRange($0)]) }
      #expect(terms == expected, "\(text)")
      #expect(indexed.entries.map { Int($0.count) } == expected.map { positions[$0]!.count })
      let stored = try SearchForward.positions(indexed.record, of: Set(expected))
      #expect(stored == positions, "\(text)")
    }
  }

  @Test("the tokenizer finds the same words and terms as the String-based one")
  func tokenizerEqualsReference() {
    var rng = SplitMix64(seed: 21)
    var texts = Self.pieces
    for _ in 0..<3000 { texts.append(Self.randomText(&rng, pieces: Int(rng.next() % 12))) }
    for text in texts {
      let new: [Tokenizer.Token] = Tokenizer.tokens(text)
      let old: [LegacyTokenizer.Token] = LegacyTokenizer.tokens(text)
      let newTerms: [String] = new.map(\.term)
      let oldTerms: [String] = old.map(\.term)
      #expect(newTerms == oldTerms, "\(text.debugDescription)")
      let newRanges: [Range<Int>] = new.map { Self.offsets($0.range, in: text) }
      let oldRanges: [Range<Int>] = old.map { Self.offsets($0.range, in: text) }
      #expect(newRanges == oldRanges)
    }
  }

  static func offsets(_ r: Range<String.Index>, in text: String) -> Range<Int> {
    let start = text.utf8.distance(from: text.startIndex, to: r.lowerBound)
    return start..<(start + text.utf8.distance(from: r.lowerBound, to: r.upperBound))
  }

  /// Groups, titles and texts from fields `g`, `t` and `x`, so that a document can move from
  /// one group to another; a long group is hashed.
  static let schema = TextSearchSchema { _, body in
    guard let g = body["g"]?.stringValue else { return nil }
    return .init(
      group: g, title: body["t"]?.stringValue ?? "", text: body["x"]?.stringValue ?? "")
  }

  static let longGroup = String(repeating: "long group ", count: 40)

  @Test(
    "creates, updates, moves between groups, unindexing and deletions in batches: every row equals the reference's"
  )
  func rowsEqualReference() throws {
    let t = try TestStore(
      projections: [
        TextSearchProjection(schema: Self.schema), LegacyTextSearchProjection(schema: Self.schema),
      ], validation: .couchDB)
    let store = t.store!
    var rng = SplitMix64(seed: 18)
    let groups = ["w0", "w1", "w2", "Ünïcode", Self.longGroup]
    let words = [
      "apple", "pie", "banana", "common", "word", "crème", "brûlée", "日本語", "x1", "x2", "Σ",
      "e\u{301}t\u{301}e\u{301}",
      // Words that share their first eight bytes, or all of a shorter word's.
      "abcdefg", "abcdefgh", "abcdefgha", "abcdefghi", "abcdefghij", "abcdefghia",
    ]
    var revs: [String: String] = [:]
    for round in 0..<8 {
      var batch: [JSONValue] = []
      var used: Set<String> = []
      for _ in 0..<(round == 0 ? 400 : 150) {
        let id = "d\(rng.next() % 500)"
        guard used.insert(id).inserted else { continue }
        var members: [JSONObject.Member] = [.init(key: "_id", value: .string(id))]
        if let rev = revs[id] { members.append(.init(key: "_rev", value: .string(rev))) }
        let what = rng.next() % 10
        if what == 0 && revs[id] != nil {
          members.append(.init(key: "_deleted", value: .bool(true)))
        } else if what == 1 {
          members.append(.init(key: "note", value: .string("not searched")))
        } else {
          var text = ""
          for _ in 0..<(rng.next() % 40) {
            text += words[Int(rng.next() % UInt64(words.count))] + " "
            if rng.next() % 8 == 0 { text += Self.randomText(&rng, pieces: 2) }
          }
          // Few groups, so that pages share buckets; a page often stays in its group.
          let g = groups[Int(rng.next() % (rng.next() % 4 == 0 ? 5 : 2))]
          members += [
            .init(key: "g", value: .string(g)),
            .init(key: "t", value: .string("Title \(rng.next() % 20)")),
            .init(key: "x", value: .string(text)),
          ]
        }
        batch.append(.object(JSONObject(members)))
      }
      for (doc, result) in zip(batch, try store.bulkDocs(batch, actor: "ann")) {
        try #require(result.ok)
        // A deleted document is created again without a revision.
        revs[doc["_id"]!.stringValue!] = doc["_deleted"] == nil ? result.rev : nil
      }
      try expectSameRows(store)
    }
    #expect(try store.verify("search") == [])
  }

  func expectSameRows(_ store: DocumentStore) throws {
    // The live index is in its own environment, kept behind the log (``SearchIndexer``),
    // brought up to date here; the reference is applied in the append transaction. Every
    // round writes each document once, so the indexer meets the documents in log order, as
    // the reference does, and numbers them the same.
    let reference = try #require(store.storage(of: "legacysearch"))
    for name in ["terms", "lengths", "forward", "ids", "stats"] {
      var a: [([UInt8], [UInt8])] = []
      var b: [([UInt8], [UInt8])] = []
      try store.readSearchIndex { txn, live in
        try txn.scan(live[name]) {
          a.append(($0, $1))
          return true
        }
      }
      try store.log.read { txn in
        try txn.scan(reference[name]) {
          b.append(($0, $1))
          return true
        }
      }
      #expect(a.count == b.count, "search.\(name)")
      let same = a.elementsEqual(b) { x, y in x.0 == y.0 && x.1 == y.1 }
      #expect(same, "search.\(name)")
    }
  }
}
