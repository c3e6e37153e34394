import Auth
import HTTPTypes
import Hummingbird
import JSON
import Projections
import Synchronization

#if canImport(FoundationEssentials)
  import FoundationEssentials
#else
  import Foundation
#endif

/// CouchDB's uuid algorithms (`[uuids] algorithm`, `couch_uuids`): `random` (128 random bits),
/// `sequential` (the default: 26 random hex digits, then 6 that grow by a random step up to
/// 0xffe; a new prefix when they overflow), `utc_random` (14 hex digits of microseconds since
/// 1970, then 18 random) and `utc_id` (the same 14, then `utc_id_suffix`).
final class UUIDs: Sendable {
  enum Algorithm: String, Sendable {
    case random, sequential
    case utcRandom = "utc_random"
    case utcID = "utc_id"
  }

  private struct State {
    var algorithm = Algorithm.sequential
    var suffix = ""
    var prefix = UUIDs.randomHex(26)
    var counter = Int.random(in: 1...0xfff)
    /// The last time a `utc_` id used: each next one is later (CouchDB's `erlang:now()`
    /// never repeats), so ids made in one microsecond still grow.
    var lastMicroseconds: UInt64 = 0
  }

  private let state = Mutex(State())

  var algorithm: Algorithm {
    get { state.withLock { $0.algorithm } }
    set { state.withLock { $0.algorithm = newValue } }
  }

  var utcIDSuffix: String {
    get { state.withLock { $0.suffix } }
    set { state.withLock { $0.suffix = newValue } }
  }

  /// `count` new ids, in the order they were made.
  func next(_ count: Int) -> [String] {
    state.withLock { s in
      (0..<count).map { _ in
        switch s.algorithm {
        case .random:
          return UUIDs.randomHex(32)
        case .sequential:
          s.counter += Int.random(in: 1...0xffe)
          if s.counter >= 0x1000000 {
            s.prefix = UUIDs.randomHex(26)
            s.counter = Int.random(in: 1...0xfff)
          }
          return s.prefix + UUIDs.hex(UInt64(s.counter), digits: 6)
        case .utcRandom, .utcID:
          let now = max(UUIDs.microseconds(), s.lastMicroseconds + 1)
          s.lastMicroseconds = now
          return UUIDs.hex(now, digits: 14)
            + (s.algorithm == .utcID ? s.suffix : UUIDs.randomHex(18))
        }
      }
    }
  }

  static func microseconds() -> UInt64 {
    UInt64(max(0, Date().timeIntervalSince1970 * 1_000_000))
  }

  static func hex(_ value: UInt64, digits: Int) -> String {
    let text = String(value, radix: 16)
    return String(repeating: "0", count: max(0, digits - text.count)) + text
  }

  static func randomHex(_ digits: Int) -> String {
    String((0..<digits).map { _ in "0123456789abcdef".randomElement()! })
  }
}

/// The settings a running server reads on every request that `/_node/{node}/_config` may
/// change (``CouchServerOptions`` gives their first values): kept in memory for the server's
/// lifetime, as CouchDB's `X-Couch-Persist: false` keeps a change; a restart takes the command
/// line's again.
final class ServerSettings: Sendable {
  struct Values: Sendable {
    var maxRequestBytes: Int
    var maxAttachmentBytes: Int?
    var maxUUIDCount: Int
    var maxChangesTimeoutMilliseconds: Int
    var allowJSONP: Bool
    var decodePlusToSpace: Bool
    /// The `[jwt_keys]` set at run time, as given.
    var jwtKeys: [String: String] = [:]
    /// `chttpd/x_forwarded_host`, `x_forwarded_proto` and `x_forwarded_ssl`.
    var forwarded = ServerHeader.ForwardedHeaders()
    /// `chttpd/rewrite_limit`: how many `_rewrite`s one request may go through.
    var rewriteLimit = 100
    /// `chttpd/secure_rewrites`: whether a rewrite rule may not climb out of its database.
    var secureRewrites = true
    /// `chttpd/WWW-Authenticate`: the header of every `401` answer, when set.
    var wwwAuthenticate: String?
    /// `httpd/authentication_handlers`: the handlers of CouchDB's node-local interface,
    /// which neither CouchDB 3's clustered port nor wikilog serves: kept and answered, with
    /// no effect, as there.
    var nodeLocalAuthenticationHandlers = CouchServer.nodeLocalAuthenticationHandlers
    /// `query_server_config/query_limit` and `partition_query_limit`: the most rows a view or
    /// `_all_docs` answers (within a partition, the second).
    var queryLimit = CouchServer.maxQueryLimit
    var partitionQueryLimit = CouchServer.maxQueryLimit
  }

