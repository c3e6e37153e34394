import Hummingbird
import JSON
import Log
import Projections
import RevTree

#if canImport(FoundationEssentials)
  import FoundationEssentials
#else
  import Foundation
#endif

extension CouchServer {
  /// The name of this node, which `{node}` in `/_node/{node}/...` must be (or `_local`) (``CouchServerOptions/nodeName``).
  var nodeName: String { options.nodeName }

  /// `node`'s name if it is this node (`_local` or ``nodeName``); `404` otherwise.
  func checkedNodeName(_ node: String) throws(CouchError) -> String {
    guard node == "_local" || node == nodeName else {
      throw CouchError("not_found", "no node named \(node)", status: 404)
    }
    return nodeName
  }

  /// `GET /_node/{node}/_stats[/group[/metric]]`: CouchDB's statistics shape (each metric
  /// `{"value", "type", "desc"}`), for what this process has written through the databases it
  /// has open. `{node}` is `_local` or `nonode@nohost`, the name a single CouchDB node has.
  ///
  /// Besides CouchDB's `couchdb.database_writes`, the `wikilog` group shows group commit at work:
  /// `commits` counts write transactions and `grouped_writes` the writes that went through the
  /// writer queue, so `grouped_writes / group_commits` is the mean group size.
  func nodeStats(node: String, path: [String], head: Bool) throws -> Response {
    _ = try checkedNodeName(node)
    let (open, total) = openStatistics()
    let feeds = hubs.counts
    func gauge(_ value: Int, _ desc: String) -> JSONValue {
      .object(
        JSONObject(["value": .int(value), "type": .string("gauge"), "desc": .string(desc)]))
    }
    func counter(_ value: Int, _ desc: String) -> JSONValue {
      .object(
        JSONObject([
          "value": .int(value), "type": .string("counter"), "desc": .string(desc),
        ]))
    }
    var stats: JSONValue = .object(
      JSONObject([
        "couchdb": .object(
          JSONObject([
            "database_writes": counter(
              total.appendedEvents, "number of times a database was changed")
          ])),
        "wikilog": .object(
          JSONObject([
            "commits": counter(total.commits, "write transactions committed"),
            "appended_events": counter(total.appendedEvents, "events appended to the logs"),
            "group_commits": counter(
              total.groups, "groups of queued writes the writer took, one transaction each"),
            "grouped_writes": counter(
              total.groupedWrites, "writes that went through the writer queue"),
            "open_databases": gauge(open.count, "databases open in this process"),
            "waiting_feeds": gauge(
              feeds.waiting, "longpoll, continuous and eventsource feeds waiting for a change"),
            "feed_followers": gauge(
              feeds.following, "databases whose log a task follows for the waiting feeds"),
          ])),
      ]))
    for segment in path {
      guard let next = stats.objectValue?[segment] else {
        throw CouchError(
          "not_found", "no statistic at \(path.joined(separator: "/"))", status: 404)
      }
      stats = next
    }
    return CouchResponse.json(stats, includeBody: !head)
  }

  /// The databases open now and their logs' statistics added up.
  func openStatistics() -> (
    open: [(name: String, store: DocumentStore)], total: EventLog.Statistics
  ) {
    let open = dataDirectory.openStores()
    var total = EventLog.Statistics()
    for (_, store) in open {
      let s = store.log.statistics
      total.commits += s.commits
      total.appendedEvents += s.appendedEvents
      total.groups += s.groups
      total.groupedWrites += s.groupedWrites
    }
    return (open, total)
  }

  /// When this process started serving (`couchdb_uptime_seconds`).
  static let started = ContinuousClock.now

