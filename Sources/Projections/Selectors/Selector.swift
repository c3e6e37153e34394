public import JSON

/// A Mango selector (CouchDB 3's query language): `_find`, `_explain`, an index's
/// `partial_filter_selector` and `filter=_selector` in `_changes`.
///
/// The operators are CouchDB's, with its semantics (`mango_selector.erl`):
///
/// - condition operators on a field: `$eq $ne $gt $gte $lt $lte` (compared by CouchDB's
///   collation, ``Collation``, so `{"$gt": null}` matches every present non-null value),
///   `$exists`, `$type` (`null boolean number string array object`), `$in $nin` (an array
///   field matches when the array or one of its elements is among the values), `$size`,
///   `$mod` (`[divisor, remainder]`, integers, the remainder's sign following the dividend),
///   `$regex` (a search, not a whole match), `$all`, `$elemMatch`, `$allMatch` (a non-empty
///   array whose every element matches), `$keyMapMatch` (an object one of whose keys
///   matches), `$beginsWith`;
/// - combination operators: `$and $or $nor $not`, at the top or under a field (which then
///   applies to every branch);
/// - implicit `$and` between members and implicit `$eq` for a value that is not an object of
///   operators; `{"a": {"b": 1}}` is `{"a.b": 1}`;
/// - dotted paths (`"a.b.c"`), with `\.` for a dot inside a field name (`"a\\.b"` is the field
///   `a.b`);
/// - a field that is missing matches nothing but `{"$exists": false}` (so `$ne` and `$nin` do
///   not match a missing field, while `$not` of a condition does); `_id` compares by bytes,
///   as CouchDB's raw collation does.
///
/// ```swift
/// let s = try Selector(JSONValue(parsing: #"{"type": "page", "year": {"$gt": 2000}}"#))
/// s.matches(try JSONValue(parsing: #"{"type": "page", "year": 2010}"#))  // true
/// ```
public struct Selector: Sendable, Hashable {
  /// A normalized selector.
  public indirect enum Node: Sendable, Hashable {
    case and([Node])
    case or([Node])
    case nor([Node])
    case not(Node)
    /// A condition on the value at a path (empty: the value the selector is applied to).
    case field([String], Condition)
  }

  /// A condition on one value, as a normalized selector holds it (index planners read them).
  public enum Condition: Sendable, Hashable {
    case eq(JSONValue)
    case ne(JSONValue)
    case gt(JSONValue)
    case gte(JSONValue)
    case lt(JSONValue)
    case lte(JSONValue)
    case exists(Bool)
    case type(String)
    case isIn([JSONValue])
    case notIn([JSONValue])
    case size(Int)
    case mod(Int64, Int64)
    case regex(Pattern)
    case all([JSONValue])
    case elemMatch(Node)
    case allMatch(Node)
    case keyMapMatch(Node)
    case beginsWith(String)
  }

  /// A compiled `$regex` (PCRE, as CouchDB's), compared and hashed by its source.
  public struct Pattern: Sendable, Hashable {
    public let source: String
    let regex: RegexPattern

    public static func == (a: Pattern, b: Pattern) -> Bool { a.source == b.source }
    public func hash(into hasher: inout Hasher) { hasher.combine(source) }
  }

  let root: Node
  /// The selector as given.
  public let json: JSONValue

  /// Parses and normalizes a selector.
  ///
  /// - Throws: ``StoreError`` 400: `invalid_operator` for an unknown operator, `bad_arg` for
  ///   an operator's argument of the wrong kind, `invalid_selector_json` when the selector is not an
  ///   object.
  public init(_ value: JSONValue) throws(StoreError) {
    guard let object = value.objectValue else {
      throw StoreError(
        "invalid_selector_json", "Selector must be a JSON object, not: \(value.serializedString)",
        code: .badRequest)
    }
    json = value
    root = try Self.parse(object, path: [], isRoot: true)
  }

  /// Whether the selector is one `$and`, `$or` or `$nor` of an empty list: it matches anything,
  /// but `_find` answers it with no documents, as CouchDB does (`mango_cursor:maybe_noop_range`:
  /// `{"$or": []}` runs no query, while `{"age": 22, "$or": []}` is `{"age": 22}`).
  public var matchesNothingInFind: Bool {
    guard let members = json.objectValue?.members, members.count == 1,
      ["$and", "$or", "$nor"].contains(members[0].key), members[0].value.arrayValue?.isEmpty == true
    else { return false }
    return true
  }

