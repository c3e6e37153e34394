import Foundation
public import JSON

/// Which documents a ``DocumentDatabase/find(_:where:sort:limit:skip:)`` selects: a Mango
/// selector built from Swift values (fields by their names in the document, nested ones with
/// dots: `"address.city"`).
///
/// ```swift
/// let soon = try db.find(
///   Note.self,
///   where: .field("done", equals: false) && .field("due", lessThan: Date.now + 86_400)
///     && .field("tags", contains: "home"),
///   sort: [.ascending("due")])
/// ```
public struct Where: Sendable, Hashable {
  /// The Mango selector.
  public let json: JSONValue

  /// A selector written as Mango's JSON.
  public init(selector: JSONValue) { json = selector }

  /// Every document.
  public static let all = Where(selector: .object(JSONObject()))

  static func op(_ field: String, _ op: String, _ value: JSONValue) -> Where {
    Where(selector: .object(JSONObject([field: .object(JSONObject([op: value]))])))
  }

  public static func field(_ name: String, equals value: some Encodable) -> Where {
    op(name, "$eq", Self.json(value))
  }
  public static func field(_ name: String, notEqualTo value: some Encodable) -> Where {
    op(name, "$ne", Self.json(value))
  }
  public static func field(_ name: String, lessThan value: some Encodable) -> Where {
    op(name, "$lt", Self.json(value))
  }
  public static func field(_ name: String, atMost value: some Encodable) -> Where {
    op(name, "$lte", Self.json(value))
  }
  public static func field(_ name: String, greaterThan value: some Encodable) -> Where {
    op(name, "$gt", Self.json(value))
  }
  public static func field(_ name: String, atLeast value: some Encodable) -> Where {
    op(name, "$gte", Self.json(value))
  }
  /// The field's value is one of `values`.
  public static func field<V: Encodable>(_ name: String, in values: [V]) -> Where {
    op(name, "$in", .array(values.map { Self.json($0) }))
  }
  /// The field is an array with an element equal to `value`.
  public static func field(_ name: String, contains value: some Encodable) -> Where {
    op(name, "$elemMatch", .object(JSONObject(["$eq": Self.json(value)])))
  }
  /// The field's string matches the regular expression `pattern` (PCRE, as CouchDB's).
  public static func field(_ name: String, matches pattern: String) -> Where {
    op(name, "$regex", .string(pattern))
  }
  /// The field is present (or, with `false`, absent).
  public static func field(_ name: String, exists: Bool) -> Where {
    op(name, "$exists", .bool(exists))
  }

  public static func && (a: Where, b: Where) -> Where {
    if a == .all { return b }
    if b == .all { return a }
    return Where(selector: .object(JSONObject(["$and": .array([a.json, b.json])])))
  }

  public static func || (a: Where, b: Where) -> Where {
    Where(selector: .object(JSONObject(["$or": .array([a.json, b.json])])))
  }

  public static prefix func ! (a: Where) -> Where {
    Where(selector: .object(JSONObject(["$not": a.json])))
  }

  /// A value as the document holds it (a date as its ISO-8601 text, so that it compares in
  /// time order).
  static func json(_ value: some Encodable) -> JSONValue {
    (try? DocumentEncoder().encode(value)) ?? .null
  }
}

/// A field to sort ``DocumentDatabase/find(_:where:sort:limit:skip:)``'s answer by.
public struct SortKey: Sendable, Hashable {
  public var field: String
  public var descending: Bool

  public static func ascending(_ field: String) -> SortKey {
    SortKey(field: field, descending: false)
  }
  public static func descending(_ field: String) -> SortKey {
    SortKey(field: field, descending: true)
  }
}
