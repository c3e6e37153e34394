import ArgumentParser
import Foundation
import Hummingbird
import JSON
import Log
import Logging
import NIOCore
import Projections
import Replication
import Synchronization
import Wiki

struct Serve: AsyncParsableCommand {
  static let configuration = CommandConfiguration(
    abstract: "Serve every database of the data directory over CouchDB's HTTP API.",
    discussion: """
      CouchDB's replicator, PouchDB and other CouchDB clients can read, write and replicate \
      the databases (one per subdirectory of the data directory; there is no -d). There are \
      no users and no authentication yet: every write over HTTP is made by the actor \
      "anonymous", and the server binds to 127.0.0.1 unless told otherwise. SIGINT (Ctrl-C) \
      or SIGTERM stops it once the requests in flight are answered.

      Examples:
        wikilog demo && wikilog serve     # http://127.0.0.1:5984/
        curl http://127.0.0.1:5984/_all_dbs
        curl 'http://127.0.0.1:5984/wiki/_changes?feed=continuous&since=now'
        wikilog serve --port 8080 --cors-origin https://wiki.example
      """)

  /// Only --db: every database of the data directory is served.
  @OptionGroup var global: DataDirectoryOption

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
    // -d is an option of `wikilog` itself, which ArgumentParser accepts anywhere on the line;
    // for serve it would mean nothing.
    for argument in CommandLine.arguments.dropFirst() {
      let name = argument.prefix { $0 != "=" }
      if name == "-d" || name == "--database" {
        throw ValidationError(
          "serve serves every database of the data directory; leave out \(name)")
      }
    }
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
    let listening = OnceFlag()
    let host = bind.contains(":") ? "[\(bind)]" : bind
    let app = buildApplication(
      dataDirectory: data, options: options,
      configuration: ApplicationConfiguration(
        address: .hostname(bind, port: port), serverName: nil),
      logger: Logger(label: "wikilog.http"),
      onServerRunning: { actualPort in
        listening.set()
        let url = "http://\(host):\(actualPort ?? port)/"
        let names = data.databaseNames()
        printText(Self.banner(directory: directory, url: url, databases: names))
      })
    do {
      try await app.runService()
    } catch let error as IOError where !listening.isSet {
      switch error.errnoCode {
      case EADDRINUSE:
        throw CLIError("\(host):\(port) is in use; choose another --port")
      case EACCES:
        throw CLIError("not allowed to listen on \(host):\(port); choose a --port above 1023")
      case EADDRNOTAVAIL:
        throw CLIError("cannot listen on \(host): not an address of this machine; check --bind")
      default:
        let reason = unsafe String(cString: strerror(error.errnoCode))
        throw CLIError("cannot listen on \(host):\(port): \(reason)")
      }
    }
    // A graceful shutdown (SIGINT or SIGTERM): the requests in flight have been answered.
    data.closeAll()
    printText(
      "wikilog: stopped serving \(directory): requests in flight answered, databases closed")
  }

  /// The line printed once the server listens, with what to do when there is nothing to serve.
  static func banner(directory: String, url: String, databases: [String]) -> String {
    let serving = "wikilog: serving \(directory) at \(url)"
    guard databases.isEmpty else {
      return "\(serving)  (databases: \(databases.joined(separator: ", ")))"
    }
    let db = " --db " + Shell.quote(directory)
    return
      "\(serving)  (no databases yet: create one with `wikilog init\(db)` or `curl -X PUT \(url)wiki`, or seed a demo wiki with `wikilog demo\(db)`)"
  }

  static func isLoopback(_ address: String) -> Bool {
    address == "localhost" || address == "::1" || address.hasPrefix("127.")
  }
}

/// A flag set once, from any thread.
final class OnceFlag: Sendable {
  private let value = Mutex(false)
  func set() { value.withLock { $0 = true } }
  var isSet: Bool { value.withLock { $0 } }
}