  /// The selector that matches every document (`{}`).
  public static let all = try! Selector(.object(JSONObject()))

  /// Whether a document satisfies the selector.
  public func matches(_ doc: JSONValue) -> Bool { Self.matches(root, doc) }

  public static func == (a: Selector, b: Selector) -> Bool { a.root == b.root }
  public func hash(into hasher: inout Hasher) { hasher.combine(root) }

  // MARK: Field paths

  /// Splits a field name at its unescaped dots: `"a.b\\.c"` is `["a", "b.c"]`.
  public static func path(_ field: String) -> [String] {
    var parts: [String] = []
    var current = ""
    var escaped = false
    for c in field {
      if escaped {
        current.append(c)
        escaped = false
      } else if c == "\\" {
        escaped = true
      } else if c == "." {
        parts.append(current)
        current = ""
      } else {
        current.append(c)
      }
    }
    if escaped { current.append("\\") }
    parts.append(current)
    return parts
  }

  /// The value at `path` in `value`: `.found`, `.missing`, or `.badPath` when a step meets
  /// something that is not an object.
  enum Lookup {
    case found(JSONValue)
    case missing
    case badPath
  }

  static func lookup(_ path: [String], in value: JSONValue) -> Lookup {
    var current = value
    for step in path {
      switch current {
      case .object(let object):
        guard let next = object[step] else { return .missing }
        current = next
      case .array(let items):
        // A number indexes an array (`mango_doc:get_field`): `favorites.3`.
        guard let i = Int(step), i >= 0, i < items.count else { return .badPath }
        current = items[i]
      default:
        return .badPath
      }
    }
    return .found(current)
  }

  /// The value at a dotted path, nil when missing.
  public static func value(at path: [String], in value: JSONValue) -> JSONValue? {
    if case .found(let v) = lookup(path, in: value) { return v }
    return nil
  }

  // MARK: Parsing

  static func error(_ error: String, _ reason: String) -> StoreError {
    StoreError(error, reason, code: .badRequest)
  }

  static func badArg(_ op: String, _ arg: JSONValue) -> StoreError {
    error("bad_arg", "Bad argument for operator \(op): \(arg.serializedString)")
  }

  static let combinations: Set<String> = ["$and", "$or", "$nor", "$not"]

  /// The members of `object`, as conditions on the value at `path`.
  ///
  /// A key given twice counts once, as its last occurrence (CouchDB's JSON decoding keeps the
  /// last). A condition needs a field (`{"$gt": 1}` as the whole selector is
  /// `invalid_selector`, as `mango_selector:normalize` finds it), and a field
  /// name no empty part (`invalid_field_name`).
  static func parse(_ object: JSONObject, path: [String], isRoot: Bool = false) throws(StoreError)
    -> Node
  {
    var nodes: [Node] = []
    // Where each key last occurs (linear, whatever a hostile selector holds).
    var last: [String: Int] = [:]
    if object.members.count > 1 {
      for (i, member) in object.members.enumerated() { last[member.key] = i }
    }
    for (i, member) in object.members.enumerated() where last[member.key].map({ $0 == i }) ?? true {
      if member.key.hasPrefix("$") {
        if isRoot && Self.isCondition(member.key) {
          throw error("invalid_selector", "One or more conditions is missing a field name.")
        }
        nodes.append(try parseOperator(member.key, member.value, path: path))
      } else {
        let parts = Self.path(member.key)
        if parts.contains("") {
          throw error("invalid_field_name", "Invalid field name: \(member.key)")
        }
        nodes.append(try parseValue(member.value, path: path + parts))
      }
    }
    return nodes.count == 1 ? nodes[0] : .and(nodes)
  }

  /// Whether `op` is a condition on a field's value (not `$and`, `$or`, `$nor`, `$not`): an
  /// operator `parseOperator` knows. Unknown operators stay `invalid_operator`.
  static func isCondition(_ op: String) -> Bool {
    [
      "$eq", "$ne", "$gt", "$gte", "$lt", "$lte", "$exists", "$type", "$in", "$nin", "$size",
      "$mod", "$regex", "$all", "$elemMatch", "$allMatch", "$keyMapMatch", "$beginsWith",
    ].contains(op)
  }

  /// A field's value: an object of operators (or of nested fields), else implicit `$eq`.
  static func parseValue(_ value: JSONValue, path: [String]) throws(StoreError) -> Node {
    if case .object(let object) = value, !object.members.isEmpty {
      return try parse(object, path: path)
    }
    return .field(path, .eq(value))
  }

