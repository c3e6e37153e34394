import Formats
public import JSON
public import Projections
import RevTree

/// A Mango JSON index: the fields it sorts documents by, and the documents it holds.
///
/// As in CouchDB, an index lives in a design document with `"language": "query"`, as one of
/// its views:
///
/// ```json
/// {"_id": "_design/by-year", "language": "query",
///  "views": {"year-idx": {"map": {"fields": {"year": "asc"}},
///                         "reduce": "_count",
///                         "options": {"def": {"fields": ["year"]}}}}}
/// ```
///
/// so it replicates with the database. A document is in the index when every field is present
/// in its winning revision and it matches `partial_filter_selector`; design documents never
/// are.
public struct MangoIndex: Sendable, Hashable {
  /// The design document (`_design/...`).
  public let ddoc: String
  public let name: String
  /// The fields, as written (dotted paths), and their parsed paths.
  public let fields: [String]
  let paths: [[String]]
  /// Whether the fields sort descending (CouchDB allows one direction for all).
  public let descending: Bool
  public let partialFilter: Selector?
  /// The bytes that start every row of this index: the length of `ddoc 0x00 name`, then it
  /// (made once: every row written or read starts with it).
  let prefix: [UInt8]

  public init(
    ddoc: String, name: String, fields: [String], descending: Bool = false,
    partialFilter: Selector? = nil
  ) {
    self.ddoc = ddoc
    self.name = name
    self.fields = fields
    self.paths = fields.map(Selector.path)
    self.descending = descending
    self.partialFilter = partialFilter
    let id = Array(ddoc.utf8) + [0] + Array(name.utf8)
    self.prefix =
      [UInt8(truncatingIfNeeded: id.count >> 8), UInt8(truncatingIfNeeded: id.count)] + id
  }

  /// The `def` CouchDB shows for the index: `{"fields": [{"f": "asc"}, ...]}` and the partial
  /// filter when there is one.
  public var def: JSONValue {
    let dir = JSONValue.string(descending ? "desc" : "asc")
    var members: [JSONObject.Member] = [
      .init(
        key: "fields",
        value: .array(fields.map { .object(JSONObject([.init(key: $0, value: dir)])) }))
    ]
    if let partialFilter {
      members.append(.init(key: "partial_filter_selector", value: partialFilter.json))
    }
    return .object(JSONObject(members))
  }

  /// The index as `GET /db/_index` lists it.
  public var listing: JSONValue {
    .object(
      JSONObject([
        .init(key: "ddoc", value: .string(ddoc)), .init(key: "name", value: .string(name)),
        .init(key: "type", value: .string("json")), .init(key: "partitioned", value: .bool(false)),
        .init(key: "def", value: def),
      ]))
  }

  /// The view a design document holds for the index.
  public var view: JSONValue {
    let dir = JSONValue.string(descending ? "desc" : "asc")
    var map: [JSONObject.Member] = [
      .init(
        key: "fields",
        value: .object(JSONObject(fields.map { .init(key: $0, value: dir) })))
    ]
    var def: [JSONObject.Member] = [
      .init(key: "fields", value: .array(fields.map { .string($0) }))
    ]
    if let partialFilter {
      map.append(.init(key: "partial_filter_selector", value: partialFilter.json))
      def.append(.init(key: "partial_filter_selector", value: partialFilter.json))
    }
    return .object(
      JSONObject([
        .init(key: "map", value: .object(JSONObject(map))),
        .init(key: "reduce", value: .string("_count")),
        .init(
          key: "options",
          value: .object(JSONObject([.init(key: "def", value: .object(JSONObject(def)))]))),
      ]))
  }