  private let values: Mutex<Values>

  init(_ options: CouchServerOptions) {
    values = Mutex(
      Values(
        maxRequestBytes: options.maxRequestBytes, maxAttachmentBytes: options.maxAttachmentBytes,
        maxUUIDCount: options.maxUUIDCount,
        maxChangesTimeoutMilliseconds: options.maxChangesTimeoutMilliseconds,
        allowJSONP: options.allowJSONP, decodePlusToSpace: options.decodePlusToSpace))
  }

  var current: Values { values.withLock { $0 } }

  func update<T>(_ change: (inout Values) -> T) -> T { values.withLock { change(&$0) } }
}

extension CouchServer {
  /// A setting of `/_node/{node}/_config`, under CouchDB's section and key: its value now as
  /// text, and how a `PUT` of a new one applies (nil: set when the server starts).
  struct Setting {
    let read: @Sendable (CouchServer) -> String?
    var write: (@Sendable (CouchServer, String) throws(CouchError) -> Void)? = nil
    /// The value a `DELETE` goes back to: the one the server started with.
    var initial: (@Sendable (CouchServer) -> String)? = nil
  }

  /// `chttpd_auth/authentication_db` (and its older name in `couch_httpd_auth`): the database
  /// users sign in from, `_users` unless set (``Auth/UserStore/useAuthenticationDatabase(_:)``).
  static let authenticationDatabase = Setting(
    read: { $0.options.authenticator?.users.authenticationDatabase ?? UserStore.databaseName },
    write: { server, text throws(CouchError) in
      let auth = try server.requireAuthenticator("chttpd_auth/authentication_db")
      do { try auth.users.useAuthenticationDatabase(text) } catch { throw CouchError(error) }
    }, initial: { _ in UserStore.databaseName })

  /// CouchDB's `?MAX_VIEW_LIMIT`: the limit of a query that names none.
  public static let maxQueryLimit = 268_435_456

  /// A `query_server_config` limit (a positive integer; back to ``maxQueryLimit`` on DELETE).
  static func limit(
    _ value: any WritableKeyPath<ServerSettings.Values, Int> & Sendable, _ name: String
  ) -> Setting {
    Setting(
      read: { String($0.settings.current[keyPath: value]) },
      write: { server, text throws(CouchError) in
        let n = try positive(text, name)
        server.settings.update { $0[keyPath: value] = n }
      }, initial: { _ in String(CouchServer.maxQueryLimit) })
  }

  /// The rows a view or `_all_docs` query may answer (`couch_mrview_util:apply_limit`): its
  /// `limit`, or with none the configured most; a `limit` above that is
  /// `400 query_parse_error`. Within a partition `partition_query_limit` applies, else (and for
  /// Mango, `ignoringPartition`) `query_limit`.
  public func queryLimit(_ asked: Int?, partitioned: Bool) throws(CouchError) -> Int {
    let most = partitioned ? settings.current.partitionQueryLimit : settings.current.queryLimit
    guard let asked else { return most }
    guard asked <= most else {
      throw CouchError(
        "query_parse_error", "Limit is too large, must not exceed \(most)", status: 400)
    }
    return asked
  }

  /// CouchDB's default `httpd/authentication_handlers`.
  static let nodeLocalAuthenticationHandlers =
    "{couch_httpd_auth, cookie_authentication_handler}, {couch_httpd_auth, default_authentication_handler}"

  /// `chttpd/rewrite_limit`: how many `_rewrite`s one request may go through (100 unless set).
  public var rewriteLimit: Int { settings.current.rewriteLimit }
  /// `chttpd/secure_rewrites`: whether a rewrite rule may climb out of its database with a
  /// third `..` (true, the default: it may not).
  public var secureRewrites: Bool { settings.current.secureRewrites }