  static func selectors(_ op: String, _ arg: JSONValue) throws(StoreError) -> [JSONValue] {
    guard case .array(let items) = arg else { throw badArg(op, arg) }
    return items
  }

  static func parseOperator(_ op: String, _ arg: JSONValue, path: [String]) throws(StoreError)
    -> Node
  {
    switch op {
    case "$and", "$or", "$nor":
      // An empty list is allowed and matches anything (`mango_selector:match`); `_find` runs
      // no query for a selector that is nothing but one (``matchesNothingInFind``).
      let items = try selectors(op, arg)
      var nodes: [Node] = []
      for item in items {
        guard case .object(let object) = item else { throw badArg(op, arg) }
        nodes.append(try parse(object, path: path))
      }
      return op == "$and" ? .and(nodes) : op == "$or" ? .or(nodes) : .nor(nodes)
    case "$not":
      guard case .object(let object) = arg else { throw badArg(op, arg) }
      return .not(try parse(object, path: path))
    default:
      return .field(path, try condition(op, arg))
    }
  }

  static let types: Set<String> = ["null", "boolean", "number", "string", "array", "object"]

  static func condition(_ op: String, _ arg: JSONValue) throws(StoreError) -> Condition {
    switch op {
    case "$eq": return .eq(arg)
    case "$ne": return .ne(arg)
    case "$gt": return .gt(arg)
    case "$gte": return .gte(arg)
    case "$lt": return .lt(arg)
    case "$lte": return .lte(arg)
    case "$exists":
      guard case .bool(let b) = arg else { throw badArg(op, arg) }
      return .exists(b)
    case "$type":
      guard case .string(let t) = arg, types.contains(t) else { throw badArg(op, arg) }
      return .type(t)
    case "$in", "$nin", "$all":
      guard case .array(let items) = arg else { throw badArg(op, arg) }
      return op == "$in" ? .isIn(items) : op == "$nin" ? .notIn(items) : .all(items)
    case "$size":
      guard case .number(let n) = arg, let i = n.int64Value, i >= 0 else { throw badArg(op, arg) }
      return .size(Int(i))
    case "$mod":
      guard case .array(let items) = arg, items.count == 2,
        case .number(let d) = items[0], let divisor = d.int64Value, divisor != 0,
        case .number(let r) = items[1], let remainder = r.int64Value
      else { throw badArg(op, arg) }
      return .mod(divisor, remainder)
    case "$regex":
      guard case .string(let source) = arg, let regex = try? RegexPattern(source) else {
        throw badArg(op, arg)
      }
      return .regex(Pattern(source: source, regex: regex))
    case "$elemMatch", "$allMatch", "$keyMapMatch":
      guard case .object(let object) = arg else { throw badArg(op, arg) }
      let node = try parse(object, path: [])
      return op == "$elemMatch"
        ? .elemMatch(node) : op == "$allMatch" ? .allMatch(node) : .keyMapMatch(node)
    case "$beginsWith":
      // Only a string makes it `$beginsWith` to CouchDB; anything else is an unknown operator.
      guard case .string(let s) = arg else {
        throw error("invalid_operator", "Invalid operator: \(op)")
      }
      return .beginsWith(s)
    default:
      throw error("invalid_operator", "Invalid operator: \(op)")
    }
  }

  // MARK: Matching

  static func matches(_ node: Node, _ value: JSONValue) -> Bool {
    switch node {
    case .and(let nodes): return nodes.allSatisfy { matches($0, value) }
    case .or(let nodes): return nodes.isEmpty || nodes.contains { matches($0, value) }
    case .nor(let nodes): return !nodes.contains { matches($0, value) }
    case .not(let inner):
      // CouchDB pushes a negation down (`$and` ↔ `$or`), and an empty list of either
      // matches anything, so its negation does too.
      switch inner {
      case .and([]), .or([]), .nor([]): return true
      default: return !matches(inner, value)
      }
    case .field(let path, let condition):
      switch lookup(path, in: value) {
      case .badPath: return false
      case .missing: return condition == .exists(false)
      case .found(let v):
        return holds(condition, v, raw: path == ["_id"])
      }
    }
  }