  /// The indexes a design document defines (none unless its `language` is `query`); views
  /// that are not well-formed Mango indexes are skipped.
  public static func indexes(inDesignDocument id: String, body: JSONValue?) -> [MangoIndex] {
    guard let body, body["language"]?.stringValue == "query",
      let views = body["views"]?.objectValue
    else { return [] }
    var out: [MangoIndex] = []
    for view in views.members {
      guard let map = view.value["map"]?.objectValue, let fields = map["fields"]?.objectValue,
        !fields.members.isEmpty
      else { continue }
      let directions = Set(fields.members.map { $0.value.stringValue ?? "asc" })
      let partial =
        (map["partial_filter_selector"]
        ?? view.value["options"]?["def"]?[
          "partial_filter_selector"]).flatMap { try? Selector($0) }
      out.append(
        MangoIndex(
          ddoc: id, name: view.key, fields: fields.members.map(\.key),
          descending: directions == ["desc"],
          partialFilter: partial.flatMap { $0.json.objectValue?.isEmpty == true ? nil : $0 }))
    }
    return out
  }

  /// Parses `POST /db/_index`'s body: `{"index": {"fields": [...], "partial_filter_selector":
  /// {...}}, "ddoc": ..., "name": ..., "type": "json"}`. The default ddoc and name are a hash
  /// of the definition, as in CouchDB.
  public static func parseRequest(_ body: JSONValue) throws(StoreError) -> MangoIndex {
    guard let object = body.objectValue else {
      throw StoreError("bad_request", "Request body must be a JSON object", code: .badRequest)
    }
    if let type = object["type"], type.stringValue != "json" {
      // As a CouchDB without its text search services answers (`mango_idx:get_idx_type`).
      if let name = type.stringValue, name == "text" || name == "nouveau" {
        throw StoreError("required index service unavailable", name, code: .unavailable)
      }
      throw StoreError(
        "invalid_index", "Invalid type for index: \(type.stringValue ?? type.serializedString)",
        code: .badRequest)
    }
    guard let index = object["index"]?.objectValue else {
      throw StoreError("missing_required_key", "Missing required key: index", code: .badRequest)
    }
    // A JSON index's definition has `fields` and `partial_filter_selector`, nothing else
    // (`mango_idx_view:opts/0`, checked by `mango_opts:validate`).
    if let other = index.members.first(where: {
      $0.key != "fields" && $0.key != "partial_filter_selector"
    }) {
      throw StoreError(
        "invalid_key", "Invalid key \(other.key) for this request.", code: .badRequest)
    }
    guard let rawFields = index["fields"]?.arrayValue, !rawFields.isEmpty else {
      throw StoreError(
        "invalid_index_fields", "Index fields must be a non-empty array", code: .badRequest)
    }
    var fields: [String] = []
    var directions = Set<String>()
    for field in rawFields {
      if let name = field.stringValue {
        fields.append(name)
        directions.insert("asc")
      } else if let sort = field.objectValue, sort.members.count == 1,
        let dir = sort.members[0].value.stringValue, dir == "asc" || dir == "desc"
      {
        fields.append(sort.members[0].key)
        directions.insert(dir)
      } else {
        throw StoreError(
          "invalid_index_fields", "Invalid index field: \(field.serializedString)",
          code: .badRequest)
      }
    }
    if let bad = fields.first(where: { Selector.path($0).contains("") }) {
      throw StoreError("invalid_field_name", "Invalid field name: \(bad)", code: .badRequest)
    }
    guard directions.count == 1 else {
      throw StoreError(
        "unsupported_mixed_sort", "Sorts currently only support a single direction for all fields.",
        code: .badRequest)
    }
    if Set(fields).count != fields.count {
      throw StoreError("invalid_index_fields", "Index fields must be unique", code: .badRequest)
    }
    var partial: Selector?
    if let p = index["partial_filter_selector"] ?? object["partial_filter_selector"] {
      let s = try Selector(p)
      if s.json.objectValue?.isEmpty == false { partial = s }
    }
    let descending = directions == ["desc"]
    var hash = MD5()
    hash.update(Array("\(fields)\(descending)".utf8))
    if let partial { hash.update(partial.json.serialized()) }
    let digest = hash.finalize().description
    func name(_ key: String) throws(StoreError) -> String? {
      guard let v = object[key] else { return nil }
      guard let s = v.stringValue, !s.isEmpty else {
        throw StoreError("invalid_\(key)", "`\(key)` must be a non-empty string", code: .badRequest)
      }
      return s
    }
    var ddoc = try name("ddoc") ?? digest
    if !ddoc.hasPrefix("_design/") { ddoc = "_design/" + ddoc }
    let indexName = try name("name") ?? digest
    guard ddoc.utf8.count + indexName.utf8.count <= 100 else {
      throw StoreError(
        "bad_request", "The design document id and index name must be at most 100 bytes together",
        code: .badRequest)
    }
    return MangoIndex(
      ddoc: ddoc, name: indexName, fields: fields, descending: descending, partialFilter: partial)
  }

