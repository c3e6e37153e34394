import CouchAPI
import Formats
import HTTPTypes
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

extension QueryEndpoints {
  /// `GET/POST /{db}/_design/{ddoc}/_view/{view}` and `POST …/{view}/queries`: a view query
  /// (the Query module's ``ViewIndex``), with CouchDB's options (``ViewQuery``) from the query
  /// string and, for `POST`, the body (`keys` and any other option; the query string's win).
  /// `as_of` (wikilog's) answers the view as it was at a seq or an ISO-8601 time. A restricted
  /// reader (a wiki user) gets the rows of the documents they may read.
  static func viewQuery(_ r: DatabaseRequest, view: String, queries: Bool) async throws
    -> Response
  {
    let (store, query, access) = (r.store, r.query, r.access)
    let ddoc = "_design/" + r.parameters["ddoc"]!
    let method = r.method
    let allowed: [HTTPRequest.Method] = queries ? [.post] : [.get, .head, .post]
    guard allowed.contains(method) else {
      throw CouchError.methodNotAllowed(allowed.map(\.rawValue))
    }
    var filter = try Self.rowFilter(access, store)
    let partition = try Self.viewPartition(store, ddoc: ddoc, query: query)
    let server = r.server
    let limit: @Sendable (Int?) throws -> Int? = { asked in
      try server.queryLimit(asked, partitioned: partition != nil)
    }
    if let partition {
      let visible = filter
      filter = { id in Partitions.isMember(id, of: partition) && visible?(id) ?? true }
    }
    let includes = filter
    var posted: JSONValue? = nil
    if method == .post { posted = try await r.jsonBody() }
    let body = posted
    let answer = try await r.blocking {
      try Self.answer(
        store, ddoc: ddoc, view: view, queries: queries, query: query, body: body,
        includes: includes, limit: limit)
    }
    return CouchResponse.json(answer, includeBody: method != .head)
  }

  /// The partition a view query reads (`partition`, or `/{db}/_partition/{p}/...`): mandatory
  /// for a partitioned design document (a partitioned database's, unless its
  /// `options.partitioned` is false), refused for any other, as
  /// `couch_mrview_util:validate_args` answers (`400 query_parse_error`).
  static func viewPartition(_ store: DocumentStore, ddoc: String, query: QueryParameters) throws
    -> String?
  {
    let partition = query["partition"]
    guard store.isPartitioned else {
      if partition != nil {
        throw CouchError(
          "query_parse_error", "`partition` parameter is not supported in this design doc",
          status: 400)
      }
      return nil
    }
    let design = try? store.get(ddoc)
    let partitioned = design?["options"]?["partitioned"] != .bool(false)
    switch (partitioned, partition) {
    case (true, nil):
      throw CouchError(
        "query_parse_error", "`partition` parameter is mandatory for queries to this view.",
        status: 400)
    case (true, let partition?):
      do { try Partitions.validate(partition: partition) } catch { throw CouchError(error) }
      return partition
    case (false, nil): return nil
    case (false, _?):
      throw CouchError(
        "query_parse_error", "`partition` parameter is not supported in this design doc",
        status: 400)
    }
  }

  /// The rows a restricted reader may see, or nil for every row.
  static func rowFilter(_ access: DatabaseAccess, _ store: DocumentStore) throws
    -> (@Sendable (String) -> Bool)?
  {
    guard let accessView = try access.view(store) else { return nil }
    return { accessView.includes($0) }
  }

  /// The answer of a view request (on the thread pool: it reads, and may build, the index).
  static func answer(
    _ store: DocumentStore, ddoc: String, view: String, queries: Bool, query: QueryParameters,
    body: JSONValue?, includes: (@Sendable (String) -> Bool)?,
    limit: (Int?) throws -> Int? = { $0 }
  ) throws -> JSONValue {
    let results = try viewQueries(query: query, body: body, queries: queries).map { asked in
      var q = asked
      q.limit = try limit(q.limit)
      guard let asOf = q.asOf else {
        let result = try ViewQueries(store).query(
          ddoc: ddoc, view: view, query: q, includes: includes)
        if q.update == .lazy {
          // Caught up after the answer: a query of no rows, which catches the index up first.
          var catchUp = ViewQuery()
          catchUp.reduce = false
          catchUp.limit = 0
          Task.detached {
            _ = try? ViewQueries(store).query(ddoc: ddoc, view: view, query: catchUp)
          }
        }
        return store.withSequenceString(result.json)
      }
      let then: AsOfView
      if let seq = store.position(ofOwnSequence: asOf) {
        then = try store.asOf(seq)
      } else if let date = ISO8601.parse(asOf) {
        then = try store.asOf(date)
      } else {
        throw CouchError(
          "query_parse_error", "`as_of` must be a seq or an ISO-8601 time.", status: 400)
      }
      defer { then.close() }
      return store.withSequenceString(
        try then.queryView(ddoc: ddoc, view: view, query: q, includes: includes).json)
    }
    return queries
      ? .object(JSONObject([.init(key: "results", value: .array(results))])) : results[0]
  }

  /// The queries a view request asks: the query string's options, and for `POST` the body's
  /// (a single query's body first and the query string over it; each of `queries`' objects
  /// over the query string). Not async: the parsing throws typed errors.
  static func viewQueries(query: QueryParameters, body: JSONValue?, queries: Bool) throws
    -> [ViewQuery]
  {
    let fromURL = try ViewQuery(parameters: query.pairs)
    guard let body else { return [fromURL] }
    guard case .object(let object) = body else {
      throw CouchError.badRequest("Request body must be a JSON object")
    }
    if queries {
      guard case .array(let list)? = object["queries"] else {
        throw CouchError("query_parse_error", "`queries` member must be an array.", status: 400)
      }
      return try list.map { item in
        guard case .object(let one) = item else {
          throw CouchError("query_parse_error", "each query must be an object", status: 400)
        }
        var q = fromURL
        try q.apply(body: one)
        return q
      }
    }
    var q = ViewQuery()
    try q.apply(body: object)
    for (name, value) in query.pairs {
      try q.apply(body: JSONObject([.init(key: name, value: bodyValue(name, value))]))
    }
    return [q]
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