  /// The settings wikilog has, by CouchDB's section and key.
  static let settings: [String: [String: Setting]] = [
    "chttpd": [
      "max_http_request_size": integer(
        "chttpd/max_http_request_size", \.maxRequestBytes, initial: \.maxRequestBytes),
      "changes_timeout": integer(
        "chttpd/changes_timeout", \.maxChangesTimeoutMilliseconds,
        initial: \.maxChangesTimeoutMilliseconds),
      "decode_plus_to_space": boolean(
        "chttpd/decode_plus_to_space", \.decodePlusToSpace, initial: \.decodePlusToSpace),
      "allow_jsonp": boolean("chttpd/allow_jsonp", \.allowJSONP, initial: \.allowJSONP),
      "x_forwarded_host": forwardedHeader(\.host, initial: "X-Forwarded-Host"),
      "x_forwarded_proto": forwardedHeader(\.proto, initial: "X-Forwarded-Proto"),
      "x_forwarded_ssl": forwardedHeader(\.ssl, initial: "X-Forwarded-Ssl"),
      "rewrite_limit": Setting(
        read: { String($0.settings.current.rewriteLimit) },
        write: { server, text throws(CouchError) in
          guard let n = Int(text.filter { $0 != " " }), n >= 0 else {
            throw .badRequest(
              "chttpd/rewrite_limit must be an integer of 0 or more, not \"\(text.prefix(40))\"")
          }
          server.settings.update { $0.rewriteLimit = n }
        }, initial: { _ in "100" }),
      "secure_rewrites": Setting(
        read: { String($0.settings.current.secureRewrites) },
        write: { server, text throws(CouchError) in
          guard let on = Bool(text.filter { $0 != " " }.lowercased()) else {
            throw .badRequest(
              "chttpd/secure_rewrites must be true or false, not \"\(text.prefix(40))\"")
          }
          server.settings.update { $0.secureRewrites = on }
        }, initial: { _ in "true" }),
      "WWW-Authenticate": Setting(
        read: { $0.settings.current.wwwAuthenticate },
        write: { server, text throws(CouchError) in
          server.settings.update { $0.wwwAuthenticate = text.isEmpty ? nil : text }
        }, initial: { _ in "" }),
    ],
    "query_server_config": [
      "query_limit": limit(\.queryLimit, "query_server_config/query_limit"),
      "partition_query_limit": limit(
        \.partitionQueryLimit, "query_server_config/partition_query_limit"),
    ],
    "httpd": [
      "authentication_handlers": Setting(
        read: { $0.settings.current.nodeLocalAuthenticationHandlers },
        write: { server, text throws(CouchError) in
          server.settings.update { $0.nodeLocalAuthenticationHandlers = text }
        }, initial: { _ in CouchServer.nodeLocalAuthenticationHandlers })
    ],
    "couchdb": [
      "max_attachment_size": Setting(
        read: { $0.settings.current.maxAttachmentBytes.map(String.init) ?? "infinity" },
        write: { server, text throws(CouchError) in
          let n = text == "infinity" ? nil : try positive(text, "couchdb/max_attachment_size")
          server.settings.update { $0.maxAttachmentBytes = n }
        }, initial: { $0.options.maxAttachmentBytes.map(String.init) ?? "infinity" }),
      "max_document_size": Setting(read: { _ in String(DocumentInput.maxBytes) }),
      "max_partition_size": Setting(
        read: { String($0.dataDirectory.state.maxPartitionBytes ?? 0) },
        write: { server, text throws(CouchError) in
          guard let n = Int(text.filter { $0 != " " }) else {
            throw .badRequest(
              "couchdb/max_partition_size must be an integer, not \"\(text.prefix(40))\"")
          }
          server.dataDirectory.state.maxPartitionBytes = n
        }, initial: { String($0.options.maxPartitionBytes) }),
      "uuid": Setting(read: { $0.serverUUID }),
    ],
    "uuids": [
      "max_count": integer("uuids/max_count", \.maxUUIDCount, initial: \.maxUUIDCount),
      "algorithm": Setting(
        read: { $0.uuids.algorithm.rawValue },
        write: { server, text throws(CouchError) in
          guard let algorithm = UUIDs.Algorithm(rawValue: text) else {
            throw .badRequest(
              "uuids/algorithm must be random, sequential, utc_random or utc_id, not \"\(text.prefix(40))\""
            )
          }
          server.uuids.algorithm = algorithm
        }, initial: { _ in UUIDs.Algorithm.sequential.rawValue }),
      "utc_id_suffix": Setting(
        read: { $0.uuids.utcIDSuffix },
        write: { server, text throws(CouchError) in server.uuids.utcIDSuffix = text },
        initial: { _ in "" }),
    ],
    "chttpd_auth": [
      "authentication_db": authenticationDatabase,
      "timeout": Setting(read: { $0.options.authenticator.map { String($0.sessions.timeout) } }),
      "iterations": Setting(
        read: { String($0.options.authenticator?.passwordIterations ?? Password.iterations) },
        write: { server, text throws(CouchError) in
          let auth = try server.requireAuthenticator("chttpd_auth/iterations")
          auth.passwordIterations = try positive(text, "chttpd_auth/iterations")
        }, initial: { _ in String(Password.iterations) }),
    ],
    // CouchDB 3's older name of the section, still read for these keys.
    "couch_httpd_auth": [
      "authentication_db": authenticationDatabase
    ],
    "vendor": [
      "name": Setting(read: { _ in "wikilog" }),
      "version": Setting(read: { _ in CouchServer.version }),
    ],
  ]

