import CouchAPI
import Hummingbird
import JSON
import Log
import Projections
import Query

extension QueryEndpoints {
  /// The `_changes` filters of design documents: `filter=_view` (a view's map function: the
  /// documents it emits any row for; `view=ddoc/name`) and `filter=ddoc/name` (a JavaScript
  /// filter function); nil for another name.
  static func changesFilter(_ asked: ChangesFilterRequest) throws -> DocumentBodyFilter? {
    let name = asked.name
    if name == "_view" {
      guard let view = asked.value("view"), let slash = view.firstIndex(of: "/") else {
        throw CouchError.badRequest("`view` filter parameter is not provided.")
      }
      return try designFilter(
        asked.store, ddoc: "_design/" + view[..<slash],
        path: ["views", String(view[view.index(after: slash)...])],
        request: asked.request, query: asked.query, body: asked.body)
    }
    guard let slash = name.firstIndex(of: "/") else { return nil }
    return try designFilter(
      asked.store, ddoc: "_design/" + name[..<slash],
      path: ["filters", String(name[name.index(after: slash)...])], request: asked.request,
      query: asked.query, body: asked.body)
  }

  /// The filter of design document `ddoc`'s function at `path` (`["filters", name]`, or
  /// `["views", name]` for `filter=_view`), run by the query server on each change's document
  /// with CouchDB's request object (`query`, `method`, `body`, `userCtx`); a design document or
  /// function that is missing is CouchDB's 404.
  static func designFilter(
    _ store: DocumentStore, ddoc: String, path: [String], request: Request,
    query: QueryParameters, body: JSONObject?
  ) throws -> DocumentBodyFilter {
    let doc: JSONValue
    do {
      doc = try store.get(ddoc)
    } catch {
      throw CouchError("not_found", "missing", status: 404)
    }
    let function: JSONValue? =
      path[0] == "views"
      ? doc["views"]?.objectValue?[path[1]]?.objectValue?["map"]
      : doc["filters"]?.objectValue?[path[1]]
    guard function?.stringValue != nil else {
      throw CouchError(
        "not_found", path[0] == "views" ? "missing_named_view" : "missing json key: \(path[1])",
        status: 404)
    }
    let rev = doc["_rev"]?.stringValue ?? ""
    let language = doc["language"]?.stringValue ?? "javascript"
    var queryObject = JSONObject()
    for (name, value) in query.pairs { queryObject[name] = .string(value) }
    let user = WriteAccess.user
    let req: JSONValue = .object(
      JSONObject([
        .init(key: "method", value: .string(request.method.rawValue)),
        .init(key: "query", value: .object(queryObject)),
        .init(key: "body", value: body.map { .object($0) } ?? .string("undefined")),
        .init(
          key: "userCtx",
          value: .object(
            JSONObject([
              .init(key: "name", value: user?.name.map(JSONValue.string) ?? .null),
              .init(key: "roles", value: .array((user?.roles ?? []).map(JSONValue.string))),
            ]))),
      ]))
    let id = ddoc
    let scope = store.log.path
    let servers = store.state.queryServers
    return DocumentBodyFilter(name: "\(ddoc)/\(path.joined(separator: "/")) \(query.pairs)") {
      document in
      do {
        let answer = try servers.with(language: language) {
          server throws(QueryServerError) in
          try server.callDesignFunction(
            ddoc: doc, id: id, rev: rev, scope: scope, path: path,
            arguments: path[0] == "views" ? [.array([document])] : [.array([document]), req])
        }
        guard case .array(let items) = answer, items.count == 2, case .array(let passes) = items[1]
        else { return false }
        return passes.first == .bool(true)
      } catch let error as QueryServerError {
        let (name, reason) = error.couchError
        throw StoreError(name, reason, code: .internalError)
      }
    }
  }

}
