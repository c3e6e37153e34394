import Foundation
import JSON
import Log
import StoreTestSupport
import TestSupport
import Testing

@testable import Projections
@testable import Query

/// The search projection's terms: each distinct word once, in byte order.
@Suite struct TextSearchLayoutTests {
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
      #expect(indexed.positionsByTerm() == positions, "\(text)")
    }
  }

  /// Groups, titles and texts from fields `g`, `t` and `x`, so that a document can move from
  /// one group to another; a long group is hashed.
  static let schema = TextSearchSchema { _, body in
    guard let g = body["g"]?.stringValue else { return nil }
    return .init(
      group: g, title: body["t"]?.stringValue ?? "", text: body["x"]?.stringValue ?? "")
  }

}
