import Foundation
import JSON
import Log
import Projections
import RevTree
import TestSupport
import Testing
import Wiki

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

  /// Writes page `id` (`<wiki>:<name>`) of its wiki with Markdown `text`, as ann.
  func putPage(_ id: String, _ text: String) throws {
    try put(
      JSONValue.object(
        JSONObject([
          "type": .string("page"), "wiki_id": .string(WikiID.of(id)), "markdown": .string(text),
        ])
      ).serialized(), id: id, actor: "ann")
  }
}
