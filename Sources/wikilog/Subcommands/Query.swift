import ArgumentParser
import Foundation
import JSON
import Projections
import Query

/// How `find` prints its documents.
enum FindFormat: String, ExpressibleByArgument, CaseIterable {
  case json, ndjson, table
}

struct Find: ParsableCommand {
  static let configuration = CommandConfiguration(
    abstract: "Query documents with a Mango selector: CouchDB's POST /db/_find.",
    discussion: """
      The query is the JSON body of CouchDB's _find: "selector" and, optionally, "fields", \
      "sort", "limit" (default 25), "skip", "bookmark", "use_index", "conflicts", \
      "execution_stats". A query that no index serves scans every document and says so on \
      standard error. --format json prints CouchDB's answer; ndjson one document per line; \
      table the "fields" (or _id and _rev) as tab-separated columns.

      Examples:
        wikilog find '{"selector":{"type":"page"},"fields":["_id","wiki_id"]}'
        wikilog find --format table '{"selector":{"year":{"$gt":2000}}}'
        wikilog find --explain '{"selector":{"year":2010}}'
      """)

  @OptionGroup var global: GlobalOptions
  @Argument(help: "The query as JSON (default: standard input).") var query: String?
  @Option(help: "json, ndjson or table.") var format: FindFormat = .json
  @Flag(help: "Show the plan (CouchDB's _explain) instead of running the query.")
  var explain = false

  func run() throws {
    let body = try Input.json(Input.read(query), what: "query")
    let q = try FindQuery(body)
    let db = try global.openStore(readOnly: true)
    defer { db.close() }
    if explain {
      printJSON(try MangoQueries(db.store).explain(q, databaseName: global.database))
      return
    }
    let result = try MangoQueries(db.store).find(q)
    switch format {
    case .json:
      printJSON(result.json)
    case .ndjson:
      if let warning = result.warning { printError("wikilog: warning: \(warning)") }
      for doc in result.docs { printJSON(doc) }
    case .table:
      if let warning = result.warning { printError("wikilog: warning: \(warning)") }
      let columns = q.fields ?? ["_id", "_rev"]
      var lines = [columns.joined(separator: "\t")]
      for doc in result.docs {
        lines.append(
          columns.map { field in
            guard let v = Selector.value(at: Selector.path(field), in: doc) else { return "" }
            return v.stringValue ?? String(decoding: v.serialized(), as: UTF8.self)
          }.joined(separator: "\t"))
      }
      printText(lines.joined(separator: "\n"))
    }
  }
}

