public import JSON

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
    func bad(_ key: String, _ v: JSONValue) -> StoreError {
      StoreError(
        "invalid_argument", "Invalid value for \(key): \(v.serializedString)", code: .badRequest)
    }
    for member in object.members {
      let v = member.value
      switch member.key {
      case "selector": break
      case "fields":
        guard let items = v.arrayValue else { throw bad("fields", v) }
        var names: [String] = []
        for item in items {
          guard let s = item.stringValue else { throw bad("fields", v) }
          names.append(s)
        }
        fields = names
      case "sort":
        guard let items = v.arrayValue else {
          throw StoreError("invalid_sort_json", "Sort must be an array", code: .badRequest)
        }
        for item in items {
          if let s = item.stringValue {
            sort.append(Sort(field: s))
          } else if let o = item.objectValue, o.members.count == 1,
            let dir = o.members[0].value.stringValue, dir == "asc" || dir == "desc"
          {
            sort.append(Sort(field: o.members[0].key, descending: dir == "desc"))
          } else {
            throw StoreError(
              "invalid_sort_json", "Invalid sort field: \(item.serializedString)",
              code: .badRequest)
          }
        }
        if Set(sort.map(\.descending)).count > 1 {
          throw StoreError(
            "unsupported_mixed_sort",
            "Sorts currently only support a single direction for all fields.", code: .badRequest)
        }
      case "limit":
        guard let n = v.numberValue?.int64Value, n >= 0 else { throw bad("limit", v) }
        limit = Int(min(n, Int64(Int.max / 2)))
      case "skip":
        guard let n = v.numberValue?.int64Value, n >= 0 else { throw bad("skip", v) }
        skip = Int(min(n, Int64(Int.max / 2)))
      case "bookmark":
        guard let s = v.stringValue else { throw bad("bookmark", v) }
        bookmark = s == "nil" ? nil : s
      case "conflicts":
        guard let b = v.boolValue else { throw bad("conflicts", v) }
        conflicts = b
      case "execution_stats":
        guard let b = v.boolValue else { throw bad("execution_stats", v) }
        executionStats = b
      case "update":
        guard let b = v.boolValue else { throw bad("update", v) }
        update = b
      case "stable":
        guard let b = v.boolValue else { throw bad("stable", v) }
        stable = b
      case "stale":
        guard v.stringValue == "ok" else { throw bad("stale", v) }
        stable = true
        update = false
      case "r":
        guard let n = v.numberValue?.int64Value, n >= 1 else { throw bad("r", v) }
        r = Int(n)
      case "use_index":
        if let s = v.stringValue {
          useIndex = [s]
        } else if let items = v.arrayValue, items.count <= 2,
          items.allSatisfy({ $0.stringValue != nil })
        {
          useIndex = items.compactMap(\.stringValue)
        } else {
          throw bad("use_index", v)
        }
      case "partition":
        guard v.stringValue == "" else {
          throw StoreError(
            "bad_request", "wikilog databases are not partitioned", code: .badRequest)
        }
      case "allow_fallback":
        guard let b = v.boolValue else { throw bad("allow_fallback", v) }
        allowFallback = b
      default:
        throw StoreError(
          "invalid_argument", "Invalid key \(member.key) for find request", code: .badRequest)
      }
    }
  }

  /// The `use_index` design document, with its `_design/` prefix.
  var useIndexDDoc: String? {
    guard let d = useIndex.first else { return nil }
    return d.hasPrefix("_design/") ? d : "_design/" + d
  }
}
