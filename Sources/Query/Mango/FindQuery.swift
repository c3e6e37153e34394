public import JSON
public import Projections

/// A `_find` request (CouchDB 3's body): the selector and its options.
///
/// ```swift
/// let q = try FindQuery(JSONValue(parsing: #"{"selector": {"year": {"$gt": 2000}}, "sort": [{"year": "desc"}], "limit": 10}"#))
/// let result = try store.find(q)
/// ```
public struct FindQuery: Sendable, Hashable {
  public var selector: Selector
  /// The fields of each document to return (dotted paths); nil: all.
  public var fields: [String]?
  /// The fields the query reads: its ``fields`` and the selector's (CouchDB's
  /// `required_fields`); nil when it returns whole documents.
  var requiredFields: [String]? { fields.map { $0 + selector.fields } }
  /// Sort fields and their direction (`true`: descending).
  public var sort: [Sort] = []
  public var limit = 25
  public var skip = 0
  public var bookmark: String?
  public var conflicts = false
  /// `use_index`: a design document (`_design/` optional) and possibly an index name.
  public var useIndex: [String] = []
  public var executionStats = false
  /// Accepted as CouchDB does; a single node reads its one copy (`r`), and indexes are always
  /// up to date (`update`, `stable`).
  public var r = 1
  public var update = true
  public var stable = false
  /// Whether a query may fall back to another index (or a scan) when `use_index` names one
  /// that cannot serve it, or when no index serves it (CouchDB 3.4's `allow_fallback`).
  public var allowFallback = true

  public struct Sort: Sendable, Hashable {
    public var field: String
    public var descending: Bool
    public init(field: String, descending: Bool = false) {
      self.field = field
      self.descending = descending
    }
  }

  public init(selector: Selector) { self.selector = selector }

