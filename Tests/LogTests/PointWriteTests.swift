import Foundation
import Log
import TestSupport
import Testing

/// Point reads and writes of caller-owned databases in a write transaction go through one
/// cursor per database (``WriteTransaction``): these check them against a dictionary, with
/// the other operations that move or invalidate such a cursor mixed in (deletes, page splits,
/// overflow values, removeAll, savepoints kept and undone, a second database).
@Suite struct PointWriteTests {
  static func key(_ n: Int) -> [UInt8] { Array("key-\(String(format: "%05d", n))".utf8) }

  static func value(_ n: Int, _ size: Int) -> [UInt8] {
    (0..<size).map { UInt8(truncatingIfNeeded: n &+ $0) }
  }

  /// Checks `db` holds exactly `model`, read in a transaction of its own.
  static func expectStored(
    _ log: EventLog, _ db: Database, _ model: [[UInt8]: [UInt8]],
    sourceLocation: SourceLocation = #_sourceLocation
  ) throws {
    var stored: [[UInt8]: [UInt8]] = [:]
    try log.read { txn in
      try txn.scan(db) { key, value in
        stored[key] = value
        return true
      }
    }
    #expect(stored == model, sourceLocation: sourceLocation)
  }

  @Test("mixed point reads and writes, in order and at random, match a dictionary")
  func mixedOperations() throws {
    let dir = TemporaryDirectory()
    let log = try EventLog(directory: dir.path)
    let a = try log.database(named: "a")
    let b = try log.database(named: "b")
    var rng = SplitMix64(seed: 42)
    var model: [[UInt8]: [UInt8]] = [:]
    var other: [[UInt8]: [UInt8]] = [:]
    for round in 0..<12 {
      try log.write { txn in
        for step in 0..<1500 {
          let n = Int.random(in: 0..<3000, using: &rng)
          switch Int.random(in: 0..<100, using: &rng) {
          case 0..<35:
            // Mostly small values; now and then one past a page (an overflow value).
            let size =
              Int.random(in: 0..<20, using: &rng) == 0 ? 5000 : Int.random(in: 0..<300, using: &rng)
            let v = Self.value(n &+ round, size)
            try txn.put(v, forKey: Self.key(n), in: a)
            model[Self.key(n)] = v
          case 35..<50:
            // A run of keys in order, as projections write them.
            for k in n..<(n + 40) {
              let v = Self.value(k &* 7 &+ round, 24)
              try txn.put(v, forKey: Self.key(k), in: a)
              model[Self.key(k)] = v
            }
          case 50..<65:
            #expect(try txn.get(Self.key(n), in: a) == model[Self.key(n)])
            let count = try txn.withValue(forKey: Self.key(n), in: a) { $0.count }
            #expect(count == model[Self.key(n)]?.count)
          case 65..<80:
            let existed = try txn.delete(Self.key(n), in: a)
            #expect(existed == (model.removeValue(forKey: Self.key(n)) != nil))
          case 80..<90:
            // The other database, read and written between the first's operations.
            let v = Self.value(n, 16)
            try txn.put(v, forKey: "other-\(n)", in: b)
            other[Array("other-\(n)".utf8)] = v
            #expect(try txn.get("other-\(n)", in: b) == v)
          case 90..<97:
            // A savepoint, kept or undone, that writes near keys the cursors lie on.
            let undo = Bool.random(using: &rng)
            var inner = model
            do {
              try txn.savepoint { child in
                for k in n..<(n + 25) {
                  let v = Self.value(k &+ 1, 40)
                  try child.put(v, forKey: Self.key(k), in: a)
                  inner[Self.key(k)] = v
                  #expect(try child.get(Self.key(k), in: a) == v)
                }
                if try child.delete(Self.key(n + 30), in: a) { inner[Self.key(n + 30)] = nil }
                if undo { throw LogError.invalidArgument("undo") }
              }
              model = inner
            } catch LogError.invalidArgument {
              #expect(undo)
            }
            #expect(try txn.get(Self.key(n), in: a) == model[Self.key(n)])
          default:
            if step % 7 == 0 && round == 5 {
              try txn.removeAll(in: a)
              model.removeAll()
            } else {
              let v = Self.value(n, 8)
              try txn.put(v, forKey: Self.key(n), in: a)
              model[Self.key(n)] = v
            }
          }
        }
      }
      try Self.expectStored(log, a, model)
      try Self.expectStored(log, b, other)
    }
    // Removing a database its transaction wrote to leaves the log usable.
    try log.write { txn in try txn.put([1], forKey: [1], in: b) }
    #expect(try log.removeDatabase(named: "b"))
    try Self.expectStored(log, a, model)
  }
}
