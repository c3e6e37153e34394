import Hummingbird
import JSON
import Log
import Projections
import Query
import Replication
import RevTree

extension CouchServer {
  /// The name of this single node, which `{node}` in `/_node/{node}/...` must be (or `_local`).
  static let nodeName = "nonode@nohost"

  /// `node`'s name if it is this node (`_local` or ``nodeName``); `404` otherwise.
  static func checkedNodeName(_ node: String) throws(CouchError) -> String {
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
    _ = try Self.checkedNodeName(node)
    let open = dataDirectory.openStores()
    var total = EventLog.Statistics()
    for (_, store) in open {
      let s = store.log.statistics
      total.commits += s.commits
      total.appendedEvents += s.appendedEvents
      total.groups += s.groups
      total.groupedWrites += s.groupedWrites
    }
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
}
