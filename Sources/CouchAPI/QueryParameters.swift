import Formats
public import JSON
public import Log
import RevTree

/// A request's query string, decoded, with CouchDB's typed readers.
///
/// Names and values are percent-decoded (`+` is a space); when a name repeats, the first value
/// counts. Readers throw `400` with `errorName` (`bad_request`, or `query_parse_error` for
/// `_all_docs`) when a value has the wrong type.
public struct QueryParameters: Sendable {
  public private(set) var pairs: [(name: String, value: String)] = []
  public var errorName = "bad_request"

  public init(_ query: String?) throws(CouchError) {
    guard let query, !query.isEmpty else { return }
    for part in query.split(separator: "&", omittingEmptySubsequences: true) {
      if let eq = part.firstIndex(of: "=") {
        pairs.append(
          (
            try PercentDecoding.decoded(part[..<eq], plusIsSpace: true),
            try PercentDecoding.decoded(part[part.index(after: eq)...], plusIsSpace: true)
          ))
      } else {
        pairs.append((try PercentDecoding.decoded(part, plusIsSpace: true), ""))
      }
    }
  }

  /// Parameters given as (name, value) pairs, as a query string would give them decoded.
  public init(pairs: [(String, String)]) {
    self.pairs = pairs.map { (name: $0.0, value: $0.1) }
  }

  public subscript(name: String) -> String? { pairs.first { $0.name == name }?.value }

  public func contains(_ name: String) -> Bool { pairs.contains { $0.name == name } }

  public func error(_ reason: String) -> CouchError {
    CouchError(errorName, reason, status: 400)
  }

  /// A flag as CouchDB reads the options of document reads, `_bulk_get` and `_changes`
  /// (`chttpd_db:parse_doc_query`, `parse_changes_query`): exactly `true` sets it; any other
  /// value, `True` included, is ignored and leaves it false, without an error.
  public func flag(_ name: String) -> Bool { self[name] == "true" }

  /// A boolean as CouchDB reads the options of `_all_docs` and views
  /// (`couch_mrview_http:parse_boolean`): `true` or `false` in any case (`True`, `FALSE`);
  /// absent is `defaultValue`; anything else is `400 query_parse_error`
  /// `Invalid boolean parameter: "yes"`.
  public func bool(_ name: String, default defaultValue: Bool = false) throws(CouchError) -> Bool {
    guard let value = self[name] else { return defaultValue }
    switch value.lowercased() {
    case "true": return true
    case "false": return false
    default: throw error("Invalid boolean parameter: \"\(value)\"")
    }
  }

  /// The last value of any of `names`, compared without case (CouchDB lowercases the names of
  /// `_changes` options, and the last of repeated options counts).
  public func last(ofAny names: Set<String>) -> String? {
    pairs.last { names.contains($0.name.lowercased()) }?.value
  }

  /// A non-negative integer, or nil when absent.
  public func int(_ name: String) throws(CouchError) -> Int? {
    guard let value = self[name] else { return nil }
    guard let n = Int(value), n >= 0 else {
      throw error("Invalid value for \(name): \"\(value)\"; expected a non-negative integer")
    }
    return n
  }

  /// A JSON-encoded value (`startkey="a"`, `keys=["a","b"]`), or nil when absent.
  public func json(_ name: String) throws(CouchError) -> JSONValue? {
    guard let value = self[name] else { return nil }
    do {
      return try JSONValue(parsing: value)
    } catch {
      // CouchDB's answer (`bad_request`), with the parameter named.
      throw CouchError.badRequest("invalid UTF-8 JSON (\(name)=\(value.prefix(100)))")
    }
  }

  /// A JSON array of strings (`keys`, `doc_ids`, `open_revs`), or nil when absent.
  public func stringArray(_ name: String) throws(CouchError) -> [String]? {
    guard let value = try json(name) else { return nil }
    guard let strings = value.stringArray else {
      throw error("\(name) must be a JSON array of strings")
    }
    return strings
  }

  /// A `since`-style sequence: `0`, `now` (when `now` is given), an integer, a JSON string
  /// holding one, or CouchDB's `N-opaque` form (the number before the dash is used).
  public func seq(_ name: String, now: () throws -> LogPosition) throws -> LogPosition? {
    guard let value = self[name] else { return nil }
    if value == "now" { return try now() }
    guard let seq = Self.parseSeq(value) else {
      throw error("Invalid \(name) sequence: \"\(value)\"")
    }
    return seq
  }

  public static func parseSeq(_ text: String) -> LogPosition? {
    var text = Substring(text)
    if text.count >= 2, text.first == "\"", text.last == "\"" { text = text.dropFirst().dropLast() }
    if let dash = text.firstIndex(of: "-"), dash != text.startIndex { text = text[..<dash] }
    guard let n = UInt64(text) else { return nil }
    return LogPosition(n)
  }
}

extension JSONValue {
  /// The strings of a JSON array of strings, or nil.
  var stringArray: [String]? {
    guard let array = arrayValue else { return nil }
    var out: [String] = []
    out.reserveCapacity(array.count)
    for item in array {
      guard let s = item.stringValue else { return nil }
      out.append(s)
    }
    return out
  }
}
