/// Where a request goes, from its raw (still percent-encoded) path.
///
/// Each `/`-separated segment is percent-decoded on its own, so `%2F` inside a segment is part of
/// a name (`/wiki/w1%3AHome%2FSub` is document `w1:Home/Sub`), while a raw `/` separates
/// segments. A trailing `/` is ignored (`/wiki/` is `/wiki`). `_design/name` is a document id
/// over two segments, as in CouchDB.
enum CouchRoute: Equatable, Sendable {
  case root
  case allDatabases
  case up
  case uuids
  /// `/_node/{node}/_stats` and below it (`path`: the segments after `_stats`).
  case nodeStats(node: String, path: [String])
  case database(String)
  /// A database endpoint such as `_all_docs` or `_changes`.
  case databaseEndpoint(String, DatabaseEndpoint)
  case local(db: String, id: String)
  case document(db: String, id: String)
  /// `/{db}/{docid}/{attachment}`, `/{db}/_design/{name}/_view/...` and the like.
  case unsupported(String)

  enum DatabaseEndpoint: String, Sendable, CaseIterable {
    case allDocs = "_all_docs"
    case bulkDocs = "_bulk_docs"
    case bulkGet = "_bulk_get"
    case revsDiff = "_revs_diff"
    case changes = "_changes"
    case ensureFullCommit = "_ensure_full_commit"
    case revsLimit = "_revs_limit"
    case compact = "_compact"
  }

  /// Parses a path such as `/wiki/_local/abc%2Fdef`.
  static func parse(_ path: String) throws(ReplicationError) -> CouchRoute {
    var segments: [String] = []
    for raw in path.split(separator: "/", omittingEmptySubsequences: true) {
      segments.append(try PercentDecoding.decode(raw))
    }
    guard let first = segments.first else { return .root }
    let rest = Array(segments.dropFirst())
    if rest.isEmpty {
      switch first {
      case "_all_dbs": return .allDatabases
      case "_up": return .up
      case "_uuids": return .uuids
      default: return .database(first)
      }
    }
    if first == "_node" {
      if rest.count >= 2 && rest[1] == "_stats" {
        return .nodeStats(node: rest[0], path: Array(rest.dropFirst(2)))
      }
      return .unsupported("only /_node/{node}/_stats is supported by wikilog")
    }
    let db = first
    let head = rest[0]
    switch head {
    case "_local":
      if rest.count == 2 { return .local(db: db, id: rest[1]) }
      if rest.count == 1 { return .unsupported("_local requires a document id") }
      return .unsupported("_local documents do not accept attachments")
    case "_design":
      if rest.count == 2 { return .document(db: db, id: "_design/" + rest[1]) }
      if rest.count == 1 { return .unsupported("_design requires a document id") }
      return .unsupported("views, shows, lists and attachments are not supported by wikilog")
    default:
      if rest.count == 1 {
        if let endpoint = DatabaseEndpoint(rawValue: head) {
          return .databaseEndpoint(db, endpoint)
        }
        return .document(db: db, id: head)
      }
      return .unsupported("attachments are not supported by wikilog")
    }
  }
}
