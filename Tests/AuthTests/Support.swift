import Formats
import Foundation
import JSON
import Projections
import Synchronization
import Testing

@testable import Auth

/// A data directory of its own with `_users`, removed afterwards.
final class TestUsers {
  let path: String
  let data: DataDirectory
  let users: UserStore

  init(_ name: String = #function) throws {
    let safe = name.filter { $0.isLetter || $0.isNumber }.prefix(40)
    path = NSTemporaryDirectory() + "wikilog-auth-\(safe)-\(UUID().uuidString)"
    try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    data = DataDirectory(path: path, systemDatabases: [.users])
    users = try UserStore(data: data)
  }

  deinit {
    data.closeAll()
    try? FileManager.default.removeItem(atPath: path)
  }

  /// The bytes of `_users`' LMDB file.
  func logBytes() throws -> [UInt8] {
    Array(try Data(contentsOf: URL(fileURLWithPath: data.directory(of: "_users") + "/data.mdb")))
  }
}

/// A clock the tests move.
final class TestClock: Sendable {
  let time = Mutex(Date(timeIntervalSince1970: 1_800_000_000))
  var now: Date { time.withLock { $0 } }
  func advance(_ seconds: TimeInterval) { time.withLock { $0 += seconds } }
}

func contains(_ haystack: [UInt8], _ needle: String) -> Bool {
  let n = Array(needle.utf8)
  guard !n.isEmpty, haystack.count >= n.count else { return false }
  for i in 0...(haystack.count - n.count) where haystack[i] == n[0] {
    if Array(haystack[i..<(i + n.count)]) == n { return true }
  }
  return false
}

func hex(_ text: String) -> [UInt8] { Hex.decode(text)! }
