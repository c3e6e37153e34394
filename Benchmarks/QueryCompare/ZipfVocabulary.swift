/// Pronounceable words, ranked, with draws following Zipf's law (s = 1) over the ranks: the
/// vocabulary of the search sections' generated pages.
struct ZipfVocabulary {
  static let syllables = [
    "ka", "lo", "mi", "ter", "an", "sur", "pel", "do", "ri", "ven", "ta", "gor", "ne", "shi", "bal",
    "cu", "fen", "ro", "wi", "zan", "de", "mor", "it", "pla", "qua", "sen", "tol", "ux", "ber",
    "ly",
  ]

  /// The words, most frequent first.
  let words: [String]
  private let cumulative: [Double]
  private let harmonic: Double

  /// `count` distinct words of one to `maxSyllables` syllables, drawn with `r`.
  init(count: Int, maxSyllables: Int, _ r: inout Random) {
    var words: [String] = []
    var seen: Set<String> = []
    while words.count < count {
      var w = ""
      for _ in 0..<(1 + r.below(maxSyllables)) {
        w += Self.syllables[r.below(Self.syllables.count)]
      }
      if seen.insert(w).inserted { words.append(w) }
    }
    var cumulative: [Double] = []
    var harmonic = 0.0
    for rank in 1...words.count {
      harmonic += 1 / Double(rank)
      cumulative.append(harmonic)
    }
    self.words = words
    self.cumulative = cumulative
    self.harmonic = harmonic
  }

  subscript(rank: Int) -> String { words[rank] }
  var count: Int { words.count }

  /// A word's index in `words` (its rank − 1), drawn from the Zipf distribution.
  func rank(_ r: inout Random) -> Int {
    let x = r.unit() * harmonic
    var lo = 0
    var hi = cumulative.count - 1
    while lo < hi {
      let mid = (lo + hi) / 2
      if cumulative[mid] < x { lo = mid + 1 } else { hi = mid }
    }
    return lo
  }

  /// A word drawn from the Zipf distribution.
  func word(_ r: inout Random) -> String { words[rank(&r)] }
}
