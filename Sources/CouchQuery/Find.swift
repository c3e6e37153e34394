import CouchAPI
import Foundation
import HTTPTypes
import Hummingbird
import JSON
import Log
import Projections
import Query
import RevTree

extension QueryEndpoints {
  /// `POST /{db}/_find`: a Mango query (``FindQuery``), read on the thread pool (a query
  /// without an index scans the database). A caller whose reads are filtered finds only the
  /// documents they may read, and `execution_stats` counts only those.
  static func find(_ r: DatabaseRequest) async throws -> Response {
    let (store, access) = (r.store, r.access)
    try r.requireJSONContentType()
    let query = try FindQuery(try await r.jsonBody())
    var visible = try access.view(store)?.filter
    if let restrict = access.policy?.queryable, !access.isAdmin {
      // A system database that shows some documents otherwise than stored: a query, which
      // matches stored bodies, matches only those its policy lets it (``SystemDatabasePolicy``).
      visible = try await r.blocking { try restrict(access, store) }
    }
    if let partition = try Self.findPartition(r) {
      let outer = visible
      visible = DocumentFilter(
        name: "_partition", parameters: ["partition": partition], wakeKeys: [],
        keys: { _ in [] },
        includes: { id in Partitions.isMember(id, of: partition) && outer?.includes(id) ?? true })
    }
    let filter = visible
    let result = try await r.blocking { try MangoQueries(store).find(query, visible: filter) }
    return CouchResponse.json(result.json)
  }

  /// `POST /{db}/_explain`: the index a `_find` would use, and its range.
  /// The partition of a `_find` or `_explain` (`/{db}/_partition/{p}/_find`): only in a
  /// partitioned database.
  static func findPartition(_ r: DatabaseRequest) throws -> String? {
    guard let partition = r.query["partition"] else { return nil }
    guard r.store.isPartitioned else {
      throw CouchError.badRequest("`partition` is not supported on this database")
    }
    do { try Partitions.validate(partition: partition) } catch { throw CouchError(error) }
    return partition
  }

  static func explain(_ r: DatabaseRequest) async throws -> Response {
    _ = try Self.findPartition(r)
    try r.requireJSONContentType()
    let query = try FindQuery(try await r.jsonBody())
    return CouchResponse.json(try MangoQueries(r.store).explain(query, databaseName: r.database))
  }

  /// `GET /{db}/_index` lists the indexes (a caller whose reads are filtered sees those whose
  /// design documents they may read); `POST` creates one in its design document (database
  /// admins only, as every design document write).
  static func indexes(_ r: DatabaseRequest) async throws -> Response {
    if !r.rest.isEmpty { return try await indexPath(r) }
    let (store, access, request) = (r.store, r.access, r.request)
    switch request.method {
    case .get, .head:
      let (limit, skip) = try Self.indexListParameters(request.uri.query)
      var shown = try MangoQueries(store).indexListing()["indexes"]?.arrayValue ?? []
      if let view = try access.view(store) {
        shown = shown.filter { index in
          index["ddoc"]?.stringValue.map { view.includes($0) } ?? true
        }
      }
      let total = shown.count
      let page = shown.dropFirst(min(skip, total)).prefix(limit ?? total)
      let listing = JSONValue.object(
        JSONObject([
          .init(key: "total_rows", value: .number(JSONNumber(Int64(total)))),
          .init(key: "indexes", value: .array(Array(page))),
        ]))
      return CouchResponse.json(listing, includeBody: request.method != .head)
    case .post:
      guard access.isAdmin else { throw r.notDatabaseAdmin }
      try r.requireJSONContentType()
      let index = try MangoIndex.parseRequest(try await r.jsonBody())
      let existing = try? store.get(index.ddoc)
      let (body, exists) = try MangoQueries.designDocument(adding: index, to: existing)
      if !exists {
        _ = try await store.putAsync(
          body.serialized(), id: index.ddoc, rev: existing?["_rev"]?.stringValue,
          actor: r.actor, origin: r.origin)
      }
      return CouchResponse.json(
        .object(
          JSONObject([
            .init(key: "result", value: .string(exists ? "exists" : "created")),
            .init(key: "id", value: .string(index.ddoc)),
            .init(key: "name", value: .string(index.name)),
          ])))
    default:
      throw CouchError.methodNotAllowed(["GET", "HEAD", "POST"])
    }
  }

