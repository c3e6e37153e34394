import ArgumentParser
import Foundation
import Hummingbird
import JSON
import Log
import Logging
import Projections
import Replication
import Wiki

struct Serve: AsyncParsableCommand {
  static let configuration = CommandConfiguration(
    abstract: "Serve every database of the data directory over CouchDB's HTTP API.",
    discussion: """
      CouchDB's replicator, PouchDB and other CouchDB clients can read, write and replicate the
      databases (one per subdirectory of the data directory). There are no users and no
      authentication yet: every write over HTTP is made by the actor "anonymous", and the server
      binds to 127.0.0.1 unless told otherwise.

      Examples:
        wikilog serve                                  # http://127.0.0.1:5984/
        curl http://127.0.0.1:5984/_all_dbs
        curl 'http://127.0.0.1:5984/wiki/_changes?feed=continuous&since=now&heartbeat=10000'
        wikilog serve --port 8080 --cors-origin https://wiki.example
      """)

  @OptionGroup var global: GlobalOptions

  @Option(help: "The TCP port to listen on.")
  var port = 5984

  @Option(help: "The address to listen on.")
  var bind = "127.0.0.1"

  @Option(
    name: .customLong("cors-origin"),
    help: ArgumentHelp(
      "A browser origin allowed to call the server (repeatable; '*' for any). Default: any origin when bound to a loopback address, none otherwise.",
      valueName: "origin"))
  var corsOrigins: [String] = []

  @Option(help: "The log level: trace, debug, info, notice, warning, error or critical.")
  var logLevel = "info"

  func validate() throws {
    guard (0...65535).contains(port) else { throw ValidationError("--port must be 0...65535") }
    guard Logger.Level(rawValue: logLevel) != nil else {
      throw ValidationError(
        "--log-level must be trace, debug, info, notice, warning, error or critical")
    }
  }

  func run() async throws {
    let directory = global.directory
    do {
      try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    } catch {
      throw CLIError("cannot create \(directory): \(error.localizedDescription)")
    }
    let level = Logger.Level(rawValue: logLevel) ?? .info
    LoggingSystem.bootstrap { label in
      var handler = StreamLogHandler.standardError(label: label)
      handler.logLevel = level
      return handler
    }
    var options = CouchServerOptions()
    if corsOrigins.isEmpty {
      options.cors = Self.isLoopback(bind) ? .anyOrigin : .none
    } else {
      options.cors = .origins(corsOrigins)
    }
    // Every HTTP write goes through the writer queue; concurrent writes share one synced
    // commit, and each is answered once that commit is on disk.
    var logOptions = EventLog.Options()
    logOptions.durability = .groupCommit
    let data = DataDirectory.wiki(path: directory, options: logOptions)
    defer { data.closeAll() }
    let host = bind.contains(":") ? "[\(bind)]" : bind
    let app = buildApplication(
      dataDirectory: data, options: options,
      configuration: ApplicationConfiguration(
        address: .hostname(bind, port: port), serverName: nil),
      logger: Logger(label: "wikilog.http"),
      onServerRunning: { actualPort in
        let url = "http://\(host):\(actualPort ?? port)/"
        let names = data.databaseNames().joined(separator: ", ")
        FileHandle.standardOutput.write(
          Data("wikilog: serving \(directory) at \(url)  (databases: \(names))\n".utf8))
      })
    try await app.runService()
  }

  static func isLoopback(_ address: String) -> Bool {
    address == "localhost" || address == "::1" || address.hasPrefix("127.")
  }
}