  /// `GET /_node/{node}/_prometheus` (server administrators): the statistics in Prometheus's
  /// text exposition format, under CouchDB's metric names where CouchDB has the same metric
  /// (`couchdb_uptime_seconds`, `couchdb_database_writes_total`, `couchdb_open_databases_total`,
  /// `couchdb_httpd_request_methods`, `couchdb_httpd_status_codes`), and wikilog's own beside
  /// them (`wikilog_…`: commits, group commit, feeds waiting, index builds; and the features', such as the replication jobs).
  func prometheus(node: String, head: Bool) throws -> Response {
    _ = try checkedNodeName(node)
    let (open, total) = openStatistics()
    let feeds = hubs.counts
    let http = metrics.snapshot
    var text = ""
    func metric(
      _ name: String, _ type: String, _ help: String, _ samples: [(labels: String, value: Int)]
    ) {
      text += "# HELP \(name) \(help)\n# TYPE \(name) \(type)\n"
      for sample in samples { text += "\(name)\(sample.labels) \(sample.value)\n" }
    }
    let (seconds, _) = (ContinuousClock.now - Self.started).components
    metric("couchdb_uptime_seconds", "counter", "uptime", [("", Int(seconds))])
    metric(
      "couchdb_database_writes_total", "counter", "number of times a database was changed",
      [("", total.appendedEvents)])
    metric(
      "couchdb_open_databases_total", "gauge", "number of open databases", [("", open.count)])
    metric(
      "couchdb_httpd_request_methods", "counter", "number of HTTP requests by method",
      http.methods.sorted { $0.key < $1.key }.map { ("{method=\"\($0.key)\"}", $0.value) })
    metric(
      "couchdb_httpd_status_codes", "counter", "number of HTTP responses by status code",
      http.statuses.sorted { $0.key < $1.key }.map { ("{code=\"\($0.key)\"}", $0.value) })
    metric(
      "couchdb_httpd_requests_total", "counter", "number of HTTP requests",
      [("", http.methods.values.reduce(0, +))])
    metric(
      "wikilog_commits_total", "counter", "write transactions committed", [("", total.commits)])
    metric(
      "wikilog_appended_events_total", "counter", "events appended to the logs",
      [("", total.appendedEvents)])
    metric(
      "wikilog_group_commits_total", "counter",
      "groups of queued writes the writer took, one transaction each", [("", total.groups)])
    metric(
      "wikilog_grouped_writes_total", "counter", "writes that went through the writer queue",
      [("", total.groupedWrites)])
    metric(
      "wikilog_waiting_feeds", "gauge",
      "longpoll, continuous and eventsource feeds waiting for a change", [("", feeds.waiting)])
    metric(
      "wikilog_feed_followers", "gauge",
      "databases whose log a task follows for the waiting feeds", [("", feeds.following)])
    metric(
      "wikilog_index_builds", "gauge", "index builds under way (as _active_tasks lists them)",
      [("", dataDirectory.state.indexTasks.running.count)])
    for feature in featureInstances {
      for m in feature.metrics() { metric(m.name, m.type, m.help, m.samples) }
    }
    var fields = HTTPFields()
    fields[.contentType] = "text/plain; version=0.0.4; charset=utf-8"
    fields[.cacheControl] = "must-revalidate"
    let bytes = Array(text.utf8)
    if head {
      fields[.contentLength] = String(bytes.count)
      return Response(status: .ok, headers: fields, body: ResponseBody())
    }
    return Response(
      status: .ok, headers: fields, body: ResponseBody(byteBuffer: ByteBuffer(bytes: bytes)))
  }
}

extension CouchServer {
  /// `GET /_active_tasks` (server admins): the index builds under way (Mango indexes, indexes
  /// behind the log catching up: its data directory's ``IndexTasks``), in CouchDB's shape for
  /// an `indexer` task.
  func activeTasks() -> JSONValue {
    .array(
      dataDirectory.state.indexTasks.running.map { task in
        let n = { (i: Int) in JSONValue.number(JSONNumber(Int64(i))) }
        return .object(
          JSONObject([
            .init(key: "type", value: .string("indexer")),
            .init(key: "node", value: .string(nodeName)),
            .init(key: "pid", value: .string("<0.\(task.id).0>")),
            .init(key: "database", value: .string(task.database)),
            .init(key: "design_document", value: .string(task.designDocument)),
            .init(key: "index", value: .string(task.index)),
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