  static func holds(_ condition: Condition, _ value: JSONValue, raw: Bool = false) -> Bool {
    func cmp(_ a: JSONValue, _ b: JSONValue) -> Int {
      raw ? Collation.compareRaw(a, b) : Collation.compare(a, b)
    }
    switch condition {
    case .eq(let v): return cmp(value, v) == 0
    case .ne(let v): return cmp(value, v) != 0
    case .gt(let v): return cmp(value, v) > 0
    case .gte(let v): return cmp(value, v) >= 0
    case .lt(let v): return cmp(value, v) < 0
    case .lte(let v): return cmp(value, v) <= 0
    case .exists(let wanted): return wanted
    case .type(let t): return typeName(value) == t
    case .isIn(let list):
      if case .array(let items) = value {
        return list.contains { arg in cmp(value, arg) == 0 || items.contains { cmp($0, arg) == 0 } }
      }
      return list.contains { cmp(value, $0) == 0 }
    case .notIn(let list):
      return !holds(.isIn(list), value, raw: raw)
    case .size(let n):
      if case .array(let items) = value { return items.count == n }
      return false
    case .mod(let divisor, let remainder):
      guard case .number(let n) = value else { return false }
      let d = n.doubleValue
      guard d == d.rounded(), abs(d) < 9.2e18 else { return false }
      return Int64(d) % divisor == remainder
    case .regex(let pattern):
      guard case .string(let s) = value else { return false }
      return pattern.regex.matches(s)
    case .all(let list):
      guard case .array(let items) = value, !list.isEmpty else { return false }
      return list.allSatisfy { arg in items.contains { cmp($0, arg) == 0 } }
    case .elemMatch(let node):
      guard case .array(let items) = value else { return false }
      return items.contains { matches(node, $0) }
    case .allMatch(let node):
      guard case .array(let items) = value, !items.isEmpty else { return false }
      return items.allSatisfy { matches(node, $0) }
    case .keyMapMatch(let node):
      guard case .object(let object) = value else { return false }
      return object.members.contains { matches(node, .string($0.key)) }
    case .beginsWith(let prefix):
      guard case .string(let s) = value else { return false }
      return s.utf8.starts(with: prefix.utf8)
    }
  }

  /// The name `$type` uses for a value's type.
  static func typeName(_ value: JSONValue) -> String {
    switch value {
    case .null: "null"
    case .bool: "boolean"
    case .number: "number"
    case .string: "string"
    case .array: "array"
    case .object: "object"
    }
  }

  // MARK: What an index can use

  /// The fields a matching document must have, as `mango_selector:has_required_fields` sees
  /// through the selector: every field of an `$and`, the fields every branch of an `$or`
  /// requires, none of `$exists: false`. Nil for every field: an empty `$or` is no constraint
  /// CouchDB's planner can see past, so it finds every index usable.
  public var requiredPaths: Set<[String]>? {
    func required(_ node: Node) -> Set<[String]>? {
      switch node {
      case .and(let nodes):
        var out = Set<[String]>()
        for n in nodes {
          guard let r = required(n) else { return nil }
          out.formUnion(r)
        }
        return out
      case .or(let nodes):
        var out: Set<[String]>? = nil
        for n in nodes {
          guard let r = required(n) else { continue }
          out = out.map { $0.intersection(r) } ?? r
        }
        return out
      case .field(let path, let c): return c == .exists(false) ? [] : [path]
      default: return []
      }
    }
    return required(root)
  }

  /// The conditions of the top-level `$and` (not under `$or`, `$nor` or `$not`), by dotted
  /// path: every one must hold, so a document an index leaves out (one without the field)
  /// cannot match when the field has any condition but `$exists: false`.
  public var requiredConditions: [([String], Condition)] {
    var out: [([String], Condition)] = []
    func walk(_ node: Node) {
      switch node {
      case .and(let nodes): nodes.forEach(walk)
      case .field(let path, let c): out.append((path, c))
      default: break
      }
    }
    walk(root)
    return out
  }

  /// Whether a condition anywhere in the selector is on `field` or a path under it.
  public func mentions(_ field: String) -> Bool {
    func walk(_ node: Node) -> Bool {
      switch node {
      case .and(let nodes), .or(let nodes), .nor(let nodes): nodes.contains(where: walk)
      case .not(let inner): walk(inner)
      case .field(let path, _): path.first == field
      }
    }
    return walk(root)
  }
}

extension JSONValue {
  /// The compact JSON text, for messages.
  public var serializedString: String { String(decoding: serialized(), as: UTF8.self) }
}
