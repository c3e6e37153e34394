import Foundation
import Projections
import TypedDocuments

/// A temporary directory per test, removed afterwards.
final class TempDirectory {
  let path: String
  init() {
    path =
      FileManager.default.temporaryDirectory
      .appendingPathComponent("typed-\(UUID().uuidString)").path
    try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
  }
  deinit { try? FileManager.default.removeItem(atPath: path) }
}

/// A database in a temporary directory.
func withDatabase<T>(
  actor: String = "tester", _ body: (DocumentDatabase, TempDirectory) async throws -> T
) async throws -> T {
  let dir = TempDirectory()
  let db = try DocumentDatabase(path: dir.path, name: "app", actor: actor)
  defer { db.close() }
  return try await body(db, dir)
}

struct Address: Codable, Equatable, Sendable {
  var street: String
  var city: String
  var geo: [Double]?
}

enum Priority: String, Codable, Sendable {
  case low, high
}

enum Shape: Codable, Equatable, Sendable {
  case circle(radius: Double)
  case rectangle(width: Int, height: Int)
  case none
}

/// Every awkward kind of field a Codable type can have.
struct Awkward: StoredDocument, Equatable {
  static let documentType = "awkward"
  var id: String
  var revision: String?
  var title: String
  var note: String?
  var count: Int?
  var big: Int64 = .max
  var huge: UInt64 = .max
  var small: Int8 = -128
  var ratio: Double = 0.1
  var flag = false
  var matrix: [[Int]] = []
  var scores: [String: [String: Double]] = [:]
  var maybes: [String: Int?] = [:]
  var optionals: [String?] = []
  var address: Address?
  var addresses: [Address] = []
  var priority: Priority = .low
  var shape: Shape = .none
  var when: Date?
  var blob: Data?
  var link: URL?
  var text = ""
}

struct Note: StoredDocument, Equatable {
  static let documentType = "note"
  var id: String
  var revision: String?
  var title: String
  var tags: [String] = []
  var done = false
  var due: Date?
}

struct Task_: StoredDocument, Equatable {
  static let documentType = "task"
  static let typeField = "docType"
  var id: String
  var revision: String?
  var name: String
}

/// A date with whole milliseconds (the precision documents keep).
func millis(_ seconds: Double) -> Date {
  Date(timeIntervalSince1970: (seconds * 1000).rounded() / 1000)
}
