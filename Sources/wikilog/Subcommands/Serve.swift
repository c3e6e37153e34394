import ArgumentParser
import Auth
import CouchAPI
import CouchQuery
import CouchReplicator
import Foundation
import Hummingbird
import HummingbirdCore
import HummingbirdTLS
import JSON
import Log
import Logging
import NIOCore
import NIOSSL
import Projections
import Query
import Replication
import Synchronization
import Wiki
import WikiApp

struct Serve: AsyncParsableCommand {
  static let configuration = CommandConfiguration(
    abstract: "Serve every database of the data directory over CouchDB's HTTP API.",
    discussion: """
      CouchDB's replicator, PouchDB and other CouchDB clients can read, write and replicate \
      the databases (one per subdirectory of the data directory; there is no -d). Users sign \
      in as in CouchDB (HTTP Basic, POST /_session cookies, JWT with --jwt-*) or with API \
      tokens (wikilog token create); each sees and edits only the wikis they own or are a \
      member of, and every write is recorded as theirs. The wiki itself, for people, is at \
      /_wiki/ (the database --wiki-db, "wiki" by default; a browser's GET / goes there). \
      Administrators (the _admin role) may \
      do everything: --admin NAME makes or updates one, with the password from \
      $WIKILOG_ADMIN_PASSWORD or a prompt. While there is no administrator at all the server \
      binds only loopback addresses and every anonymous request acts as an administrator \
      (CouchDB's old "admin party"); it says so at start. --tls-cert and --tls-key serve \
      HTTPS. SIGINT (Ctrl-C) or SIGTERM stops it once the requests in flight are answered.

      Examples:
        WIKILOG_ADMIN_PASSWORD=s3cret wikilog serve --admin admin
        curl -u admin:s3cret http://127.0.0.1:5984/_all_dbs
        curl -u alice:pw 'http://127.0.0.1:5984/wiki/_changes?since=now'
        wikilog serve --bind 0.0.0.0 --tls-cert cert.pem --tls-key key.pem
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

  @Option(
    help: ArgumentHelp(
      "Make (or update) the administrator NAME before serving; the password comes from $WIKILOG_ADMIN_PASSWORD or a prompt.",
      valueName: "name"))
  var admin: String?

  @Option(
    name: .customLong("tls-cert"),
    help: ArgumentHelp("Serve HTTPS with this certificate chain (PEM).", valueName: "file"))
  var tlsCert: String?

  @Option(
    name: .customLong("tls-key"),
    help: ArgumentHelp("The private key (PEM) of --tls-cert.", valueName: "file"))
  var tlsKey: String?

  @Option(
    name: .customLong("jwt-secret-file"),
    help: ArgumentHelp(
      "Accept HS256 JWTs (Authorization: Bearer) signed with the secret in this file.",
      valueName: "file"))
  var jwtSecretFile: String?

  @Option(
    name: .customLong("jwt-key"),
    help: ArgumentHelp(
      "Accept RS256 or ES256 JWTs verified by this PEM public key; KID=FILE names its kid (repeatable).",
      valueName: "[kid=]file"))
  var jwtKeys: [String] = []

  @Option(
    name: .customLong("wiki-db"),
    help: ArgumentHelp("The database the web UI at /_wiki/ shows.", valueName: "name"))
  var wikiDatabase = "wiki"

  @Option(
    help: ArgumentHelp(
      "How long an AuthSession cookie stays valid, in seconds (CouchDB's default 600).",
      valueName: "seconds"))
  var sessionTimeout = 600

  @Option(
    name: .customLong("header-timeout"),
    help: ArgumentHelp(
      "Seconds a connection may take to send a request's head (and may stay idle between requests) before it is closed.",
      valueName: "seconds"))
  var headerTimeout = 60

  @Option(
    name: .customLong("max-connections"),
    help: ArgumentHelp(
      "Connections open at once; more get 503 service_unavailable.", valueName: "count"))
  var maxConnections = 2048

  @Option(
    name: .customLong("query-timeout"),
    help: ArgumentHelp(
      "Seconds a design function (a view's map, a reduce, validate_doc_update...) may take before its query server is stopped (CouchDB's os_process_timeout).",
      valueName: "seconds"))
  var queryTimeout = 5.0

  @Option(
    name: .customLong("query-memory"),
    help: ArgumentHelp(
      "MiB of JavaScript heap a query server may use; an allocation past it fails.",
      valueName: "MiB"))
  var queryMemory = 512

  @Option(
    name: .customLong("node-name"),
    help: ArgumentHelp(
      "This node's name in /_membership and /_node/{node} (CouchDB's -name; nonode@nohost by default).",
      valueName: "name"))
  var nodeName = "nonode@nohost"

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
    guard (tlsCert == nil) == (tlsKey == nil) else {
      throw ValidationError("--tls-cert and --tls-key go together")
    }
    do { try DataDirectory.validate(name: wikiDatabase) } catch {
      throw ValidationError("--wiki-db: \(error)")
    }
    guard sessionTimeout > 0 else { throw ValidationError("--session-timeout must be positive") }
    guard headerTimeout > 0 else { throw ValidationError("--header-timeout must be positive") }
    guard maxConnections > 0 else { throw ValidationError("--max-connections must be positive") }
    guard queryTimeout > 0 else { throw ValidationError("--query-timeout must be positive") }
    guard queryMemory >= 16 else { throw ValidationError("--query-memory must be at least 16") }
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
      throw CLIError(
        "cannot create \(directory): "
          + (FileSystem.problem(creating: directory) ?? error.localizedDescription))
    }
    let level = Logger.Level(rawValue: logLevel) ?? .info
    LoggingSystem.bootstrap { label in
      var handler = StreamLogHandler.standardError(label: label)
      handler.logLevel = level
      return handler
    }
    var options = CouchServerOptions()
    options.features = [.query, .replicator()]
    options.nodeName = nodeName
    if corsOrigins.isEmpty {
      options.cors = Self.isLoopback(bind) ? .anyOrigin : .none
    } else {
      options.cors = .origins(corsOrigins)
    }
    // Every HTTP write goes through the writer queue; concurrent writes share one synced
    // commit, and each is answered once that commit is on disk.
    var logOptions = EventLog.Options()
    logOptions.durability = .groupCommit
    let data = DataDirectory.wiki(
      path: directory, options: logOptions, systemDatabases: [.users, .replicator])
    defer { data.closeAll() }
    data.state.queryServers.limits = QueryServerLimits(
      timeout: queryTimeout, memoryMiB: queryMemory)
    let authenticator = try Authenticator(
      data: data, jwt: try jwtVerifier(), sessionTimeout: sessionTimeout)
    if let admin { try Self.ensureAdmin(admin, auth: authenticator) }
    let hasAdmin = try authenticator.users.users().contains { $0.isAdmin }
    if !hasAdmin && !Self.isLoopback(bind) {
      throw CLIError(
        "there is no administrator, so wikilog serves only loopback addresses; make one with --admin NAME (or wikilog user add NAME --admin) to serve \(bind)"
      )
    }
    options.authenticator = authenticator
    options.secure = tlsCert != nil
    let server = try tlsServer()
    let listening = OnceFlag()
    let host = bind.contains(":") ? "[\(bind)]" : bind
    let scheme = tlsCert == nil ? "http" : "https"
    var wikiOptions = WikiAppOptions()
    wikiOptions.database = wikiDatabase
    let app = buildWikiApplication(
      dataDirectory: data, options: options, wiki: wikiOptions, server: server,
      configuration: ApplicationConfiguration(
        address: .hostname(bind, port: port), serverName: nil),
      logger: Logger(label: "wikilog.http"),
      onServerRunning: { actualPort in
        listening.set()
        let url = "\(scheme)://\(host):\(actualPort ?? port)/"
        let names = data.databaseNames().filter { !$0.hasPrefix("_") }
        printText(Self.banner(directory: directory, url: url, databases: names))
        printText("wikilog: the wiki in a browser: \(url)_wiki/")
        if !hasAdmin {
          printText(
            "wikilog: no administrator yet: serving loopback only, and anonymous requests act as an administrator (\"admin party\"); make one with --admin NAME"
          )
        }
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

  /// Makes `name` an administrator with the password from `$WIKILOG_ADMIN_PASSWORD` or a
  /// prompt: a new user, or an existing one given the `_admin` role and the password; and a
  /// server administrator for the server's lifetime, kept outside `_users` (as CouchDB's
  /// `[admins]`), so that it still signs in once `_users` is deleted.
  static func ensureAdmin(_ name: String, auth: Authenticator) throws {
    let users = auth.users
    let password: String
    if let fromEnvironment = ProcessInfo.processInfo.environment["WIKILOG_ADMIN_PASSWORD"],
      !fromEnvironment.isEmpty
    {
      password = fromEnvironment
    } else {
      guard isatty(0) == 1 else {
        throw CLIError(
          "--admin \(name) needs a password: set WIKILOG_ADMIN_PASSWORD or run on a terminal")
      }
      password = try Terminal.askSecret("Password for the administrator \(name): ")
      guard !password.isEmpty else { throw CLIError("the password must not be empty") }
    }
    do {
      if let user = try users.user(named: name) {
        if !user.isAdmin {
          try users.setRoles(of: name, to: user.roles + [UserContext.adminRole], actor: name)
        }
        if try auth.checkPassword(name: name, password: password) == nil {
          try users.setPassword(of: name, to: password, actor: name)
        }
      } else {
        _ = try users.add(
          name: name, password: password, roles: [UserContext.adminRole], actor: name)
      }
      try auth.addServerAdmin(name: name, password: password)
    } catch let error as StoreError {
      throw CLIError("cannot make the administrator \(name): \(error.reason)")
    }
  }

  /// The JWT keys of --jwt-secret-file and --jwt-key, or nil when none is given.
  func jwtVerifier() throws -> JWTVerifier? {
    guard jwtSecretFile != nil || !jwtKeys.isEmpty else { return nil }
    var verifier = JWTVerifier()
    if let file = jwtSecretFile {
      guard var secret = FileManager.default.contents(atPath: file).map(Array.init) else {
        throw CLIError("cannot read the JWT secret \(file)")
      }
      while let last = secret.last, last == 10 || last == 13 { secret.removeLast() }
      guard !secret.isEmpty else { throw CLIError("the JWT secret \(file) is empty") }
      verifier.addHMACKey(secret)
    }
    for entry in jwtKeys {
      var kid = JWTVerifier.defaultKeyID
      var file = entry
      if let eq = entry.firstIndex(of: "="), !FileManager.default.fileExists(atPath: entry) {
        kid = String(entry[..<eq])
        file = String(entry[entry.index(after: eq)...])
      }
      guard
        let pem = FileManager.default.contents(atPath: file).map({
          String(decoding: $0, as: UTF8.self)
        })
      else { throw CLIError("cannot read the JWT key \(file)") }
      do {
        try verifier.addRSAKey(pem: pem, kid: kid)
      } catch {
        do { try verifier.addECKey(pem: pem, kid: kid) } catch {
          throw CLIError("\(file) is not an RSA or P-256 public key in PEM")
        }
      }
    }
    return verifier
  }

  /// HTTP/1.1 with the connection guard (--header-timeout, --max-connections), over TLS when
  /// --tls-cert and --tls-key are given.
  func tlsServer() throws -> HTTPServerBuilder {
    let http1 = HTTPServerBuilder.couchHTTP1(
      limits: ConnectionLimits(
        headerTimeout: .seconds(headerTimeout), maxConnections: maxConnections))
    guard let tlsCert, let tlsKey else { return http1 }
    do {
      let chain = try NIOSSLCertificate.fromPEMFile(tlsCert).map {
        NIOSSLCertificateSource.certificate($0)
      }
      guard !chain.isEmpty else { throw CLIError("no certificate in \(tlsCert)") }
      let key = try NIOSSLPrivateKey(file: tlsKey, format: .pem)
      let configuration = TLSConfiguration.makeServerConfiguration(
        certificateChain: chain, privateKey: .privateKey(key))
      return try .tls(http1, tlsConfiguration: configuration)
    } catch let error as CLIError {
      throw error
    } catch {
      throw CLIError("cannot use --tls-cert \(tlsCert) and --tls-key \(tlsKey): \(error)")
    }
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
