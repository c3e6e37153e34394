public import CouchAPI
import HTTPTypes
import Hummingbird
import JSON
import Projections
import Query

extension CouchFeature {
  /// Mango, views, full-text search and design functions over CouchDB's HTTP API, on the Query
  /// module's indexes:
  /// - `POST /{db}/_find`, `POST /{db}/_explain`, `/{db}/_index[/...]`;
  /// - `GET /{db}/_search` (wikilog's full-text search over pages);
  /// - `/{db}/_design/{ddoc}/_view/{view}[/queries]`, `/{db}/_design/{ddoc}/_info`,
  ///   `POST /{db}/_compact/{ddoc}`, `POST /{db}/_view_cleanup`;
  /// - `/{db}/_design/{ddoc}/_show|_list|_update/{function}/...`;
  /// - `/{db}/_design/{ddoc}/_rewrite/...`: the design document's `rewrites` (``Rewrites``);
  /// - the `_changes` filters `filter=ddoc/name` and `filter=_view`;
  /// - design documents' `validate_doc_update` on every write, and their functions compiled
  ///   when saved (``DesignFunctions``), unless the data directory was given other checks.
  public static let query = CouchFeature(
    name: "query",
    databaseEndpoints: [
      DatabaseEndpoint(["_find"], methods: [.post]) { r in try await QueryEndpoints.find(r) },
      DatabaseEndpoint(["_explain"], methods: [.post], role: .member) { r in
        // It names the indexes and their fields, which live in design documents: for those
        // who may read them (the security object's members), as `GET _index` lists them.
        try await QueryEndpoints.explain(r)
      },
      DatabaseEndpoint(["_index", .rest]) { r in try await QueryEndpoints.indexes(r) },
      DatabaseEndpoint(["_search"], methods: [.get, .head]) { r in
        try await QueryEndpoints.search(r)
      },
      DatabaseEndpoint(["_view_cleanup"], methods: [.post], role: .databaseAdmin) { r in
        try await r.blocking { try ViewQueries(r.store).cleanup() }
        return CouchResponse.json(.object(JSONObject(["ok": .bool(true)])), status: .accepted)
      },
      DatabaseEndpoint(
        ["_compact", .parameter("ddoc")], methods: [.post], role: .databaseAdmin,
        adminOnlyOnUsers: false
      ) { r in
        try r.requireJSONContentType()
        let ddoc = "_design/" + r.parameters["ddoc"]!
        try await r.blocking { try ViewQueries(r.store).compact(ddoc: ddoc) }
        return CouchResponse.json(.object(JSONObject(["ok": .bool(true)])), status: .accepted)
      },
      DatabaseEndpoint(
        ["_design", .parameter("ddoc"), "_info"], methods: [.get, .head], adminOnlyOnUsers: false
      ) { r in
        let id = "_design/" + r.parameters["ddoc"]!
        try r.access.checkRead(id, in: r.store)
        let info = try await r.blocking { try QueryEndpoints.designInfo(r.store, id: id) }
        return CouchResponse.json(info, includeBody: r.method != .head)
      },
      DatabaseEndpoint(["_design", .parameter("ddoc"), "_view", .rest], adminOnlyOnUsers: false) {
        r in
        switch r.rest.count {
        case 1: return try await QueryEndpoints.viewQuery(r, view: r.rest[0], queries: false)
        case 2 where r.rest[1] == "queries":
          return try await QueryEndpoints.viewQuery(r, view: r.rest[0], queries: true)
        default: throw CouchError.notFound()
        }
      },
    ]
      // A function's path without its name: CouchDB's 404s (`couch_mrview_show`).
      + [
        ("_show", "show_error", "Invalid path."), ("_list", "list_error", "Bad path."),
        ("_update", "update_error", "Invalid path."),
      ].map { kind, error, reason in
        DatabaseEndpoint(
          ["_design", .parameter("ddoc"), .literal(kind)], adminOnlyOnUsers: false
        ) { _ in throw CouchError(error, reason, status: 404) }
      }
      + [
        DatabaseEndpoint(
          ["_design", .parameter("ddoc"), "_rewrite", .rest], adminOnlyOnUsers: false
        ) { r in try await Rewrites.rewrite(r) }
      ]
      + ["_show", "_list", "_update"].map { kind in
        DatabaseEndpoint(
          ["_design", .parameter("ddoc"), .literal(kind), .parameter("function"), .rest],
          adminOnlyOnUsers: false
        ) { r in try await QueryEndpoints.designFunction(r, kind: kind) }
      },
    changesFilter: { asked in try QueryEndpoints.changesFilter(asked) },
    prepare: { data in
      if data.updateValidator == nil { data.useUpdateValidator(DesignFunctions()) }
    },
    perServer: { _ in
      // The engine of `javascript` design functions: wikilog's own query server, or the
      // command `COUCHDB_QUERY_SERVER_JAVASCRIPT` names (which says nothing of itself).
      let own = QueryServerCommand.forLanguage("javascript")?.mapsBatches == true
      var engine = JSONObject(["name": .string(own ? "spidermonkey" : "external")])
      if own { engine["version"] = .string(QueryServerCommand.spiderMonkeyVersion) }
      return CouchFeature.Instance(versions: ["javascript_engine": .object(engine)])
    })
}

/// The handlers of ``CouchAPI/CouchFeature/query``.
enum QueryEndpoints {}

extension CouchServerOptions {
  /// The default options with ``CouchAPI/CouchFeature/query``: the API `wikilog serve`
  /// answers.
  public static var withQuery: CouchServerOptions {
    var options = CouchServerOptions()
    options.features = [.query]
    return options
  }
}
