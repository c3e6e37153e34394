import ArgumentParser
import Formats
import Foundation
import JSON
import Log
import Projections
import Query

struct View: ParsableCommand {
  static let configuration = CommandConfiguration(
    abstract: "Query a CouchDB view: a design document's map and reduce functions.",
    discussion: """
      The answer is CouchDB's GET /db/_design/DDOC/_view/VIEW, from the view's index (a \
      directory views-<signature> beside the database, built from the start the first time, \
      then kept up behind the log). JavaScript runs in wikilog's sandbox (or the command in \
      COUCHDB_QUERY_SERVER_JAVASCRIPT). The options are CouchDB's query parameters: the \
      flags below, or any parameter with --param NAME=VALUE (JSON values as in a URL). \
      --as-of answers the view as it was at a seq or an ISO-8601 time, replayed from the log. \
      --format rows prints one row per line.

      Examples:
        wikilog view pages by_wiki --key '"w1"' --include-docs
        wikilog view stats by_day --group-level 1
        wikilog view pages by_wiki --as-of 2026-11-01T00:00:00Z --reduce false
        wikilog view pages by_wiki --param 'startkey=["w1"]' --param limit=10
      """)

  enum Format: String, ExpressibleByArgument, CaseIterable { case json, rows }

  @OptionGroup var global: GlobalOptions
  @Argument(help: "The design document, without _design/.") var ddoc: String
  @Argument(help: "The view.") var view: String
  @Option(help: "Rows of this key (JSON).") var key: String?
  @Option(help: "Rows of these keys (a JSON array).") var keys: String?
  @Option(help: "The first key (JSON).") var startkey: String?
  @Option(help: "The last key (JSON).") var endkey: String?
  @Option(help: "At most this many rows.") var limit: Int?
  @Option(help: "Skip this many rows.") var skip: Int?
  @Flag(help: "Rows in reverse order.") var descending = false
  @Option(help: "true or false: reduce (the default when the view has a reduce).")
  var reduce: String?
  @Flag(help: "Group by the whole key.") var group = false
  @Option(help: "Group by the first N elements of array keys.") var groupLevel: Int?
  @Flag(help: "Each row with its document.") var includeDocs = false
  @Option(help: "A CouchDB view parameter as NAME=VALUE (repeatable).") var param: [String] = []
  @Option(help: "The view as it was at this seq or ISO-8601 time.") var asOf: String?
  @Option(help: "json (CouchDB's answer) or rows (one per line).") var format: Format = .json

  func run() throws {
    var parameters: [(String, String)] = []
    if let key { parameters.append(("key", key)) }
    if let keys { parameters.append(("keys", keys)) }
    if let startkey { parameters.append(("startkey", startkey)) }
    if let endkey { parameters.append(("endkey", endkey)) }
    if let limit { parameters.append(("limit", String(limit))) }
    if let skip { parameters.append(("skip", String(skip))) }
    if descending { parameters.append(("descending", "true")) }
    if let reduce { parameters.append(("reduce", reduce)) }
    if group { parameters.append(("group", "true")) }
    if let groupLevel { parameters.append(("group_level", String(groupLevel))) }
    if includeDocs { parameters.append(("include_docs", "true")) }
    for p in param {
      guard let eq = p.firstIndex(of: "=") else {
        throw ValidationError("--param takes NAME=VALUE, not \(p)")
      }
      parameters.append((String(p[..<eq]), String(p[p.index(after: eq)...])))
    }
    let query = try ViewQuery(parameters: parameters)
    let db = try global.openStore(readOnly: true)
    defer { db.close() }
    let id = "_design/" + ddoc
    let result: ViewResult
    if let asOf {
      let view: AsOfView
      if let seq = UInt64(asOf) {
        view = try db.store.asOf(LogPosition(seq))
      } else if let date = ISO8601.parse(asOf) {
        view = try db.store.asOf(date)
      } else {
        throw ValidationError("--as-of takes a seq or an ISO-8601 time, not \(asOf)")
      }
      defer { view.close() }
      result = try view.queryView(ddoc: id, view: self.view, query: query)
    } else {
      result = try ViewQueries(db.store).query(ddoc: id, view: self.view, query: query)
    }
    switch format {
    case .json: printJSON(result.json)
    case .rows: for row in result.rows { printJSON(row) }
    }
  }
}
