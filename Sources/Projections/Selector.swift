public import JSON
import RevTree

/// A Mango-style selector on a document's top-level fields, for `filter=_selector`.
///
/// Supported: `{"field": value}` (equality), and per field the operators `$eq`, `$ne`, `$gt`,
/// `$gte`, `$lt`, `$lte`, `$exists`, `$in`, `$nin`; several fields must all match. Comparisons
/// are between numbers or between strings; anything else is unequal. Nested paths and
/// combination operators (`$or`, `$and`, ...) are refused with a clear error.
///
/// ```swift
/// let s = try Selector(JSONValue(parsing: #"{"type": "page", "wiki_id": {"$eq": "w1"}}"#))
/// ```
public struct Selector: Sendable, Hashable {
  enum Condition: Sendable, Hashable {
    case eq(JSONValue)
    case ne(JSONValue)
    case gt(JSONValue)
    case gte(JSONValue)
    case lt(JSONValue)
    case lte(JSONValue)
    case exists(Bool)
    case isIn([JSONValue])
    case notIn([JSONValue])
  }

  let fields: [(String, [Condition])]

  public static func == (a: Selector, b: Selector) -> Bool {
    a.fields.map(\.0) == b.fields.map(\.0) && a.fields.map(\.1) == b.fields.map(\.1)
  }

  public func hash(into hasher: inout Hasher) {
    for (k, c) in fields {
      hasher.combine(k)
      hasher.combine(c)
    }
  }

  public init(_ value: JSONValue) throws(StoreError) {
    guard let object = value.objectValue else {
      throw StoreError.badRequest("selector must be a JSON object")
    }
    var fields: [(String, [Condition])] = []
    for member in object.members {
      guard !member.key.hasPrefix("$") else {
        throw StoreError.badRequest(
          "selector operator \(member.key) is not supported; use top-level fields")
      }
      guard !member.key.contains(".") else {
        throw StoreError.badRequest("selector field \(member.key): nested paths are not supported")
      }
      var conditions: [Condition] = []
      if let ops = member.value.objectValue, ops.members.contains(where: { $0.key.hasPrefix("$") })
      {
        for op in ops.members {
          switch op.key {
          case "$eq": conditions.append(.eq(op.value))
          case "$ne": conditions.append(.ne(op.value))
          case "$gt": conditions.append(.gt(op.value))
          case "$gte": conditions.append(.gte(op.value))
          case "$lt": conditions.append(.lt(op.value))
          case "$lte": conditions.append(.lte(op.value))
          case "$exists":
            guard let b = op.value.boolValue else {
              throw StoreError.badRequest("$exists takes true or false")
            }
            conditions.append(.exists(b))
          case "$in", "$nin":
            guard let list = op.value.arrayValue else {
              throw StoreError.badRequest("\(op.key) takes an array")
            }
            conditions.append(op.key == "$in" ? .isIn(list) : .notIn(list))
          default:
            throw StoreError.badRequest("selector operator \(op.key) is not supported")
          }
        }
      } else {
        conditions.append(.eq(member.value))
      }
      fields.append((member.key, conditions))
    }
    self.fields = fields
  }

  /// Whether a document satisfies every condition.
  public func matches(_ doc: JSONValue) -> Bool {
    guard let object = doc.objectValue else { return false }
    for (field, conditions) in fields {
      let value = object[field]
      for condition in conditions where !Self.holds(condition, value) { return false }
    }
    return true
  }

  static func holds(_ condition: Condition, _ value: JSONValue?) -> Bool {
    switch condition {
    case .exists(let wanted): return (value != nil) == wanted
    case .eq(let v): return value.map { equal($0, v) } ?? false
    case .ne(let v): return value.map { !equal($0, v) } ?? true
    case .gt(let v): return compare(value, v).map { $0 > 0 } ?? false
    case .gte(let v): return compare(value, v).map { $0 >= 0 } ?? false
    case .lt(let v): return compare(value, v).map { $0 < 0 } ?? false
    case .lte(let v): return compare(value, v).map { $0 <= 0 } ?? false
    case .isIn(let list): return value.map { x in list.contains { equal(x, $0) } } ?? false
    case .notIn(let list): return value.map { x in !list.contains { equal(x, $0) } } ?? true
    }
  }

  static func equal(_ a: JSONValue, _ b: JSONValue) -> Bool {
    if case .number(let x) = a, case .number(let y) = b { return x.doubleValue == y.doubleValue }
    return a == b
  }

  static func compare(_ a: JSONValue?, _ b: JSONValue) -> Int? {
    switch (a, b) {
    case (.number(let x)?, .number(let y)):
      return x.doubleValue < y.doubleValue ? -1 : (x.doubleValue > y.doubleValue ? 1 : 0)
    case (.string(let x)?, .string(let y)):
      return x < y ? -1 : (x > y ? 1 : 0)
    default:
      return nil
    }
  }
}
