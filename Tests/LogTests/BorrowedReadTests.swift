import Foundation
import Testing

@testable import Log

/// Reads that skip or borrow instead of copying: `forEachEvent(from:ofTypes:)`,
/// `withValue(forKey:in:_:)` and `scanBorrowed(_:from:direction:_:)`.
@Suite struct BorrowedReadTests {
  @Test("forEachEvent(ofTypes:) passes the events of those types only, in either direction")
  func typeFilter() throws {
    let dir = TemporaryDirectory()
    let log = try EventLog(directory: dir.path)
    let types = ["doc.edit", "draft.saved", "doc.edt", "doc.edits", ""]
    try log.append((1...40).map { event($0, stream: "s\($0 % 4)", type: types[$0 % types.count]) })
    let all = try log.read(from: 1)
    try log.read { txn throws in
      for wanted in [["doc.edit"], ["doc.edit", "draft.saved"], [""], [], ["nothing"]] {
        for direction in [ReadDirection.forward, .backward] {
          let from: LogPosition = direction == .forward ? 7 : 33
          var seen: [RecordedEvent] = []
          try txn.forEachEvent(from: from, direction: direction, ofTypes: wanted) {
            seen.append($0)
            return true
          }
          let expected = all.filter {
            wanted.contains($0.type)
              && (direction == .forward ? $0.position >= from : $0.position <= from)
          }
          #expect(seen == (direction == .forward ? expected : expected.reversed()))
        }
      }
      var first: [LogPosition] = []
      try txn.forEachEvent(from: .start, ofTypes: ["draft.saved"]) {
        first.append($0.position)
        return first.count < 3
      }
      #expect(first == [1, 6, 11])
    }
  }

