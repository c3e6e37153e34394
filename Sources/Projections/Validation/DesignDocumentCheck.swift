public import JSON

/// CouchDB's checks of a design document's fields (`couch_mrview:validate_ddoc_fields` and the
/// view checks of `couch_mrview:validate`), run on every revision of a `_design/` document,
/// local or replicated, as CouchDB runs them: a design document that breaks them is refused
/// with 400 `invalid_design_doc`.
///
/// ```
/// {"views": {"v": "function(doc) {}"}}           →  `views.v` field must have object type
/// {"language": "query", "views": {"v": {"map": "function(doc) {}"}}}
///                                                 →  `views.v.map` field must have object type
/// {"views": {"v": {"reduce": "_count"}}}          →  View `v` must contain map function
/// {"views": {"v": {"map": "...", "reduce": "_max"}}}
///                                                 →  `_max` is not a supported reduce function.
/// ```
///
/// What CouchDB checks by running the code (compiling JavaScript functions) is not checked:
/// wikilog runs no design functions.
public enum DesignDocumentCheck {
  /// A field's expected type, as CouchDB names it in its messages.
  enum FieldType: String {
    case object, string, array, boolean

    func matches(_ value: JSONValue) -> Bool {
      switch (self, value) {
      case (.object, .object), (.string, .string), (.array, .array), (.boolean, .bool): true
      default: false
      }
    }
  }

  /// One step of a path: a named member, or every member (`any`), with the types it may have.
  struct Step {
    var key: String?
    var types: [FieldType]
  }

  /// CouchDB's paths, in its order (the first that fails is the one reported).
  static func paths(mapType: FieldType) -> [[Step]] {
    func s(_ key: String?, _ types: FieldType...) -> Step { Step(key: key, types: types) }
    return [
      [s("filters", .object), s(nil, .object, .string)],
      [s("language", .string)],
      [s("lists", .object), s(nil, .object, .string)],
      [s("options", .object)],
      [s("options", .object), s("include_design", .boolean)],
      [s("options", .object), s("local_seq", .boolean)],
      [s("options", .object), s("partitioned", .boolean)],
      [s("rewrites", .string, .array)],
      [s("shows", .object), s(nil, .object, .string)],
      [s("updates", .object), s(nil, .object, .string)],
      [s("validate_doc_update", .string)],
      [s("views", .object), s("lib", .object)],
      [s("views", .object), s(nil, .object), s("map", mapType)],
      [s("views", .object), s(nil, .object), s("reduce", .string)],
    ]
  }

  /// Refuses a design document body that CouchDB would refuse (`options.partitioned: true`
  /// only in a `partitioned` database).
  public static func check(_ body: JSONObject, partitioned: Bool = false) throws(StoreError) {
    let mapType: FieldType = body["language"] == .string("query") ? .object : .string
    for path in paths(mapType: mapType) {
      if let (failed, types) = firstFailure(.object(body), path[...], at: []) {
        // CouchDB's `join` lists the types the other way round ("string or object").
        let names = types.reversed().map(\.rawValue).joined(separator: " or ")
        throw invalid("`\(failed.joined(separator: "."))` field must have \(names) type")
      }
    }
    let views = body["views"]?.objectValue?.members ?? []
    for view in views where view.key != "lib" && view.value["map"] == nil {
      throw invalid("View `\(view.key)` must contain map function")
    }
    if body["options"]?["partitioned"] == .bool(true) && !partitioned {
      throw invalid("partitioned option cannot be true in a non-partitioned database.")
    }
    // The built-in reduce functions, checked for the languages CouchDB 3.4 has a query server
    // for, named in any case (design documents in other languages are stored unchecked).
    let language = (body["language"]?.stringValue ?? "javascript").lowercased()
    guard ["javascript", "coffeescript", "javascript_quickjs", "query"].contains(language) else {
      return
    }
    let builtIns = ["_sum", "_count", "_stats", "_approx_count_distinct"]
    for view in views where view.key != "lib" {
      guard let reduce = view.value["reduce"]?.stringValue, reduce.hasPrefix("_") else { continue }
      if !builtIns.contains(where: reduce.hasPrefix) {
        throw invalid("`\(reduce)` is not a supported reduce function.")
      }
    }
  }

  /// The path (from the body) and expected types of the first value along `path` that does
  /// not have its type; nil when there is none (an absent member is never one).
  static func firstFailure(_ value: JSONValue, _ path: ArraySlice<Step>, at prefix: [String])
    -> ([String], [FieldType])?
  {
    guard let step = path.first, case .object(let object) = value else { return nil }
    let keys = step.key.map { [$0] } ?? object.members.map(\.key)
    for key in keys {
      guard let member = object[key] else { continue }
      guard step.types.contains(where: { $0.matches(member) }) else {
        return (prefix + [key], step.types)
      }
      if let failure = firstFailure(member, path.dropFirst(), at: prefix + [key]) {
        return failure
      }
    }
    return nil
  }

  static func invalid(_ reason: String) -> StoreError {
    StoreError("invalid_design_doc", reason, code: .badRequest)
  }
}