struct IndexCommand: ParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "index",
    abstract: "Create, list and drop Mango JSON indexes (CouchDB's /db/_index).",
    discussion: """
      Examples:
        wikilog index create year --ddoc by-year --name year --actor admin
        wikilog index list
        wikilog index drop by-year year --actor admin
      """,
    subcommands: [Create.self, List.self, Drop.self])

  struct Create: ParsableCommand {
    static let configuration = CommandConfiguration(
      abstract: "Create a JSON index on one or more fields, built from every document now.",
      discussion: """
        The index is a view in a design document (language "query"), as CouchDB stores it, so \
        it replicates. The build runs in the write transaction; its progress is shown on \
        standard error.

        Examples:
          wikilog index create year --ddoc by-year --name year --actor admin
          wikilog index create type wiki_id --partial-filter '{"type":"page"}'
        """)

    @OptionGroup var global: GlobalOptions
    @OptionGroup var actor: ActorOptions
    @Argument(help: "The fields (dotted paths), in sort order.") var fields: [String]
    @Option(help: "The design document (default: a hash of the definition).") var ddoc: String?
    @Option(help: "The index name (default: a hash of the definition).") var name: String?
    @Flag(help: "Sort descending.") var descending = false
    @Option(help: "Only documents matching this selector (JSON).") var partialFilter: String?

    func validate() throws {
      if fields.isEmpty { throw ValidationError("give at least one field") }
    }

    func run() throws {
      var index: [JSONObject.Member] = [
        .init(
          key: "fields",
          value: .array(
            fields.map {
              .object(JSONObject([.init(key: $0, value: .string(descending ? "desc" : "asc"))]))
            }))
      ]
      if let partialFilter {
        index.append(
          .init(
            key: "partial_filter_selector",
            value: try Input.json(Array(partialFilter.utf8), what: "in --partial-filter")))
      }
      var request: [JSONObject.Member] = [.init(key: "index", value: .object(JSONObject(index)))]
      if let ddoc { request.append(.init(key: "ddoc", value: .string(ddoc))) }
      if let name { request.append(.init(key: "name", value: .string(name))) }
      let definition = try MangoIndex.parseRequest(.object(JSONObject(request)))
      let db = try global.openStore()
      defer { db.close() }
      let existing = try? db.store.get(definition.ddoc)
      let (body, exists) = try MangoQueries.designDocument(adding: definition, to: existing)
      if !exists {
        let reporter = ProgressReporter(tasks: db.store.state.indexTasks)
        reporter.start()
        defer { reporter.stop() }
        _ = try db.store.put(
          body.serialized(), id: definition.ddoc, rev: existing?["_rev"]?.stringValue,
          actor: actor.name)
      }
      printJSON(
        .object(
          JSONObject([
            .init(key: "result", value: .string(exists ? "exists" : "created")),
            .init(key: "id", value: .string(definition.ddoc)),
            .init(key: "name", value: .string(definition.name)),
          ])))
    }
  }

  struct List: ParsableCommand {
    static let configuration = CommandConfiguration(
      abstract: "List the indexes: CouchDB's GET /db/_index.",
      discussion: """
        One line per index: design document, name, fields (and a partial filter). --json \
        prints CouchDB's answer.

        Example: wikilog index list --json
        """)
    @OptionGroup var global: GlobalOptions
    @OptionGroup var json: JSONFlag

    func run() throws {
      let db = try global.openStore(readOnly: true)
      defer { db.close() }
      if json.json {
        printJSON(try MangoQueries(db.store).indexListing())
        return
      }
      var lines = ["_all_docs\t(special)\t_id"]
      for index in try MangoQueries(db.store).indexes() {
        var line = "\(index.ddoc)\t\(index.name)\t\(index.fields.joined(separator: ","))"
        if index.descending { line += " desc" }
        if let p = index.partialFilter {
          line += "\tpartial: " + String(decoding: p.json.serialized(), as: UTF8.self)
        }
        lines.append(line)
      }
      printText(lines.joined(separator: "\n"))
    }
  }

  struct Drop: ParsableCommand {
    static let configuration = CommandConfiguration(
      abstract: "Drop an index (its design document goes with its last index).",
      discussion: "Example: wikilog index drop by-year year --actor admin")
    @OptionGroup var global: GlobalOptions
    @OptionGroup var actor: ActorOptions
    @Argument(help: "The design document (with or without _design/).") var ddoc: String
    @Argument(help: "The index name.") var name: String

    func run() throws {
      let id = ddoc.hasPrefix("_design/") ? ddoc : "_design/" + ddoc
      let db = try global.openStore()
      defer { db.close() }
      guard let doc = try? db.store.get(id),
        let (rev, body) = MangoQueries.designDocument(removing: name, from: doc)
      else { throw CLIError("no index \(name) in \(id)") }
      if let body {
        _ = try db.store.put(body.serialized(), id: id, rev: rev, actor: actor.name)
      } else {
        _ = try db.store.delete(id, rev: rev, actor: actor.name)
      }
      printJSON(.object(JSONObject([.init(key: "ok", value: .bool(true))])))
    }
  }
}

/// Prints the running index builds' progress to standard error every half second.
final class ProgressReporter: @unchecked Sendable {
  private let tasks: IndexTasks
  private var thread: Thread?
  private let lock = NSLock()
  private var running = true

  init(tasks: IndexTasks) { self.tasks = tasks }

  func start() {
    let t = Thread { [self] in
      while lock.withLock({ running }) {
        Thread.sleep(forTimeInterval: 0.5)
        for task in tasks.running {
          printError(
            "wikilog: building index \(task.designDocument) \(task.index): \(task.done) of \(task.total) (\(task.total > 0 ? task.done * 100 / task.total : 100)%)"
          )
        }
      }
    }
    thread = t
    t.start()
  }

  func stop() { lock.withLock { running = false } }
}

