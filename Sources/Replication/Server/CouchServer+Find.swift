import Foundation
import HTTPTypes
import Hummingbird
import JSON
import Projections

extension CouchServer {
  /// `POST /{db}/_find`: a Mango query (``FindQuery``), read on the thread pool (a query
  /// without an index scans the database). A caller whose reads are filtered finds only the
  /// documents they may read, and `execution_stats` counts only those.
  func find(_ store: DocumentStore, request: Request, access: DatabaseAccess) async throws
    -> Response
  {
    try Self.requireJSONContentType(request)
    let query = try FindQuery(try await jsonBody(of: request))
    var visible = try access.view(store)?.filter
    if access.name == ReplicatorDocuments.databaseName && !access.isAdmin {
      visible = try await blocking { try Self.ownDocuments(store, access: access) }
    }
    let filter = visible
    let result = try await blocking { try store.find(query, visible: filter) }
    return CouchResponse.json(result.json)
  }

  /// What a user who is not a database admin of `_replicator` finds with `_find`: their own
  /// documents (and design documents). CouchDB shows others' documents without credentials,
  /// matched after stripping; wikilog's `_find` matches stored bodies, so a selector over
  /// another user's `source` would reveal its password one guess at a time: others' documents
  /// are left out instead.
  static func ownDocuments(_ store: DocumentStore, access: DatabaseAccess) throws -> DocumentFilter
  {
    var options = AllDocsOptions()
    options.includeDocs = true
    var own = Set<String>()
    for row in try store.allDocs(options).rows {
      guard let id = row["id"]?.stringValue else { continue }
      if id.hasPrefix("_design/")
        || (access.user.name != nil && row["doc"]?["owner"]?.stringValue == access.user.name)
      {
        own.insert(id)
      }
    }
    let ids = own
    return DocumentFilter(
      name: "_replicator_owner", parameters: ["owner": access.user.name ?? ""], wakeKeys: [],
      keys: { _ in [] }, includes: { ids.contains($0) })
  }

  /// `POST /{db}/_explain`: the index a `_find` would use, and its range.
  func explain(_ store: DocumentStore, db: String, request: Request) async throws -> Response {
    try Self.requireJSONContentType(request)
    let query = try FindQuery(try await jsonBody(of: request))
    return CouchResponse.json(try store.explain(query, databaseName: db))
  }

  /// `GET /{db}/_index` lists the indexes (a caller whose reads are filtered sees those whose
  /// design documents they may read); `POST` creates one in its design document (database
  /// admins only, as every design document write).
  func indexes(
    _ store: DocumentStore, request: Request, context: Context, caller: Caller,
    access: DatabaseAccess
  ) async throws -> Response {
    switch request.method {
    case .get, .head:
      var listing = try store.indexListing()
      if let view = try access.view(store), var object = listing.objectValue,
        let all = object["indexes"]?.arrayValue
      {
        let shown = all.filter { index in
          index["ddoc"]?.stringValue.map { view.includes($0) } ?? true
        }
        object["indexes"] = .array(shown)
        object["total_rows"] = .number(JSONNumber(Int64(shown.count)))
        listing = .object(object)
      }
      return CouchResponse.json(listing, includeBody: request.method != .head)
    case .post:
      guard access.isAdmin else { throw Self.notDatabaseAdmin(caller.user) }
      try Self.requireJSONContentType(request)
      let index = try MangoIndex.parseRequest(try await jsonBody(of: request))
      let existing = try? store.get(index.ddoc)
      let (body, exists) = DocumentStore.designDocument(adding: index, to: existing)
      if !exists {
        _ = try await store.putAsync(
          body.serialized(), id: index.ddoc, rev: existing?["_rev"]?.stringValue,
          actor: caller.actor, origin: replicationOrigin(context))
      }
      return CouchResponse.json(
        .object(
          JSONObject([
            .init(key: "result", value: .string(exists ? "exists" : "created")),
            .init(key: "id", value: .string(index.ddoc)),
            .init(key: "name", value: .string(index.name)),
          ])))
    default:
      throw ReplicationError.methodNotAllowed(["GET", "HEAD", "POST"])
    }
  }