  @Test("forEachEvent(ofTypes:) still finds a corrupt record among the events it skips")
  func skippedRecordsAreChecked() throws {
    let dir = TemporaryDirectory()
    let log = try EventLog(directory: dir.path)
    try log.append([event(1, type: "wanted"), event(2, type: "other"), event(3, type: "wanted")])
    try log.write { txn throws in
      var bytes = try #require(try txn.raw.get(log.dbs.events, UInt64(2).bigEndianBytes))
      bytes[bytes.count - 6] ^= 0xFF
      try txn.raw.put(log.dbs.events, UInt64(2).bigEndianBytes, bytes)
    }
    #expect(throws: LogError.corruptRecord(position: 2, reason: "checksum mismatch")) {
      try log.read { txn throws in
        try txn.forEachEvent(from: .start, ofTypes: ["wanted"]) { _ in true }
      }
    }
  }

  @Test("events decoded in a run keep their own type, stream and actor")
  func repeatedStrings() throws {
    let dir = TemporaryDirectory()
    let log = try EventLog(directory: dir.path)
    // Types and actors of equal lengths, repeated and not, short (inline) and long (allocated).
    let types = [
      "aaaa", "aaab", "aaab", "a-type-name-longer-than-fifteen", "a-type-name-longer-than-fifteeN",
      "",
    ]
    let actors = [
      "ann", "bob", "bob", "", "an actor with a long name ✓", "an actor with a long name ✓",
    ]
    let new = (0..<30).map { i in
      NewEvent(
        type: types[i % types.count], stream: i % 4 == 0 ? "" : "stream \(i % 3)",
        actor: actors[(i / 2) % actors.count], payload: i % 5 == 0 ? [] : [UInt8(i)])
    }
    let recorded = try log.append(new)
    #expect(try log.read(from: 1) == recorded)
    #expect(try log.read(from: 30, direction: .backward) == recorded.reversed())
    for e in recorded {
      #expect(try log.event(at: e.position) == e)
    }
    // One transaction: events read one by one, also from inside a walk over the log.
    try log.read { txn throws in
      for e in recorded.reversed() { #expect(try txn.event(at: e.position) == e) }
      var walked = 0
      try txn.forEachEvent(from: .start) { e throws in
        #expect(e == recorded[walked])
        let other = recorded[(walked * 7) % recorded.count]
        #expect(try txn.event(at: other.position) == other)
        walked += 1
        return true
      }
      #expect(walked == recorded.count)
    }
  }

  @Test("withValue(forKey:in:) lends the stored bytes, or returns nil for a missing key")
  func withValue() throws {
    let dir = TemporaryDirectory()
    let log = try EventLog(directory: dir.path)
    let db = try log.database(named: "values")
    let big = (0..<5000).map { UInt8(truncatingIfNeeded: $0 &* 31) }  // an overflow page
    try log.write { txn throws in
      try txn.put([1, 2, 3], forKey: Array("small".utf8), in: db)
      try txn.put([], forKey: Array("empty".utf8), in: db)
      try txn.put(big, forKey: Array("big".utf8), in: db)
      // A write transaction lends its own writes.
      #expect(try txn.withValue(forKey: Array("small".utf8), in: db) { $0.count } == 3)
    }
    try log.read { txn throws in
      func copy(_ key: String) throws -> [UInt8]? {
        try txn.withValue(forKey: Array(key.utf8), in: db) { span in
          (0..<span.count).map { span[$0] }
        }
      }
      #expect(try copy("small") == [1, 2, 3])
      #expect(try copy("empty") == [])
      #expect(try copy("big") == big)
      #expect(try copy("missing") == nil)
      var called = false
      let none: Int? = try txn.withValue(forKey: Array("missing".utf8), in: db) { _ in
        called = true
        return 1
      }
      #expect(none == nil && !called)
      #expect(throws: CancellationError.self) {
        try txn.withValue(forKey: Array("small".utf8), in: db) { _ in throw CancellationError() }
      }
    }
  }

  @Test("string keys name the same entries as their UTF-8 bytes")
  func stringKeys() throws {
    let dir = TemporaryDirectory()
    let log = try EventLog(directory: dir.path)
    let db = try log.database(named: "byId")
    let ids = ["w1:Home", "w1:Ünïcödé page ✓", String(repeating: "long id ", count: 20)]
    try log.write { txn throws in
      for (n, id) in ids.enumerated() { try txn.put([UInt8(n)], forKey: id, in: db) }
      try txn.put([9], forKey: Array("bytes".utf8), in: db)
      try txn.put(UInt64(0x0102_0304_0506_0708).bigEndianBytes, forKey: "position", in: db)
      #expect(throws: LogError.self) { try txn.put([1], forKey: "", in: db) }
      #expect(throws: LogError.self) {
        try txn.put([1], forKey: String(repeating: "x", count: 600), in: db)
      }
    }
    try log.read { txn throws in
      for (n, id) in ids.enumerated() {
        #expect(try txn.get(Array(id.utf8), in: db) == [UInt8(n)])
        #expect(try txn.get(id, in: db) == [UInt8(n)])
        #expect(try txn.withValue(forKey: id, in: db) { $0[0] } == UInt8(n))
      }
      #expect(try txn.get("bytes", in: db) == [9])
      let position = try txn.withValue(forKey: "position", in: db) { bytes in
        (0..<8).reduce(UInt64(0)) { $0 << 8 | UInt64(bytes[$1]) }
      }
      #expect(position == 0x0102_0304_0506_0708)
      #expect(try txn.get("missing", in: db) == nil)
      #expect(try txn.withValue(forKey: "missing", in: db) { $0.count } == nil)
    }
    try log.write { txn throws in
      #expect(try txn.delete(ids[1], in: db))
      #expect(try !txn.delete(ids[1], in: db))
      #expect(try txn.delete(Array(ids[2].utf8), in: db))
    }
    #expect(try log.read { try $0.count(of: db) } == 3)
  }

  @Test("a transaction writes again once a lending closure has returned or thrown")
  func writesAfterLending() throws {
    let dir = TemporaryDirectory()
    let log = try EventLog(directory: dir.path)
    let db = try log.database(named: "values")
    try log.write { txn throws in
      try txn.put([1], forKey: [1], in: db)
      #expect(throws: CancellationError.self) {
        try txn.withValue(forKey: [1], in: db) { _ in throw CancellationError() }
      }
      try txn.scanBorrowed(db) { _, _ in false }
      try txn.put([2], forKey: [2], in: db)
      try txn.append(event(1))
    }
    #expect(try log.read { try $0.count(of: db) } == 2)
  }

  @Test("writing while a transaction lends stored bytes stops the process")
  func noWritesWhileLending() async {
    await #expect(processExitsWith: .failure) {
      let dir = TemporaryDirectory()
      let log = try EventLog(directory: dir.path)
      let db = try log.database(named: "values")
      try log.write { txn throws in
        try txn.put([1], forKey: [1], in: db)
        _ = try txn.withValue(forKey: [1], in: db) { _ in try txn.put([2], forKey: [2], in: db) }
      }
    }
  }

  @Test("scanBorrowed sees what scan sees, from a start key, in either direction")
  func scanBorrowed() throws {
    let dir = TemporaryDirectory()
    let log = try EventLog(directory: dir.path)
    let db = try log.database(named: "entries")
    try log.write { txn throws in
      for n in stride(from: 0, to: 100, by: 3) {
        try txn.put(Array(repeating: UInt8(n), count: n), forKey: UInt64(n).bigEndianBytes, in: db)
      }
    }
    try log.read { txn throws in
      for start in [
        nil, UInt64(0).bigEndianBytes, UInt64(50).bigEndianBytes, UInt64(51).bigEndianBytes, [0xFF],
      ] {
        for direction in [ReadDirection.forward, .backward] {
          var copied: [([UInt8], [UInt8])] = []
          try txn.scan(db, from: start, direction: direction) { k, v in
            copied.append((k, v))
            return copied.count < 10
          }
          var borrowed: [([UInt8], [UInt8])] = []
          try txn.scanBorrowed(db, from: start, direction: direction) { k, v in
            borrowed.append(((0..<k.count).map { k[$0] }, (0..<v.count).map { v[$0] }))
            return borrowed.count < 10
          }
          #expect(borrowed.map(\.0) == copied.map(\.0) && borrowed.map(\.1) == copied.map(\.1))
        }
      }
    }
  }
}