  /// `limit` and `skip` of `GET /{db}/_index` (parameters separated by `&` or `;`, as CouchDB
  /// reads a query string): integers, `limit` 1 or more and `skip` 0 or more, else CouchDB's
  /// 500 `invalid_list_index_params`.
  static func indexListParameters(_ query: String?) throws(CouchError) -> (Int?, Int) {
    var limit: Int?
    var skip = 0
    let invalid = CouchError(
      "invalid_list_index_params", "Index parameter ranges: limit > 1, skip > 0", status: 500)
    for pair in (query ?? "").split(whereSeparator: { $0 == "&" || $0 == ";" }) {
      let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
      guard parts.count == 2, parts[0] == "limit" || parts[0] == "skip" else { continue }
      guard let n = Int(parts[1]) else { throw invalid }
      if parts[0] == "limit" {
        guard n >= 1 else { throw invalid }
        limit = n
      } else {
        guard n >= 0 else { throw invalid }
        skip = n
      }
    }
    return (limit, skip)
  }

  /// `/{db}/_index/...`, as `mango_httpd:handle_index_req` routes it: `_bulk_delete` (POST),
  /// `{ddoc}/{type}/{name}` and `_design/{ddoc}/{type}/{name}` (DELETE; `{ddoc}` may be
  /// `_design/...` escaped as one segment); every other path is 404.
  static func indexPath(_ r: DatabaseRequest) async throws -> Response {
    if r.rest == ["_bulk_delete"] {
      try r.allow([.post])
      return try await bulkDeleteIndexes(r)
    }
    var parts = r.rest
    if parts.count == 4 && parts[0] == "_design" {
      parts = ["_design/" + parts[1], parts[2], parts[3]]
    }
    guard parts.count == 3 else { throw CouchError("not_found", "missing", status: 404) }
    try r.allow([.delete])
    guard r.access.isAdmin else { throw r.notDatabaseAdmin }
    // Only JSON indexes exist here, so any other type names none.
    guard parts[1] == "json",
      try await removeIndexes(r, ddoc: Self.designID(parts[0]), name: parts[2])
    else {
      throw CouchError("not_found", "missing", status: 404)
    }
    return CouchResponse.json(.object(JSONObject([.init(key: "ok", value: .bool(true))])))
  }

  /// `POST /{db}/_index/_bulk_delete` `{"docids": [...]}`: removes the indexes of each design
  /// document named, answering `{"success": [{"id", "ok"}], "fail": [{"id", "error"}]}` (each
  /// list latest first, as CouchDB builds them).
  static func bulkDeleteIndexes(_ r: DatabaseRequest) async throws -> Response {
    guard r.access.isAdmin else { throw r.notDatabaseAdmin }
    try r.requireJSONContentType()
    let body = try await r.jsonBody()
    guard let items = body["docids"]?.arrayValue,
      case let ids = items.compactMap(\.stringValue), ids.count == items.count
    else {
      throw CouchError(
        "invalid_bulk_docs",
        "Bulk Delete requires an array of non-null docids. Docids: \(String(decoding: (body["docids"] ?? .null).serialized(), as: UTF8.self))",
        status: 400)
    }
    var success: [JSONValue] = []
    var fail: [JSONValue] = []
    for id in ids {
      let ddoc = Self.designID(id)
      let removed = try await removeIndexes(r, ddoc: ddoc, name: nil)
      let outcome: JSONObject.Member =
        removed
        ? .init(key: "ok", value: .bool(true)) : .init(key: "error", value: .string("not_found"))
      let entry = JSONValue.object(JSONObject([.init(key: "id", value: .string(ddoc)), outcome]))
      if removed { success.insert(entry, at: 0) } else { fail.insert(entry, at: 0) }
    }
    return CouchResponse.json(
      .object(
        JSONObject([
          .init(key: "success", value: .array(success)), .init(key: "fail", value: .array(fail)),
        ])))
  }

  /// `_design/` and `id`, unless it has it (`mango_httpd:convert_to_design_id`).
  static func designID(_ id: String) -> String {
    id.hasPrefix("_design/") ? id : "_design/" + id
  }

