import Formats
import Hummingbird
import JSON
import Log
import Projections
import Query

#if canImport(FoundationEssentials)
  import FoundationEssentials
#else
  import Foundation
#endif

extension CouchServer {
  /// `GET/POST /{db}/_design/{ddoc}/_view/{view}` and `POST …/{view}/queries`: a view query
  /// (the Query module's ``ViewIndex``), with CouchDB's options (``ViewQuery``) from the query
  /// string and, for `POST`, the body (`keys` and any other option; the query string's win).
  /// `as_of` (wikilog's) answers the view as it was at a seq or an ISO-8601 time. A restricted
  /// reader (a wiki user) gets the rows of the documents they may read.
  func viewQuery(
    _ store: DocumentStore, ddoc: String, view: String, queries: Bool, request: Request,
    query: QueryParameters, access: DatabaseAccess
  ) async throws -> Response {
    let method = request.method
    try allow(method, queries ? [.post] : [.get, .head, .post])
    let includes: (@Sendable (String) -> Bool)?
    if let accessView = try access.view(store) {
      includes = { accessView.includes($0) }
    } else {
      includes = nil
    }
    var asked: [ViewQuery] = []
    let fromURL = try ViewQuery(parameters: query.pairs)
    if method == .post {
      let body = try await jsonBody(of: request)
      guard case .object(let object) = body else {
        throw CouchError.badRequest("Request body must be a JSON object")
      }
      if queries {
        guard case .array(let list)? = object["queries"] else {
          throw CouchError("query_parse_error", "`queries` member must be an array.", status: 400)
        }
        for item in list {
          guard case .object(let one) = item else {
            throw CouchError("query_parse_error", "each query must be an object", status: 400)
          }
          var q = fromURL
          try q.apply(body: one)
          asked.append(q)
        }
      } else {
        var q = ViewQuery()
        try q.apply(body: object)
        for (name, value) in query.pairs {
          try q.apply(body: JSONObject([.init(key: name, value: Self.bodyValue(name, value))]))
        }
        asked.append(q)
      }
    } else {
      asked.append(fromURL)
    }
    let all = asked
    let results = try await blocking {
      try all.map { q in
        guard let asOf = q.asOf else {
          let result = try store.queryView(ddoc: ddoc, view: view, query: q, includes: includes)
          if q.update == .lazy {
            Task.detached { _ = try? store.queryView(ddoc: ddoc, view: view, query: ViewQuery()) }
          }
          return result.json
        }
        let then: AsOfView
        if let seq = UInt64(asOf) {
          then = try store.asOf(LogPosition(seq))
        } else if let date = ISO8601.parse(asOf) {
          then = try store.asOf(date)
        } else {
          throw CouchError(
            "query_parse_error", "`as_of` must be a seq or an ISO-8601 time.", status: 400)
        }
        defer { then.close() }
        return try then.queryView(ddoc: ddoc, view: view, query: q, includes: includes).json
      }
    }
    let answer: JSONValue =
      queries
      ? .object(JSONObject([.init(key: "results", value: .array(results))])) : results[0]
    return CouchResponse.json(answer, includeBody: method != .head)
  }

  /// A query-string option as a body member: JSON-valued ones parsed, the rest as strings.
  static func bodyValue(_ name: String, _ value: String) throws -> JSONValue {
    switch name {
    case "key", "keys", "startkey", "start_key", "endkey", "end_key":
      do {
        return try JSONValue(parsing: value)
      } catch {
        throw CouchError.badRequest("invalid UTF-8 JSON")
      }
    default:
      return .string(value)
    }
  }
}
