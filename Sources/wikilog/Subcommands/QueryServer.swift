import ArgumentParser
import JSSandbox

/// `wikilog query-server`: the JavaScript query server that `wikilog serve` and every command
/// that runs design functions start as a child process (CouchDB's query-server protocol on
/// standard input and output, as CouchDB runs `couchjs`).
struct QueryServer: ParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "query-server",
    abstract: "Run design functions in a sandbox (CouchDB's query-server protocol on stdio).",
    discussion: """
      Started by wikilog itself, one process per concurrent view build or design function: \
      one JSON command per line on standard input, one answer per line on standard output. \
      Functions run in SpiderMonkey with nothing but the JavaScript standard library and \
      CouchDB's helpers (emit, log, sum, toJSON, isArray, require, getRow, send, start, \
      provides, registerType): no files, processes, sockets, environment or timers; every \
      design document in a realm of its own. The process itself gives up opening files, \
      sockets and starting programs (seccomp) before it reads its first command.

      Examples:
        echo '["reset",{}]' | wikilog query-server
        wikilog query-server --memory 256 < commands.ndjson
      """)

  @Option(help: "The JavaScript heap's limit, in MiB.")
  var memory: Int = 512

  @Flag(help: .hidden)
  var noWalls = false

  func run() throws {
    let status = wikilog_js_query_server(Int32(clamping: memory), noWalls ? 0 : 1)
    throw ExitCode(status)
  }
}
