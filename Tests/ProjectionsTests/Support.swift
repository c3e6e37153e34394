import Foundation
import Log
import Projections
import RevTree
import Testing

/// A store in a directory of its own, removed afterwards.
final class TestStore {
  let path: String
  var store: DocumentStore!

  init(
    _ name: String = #function, projections: [any Projection] = [],
    durability: EventLog.Durability = .synced, validation: DocumentValidation = .touchWiki
  ) throws {
    let safe = name.filter { $0.isLetter || $0.isNumber }.prefix(40)
    path = NSTemporaryDirectory() + "wikilog-projtests-\(safe)-\(UUID().uuidString)"
    store = try DocumentStore(
      directory: path, options: EventLog.Options(durability: durability), projections: projections,
      validation: validation)
  }

  func reopen(projections: [any Projection] = []) throws {
    let validation = store.validation
    store.close()
    store = nil
    store = try DocumentStore(directory: path, projections: projections, validation: validation)
  }

  deinit {
    store?.close()
    try? FileManager.default.removeItem(atPath: path)
  }
}

func json(_ text: String) -> JSONValue {
  try! JSONValue(parsing: text)
}

extension JSONValue {
  subscript(path key: String) -> JSONValue? { objectValue?[key] }
  var string: String? { stringValue }
}

extension DocumentStore {
  var position: LogPosition { (try? log.committedPosition) ?? .start }
}

/// SplitMix64: a small deterministic generator, so seeded workloads and property tests replay
/// exactly.
struct SplitMix64: RandomNumberGenerator {
  var state: UInt64

  init(seed: UInt64) { state = seed }

  mutating func next() -> UInt64 {
    state &+= 0x9E37_79B9_7F4A_7C15
    var z = state
    z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
    z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
    return z ^ (z >> 31)
  }
}