  /// `DELETE /{db}/_index/{ddoc}/json/{name}` (`{ddoc}` with or without `_design/`): removes
  /// the index from its design document, and the design document when it was the last view.
  func deleteIndex(
    _ store: DocumentStore, path: [String], context: Context, caller: Caller,
    access: DatabaseAccess
  ) async throws -> Response {
    guard access.isAdmin else { throw Self.notDatabaseAdmin(caller.user) }
    var parts = path
    if parts.first == "_design" { parts.removeFirst() }
    guard parts.count == 3, parts[1] == "json" else {
      throw ReplicationError.badRequest("Index path must be {ddoc}/json/{name}")
    }
    let ddoc = "_design/" + parts[0]
    let name = parts[2]
    guard let doc = try? store.get(ddoc), doc["language"]?.stringValue == "query",
      var object = doc.objectValue, var views = object["views"]?.objectValue,
      views[name] != nil, let rev = doc["_rev"]?.stringValue
    else {
      throw ReplicationError("not_found", "Index not found", status: 404)
    }
    views.members.removeAll { $0.key == name }
    let origin = replicationOrigin(context)
    if views.members.isEmpty {
      _ = try await store.deleteAsync(ddoc, rev: rev, actor: caller.actor, origin: origin)
    } else {
      object["views"] = .object(views)
      _ = try await store.putAsync(
        JSONValue.object(object).serialized(), id: ddoc, rev: rev, actor: caller.actor,
        origin: origin)
    }
    return CouchResponse.json(.object(JSONObject([.init(key: "ok", value: .bool(true))])))
  }
}

extension CouchServer {
  /// `GET /{db}/_search?q=...&wiki=...&limit=&skip=`: wikilog's own full-text search over the
  /// database's pages (``TextSearchProjection``), ranked by BM25. `wiki` limits it to one wiki;
  /// a caller whose reads are filtered searches only the wikis they may read, whose numbers
  /// alone rank the results.
  func search(
    _ store: DocumentStore, request: Request, query: QueryParameters, access: DatabaseAccess
  ) async throws -> Response {
    guard let q = query["q"], !q.isEmpty else {
      throw ReplicationError.badRequest("`q` (the words to search for) is required")
    }
    var search = try SearchQuery(q)
    search.limit = min(try query.int("limit") ?? 25, 200)
    search.skip = try query.int("skip") ?? 0
    guard search.limit >= 0, search.skip >= 0 else {
      throw ReplicationError.badRequest("limit and skip must be 0 or more")
    }
    guard store.hasTextSearch else {
      throw ReplicationError.notImplemented("full-text search in a database without pages")
    }
    var groups = try query["wiki"].map { [$0] } ?? store.searchGroups()
    let view = try access.view(store)
    if let view { groups = groups.filter { view.includes($0) } }
    let (chosen, asked) = (groups, search)
    let body = try await blocking {
      var result = try store.search(asked, groups: chosen)
      if let view { result.hits = result.hits.filter { view.includes($0.docID) } }
      return try store.searchJSON(result)
    }
    return CouchResponse.json(body, includeBody: request.method != .head)
  }
}

extension CouchServer {
  /// `GET /_active_tasks` (server admins): the Mango index builds under way, in CouchDB's
  /// shape for an `indexer` task.
  static func activeTasks() -> JSONValue {
    .array(
      MangoProjection.builds.running.map { task in
        let n = { (i: Int) in JSONValue.number(JSONNumber(Int64(i))) }
        return .object(
          JSONObject([
            .init(key: "type", value: .string("indexer")),
            .init(key: "node", value: .string("nonode@nohost")),
            .init(key: "pid", value: .string("<0.\(task.id).0>")),
            .init(key: "database", value: .string(task.database)),
            .init(key: "design_document", value: .string(task.ddoc)),
            .init(key: "index", value: .string(task.name)),
            .init(key: "changes_done", value: n(task.done)),
            .init(key: "total_changes", value: n(task.total)),
            .init(key: "progress", value: n(task.total == 0 ? 100 : task.done * 100 / task.total)),
            .init(key: "started_on", value: .number(JSONNumber(task.started))),
            .init(
              key: "updated_on", value: .number(JSONNumber(Int64(Date().timeIntervalSince1970)))),
          ]))
      })
  }
}