  /// Removes the index `name` (every index, for nil) from the query design document `ddoc`,
  /// and the design document when no view is left. False when there is no such index.
  static func removeIndexes(_ r: DatabaseRequest, ddoc: String, name: String?) async throws
    -> Bool
  {
    let store = r.store
    guard let doc = try? store.get(ddoc),
      let (rev, body) = MangoQueries.designDocument(removing: name, from: doc)
    else { return false }
    if let body {
      _ = try await store.putAsync(
        body.serialized(), id: ddoc, rev: rev, actor: r.actor, origin: r.origin)
    } else {
      _ = try await store.deleteAsync(ddoc, rev: rev, actor: r.actor, origin: r.origin)
    }
    return true
  }

  /// `GET /{db}/_design/{ddoc}/_info`: the design document's view index, as CouchDB describes
  /// one. Every index here is kept in step with each write, so it is never updating or behind.
  /// Its rows live in the database's one LMDB file, so `sizes.file` is their stored size too
  /// (``DocumentStore/mangoIndexSizes(ddoc:)``).
  static func designInfo(_ store: DocumentStore, id: String) throws -> JSONValue {
    guard let doc = try? store.get(id) else {
      throw CouchError("not_found", "missing", status: 404)
    }
    // A design document of views: its view index (the Query module's views).
    if doc["language"]?.stringValue != "query" { return try ViewQueries(store).info(ddoc: id) }
    var md5 = MD5()
    md5.update((doc["views"] ?? .null).serialized())
    let (active, external) = try MangoQueries(store).indexSizes(ddoc: id)
    let sizes = JSONObject([
      .init(key: "active", value: .number(JSONNumber(Int64(active)))),
      .init(key: "external", value: .number(JSONNumber(Int64(external)))),
      .init(key: "file", value: .number(JSONNumber(Int64(active)))),
    ])
    let index = JSONObject([
      .init(key: "compact_running", value: .bool(false)),
      .init(key: "language", value: .string(doc["language"]?.stringValue ?? "javascript")),
      .init(key: "purge_seq", value: .number(0)),
      .init(key: "signature", value: .string(md5.finalize().description)),
      .init(key: "sizes", value: .object(sizes)),
      .init(
        key: "update_seq",
        value: .number(JSONNumber(Int64(clamping: try store.info.updateSeq.rawValue)))),
      .init(key: "updater_running", value: .bool(false)),
      .init(key: "waiting_clients", value: .number(0)),
      .init(key: "waiting_commit", value: .bool(false)),
    ])
    return .object(
      JSONObject([
        .init(key: "name", value: .string(String(id.dropFirst("_design/".count)))),
        .init(key: "view_index", value: .object(index)),
      ]))
  }
}

extension QueryEndpoints {
  /// `GET /{db}/_search?q=...&wiki=...&limit=&skip=&update=`: wikilog's own full-text search
  /// over the database's pages (``TextSearchProjection``), ranked by BM25. `wiki` limits it to one wiki;
  /// a caller whose reads are filtered searches only the wikis they may read, whose numbers
  /// alone rank the results.
  static func search(_ r: DatabaseRequest) async throws -> Response {
    let (store, request, query, access) = (r.store, r.request, r.query, r.access)
    guard let q = query["q"], !q.isEmpty else {
      throw CouchError.badRequest("`q` (the words to search for) is required")
    }
    var search = try SearchQuery(q)
    search.limit = min(try query.int("limit") ?? 25, 200)
    search.skip = try query.int("skip") ?? 0
    guard search.limit >= 0, search.skip >= 0 else {
      throw CouchError.badRequest("limit and skip must be 0 or more")
    }
    guard TextSearch(store).isAvailable else {
      throw CouchError.notImplemented("full-text search in a database without pages")
    }
    // The index follows the log (an `IndexFollower`): by default a search first brings it up to
    // the end, as CouchDB's `update=true`; `false` and `lazy` take it as it stands (it is
    // catching up on its own already).
    let update: Bool
    switch query["update"] {
    case nil, "true": update = true
    case "false", "lazy": update = false
    case let other?:
      throw CouchError.badRequest("Invalid value for `update`: \(other.prefix(40))")
    }
    let view = try access.view(store)
    let (wiki, asked) = (query["wiki"], search)
    let body = try await r.blocking {
      var groups = try wiki.map { [$0] } ?? TextSearch(store).groups(update: update)
      if let view { groups = groups.filter { view.includes($0) } }
      var result = try TextSearch(store).search(asked, groups: groups, update: update)
      if let view { result.hits = result.hits.filter { view.includes($0.docID) } }
      return try TextSearch(store).json(result)
    }
    return CouchResponse.json(body, includeBody: request.method != .head)
  }
}