/// `putLast(_:forKey:in:)`: appends under a key that sorts after every other.
@Suite struct PutLastTests {
  @Test(
    "putLast appends in key order and refuses a key that does not sort last, leaving the transaction usable"
  )
  func appendsInOrder() throws {
    let dir = TemporaryDirectory()
    let log = try EventLog(directory: dir.path)
    let db = try log.database(named: "bySeq")
    try log.write { txn throws in
      for n in [UInt64(3), 7, 300] {
        try txn.putLast([UInt8(n % 256)], forKey: n.bigEndianBytes, in: db)
      }
      for key in [UInt64(300), 299, 1] {
        #expect(throws: LogError.self) {
          try txn.putLast([0], forKey: key.bigEndianBytes, in: db)
        }
      }
      // After a refusal the transaction still writes, and a delete of the last key lets a
      // larger one follow.
      try txn.delete(UInt64(300).bigEndianBytes, in: db)
      try txn.putLast([9], forKey: UInt64(301).bigEndianBytes, in: db)
    }
    var rows: [([UInt8], [UInt8])] = []
    try log.read { txn throws in
      try txn.scan(db) { k, v in
        rows.append((k, v))
        return true
      }
    }
    #expect(rows.map(\.0) == [UInt64(3), 7, 301].map(\.bigEndianBytes))
    #expect(rows.map(\.1) == [[3], [7], [9]])
  }
}

/// `removeAll(withPrefix:in:)`: one cursor removes a key range.
@Suite struct RemovePrefixTests {
  @Test("removeAll(withPrefix:) removes exactly the keys with the prefix, across many pages")
  func removesTheRange() throws {
    let dir = TemporaryDirectory()
    let log = try EventLog(directory: dir.path)
    let db = try log.database(named: "rows")
    try log.write { txn throws in
      for a in [UInt8(1), 2, 3] {
        for n in 0..<3_000 {
          try txn.put(
            [UInt8](repeating: a, count: 40), forKey: [a] + UInt64(n).bigEndianBytes, in: db)
        }
      }
      #expect(try txn.removeAll(withPrefix: [2], in: db) == 3_000)
      #expect(try txn.removeAll(withPrefix: [9], in: db) == 0)
      // The last range of the database, to its end.
      #expect(try txn.removeAll(withPrefix: [3], in: db) == 3_000)
    }
    var keys: [[UInt8]] = []
    try log.read { txn in
      try txn.scan(db) { k, _ in
        keys.append(k)
        return true
      }
    }
    #expect(keys.count == 3_000)
    #expect(keys.allSatisfy { $0.first == 1 })
    log.close()
  }
}
