public import JSON

/// A selector written as CouchDB 3.4 normalizes it (`mango_selector:normalize`), which is what
/// `_explain` shows: operators explicit (`{"a": 1}` is `{"a": {"$eq": 1}}`, several members an
/// `$and`), field names joined into dotted paths down to the conditions
/// (`{"a": {"b": {"$gt": 1}}}` is `{"a.b": {"$gt": 1}}`), and negations pushed to the
/// conditions (`{"$not": {"a": {"$gt": 1}}}` is `{"a": {"$lte": 1}}`, De Morgan's laws for
/// `$and`, `$or` and `$nor`).
///
/// ```
/// {"type": "page", "year": {"$gt": 2000}}
///   →  {"$and": [{"type": {"$eq": "page"}}, {"year": {"$gt": 2000}}]}
/// ```
extension Selector {
  /// ``json`` as CouchDB normalizes it. The selector was checked when it was parsed, so this
  /// only rewrites it.
  public var normalizedJSON: JSONValue {
    guard case .object(let object) = json, !object.members.isEmpty else { return json }
    return Self.normNegations(Self.normFields(Self.normOps(json), path: ""))
  }

  /// The fields the selector names, as CouchDB lists them (`mango_selector:fields` of the
  /// normalized selector): those under `$and`, `$or` and `$nor`, and the name of every other
  /// member.
  public var fields: [String] {
    func fields(_ v: JSONValue) -> [String] {
      guard let members = v.objectValue?.members, members.count == 1 else { return [] }
      let (key, value) = (members[0].key, members[0].value)
      if key.hasPrefix("$"), let items = value.arrayValue { return items.flatMap(fields) }
      return [key]
    }
    return fields(normalizedJSON)
  }

  private static func pair(_ key: String, _ value: JSONValue) -> JSONValue {
    .object(JSONObject([.init(key: key, value: value)]))
  }

  /// The one member of a single-member object.
  private static func single(_ value: JSONValue) -> (key: String, value: JSONValue)? {
    guard case .object(let object) = value, object.members.count == 1 else { return nil }
    return (object.members[0].key, object.members[0].value)
  }

  private static func each(_ value: JSONValue, _ transform: (JSONValue) -> JSONValue) -> JSONValue {
    guard case .array(let items) = value else { return value }
    return .array(items.map(transform))
  }

  /// `norm_ops`: implicit `$eq` and `$and` made explicit, recursively.
  static func normOps(_ value: JSONValue) -> JSONValue {
    guard case .object(let object) = value, !object.members.isEmpty else {
      return pair("$eq", value)
    }
    guard object.members.count == 1 else {
      return pair("$and", .array(object.members.map { normOps(pair($0.key, $0.value)) }))
    }
    let (key, arg) = (object.members[0].key, object.members[0].value)
    switch key {
    case "$and", "$or", "$nor": return pair(key, each(arg, normOps))
    case "$not", "$elemMatch", "$allMatch", "$keyMapMatch": return pair(key, normOps(arg))
    case _ where key.hasPrefix("$"): return value
    default: return pair(key, normOps(arg))
    }
  }

  /// `norm_fields`: field names joined with `.` down to the conditions.
  static func normFields(_ value: JSONValue, path: String) -> JSONValue {
    guard let (key, arg) = single(value) else { return value }
    switch key {
    case "$and", "$or", "$nor": return pair(key, each(arg) { normFields($0, path: path) })
    case "$not": return pair(key, normFields(arg, path: path))
    case "$elemMatch", "$allMatch", "$keyMapMatch":
      return pair(path, pair(key, normFields(arg, path: "")))
    case _ where key.hasPrefix("$"): return pair(path, value)
    default: return normFields(arg, path: path.isEmpty ? key : path + "." + key)
    }
  }

  /// `norm_negations`: `$not` and `$nor` pushed down to the conditions.
  static func normNegations(_ value: JSONValue) -> JSONValue {
    guard let (key, arg) = single(value) else { return value }
    switch key {
    case "$not": return negate(arg)
    case "$nor": return pair("$and", each(arg, negate))
    case "$and", "$or": return pair(key, each(arg, normNegations))
    case "$elemMatch", "$allMatch", "$keyMapMatch": return pair(key, normNegations(arg))
    default: return value
    }
  }

  static let negated: [String: String] = [
    "$lt": "$gte", "$lte": "$gt", "$eq": "$ne", "$ne": "$eq", "$gte": "$lt", "$gt": "$lte",
    "$in": "$nin", "$nin": "$in",
  ]

  static func negate(_ value: JSONValue) -> JSONValue {
    guard let (key, arg) = single(value) else { return value }
    switch key {
    case "$not": return normNegations(arg)
    case "$nor": return pair("$or", each(arg, normNegations))
    case "$and": return pair("$or", each(arg, negate))
    case "$or": return pair("$and", each(arg, negate))
    case "$exists":
      if case .bool(let b) = arg { return pair(key, .bool(!b)) }
      return pair("$not", value)
    case _ where negated[key] != nil: return pair(negated[key]!, arg)
    case _ where key.hasPrefix("$"): return pair("$not", value)
    default: return pair(key, negate(arg))
    }
  }
}
