import Log
import Projections

/// A live search index compared with one rebuilt from the same documents
/// (``IndexFollower/verify(maxDifferences:)``), document by document: the rebuilt one's numbers
/// stand for the documents in both.
struct SearchComparison {
  let max: Int
  var differences: [String] = []

  init(max: Int) { self.max = max }

  var full: Bool { differences.count >= max }

  mutating func note(_ s: String) {
    if !full { differences.append("search." + s) }
  }

  /// group key and num in `ids` values, by document id.
  static func refs(_ storage: ProjectionStorage, _ txn: ReadTransaction) throws
    -> [[UInt8]: SearchDocRef]
  {
    var out: [[UInt8]: SearchDocRef] = [:]
    try txn.scan(storage["ids"]) { id, value in
      out[id] = try SearchDocRef(idValue: value)
      return true
    }
    return out
  }

  mutating func compare(live: ProjectionStorage, rebuilt: ProjectionStorage, txn: ReadTransaction)
    throws
  {
    let liveRefs = try Self.refs(live, txn)
    let rebuiltRefs = try Self.refs(rebuilt, txn)
    // Documents: the same ids, groups and forward records; live numbers mapped to rebuilt ones.
    var numbers: [[UInt8]: [UInt32: UInt32]] = [:]
    for (id, ref) in rebuiltRefs.sorted(by: { $0.key.lexicographicallyPrecedes($1.key) }) {
      let name = ProjectionRunner.show(id)
      guard let mine = liveRefs[id] else {
        note("ids: live lacks \(name)")
        continue
      }
      guard mine.group == ref.group else {
        note("ids: \(name) is in another group")
        continue
      }
      numbers[ref.group, default: [:]][mine.num] = ref.num
      if try txn.get(mine.forwardKey, in: live["forward"])
        != txn.get(ref.forwardKey, in: rebuilt["forward"])
      {
        note("forward: the record of \(name) differs from the rebuilt one")
      }
    }
    for id in liveRefs.keys where rebuiltRefs[id] == nil {
      note("ids: live has \(ProjectionRunner.show(id)), which the rebuild does not")
    }
    if try txn.count(of: live["forward"]) != txn.count(of: rebuilt["forward"]) {
      note("forward: live has a different number of records")
    }
    // Postings and lengths, as sets of (rebuilt number, value) per row group.
    try compareSlots("terms", live: live, rebuilt: rebuilt, numbers: numbers, txn: txn)
    try compareSlots("lengths", live: live, rebuilt: rebuilt, numbers: numbers, txn: txn)
    // Totals per group (documents, words, hashed name), not the next number.
    var liveStats: [[UInt8]: [UInt8]] = [:]
    try txn.scan(live["stats"]) { k, v in
      liveStats[k] = Array(v.prefix(16)) + Array(v.dropFirst(24))
      return true
    }
    try txn.scan(rebuilt["stats"]) { k, v in
      let mine = liveStats.removeValue(forKey: k)
      // A group with no documents left keeps its row (its counter) in one index only.
      let empty = Array(repeating: UInt8(0), count: 16)
      let theirs = Array(v.prefix(16)) + Array(v.dropFirst(24))
      if (mine ?? empty + Array(v.dropFirst(24))) != theirs {
        note("stats: the totals of \(ProjectionRunner.show(k)) differ from the rebuilt ones")
      }
      return !full
    }
    for (k, v) in liveStats where v.prefix(16) != Array(repeating: 0, count: 16)[...] {
      note("stats: live has totals for \(ProjectionRunner.show(k)), which the rebuild does not")
    }
  }

  /// Compares `terms` (key group · 0 · term · 0 · bucket) or `lengths` (group · 0 · bucket):
  /// the (document, value) pairs of each key without its bucket, live documents given their
  /// rebuilt numbers.
  private mutating func compareSlots(
    _ name: String, live: ProjectionStorage, rebuilt: ProjectionStorage,
    numbers: [[UInt8]: [UInt32: UInt32]], txn: ReadTransaction
  ) throws {
    func collect(_ db: Database, mapped: Bool) throws -> [[UInt8]: [UInt64]] {
      var out: [[UInt8]: [UInt64]] = [:]
      try txn.scan(db) { key, value in
        guard key.count > 4, let cut = key.firstIndex(of: 0) else {
          note("\(name): malformed key \(ProjectionRunner.show(key))")
          return !full
        }
        let group = Array(key[..<cut])
        let base =
          key.suffix(4).reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
          * UInt32(TextSearchProjection.bucketSize)
        for (slot, n) in try SlotList.decode(value) {
          var num = base + UInt32(slot)
          if mapped {
            guard let m = numbers[group]?[num] else {
              note("\(name): \(ProjectionRunner.show(key)) names a document the rebuild lacks")
              continue
            }
            num = m
          }
          out[Array(key.dropLast(4)), default: []].append(UInt64(num) << 32 | UInt64(n))
        }
        return !full
      }
      return out
    }
    var a = try collect(live[name], mapped: true)
    let b = try collect(rebuilt[name], mapped: false)
    for (key, pairs) in b.sorted(by: { $0.key.lexicographicallyPrecedes($1.key) }) {
      if a.removeValue(forKey: key)?.sorted() != pairs.sorted() {
        note("\(name): the rows of \(ProjectionRunner.show(key)) differ from the rebuilt ones")
      }
      if full { return }
    }
    for key in a.keys {
      note("\(name): live has rows for \(ProjectionRunner.show(key)), which the rebuild does not")
    }
  }
}
