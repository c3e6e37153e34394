public import JSON
public import Projections

/// A view query's options, as CouchDB reads them from a `_view` request's query string and
/// body (`couch_mrview_http:parse_params`, `couch_mrview_util:validate_args`), with its error
/// messages (400 `query_parse_error`).
///
/// ```swift
/// var query = try ViewQuery(parameters: [("startkey", #"["w1"]"#), ("limit", "10")])
/// query.includeDocs = true
/// ```
public struct ViewQuery: Sendable {
  public enum Update: Sendable, Hashable {
    /// Caught up before the query (the default).
    case yes
    /// As the index stands (`update=false`, `stale=ok`).
    case no
    /// As it stands, caught up after (`update=lazy`, `stale=update_after`).
    case lazy
  }

  public var startKey: JSONValue?
  public var endKey: JSONValue?
  public var keys: [JSONValue]?
  public var startDocID: String?
  public var endDocID: String?
  public var inclusiveEnd = true
  public var descending = false
  public var limit: Int?
  public var skip = 0
  public var reduce: Bool?
  public var group: Bool?
  public var groupLevel: Int?
  public var includeDocs = false
  public var conflicts: Bool?
  public var attachments = false
  public var updateSeq = false
  public var update = Update.yes
  public var stable = false
  public var sorted = true
  /// `as_of`: the view as it was at a log position or a time (wikilog's), as written.
  public var asOf: String?

  public init() {}

  /// The options of a query string's (decoded) parameters; unknown ones are ignored, as
  /// CouchDB keeps them aside.
  public init(parameters: [(String, String)]) throws(StoreError) {
    for (name, value) in parameters { try set(name, .text(value)) }
  }

  /// Adds the options of a POST body (already JSON); the query string's are applied after it
  /// (``init(parameters:)`` then this, then the query again, as CouchDB does, is the caller's
  /// order: body first, query string over it).
  public mutating func apply(body: JSONObject) throws(StoreError) {
    for member in body.members { try set(member.key, .json(member.value)) }
  }

  enum Given {
    case text(String)
    case json(JSONValue)
  }

  static func error(_ reason: String) -> StoreError {
    StoreError("query_parse_error", reason, code: .badRequest)
  }

  private func decoded(_ value: Given) throws(StoreError) -> JSONValue {
    switch value {
    case .json(let v): return v
    case .text(let t):
      do {
        return try JSONValue(parsing: t)
      } catch {
        throw StoreError("bad_request", "invalid UTF-8 JSON", code: .badRequest)
      }
    }
  }

  private func boolean(_ value: Given) throws(StoreError) -> Bool {
    switch value {
    case .json(.bool(let b)): return b
    case .json(.string(let s)), .text(let s):
      switch s.lowercased() {
      case "true": return true
      case "false": return false
      default: throw Self.error("Invalid boolean parameter: \"\(s)\"")
      }
    case .json(let v):
      throw Self.error(
        "Invalid boolean parameter: \(String(decoding: v.serialized(), as: UTF8.self))")
    }
  }

  private func positive(_ value: Given) throws(StoreError) -> Int {
    let text: String
    switch value {
    case .json(.number(let n)):
      guard let i = n.int64Value else { throw Self.error("Invalid value for integer: \"\(n)\"") }
      guard i >= 0 else { throw Self.error("Invalid value for positive integer: \"\(n)\"") }
      return Int(clamping: i)
    case .json(.string(let s)), .text(let s): text = s
    case .json(let v): text = String(decoding: v.serialized(), as: UTF8.self)
    }
    guard let i = Int(text) else { throw Self.error("Invalid value for integer: \"\(text)\"") }
    guard i >= 0 else { throw Self.error("Invalid value for positive integer: \"\(text)\"") }
    return i
  }

  private func string(_ value: Given) -> String {
    switch value {
    case .text(let s), .json(.string(let s)): s
    case .json(let v): String(decoding: v.serialized(), as: UTF8.self)
    }
  }

  private mutating func set(_ name: String, _ value: Given) throws(StoreError) {
    switch name {
    case "reduce": reduce = try boolean(value)
    case "key":
      let k = try decoded(value)
      startKey = k
      endKey = k
    case "keys":
      let v = try decoded(value)
      guard case .array(let list) = v else {
        throw StoreError.badRequest("`keys` member must be an array.")
      }
      if list.count == 1 {
        startKey = list[0]
        endKey = list[0]
      } else {
        keys = list
      }
    case "startkey", "start_key": startKey = try decoded(value)
    case "endkey", "end_key": endKey = try decoded(value)
    case "startkey_docid", "start_key_doc_id": startDocID = string(value)
    case "endkey_docid", "end_key_doc_id": endDocID = string(value)
    case "limit": limit = try positive(value)
    case "skip": skip = try positive(value)
    case "stale":
      switch string(value) {
      case "ok":
        stable = true
        update = .no
      case "update_after":
        stable = true
        update = .lazy
      default: throw Self.error("Invalid value for `stale`.")
      }
    case "stable":
      switch string(value) {
      case "true": stable = true
      case "false": stable = false
      default: throw Self.error("Invalid value for `stable`.")
      }
    case "update":
      switch string(value) {
      case "true": update = .yes
      case "false": update = .no
      case "lazy": update = .lazy
      default: throw Self.error("Invalid value for `update`.")
      }
    case "descending": descending = try boolean(value)
    case "group": group = try boolean(value)
    case "group_level": groupLevel = try positive(value)
    case "inclusive_end": inclusiveEnd = try boolean(value)
    case "include_docs": includeDocs = try boolean(value)
    case "conflicts": conflicts = try boolean(value)
    case "attachments": attachments = try boolean(value)
    case "update_seq": updateSeq = try boolean(value)
    case "sorted": sorted = try boolean(value)
    case "as_of": asOf = string(value)
    default: break
    }
  }

  /// The grouping asked for: 0 (none), a level, or nil for exact (`group=true`).
  func grouping() throws(StoreError) -> Int? {
    switch (group, groupLevel) {
    case (nil, nil), (false?, nil): return 0
    case (false?, let level?) where level > 0:
      throw Self.error("Can't specify group=false and group_level>0 at the same time")
    case (true?, nil): return nil
    case (_, let level?): return level
    }
  }
}
