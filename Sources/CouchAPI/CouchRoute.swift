import Formats

/// Where a request goes, from its raw (still percent-encoded) path.
///
/// Each `/`-separated segment is percent-decoded on its own, so `%2F` inside a segment is part of
/// a name (`/wiki/w1%3AHome%2FSub` is document `w1:Home/Sub`), while a raw `/` separates
/// segments. A trailing `/` is ignored (`/wiki/` is `/wiki`). `_design/name` is a document id
/// over two segments, as in CouchDB.
///
/// Every endpoint of CouchDB 3.4 that wikilog does not serve has a route of its own that answers
/// honestly (``unserved(_:)``, ``databaseUnserved(_:_:)``): `501 not_implemented` naming the
/// feature, or CouchDB's own answer where that is the honest one (`410 gone` for `_temp_view`,
/// `404` for `/favicon.ico`), so that no such path is mistaken for a database or a document.
indirect enum CouchRoute: Equatable, Sendable {
  case root
  /// `/_session`: sign-in.
  case session
  case allDatabases
  /// `GET /_dbs_info`, `POST /_dbs_info` with `{"keys": [...]}`.
  case databasesInfo
  case up
  case uuids
  /// `GET /_membership`: this one node.
  case membership
  /// `/_active_tasks`: the index builds, and what the features list (the replications).
  case activeTasks
  /// An endpoint at the root a feature contributes (``CouchFeature/Instance/serverEndpoints``:
  /// the replicator's `/_replicate` and `/_scheduler/...`), by its index in the server's list,
  /// with what its pattern matched.
  case serverFeature(endpoint: Int, parameters: [String: String], rest: [String])
  /// `GET /_node/{node}`: the node's name.
  case node(String)
  /// `/_node/{node}/_stats` and below it (`path`: the segments after `_stats`).
  case nodeStats(node: String, path: [String])
  /// `GET /_node/{node}/_prometheus`: the statistics in Prometheus's text format.
  case prometheus(node: String)
  /// `/_node/{node}/_config[/{section}[/{key}]]` (`path`: the segments after `_config`).
  case config(node: String, path: [String])
  /// `GET /_node/{node}/_versions`: the versions of the server's parts.
  case versions(node: String)
  case database(String)
  /// A database endpoint such as `_all_docs` or `_changes`.
  case databaseEndpoint(String, DatabaseEndpoint)
  case local(db: String, id: String)
  case document(db: String, id: String)
  /// `/{db}/{docid}/{attachment}`: the name is every segment after the id, joined with `/`.
  case attachment(db: String, id: String, name: String)
  /// `GET /{db}/_partition/{partition}`: a partition's counts and size.
  case partitionInfo(db: String, partition: String)
  /// `/{db}/_partition/{partition}/{rest}`: the route of `/{db}/{rest}` (`segments`) read within
  /// the partition, as `chttpd_db:handle_partition_req` answers it (`_all_docs`, `_find`,
  /// `_explain`, `_index` and a design document's functions; anything else `404`).
  case partitioned(db: String, partition: String, segments: [String], inner: CouchRoute)
  /// An endpoint a feature contributes (``CouchFeature/databaseEndpoints``), by its index in
  /// the server's list, with what its pattern matched.
  case feature(db: String, endpoint: Int, parameters: [String: String], rest: [String])
  /// `/{db}/_log/head` and `/{db}/_log/proof`: the log's signed tree head and its proofs
  /// (wikilog's own, not CouchDB's).
  case log(db: String, LogEndpoint)
  /// `/_global_changes` and below: CouchDB's system database of database updates, which a
  /// single node does not have: `404` (a `PUT` of it `412 file_exists`, as CouchDB 3.4
  /// answers).
  case globalChanges
  /// A CouchDB endpoint wikilog does not serve, or a path that is wrong in itself: answered
  /// with this error, whatever the method.
  case unserved(CouchError)
  /// The same below an existing database: the database is opened first (`404` when it does
  /// not exist), then this error answers.
  case databaseUnserved(String, CouchError)

  /// The server's own endpoints (not a database's), as keys of
  /// ``CouchServer/serverEndpoints``.
  enum ServerEndpoint: Sendable, CaseIterable {
    case root, session, allDatabases, databasesInfo, up, uuids, activeTasks
    case node, nodeStats, membership, prometheus, config, versions
  }

  /// The server endpoint this route is, nil for a database's route.
  var serverEndpoint: ServerEndpoint? {
    switch self {
    case .root: .root
    case .session: .session
    case .allDatabases: .allDatabases
    case .databasesInfo: .databasesInfo
    case .up: .up
    case .uuids: .uuids
    case .activeTasks: .activeTasks
    case .node: .node
    case .nodeStats: .nodeStats
    case .prometheus: .prometheus
    case .membership: .membership
    case .config: .config
    case .versions: .versions
    default: nil
    }
  }

  enum DatabaseEndpoint: String, Sendable, CaseIterable {
    case allDocs = "_all_docs"
    case designDocs = "_design_docs"
    case localDocs = "_local_docs"
    case allDocsQueries = "_all_docs/queries"
    case designDocsQueries = "_design_docs/queries"
    case localDocsQueries = "_local_docs/queries"
    case bulkDocs = "_bulk_docs"
    case bulkGet = "_bulk_get"
    case revsDiff = "_revs_diff"
    case missingRevs = "_missing_revs"
    case changes = "_changes"
    case ensureFullCommit = "_ensure_full_commit"
    case revsLimit = "_revs_limit"
    case compact = "_compact"
    case security = "_security"
    case purge = "_purge"
    case purgedInfos = "_purged_infos"
    case purgedInfosLimit = "_purged_infos_limit"
    case redact = "_redact"
  }

  enum LogEndpoint: String, Sendable, CaseIterable {
    case head, proof
  }

  /// The database the route names, if any.
  var database: String? {
    switch self {
    case .database(let db), .databaseEndpoint(let db, _), .local(let db, _), .document(let db, _),
      .attachment(let db, _, _), .databaseUnserved(let db, _),
      .log(let db, _), .feature(let db, _, _, _), .partitionInfo(let db, _),
      .partitioned(let db, _, _, _):
      return db
    default:
      return nil
    }
  }

  /// Parses a path such as `/wiki/_local/abc%2Fdef`; the paths below a database that one of
  /// `endpoints` matches, and the paths from the root one of `serverEndpoints` matches (the
  /// server's features'), are theirs, before any built-in route.
  static func parse(
    _ path: String, endpoints: [CouchAPI.DatabaseEndpoint] = [],
    serverEndpoints: [CouchAPI.ServerEndpoint] = [], plusIsSpace: Bool = false
  ) throws(CouchError) -> CouchRoute {
    var segments: [String] = []
    for raw in path.split(separator: "/", omittingEmptySubsequences: true) {
      segments.append(try PercentDecoding.decoded(raw, plusIsSpace: plusIsSpace))
    }
    return parse(segments: segments, endpoints: endpoints, serverEndpoints: serverEndpoints)
  }

  /// ``parse(_:endpoints:serverEndpoints:)`` of the percent-decoded segments.
  static func parse(
    segments: [String], endpoints: [CouchAPI.DatabaseEndpoint],
    serverEndpoints: [CouchAPI.ServerEndpoint] = []
  ) -> CouchRoute {
    guard let first = segments.first else { return .root }
    let rest = Array(segments.dropFirst())
    if first.hasPrefix("_") {
      for (index, endpoint) in serverEndpoints.enumerated() {
        if let (parameters, remaining) = endpoint.match(segments) {
          return .serverFeature(endpoint: index, parameters: parameters, rest: remaining)
        }
      }
      // A feature's path with segments none of its patterns takes.
      if serverEndpoints.contains(where: { $0.path.first == .literal(first) }) {
        return .unserved(.notFound())
      }
    }
    if let route = serverRoute(first, rest) { return route }
    let db = first
    guard let head = rest.first else { return .database(db) }
    for (index, endpoint) in endpoints.enumerated() {
      if let (parameters, remaining) = endpoint.match(rest[...]) {
        return .feature(db: db, endpoint: index, parameters: parameters, rest: remaining)
      }
    }
    if head == "_partition" {
      switch rest.count {
      case 1: return .databaseUnserved(db, .badRequest("invalid_partition_req"))
      case 2: return .partitionInfo(db: db, partition: rest[1])
      default:
        let inner = Array(rest[2...])
        return .partitioned(
          db: db, partition: rest[1], segments: inner,
          inner: parse(segments: [db] + inner, endpoints: endpoints))
      }
    }
    if let error = unservedDatabasePath(db: db, rest) { return .databaseUnserved(db, error) }
    switch head {
    case "_local":
      if rest.count == 2 { return .local(db: db, id: rest[1]) }
      if rest.count == 1 { return .unserved(.badRequest("Invalid _local document id.")) }
      return .unserved(.badRequest("_local documents do not accept attachments."))
    case "_log":
      if rest.count == 2, let endpoint = LogEndpoint(rawValue: rest[1]) {
        return .log(db: db, endpoint)
      }
      return .unserved(.notFound())
    case "_design":
      if rest.count == 2 { return .document(db: db, id: "_design/" + rest[1]) }
      if rest.count > 2 {
        return .attachment(
          db: db, id: "_design/" + rest[1], name: rest[2...].joined(separator: "/"))
      }
      return .unserved(.badRequest("_design requires a document id"))
    default:
      if let endpoint = DatabaseEndpoint(rawValue: head) {
        if rest.count == 1 { return .databaseEndpoint(db, endpoint) }
        // `_all_docs/queries`, `_design_docs/queries`, `_local_docs/queries`.
        if rest.count == 2, let queries = DatabaseEndpoint(rawValue: head + "/" + rest[1]) {
          return .databaseEndpoint(db, queries)
        }
        return .unserved(.notFound())
      }
      // `_local%2Fid` names the local document, as the `_local/id` path does in CouchDB.
      if head.hasPrefix("_local/"), head.count > 7 {
        if rest.count == 1 { return .local(db: db, id: String(head.dropFirst(7))) }
        return .unserved(.badRequest("_local documents do not accept attachments."))
      }
      if rest.count == 1 { return .document(db: db, id: head) }
      return .attachment(db: db, id: head, name: rest[1...].joined(separator: "/"))
    }
  }

  /// The routes of the server's own endpoints (`/_...`, `/favicon.ico`), or nil for a database.
  static func serverRoute(_ first: String, _ rest: [String]) -> CouchRoute? {
    func only(_ route: CouchRoute) -> CouchRoute { rest.isEmpty ? route : .unserved(.notFound()) }
    switch first {
    case "_all_dbs": return only(.allDatabases)
    case "_session": return only(.session)
    case "_users", "_replicator": return nil  // a database (when the data directory has it)
    case "_dbs_info": return only(.databasesInfo)
    case "_up": return only(.up)
    case "_membership": return only(.membership)
    case "_active_tasks": return only(.activeTasks)
    case "_uuids": return only(.uuids)
    case "_node": return nodeRoute(rest)
    case "_global_changes": return .globalChanges
    case "favicon.ico": return .unserved(.notFound("wikilog serves no favicon.ico"))
    default:
      guard let feature = unservedServerFeatures[first] else { return nil }
      return .unserved(.notImplemented(feature))
    }
  }

  /// The server endpoints of CouchDB 3.4 that wikilog does not serve, by first segment, with
  /// the feature each belongs to. (wikilog serves `_users` and `_replicator` as databases.)
  static let unservedServerFeatures: [String: String] = [
    "_cluster_setup": "cluster setup (/_cluster_setup)",
    "_db_updates": "the feed of database updates (/_db_updates)",
    "_nouveau_analyze": "full-text search (/_nouveau_analyze)",
    "_reload_query_servers": "query servers (/_reload_query_servers)",
    "_replicate": "replication on this server (/_replicate: it has no replicator feature)",
    "_reshard": "resharding (/_reshard)",
    "_scheduler": "the replication scheduler (/_scheduler: it has no replicator feature)",
    "_search_analyze": "full-text search (/_search_analyze)",
    "_utils": "Fauxton, the web interface at /_utils,",
  ]

  /// `/_node`, `/_node/{node}`, `/_node/{node}/_stats/...` and the node endpoints not served.
  static func nodeRoute(_ rest: [String]) -> CouchRoute {
    guard let node = rest.first else {
      return .unserved(.badRequest("Incomplete path to _node request"))
    }
    guard rest.count >= 2 else { return .node(node) }
    let endpoint = rest[1]
    if endpoint == "_stats" { return .nodeStats(node: node, path: Array(rest.dropFirst(2))) }
    if endpoint == "_prometheus", rest.count == 2 { return .prometheus(node: node) }
    if endpoint == "_config" { return .config(node: node, path: Array(rest.dropFirst(2))) }
    if endpoint == "_versions", rest.count == 2 { return .versions(node: node) }
    let feature =
      switch endpoint {
      case "_system": "system statistics"
      case "_restart": "restarting the server"
      case "_smoosh": "automatic compaction (smoosh)"
      default: "the node-local interface"
      }
    return .unserved(.notImplemented("\(feature) (/_node/{node}/\(endpoint))"))
  }

  /// The error for a path below database `db` that names a CouchDB feature wikilog does not
  /// serve, or nil.
  static func unservedDatabasePath(db: String, _ rest: [String]) -> CouchError? {
    let head = rest[0]
    let path = "/{db}/" + head
    switch head {
    case "_shards", "_sync_shards":
      return .notImplemented("shards (\(path))")
    case "_temp_view":
      return CouchError("gone", "Temporary views are not supported in CouchDB", status: 410)
    case "_search_cleanup", "_nouveau_cleanup":
      return .notImplemented("full-text search (\(path))")
    case "_design" where rest.count > 2 && rest[2].hasPrefix("_"):
      let action = rest[2]
      let feature =
        switch action {
        case "_search", "_search_info", "_search_disk_size", "_nouveau", "_nouveau_info":
          "full-text search"
        case "_view", "_show", "_list", "_update", "_info", "_rewrite":
          "views and design functions on this server (it has no Query feature)"
        default: "design document functions"
        }
      return .notImplemented("\(feature) (/{db}/_design/{ddoc}/\(action))")
    default:
      return nil
    }
  }
}