  /// Parses a `_find` or `_explain` body.
  ///
  /// - Throws: ``StoreError`` 400 with CouchDB's error names (`missing_required_key`,
  ///   `invalid_sort_json`, `unsupported_mixed_sort`, `bad_arg`, `invalid_operator`, ...).
  public init(_ body: JSONValue) throws(StoreError) {
    guard let object = body.objectValue else {
      throw StoreError("bad_request", "Request body must be a JSON object", code: .badRequest)
    }
    guard let selector = object["selector"] else {
      throw StoreError("missing_required_key", "Missing required key: selector", code: .badRequest)
    }
    self.selector = try Selector(selector)
    // Each option as `mango_opts:validate_find` checks it, with its error.
    func boolean(_ v: JSONValue) throws(StoreError) -> Bool {
      guard let b = v.boolValue else {
        throw StoreError(
          "invalid_boolean", "Invalid boolean value: \(v.serializedString)", code: .badRequest)
      }
      return b
    }
    func integer(_ v: JSONValue, min: Int64) throws(StoreError) -> Int {
      // An integer: a JSON number with no fraction or exponent (Erlang's is_integer).
      if let n = v.numberValue?.int64Value, n >= min {
        return Int(Swift.min(n, Int64(Int.max / 2)))
      }
      throw min > 0
        ? StoreError(
          "invalid_pos_integer", "\(v.serializedString) is not an integer greater than zero",
          code: .badRequest)
        : StoreError(
          "invalid_non_neg_integer",
          "\(v.serializedString) is not an integer greater than or equal to zero",
          code: .badRequest)
    }
    for member in object.members {
      let v = member.value
      switch member.key {
      case "selector": break
      case "fields":
        guard let items = v.arrayValue else {
          throw StoreError(
            "invalid_fields_json", "Fields must be an array of strings, not: \(v.serializedString)",
            code: .badRequest)
        }
        var names: [String] = []
        for item in items {
          guard let s = item.stringValue else {
            throw StoreError(
              "invalid_field", "Invalid JSON for field spec: \(item.serializedString)",
              code: .badRequest)
          }
          names.append(s)
        }
        // An empty list asks for every field, as no list does.
        fields = names.isEmpty ? nil : names
      case "sort":
        guard let items = v.arrayValue else {
          throw StoreError(
            "invalid_sort_json", "Sort must be an array of sort specs, not: \(v.serializedString)",
            code: .badRequest)
        }
        for item in items {
          if let s = item.stringValue {
            sort.append(Sort(field: s))
          } else if let o = item.objectValue, o.members.count == 1 {
            guard let dir = o.members[0].value.stringValue, dir == "asc" || dir == "desc" else {
              throw StoreError(
                "invalid_sort_dir",
                "Invalid sort direction: \(o.members[0].value.serializedString)",
                code: .badRequest)
            }
            sort.append(Sort(field: o.members[0].key, descending: dir == "desc"))
          } else {
            throw StoreError(
              "invalid_sort_field", "Invalid sort field: \(item.serializedString)",
              code: .badRequest)
          }
        }
        if let bad = sort.first(where: { Selector.path($0.field).contains("") }) {
          throw StoreError(
            "invalid_field_name", "Invalid field name: \(bad.field)", code: .badRequest)
        }
        if Set(sort.map(\.descending)).count > 1 {
          throw StoreError(
            "unsupported_mixed_sort",
            "Sorts currently only support a single direction for all fields.", code: .badRequest)
        }
      case "limit": limit = try integer(v, min: 0)
      case "skip": skip = try integer(v, min: 0)
      case "bookmark":
        if v == .null {
          bookmark = nil
        } else if let s = v.stringValue {
          bookmark = s.isEmpty || s == "nil" ? nil : s
        } else {
          throw StoreError(
            "invalid_bookmark", "Invalid bookmark value: \(v.serializedString)", code: .badRequest)
        }
      case "conflicts": conflicts = try boolean(v)
      case "execution_stats": executionStats = try boolean(v)
      case "update": update = try boolean(v)
      case "stable": stable = try boolean(v)
      case "stale":
        // "ok", or false (also as the string "false"): `mango_opts:is_ok_or_false`.
        if v.stringValue == "ok" {
          stable = true
          update = false
        } else if !(v.boolValue == false || v.stringValue == "false") {
          throw StoreError(
            "invalid_ok_or_false_value", "Invalid value for stale: \(v.serializedString)",
            code: .badRequest)
        }
      case "r": r = try integer(v, min: 1)
      case "use_index": useIndex = try Self.useIndex(v)
      case "partition":
        guard v.stringValue == "" else {
          throw StoreError(
            "bad_request", "wikilog databases are not partitioned", code: .badRequest)
        }
      case "allow_fallback": allowFallback = try boolean(v)
      default:
        throw StoreError(
          "invalid_key", "Invalid key \(member.key) for this request.", code: .badRequest)
      }
    }
  }

  /// `use_index` as `mango_opts:validate_use_index` reads it: null or `[]` (none), a design
  /// document, `"ddoc/name"` or `"_design/ddoc/name"`, or `[ddoc]` or `[ddoc, name]`.
  static func useIndex(_ v: JSONValue) throws(StoreError) -> [String] {
    if v == .null { return [] }
    if let s = v.stringValue {
      let parts = s.split(separator: "/", omittingEmptySubsequences: false).map(String.init)
      switch parts.count {
      case 1: return parts
      case 2: return parts[0] == "_design" ? [parts[1]] : parts
      case 3 where parts[0] == "_design": return [parts[1], parts[2]]
      default: break
      }
    } else if let items = v.arrayValue, items.count <= 2 {
      let names = items.compactMap(\.stringValue)
      if names.count == items.count { return names }
    }
    throw StoreError(
      "invalid_index_name", "Invalid index name: \(v.serializedString)", code: .badRequest)
  }

  /// The `use_index` design document, with its `_design/` prefix.
  var useIndexDDoc: String? {
    guard let d = useIndex.first else { return nil }
    return d.hasPrefix("_design/") ? d : "_design/" + d
  }
}
