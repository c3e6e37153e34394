import Foundation
import Log
import Testing

@Suite struct CountTests {
  @Test("count(of:from:before:) counts the keys in a range, in key order, like a scan")
  func rangeCounts() throws {
    let dir = TemporaryDirectory()
    let log = try EventLog(directory: dir.path, options: .init(durability: .unsynced))
    let db = try log.database(named: "numbers")
    try log.write { txn in
      for n in stride(from: 0, to: 200, by: 2) {
        try txn.put([], forKey: UInt64(n).bigEndianBytes, in: db)
      }
      try txn.put([], forKey: [0xFF], in: db)  // a short key sorts by bytes, then length
    }
    try log.read { txn in
      var keys: [[UInt8]] = []
      try txn.scan(db) { k, _ in
        keys.append(k)
        return true
      }
      let bounds: [[UInt8]?] =
        [nil, [0], [0xFF], [0xFF, 0]]
        + [0, 1, 2, 99, 100, 198, 199, 500].map { UInt64($0).bigEndianBytes }
      for from in bounds {
        for before in bounds {
          let expected = keys.filter { k in
            (from.map { !k.lexicographicallyPrecedes($0) } ?? true)
              && (before.map { k.lexicographicallyPrecedes($0) } ?? true)
          }.count
          #expect(try txn.count(of: db, from: from, before: before) == expected)
        }
      }
      #expect(try txn.count(of: db, from: nil) == txn.count(of: db))
    }
    log.close()
  }
}
