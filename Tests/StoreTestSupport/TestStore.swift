public import Foundation
public import JSON
public import Log
public import Projections
public import Wiki

/// Helpers of the store's, the query engine's and the wiki's tests.

/// A store in a directory of its own, removed afterwards; CouchDB's rules only, unless the
/// test asks for the wiki's (`validation: .touchWiki`).
public final class TestStore {
  public let path: String
  public var store: DocumentStore!

  public init(
    _ name: String = #function, projections: [any Projection] = [],
    indexes: [any IndexBehindLog] = [], durability: EventLog.Durability = .synced,
    validation: DocumentValidation = .couchDB
  ) throws {
    let safe = name.filter { $0.isLetter || $0.isNumber }.prefix(40)
    path = NSTemporaryDirectory() + "wikilog-projtests-\(safe)-\(UUID().uuidString)"
    store = try DocumentStore(
      directory: path, options: EventLog.Options(durability: durability), projections: projections,
      indexes: indexes, validation: validation)
  }

  public func reopen(
    projections: [any Projection] = [], indexes: [any IndexBehindLog] = []
  ) throws {
    let validation = store.validation
    store.close()
    store = nil
    store = try DocumentStore(
      directory: path, projections: projections, indexes: indexes, validation: validation)
  }

  deinit {
    store?.close()
    try? FileManager.default.removeItem(atPath: path)
  }
}

public func json(_ text: String) -> JSONValue {
  try! JSONValue(parsing: text)
}

extension JSONValue {
  public subscript(path key: String) -> JSONValue? { objectValue?[key] }
  public var string: String? { stringValue }
}

extension DocumentStore {
  public var position: LogPosition { (try? log.committedPosition) ?? .start }

  /// Writes page `id` (`<wiki>:<name>`) of its wiki with Markdown `text`, as ann.
  public func putPage(_ id: String, _ text: String) throws {
    try put(
      JSONValue.object(
        JSONObject([
          "type": .string("page"), "wiki_id": .string(WikiID.of(id)), "markdown": .string(text),
        ])
      ).serialized(), id: id, actor: "ann")
  }
}

extension ChangesOptions {
  /// Every revision event, not one row per document.
  public static func history() -> ChangesOptions {
    var o = ChangesOptions()
    o.history = true
    return o
  }
}
