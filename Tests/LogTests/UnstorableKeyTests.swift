import Foundation
import Log
import TestSupport
import Testing

/// Keys LMDB cannot hold (empty, or longer than its 511-byte maximum) can still be asked for:
/// a read finds nothing at them, and a scan from one starts where
/// the stored keys after it begin (they came from requests, such as `_all_docs?startkey=""`,
/// and answered `MDB_BAD_VALSIZE` errors before).
@Suite struct UnstorableKeyTests {
  @Test("empty and over-long keys: get is nil, scans and counts start in key order")
  func unstorableKeys() throws {
    let dir = TemporaryDirectory()
    let log = try EventLog(directory: dir.path)
    let db = try log.database(named: "keys")
    let long = [UInt8](repeating: UInt8(ascii: "m"), count: 511)
    let stored: [[UInt8]] = [
      Array("a".utf8), long, long.dropLast() + [UInt8(ascii: "n")], Array("z".utf8),
    ]
    try log.write { txn in
      for key in stored { try txn.put([1], forKey: key, in: db) }
    }
    let tooLong = long + [UInt8(ascii: "a")]
    func keys(from start: [UInt8], _ direction: ReadDirection = .forward) throws -> [[UInt8]] {
      try log.read { txn in
        var out: [[UInt8]] = []
        try txn.scan(db, from: start, direction: direction) { key, _ in
          out.append(key)
          return true
        }
        return out
      }
    }
    let found = try log.read { txn -> [[UInt8]?] in
      [try txn.get([], in: db), try txn.get("", in: db), try txn.get(tooLong, in: db)]
    }
    #expect(found.allSatisfy { $0 == nil })
    // From "": everything; backwards from "": nothing sorts at or before it.
    #expect(try keys(from: []) == stored)
    #expect(try keys(from: [], .backward).isEmpty)
    // From 511 "m"s and an "a": past the stored 511 "m"s (a prefix of it), at the next key.
    #expect(try keys(from: tooLong) == Array(stored[2...]))
    #expect(try keys(from: tooLong, .backward) == [long, Array("a".utf8)])
    // Past every stored key.
    let past = [UInt8](repeating: UInt8(ascii: "z"), count: 600)
    #expect(try keys(from: past).isEmpty)
    #expect(try keys(from: past, .backward) == stored.reversed())
    // In a write transaction, whose point reads go through a cursor.
    let inWrite = try log.write { txn -> ([[UInt8]?], Int, Int) in
      (
        [try txn.get([], in: db), try txn.get(tooLong, in: db)],
        try txn.count(of: db, from: [], before: nil),
        try txn.count(of: db, from: tooLong, before: nil)
      )
    }
    #expect(inWrite.0.allSatisfy { $0 == nil })
    #expect(inWrite.1 == 4)
    #expect(inWrite.2 == 2)
  }
}