  /// ``settings`` with the features' read-only ones (the replicator's `[replicator]`).
  var allSettings: [String: [String: Setting]] {
    var all = Self.settings
    for (section, keys) in Self.authSettings {
      all[section, default: [:]].merge(keys) { $1 }
    }
    for feature in featureInstances {
      for (section, keys) in feature.configuration {
        for (key, read) in keys { all[section, default: [:]][key] = Setting(read: { _ in read() }) }
      }
    }
    return all
  }

  /// A header name a proxy sets (``ServerHeader/ForwardedHeaders``).
  static func forwardedHeader(
    _ value: any WritableKeyPath<ServerHeader.ForwardedHeaders, HTTPField.Name> & Sendable,
    initial: String
  ) -> Setting {
    Setting(
      read: { $0.settings.current.forwarded[keyPath: value].rawName },
      write: { server, text throws(CouchError) in
        guard let name = HTTPField.Name(text) else {
          throw .badRequest("\"\(text.prefix(40))\" is not a header name")
        }
        server.settings.update { $0.forwarded[keyPath: value] = name }
      }, initial: { _ in initial })
  }

  /// A `true`/`false` setting of ``ServerSettings``, which `initial` gave its first value.
  static func boolean(
    _ name: String, _ value: any WritableKeyPath<ServerSettings.Values, Bool> & Sendable,
    initial: any KeyPath<CouchServerOptions, Bool> & Sendable
  ) -> Setting {
    setting(value, initial: initial) { text throws(CouchError) in
      guard let on = Bool(text.filter { $0 != " " }.lowercased()) else {
        throw .badRequest("\(name) must be true or false, not \"\(text.prefix(40))\"")
      }
      return on
    }
  }

  /// A positive integer setting of ``ServerSettings``, which `initial` gave its first value.
  static func integer(
    _ name: String, _ value: any WritableKeyPath<ServerSettings.Values, Int> & Sendable,
    initial: any KeyPath<CouchServerOptions, Int> & Sendable
  ) -> Setting {
    setting(value, initial: initial) { text throws(CouchError) in try positive(text, name) }
  }

  /// A setting of ``ServerSettings`` that `parse` reads from a `PUT`'s text.
  static func setting<T: LosslessStringConvertible & Sendable>(
    _ value: any WritableKeyPath<ServerSettings.Values, T> & Sendable,
    initial: any KeyPath<CouchServerOptions, T> & Sendable,
    parse: @escaping @Sendable (String) throws(CouchError) -> T
  ) -> Setting {
    Setting(
      read: { String($0.settings.current[keyPath: value]) },
      write: { server, text throws(CouchError) in
        let parsed = try parse(text)
        server.settings.update { $0[keyPath: value] = parsed }
      }, initial: { String($0.options[keyPath: initial]) })
  }

  static func positive(_ text: String, _ name: String) throws(CouchError) -> Int {
    guard let n = Int(text.filter { $0 != " " }), n > 0 else {
      throw .badRequest("\(name) must be a positive integer, not \"\(text.prefix(40))\"")
    }
    return n
  }

  /// Every section and key with its value now (server administrators' `[admins]` as
  /// CouchDB shows them, hashed).
  func configSections() -> [String: [(String, String)]] {
    var sections: [String: [(String, String)]] = [:]
    for (section, keys) in allSettings {
      for (key, setting) in keys.sorted(by: { $0.key < $1.key }) {
        if let value = setting.read(self) { sections[section, default: []].append((key, value)) }
      }
    }
    for (key, value) in jwtKeys() { sections["jwt_keys", default: []].append((key, value)) }
    if let auth = options.authenticator {
      for name in auth.serverAdminNames {
        if let hash = auth.serverAdminHash(name: name) {
          sections["admins", default: []].append((name, hash))
        }
      }
    }
    return sections
  }