  // MARK: Keys

  /// The longest a row's field part may be; longer encodings are cut (see
  /// ``MangoProjection``), which keeps the order of keys up to their first 250 bytes.
  static let maxFieldBytes = 250

  /// A document's place in the index: its key (the encoded field values, see ``truncated(_:)``)
  /// and the values themselves, as a serialized JSON array in index order, from which a
  /// covering query builds its results (``covers(_:)``).
  struct Entry: Equatable {
    var key: [UInt8]
    var values: [UInt8]
  }

  /// `doc`'s entry, or nil when the document is not in the index (a field missing, the
  /// partial filter not matched, a design document).
  func entry(_ docID: String, _ doc: JSONValue) -> Entry? {
    if docID.hasPrefix("_design/") { return nil }
    if let partialFilter, !partialFilter.matches(doc) { return nil }
    var key: [UInt8] = []
    var values: [UInt8] = [UInt8(ascii: "[")]
    for (k, path) in paths.enumerated() {
      guard let value = Selector.value(at: path, in: doc) else { return nil }
      Collation.encode(value, into: &key)
      if k > 0 { values.append(UInt8(ascii: ",")) }
      value.serialize(into: &values)
    }
    values.append(UInt8(ascii: "]"))
    return Entry(key: Self.truncated(key), values: values)
  }

  /// Whether the index alone answers a query that reads `fields` (the query's `fields` and
  /// the selector's, or nil for whole documents): they are all among its fields and `_id`, as
  /// in CouchDB's `mango_idx_view:covers`. Results are then made of the index's values, no
  /// document is read.
  func covers(_ fields: [String]?) -> Bool {
    guard let fields else { return false }
    let available = Set(self.fields + ["_id"])
    return fields.allSatisfy(available.contains)
  }

  /// The document a covering query sees of an entry: its `_id` and the index's fields, nested
  /// by their paths (CouchDB's `derive_doc_from_index`).
  func coveredDocument(_ docID: String, values: JSONValue) -> JSONValue {
    var doc = JSONValue.object(JSONObject([.init(key: "_id", value: .string(docID))]))
    for (path, value) in zip(paths, values.arrayValue ?? []) {
      doc = DocumentStore.insert(value, at: path[...], into: doc)
    }
    return doc
  }

  /// The document id and the serialized values of a `mango.entries` value
  /// (``MangoProjection/rows(_:_:_:)`` writes them).
  static func decodeRowValue(_ bytes: [UInt8]) throws -> (docID: String, values: ArraySlice<UInt8>)
  {
    var r = ByteReader(bytes)
    let id = try r.string()
    return (id, bytes[r.offset...])
  }

  static func truncated(_ bytes: [UInt8]) -> [UInt8] {
    bytes.count <= maxFieldBytes ? bytes : Array(bytes.prefix(maxFieldBytes))
  }

  /// Whether the index reads the document's `_id` (a field or its partial filter): bodies are
  /// stored without it, and it is added for such an index only.
  var needsID: Bool { partialFilter != nil || paths.contains { $0.first == "_id" } }
  /// Whether the index reads `_conflicts` (a field, or its partial filter).
  var needsConflicts: Bool {
    paths.contains { $0.first == "_conflicts" } || partialFilter?.mentions("_conflicts") == true
  }

  /// A document id as it ends a row key: itself up to 150 bytes, else its first 134 bytes and
  /// the MD5 of the whole (LMDB keys are at most 511 bytes).
  static func docKey(_ docID: String) -> [UInt8] {
    let bytes = Array(docID.utf8)
    guard bytes.count > 150 else { return bytes }
    var md5 = MD5()
    md5.update(bytes)
    return Array(bytes.prefix(134)) + md5.finalize().bytes
  }
}