struct Grep: ParsableCommand {
  static let configuration = CommandConfiguration(
    abstract: "Search field values with a regular expression.",
    discussion: """
      Searches the winning revision of every live document (with --history: every revision in \
      the log, with who wrote it and when). Prints one line per matching field: id, rev, field \
      and value, tab-separated (--json: one JSON object per line).

      Examples:
        wikilog grep 'recipe|cake' --type page --field markdown
        wikilog grep '(?i)^todo' --history
      """)

  @OptionGroup var global: GlobalOptions
  @OptionGroup var json: JSONFlag
  @Argument(help: "A regular expression (PCRE syntax, as Mango's $regex).") var pattern: String
  @Option(help: "Only this field (a dotted path).") var field: String?
  @Option(help: "Only documents whose type field is this.") var type: String?
  @Flag(help: "Search every revision in the log.") var history = false

  func run() throws {
    let regex: RegexPattern
    do {
      regex = try RegexPattern(pattern)
    } catch {
      throw CLIError("bad regular expression '\(pattern)': \(error)")
    }
    let db = try global.openStore(readOnly: true)
    defer { db.close() }
    var out = OutputBuffer()
    var found = false
    try MangoQueries(db.store).grep(regex, field: field, type: type, history: history) { match in
      found = true
      if json.json {
        out.line(match.json)
      } else {
        var columns = [match.docID, match.rev, match.field]
        if history, let t = match.json["time"]?.stringValue {
          columns += [match.actor ?? "", t]
        }
        columns.append(
          match.value.replacingOccurrences(of: "\n", with: "\\n")
            .replacingOccurrences(of: "\t", with: "\\t"))
        out.append(columns.joined(separator: "\t") + "\n")
      }
      return true
    }
    out.flush()
    if !found { throw ExitCode.failure }
  }
}

struct Search: ParsableCommand {
  static let configuration = CommandConfiguration(
    abstract: "Full-text search over wiki pages, ranked by BM25.",
    discussion: """
      Words must all match (case-folded); "a phrase" in quotes matches its words in order; \
      word* matches every word beginning with it. Prints score, page id and a snippet with the \
      matched words in [brackets] (--json: GET /db/_search's answer, with <mark> in snippets).

      Examples:
        wikilog search 'apple pie'
        wikilog search '"three-way merge" conflict*' --wiki w1 --limit 5
      """)

  @OptionGroup var global: GlobalOptions
  @OptionGroup var json: JSONFlag
  @Argument(help: "The query.") var query: String
  @Option(help: "Only this wiki.") var wiki: String?
  @Option(help: "At most this many results.") var limit: Int = 25
  @Option(help: "Skip this many results first.") var skip: Int = 0

  func validate() throws {
    if limit < 0 || skip < 0 { throw ValidationError("--limit and --skip must be 0 or more") }
  }

  func run() throws {
    var q = try SearchQuery(query)
    q.limit = limit
    q.skip = skip
    let db = try global.openStore(readOnly: true)
    defer { db.close() }
    guard TextSearch(db.store).isAvailable else {
      throw CLIError("database '\(global.database)' has no full-text index")
    }
    let groups = try wiki.map { [$0] } ?? TextSearch(db.store).groups()
    let result = try TextSearch(db.store).search(q, groups: groups)
    let body = try TextSearch(db.store).json(result)
    if json.json {
      printJSON(body)
      return
    }
    var lines: [String] = []
    for row in body["rows"]?.arrayValue ?? [] {
      let snippet = (row["snippet"]?.stringValue ?? "")
        .replacingOccurrences(of: "<mark>", with: "[").replacingOccurrences(
          of: "</mark>", with: "]"
        )
        .replacingOccurrences(of: "&lt;", with: "<").replacingOccurrences(of: "&gt;", with: ">")
        .replacingOccurrences(of: "&quot;", with: "\"").replacingOccurrences(of: "&amp;", with: "&")
      let score = row["score"]?.numberValue?.doubleValue ?? 0
      lines.append(
        "\(String(format: "%.3f", score))\t\(row["id"]?.stringValue ?? "")\t\(snippet)")
    }
    lines.append("\(result.total) page\(result.total == 1 ? "" : "s") matched")
    printText(lines.joined(separator: "\n"))
  }
}