  /// `/_node/{node}/_config[/{section}[/{key}]]` (server administrators), as
  /// `chttpd_node:handle_node_req` answers: `GET` of everything, a section (`{}` when wikilog
  /// has none of that name) or a key (`404 unknown_config_value`); `PUT` of a JSON string sets
  /// a key that can change at run time and answers the old value; `DELETE` of `admins/NAME`
  /// removes a server administrator. A setting fixed when the server starts, or one wikilog
  /// does not have, is `400` and names itself: nothing is accepted that would not apply.
  func config(node: String, path: [String], request: Request) async throws -> Response {
    _ = try checkedNodeName(node)
    // The body is read first, and the rest answered without suspending: Swift 6.3.1's
    // optimizer crashes (signal 11, splitting the coroutine) on this function's typed throws
    // inside an async one, so a release build needs the two apart.
    let body: JSONValue? =
      request.method == .put && path.count == 2 ? try await jsonBody(of: request) : nil
    return try configAnswer(path: path, method: request.method, body: body)
  }

  /// ``config(node:path:request:)`` once the body of a `PUT` is read.
  private func configAnswer(path: [String], method: HTTPRequest.Method, body: JSONValue?)
    throws -> Response
  {
    let head = method == .head
    func text(_ value: String) -> Response {
      CouchResponse.json(.string(value), includeBody: !head)
    }
    switch path.count {
    case 0:
      try allow(method, [.get, .head])
      let all = configSections().sorted { $0.key < $1.key }.map { section, keys in
        JSONObject.Member(
          key: section,
          value: .object(JSONObject(keys.map { .init(key: $0.0, value: .string($0.1)) })))
      }
      return CouchResponse.json(.object(JSONObject(all)), includeBody: !head)
    case 1:
      if path[0] == "_reload" {
        try allow(method, [.post])
        return CouchResponse.ok()
      }
      try allow(method, [.get, .head])
      let keys = configSections()[path[0]] ?? []
      return CouchResponse.json(
        .object(JSONObject(keys.map { .init(key: $0.0, value: .string($0.1)) })),
        includeBody: !head)
    case 2:
      let (section, key) = (path[0], path[1])
      let current = configSections()[section]?.first { $0.0 == key }?.1
      switch method {
      case .get, .head:
        guard let current else {
          throw CouchError("not_found", "unknown_config_value", status: 404)
        }
        return text(current)
      case .put:
        guard case .string(let raw) = body else {
          throw CouchError.badRequest("a JSON string expected")
        }
        let value = String(
          raw.drop(while: { $0 == " " }).reversed().drop(while: { $0 == " " }).reversed())
        if section == "admins" {
          guard let auth = options.authenticator else {
            throw CouchError.badRequest("this server signs no one in: it has no administrators")
          }
          do { try auth.addServerAdmin(name: key, password: value) } catch {
            throw CouchError(error)
          }
          return text(current ?? "")
        }
        if section == "jwt_keys" { return text(try setJWTKey(key, value) ?? "") }
        guard let setting = allSettings[section]?[key] else {
          throw CouchError.badRequest("wikilog has no setting \(section)/\(key)")
        }
        guard let write = setting.write else {
          // Its own value again changes nothing, and is true: accepted (a client restoring
          // what it read, a test suite's setup asking for what the server has).
          if let current, current == value { return text(current) }
          throw CouchError.badRequest(
            "\(section)/\(key) is set when the server starts; wikilog does not change it while it runs"
          )
        }
        try write(self, value)
        return text(current ?? "")
      case .delete:
        guard let current else {
          throw CouchError("not_found", "unknown_config_value", status: 404)
        }
        if section == "jwt_keys" {
          _ = try deleteJWTKey(key)
          return text(current)
        }
        if section != "admins" {
          // Back to the value the server started with.
          guard let setting = allSettings[section]?[key], let write = setting.write,
            let initial = setting.initial
          else {
            throw CouchError.badRequest(
              "\(section)/\(key) is set when the server starts; wikilog does not change it while it runs"
            )
          }
          try write(self, initial(self))
          return text(current)
        }
        guard let auth = options.authenticator else {
          throw CouchError("not_found", "unknown_config_value", status: 404)
        }
        if auth.serverAdminNames == [key], try !auth.users.users().contains(where: \.isAdmin) {
          throw CouchError.badRequest(
            "\(key) is this server's last administrator: removing it would leave none")
        }
        auth.removeServerAdmin(name: key)
        return text(current)
      default:
        throw CouchError.methodNotAllowed(["GET", "PUT", "DELETE"])
      }
    default:
      throw CouchError.notFound()
    }
  }
}
