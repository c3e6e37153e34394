import Formats
import Log
import Projections

/// A live search index compared with one rebuilt from the same documents
/// (``IndexFollower/verify(maxDifferences:)``), document by document: numbers and segments
/// differ between the two (they depend on the order the indexer met the documents), so each
/// index's postings and lengths are read back as (document id, value) pairs.
struct SearchComparison {
  let max: Int
  var differences: [String] = []

  init(max: Int) { self.max = max }

  var full: Bool { differences.count >= max }

  mutating func note(_ s: String) {
    if !full { differences.append("search." + s) }
  }

  /// Each document's number and group (`refs`), by document id.
  static func refs(_ storage: ProjectionStorage, _ txn: ReadTransaction) throws
    -> [[UInt8]: SearchRef]
  {
    var out: [[UInt8]: SearchRef] = [:]
    try txn.scan(storage["refs"]) { id, value in
      out[id] = try SearchRef(value: value)
      return true
    }
    return out
  }

  mutating func compare(live: ProjectionStorage, rebuilt: ProjectionStorage, txn: ReadTransaction)
    throws
  {
    let liveRefs = try Self.refs(live, txn)
    let rebuiltRefs = try Self.refs(rebuilt, txn)
    for (id, ref) in rebuiltRefs.sorted(by: { $0.key.lexicographicallyPrecedes($1.key) }) {
      let name = ProjectionRunner.show(id)
      guard let mine = liveRefs[id] else {
        note("refs: live lacks \(name)")
        continue
      }
      guard mine.group == ref.group else {
        note("refs: \(name) is in another group")
        continue
      }
      if try txn.get(SearchKeys.u64(mine.num), in: live["records"])
        != txn.get(SearchKeys.u64(ref.num), in: rebuilt["records"])
      {
        note("records: the record of \(name) differs from the rebuilt one")
      }
    }
    for id in liveRefs.keys where rebuiltRefs[id] == nil {
      note("refs: live has \(ProjectionRunner.show(id)), which the rebuild does not")
    }
    if try txn.count(of: live["records"]) != txn.count(of: rebuilt["records"]) {
      note("records: live has a different number of records")
    }
    // Postings and lengths, as sets of (document, value) per group and term.
    for name in ["postings", "norms"] {
      let a = try Self.rows(name, live, liveRefs, txn, &self)
      var b = try Self.rows(name, rebuilt, rebuiltRefs, txn, &self)
      for (key, pairs) in a.sorted(by: { $0.key.lexicographicallyPrecedes($1.key) }) {
        if b.removeValue(forKey: key) != pairs {
          note("\(name): the rows of \(ProjectionRunner.show(key)) differ from the rebuilt ones")
        }
        if full { return }
      }
      for key in b.keys.sorted(by: { $0.lexicographicallyPrecedes($1) }) {
        note("\(name): live lacks the rows of \(ProjectionRunner.show(key))")
      }
    }
    // Totals per group (documents, words, hashed name).
    var liveTotals: [[UInt8]: [UInt8]] = [:]
    try txn.scan(live["totals"]) { k, v in
      liveTotals[k] = v
      return true
    }
    try txn.scan(rebuilt["totals"]) { k, v in
      if liveTotals.removeValue(forKey: k) != v {
        note("totals: the totals of \(ProjectionRunner.show(k)) differ from the rebuilt ones")
      }
      return !full
    }
    for k in liveTotals.keys {
      note("totals: live has totals for \(ProjectionRunner.show(k)), which the rebuild does not")
    }
  }

  /// The live (not dead) documents' values of every row of `postings` (key without the
  /// segment: group · 0x00 · term) or `norms` (group), as sorted (document id, value) pairs.
  /// A posting of a number no document has is a difference.
  static func rows(
    _ name: String, _ storage: ProjectionStorage, _ refs: [[UInt8]: SearchRef],
    _ txn: ReadTransaction, _ report: inout SearchComparison
  ) throws -> [[UInt8]: [SearchPair]] {
    var ids: [UInt64: [UInt8]] = [:]
    for (id, ref) in refs { ids[ref.num] = id }
    let segments = Dictionary(
      try SearchSegment.all(storage, txn).map { ($0.id, $0) }, uniquingKeysWith: { a, _ in a })
    let dead = try DeadSet(storage, txn)
    var out: [[UInt8]: [SearchPair]] = [:]
    try txn.scan(storage[name]) { key, value in
      guard key.count > 4,
        let segment = segments[UInt32(SearchKeys.readU64([0, 0, 0, 0] + key.prefix(4)))]
      else {
        report.note("\(name): a row of no segment, \(ProjectionRunner.show(key))")
        return !report.full
      }
      let suffix = Array(key.dropFirst(4))
      var i = 0
      var num = segment.lo
      while i < value.count {
        guard let delta = Varint.read(value, at: &i), let v = Varint.read(value, at: &i) else {
          report.note("\(name): the row \(ProjectionRunner.show(key)) cannot be read")
          break
        }
        num += delta
        // A posting's frequency, then as many positions.
        var values = [v]
        if name == "postings" {
          for _ in 0..<v {
            guard let p = Varint.read(value, at: &i) else { break }
            values.append(p)
          }
        }
        if dead.contains(num) { continue }
        guard let id = ids[num] else {
          report.note("\(name): \(ProjectionRunner.show(key)) names a document the index lacks")
          continue
        }
        out[suffix, default: []].append(SearchPair(id: id, values: values))
      }
      return !report.full
    }
    for key in out.keys { out[key]!.sort { $0.id.lexicographicallyPrecedes($1.id) } }
    return out
  }
}

struct SearchPair: Hashable {
  var id: [UInt8]
  var values: [UInt64]
}
