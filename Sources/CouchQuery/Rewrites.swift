import CouchAPI
import Formats
import HTTPTypes
import Hummingbird
import JSON
import NIOCore
import Projections

/// A design document's `rewrites` (`/{db}/_design/{ddoc}/_rewrite/...`), as
/// `chttpd_rewrite:handle_rewrite_req` answers them: the request is routed again, through the
/// whole API, at the path the rewrite gives, as the same caller (signed in again from the same
/// headers), so a rewrite reaches nothing its caller could not reach directly.
///
/// - `rewrites` an array of rules (`from`, `to`, `method`, `query`, `formats`): the first rule
///   whose method and `from` match is taken; `:name` segments bind, `*` takes the rest; the
///   query string's `key`, `startkey`, `endkey` and `keys` are JSON. A `to` with a third `..`
///   (out of the database) is `500 insecure_rewrite_rule` unless `chttpd/secure_rewrites` is
///   false.
/// - `rewrites` a JavaScript function of the request: it answers a path, or an object with
///   `path`, `method`, `query`, `headers` and `body` for the routed request, or with `code`,
///   `headers` and `body` for an answer of its own; nothing is `404 rewrite_error`.
/// - A request rewritten more than `chttpd/rewrite_limit` times (100) is `400`.
enum Rewrites {
  /// How many rewrites the request being answered went through.
  @TaskLocal static var count = 0

  static func rewrite(_ r: DatabaseRequest) async throws -> Response {
    let limit = r.server.rewriteLimit
    guard count < limit else {
      throw CouchError.badRequest("Exceeded rewrite recursion limit")
    }
    let name = r.parameters["ddoc"]!
    let id = "_design/" + name
    try r.access.checkRead(id, in: r.store)
    let design: JSONValue
    do {
      design = try await r.blocking { try r.store.get(id) }
    } catch {
      throw CouchError("not_found", "missing", status: 404)
    }
    let prefix =
      "/" + PercentDecoding.encode(r.database) + "/_design/" + PercentDecoding.encode(name)
    let target: Request
    switch design["rewrites"] {
    case .array(let rules)?:
      let path = try rulePath(
        rules, method: r.method.rawValue, parts: r.rest, query: r.query,
        secure: r.server.secureRewrites)
      let normalized = normalize(prefix + "/" + path)
      target = Self.request(r.request, path: normalized)
    case .string?:
      let body = r.method == .get || r.method == .head ? [] : try await r.body()
      guard var req = try await QueryEndpoints.requestObject(r, body: body, docID: nil).objectValue
      else { throw CouchError("rewrite_error", "bad request object", status: 500) }
      for field in ["info", "form", "uuid", "id"] { req[field] = nil }
      let language = design["language"]?.stringValue ?? "javascript"
      let rev = design["_rev"]?.stringValue ?? ""
      let answer = try await r.blocking { [req] in
        try QueryEndpoints.callFunction(
          r.store, language, design, id, rev, ["rewrites"], [.object(req)])
      }
      guard case .array(let items) = answer, let head = items.first?.stringValue else {
        throw CouchError("unknown_error", "bad rewrite return", status: 500)
      }
      if head == "no_dispatch_rule" {
        throw CouchError("rewrite_error", "Invalid path.", status: 404)
      }
      guard head == "ok", items.count == 2, case .object(let result) = items[1] else {
        throw CouchError("rewrite_error", "bad rewrite", status: 500)
      }
      try validate(result)
      if let code = result["code"]?.numberValue?.int64Value {
        var headers = HTTPFields()
        for member in result["headers"]?.objectValue?.members ?? [] {
          if let field = HTTPField.Name(member.key), let value = member.value.stringValue {
            headers[field] = value
          }
        }
        let bytes = result["body"]?.stringValue.map { Array($0.utf8) } ?? body
        return Response(
          status: HTTPResponse.Status(code: Int(code)), headers: headers,
          body: ResponseBody(byteBuffer: ByteBuffer(bytes: bytes)))
      }
      guard let path = result["path"]?.stringValue else {
        throw CouchError("rewrite_error", "Rewrite result must produce a new path.", status: 500)
      }
      var normalized = normalize(prefix + "/" + path)
      let pairs: [(String, String)]
      if let query = result["query"]?.objectValue {
        pairs = query.members.map { ($0.key, $0.value.stringValue ?? "") }
      } else {
        pairs = r.query.pairs.map { ($0.name, $0.value) }
      }
      if !pairs.isEmpty {
        normalized +=
          "?" + pairs.map { quotePlus($0.0) + "=" + quotePlus($0.1) }.joined(separator: "&")
      }
      var headers = r.request.headers
      for member in result["headers"]?.objectValue?.members ?? [] {
        if let field = HTTPField.Name(member.key), let value = member.value.stringValue {
          headers[field] = value
        }
      }
      let newBody = result["body"]?.stringValue.map { Array($0.utf8) } ?? body
      if result["body"] != nil || !body.isEmpty {
        headers[.contentLength] = String(newBody.count)
        headers[.transferEncoding] = nil
      }
      let method = result["method"]?.stringValue.flatMap { HTTPRequest.Method($0) } ?? r.method
      target = Self.request(
        r.request, path: normalized, method: method, headers: headers,
        body: RequestBody(buffer: ByteBuffer(bytes: newBody)))
    default:
      throw CouchError("rewrite_error", "Invalid path.", status: 404)
    }
    return try await $count.withValue(count + 1) {
      try await r.server.answer(target, context: r.context)
    }
  }

  /// `request` at `path` (with its query string), its method, headers and body unless given.
  static func request(
    _ request: Request, path: String, method: HTTPRequest.Method? = nil,
    headers: HTTPFields? = nil, body: RequestBody? = nil
  ) -> Request {
    var head = request.head
    head.path = path
    if let method { head.method = method }
    if let headers { head.headerFields = headers }
    return Request(head: head, body: body ?? request.body)
  }

  /// `couch_query_servers:validate_rewrite_response`: the fields a rewrite function answers
  /// have their types.
  static func validate(_ result: JSONObject) throws {
    func bad(_ reason: String) -> CouchError { CouchError("rewrite_error", reason, status: 500) }
    for member in result.members {
      switch member.key {
      case "method": guard member.value.stringValue != nil else { throw bad("bad method") }
      case "path": guard member.value.stringValue != nil else { throw bad("bad path") }
      case "body": guard member.value.stringValue != nil else { throw bad("bad body") }
      case "headers", "query":
        guard let object = member.value.objectValue else { throw bad("bad \(member.key)") }
        for field in object.members where field.value.stringValue == nil {
          throw bad("object key/value must be strings \(field.key)=\(json(field.value))")
        }
      case "code":
        guard let code = member.value.numberValue?.int64Value, (200..<600).contains(code) else {
          throw bad("bad code")
        }
      default: break
      }
    }
  }

  // MARK: Rules

  /// A segment of a rule's `from` or `to`: a literal, a `:name` binding or `*`.
  enum Part: Equatable {
    case literal(String)
    case bind(String)
    case all
  }

  /// What a rule's variables are bound to: the path's and the query string's values (JSON for
  /// the key parameters), in CouchDB's order (the first of a name wins).
  typealias Bindings = [(name: String, value: JSONValue)]

  static let jsonParameters: Set<String> = [
    "key", "startkey", "start_key", "endkey", "end_key", "keys",
  ]

  /// The path (with its query string), relative to the design document, that the first rule
  /// matching `method` and `parts` gives (`chttpd_rewrite:try_bind_path`).
  static func rulePath(
    _ rules: [JSONValue], method: String, parts: [String], query: QueryParameters, secure: Bool
  ) throws -> String {
    var queryList: Bindings = []
    for (name, value) in query.pairs {
      if jsonParameters.contains(name) {
        do { queryList.append((name, try JSONValue(parsing: Array(value.utf8)))) } catch {
          throw CouchError.badRequest("invalid JSON in the `\(name)` parameter")
        }
      } else {
        queryList.append((name, .string(value)))
      }
    }
    // Every rule is read first, as CouchDB makes its dispatch list: an insecure one anywhere
    // is refused.
    struct Rule {
      var method: String?
      var from: [Part]
      var to: [Part]
      var query: [JSONObject.Member]
      var formats: JSONObject
    }
    var dispatch: [Rule] = []
    for case .object(let rule) in rules {
      guard let to = rule["to"]?.stringValue else {
        throw CouchError("error", "invalid_rewrite_target", status: 500)
      }
      dispatch.append(
        Rule(
          method: rule["method"]?.stringValue,
          from: try rule["from"]?.stringValue.map { try parse($0, secure: secure) } ?? [.all],
          to: try parse(to, secure: secure), query: rule["query"]?.objectValue?.members ?? [],
          formats: rule["formats"]?.objectValue ?? JSONObject()))
    }
    for rule in dispatch {
      if let m = rule.method, m != "*", m != method { continue }
      guard let (remaining, bound) = bind(rule.from, parts) else { continue }
      let bindings = bound + queryList
      // The rule's query, its variables replaced (reversed, as CouchDB accumulates it).
      var queryArgs: Bindings = []
      for member in rule.query {
        queryArgs.insert(
          (member.key, replace(member.value, bindings, formats: rule.formats)), at: 0)
      }
      let names = Set(queryArgs.map(\.name))
      let final = bindings.filter { !names.contains($0.name) } + queryArgs
      var path: [String] = []
      for part in rule.to {
        switch part {
        case .all:
          path += remaining
        case .bind(let name):
          path.append(final.first { $0.name == name }.map { text($0.value) } ?? "undefined")
        case .literal(let text):
          path.append(text)
        }
        if part == .all { break }
      }
      var encoded: [String] = []
      for binding in final where binding.name != "*" {
        let value =
          jsonParameters.contains(binding.name)
          ? json(binding.value) : text(binding.value)
        encoded.insert(quotePlus(binding.name) + "=" + quotePlus(value), at: 0)
      }
      return path.map(quotePlus).joined(separator: "/")
        + (encoded.isEmpty ? "" : "?" + encoded.joined(separator: "&"))
    }
    throw CouchError("not_found", "missing", status: 404)
  }

  /// A string value as itself, any other as its JSON.
  static func text(_ value: JSONValue) -> String {
    value.stringValue ?? json(value)
  }

  static func json(_ value: JSONValue) -> String {
    String(decoding: value.serialized(), as: UTF8.self)
  }

  /// `from` or `to` split at `/` (empty segments dropped); a third `..` is refused when rewrites
  /// are secure.
  static func parse(_ path: String, secure: Bool) throws -> [Part] {
    var parts: [Part] = []
    var dotDots = 0
    for segment in path.split(separator: "/", omittingEmptySubsequences: true) {
      switch segment {
      case "*": parts.append(.all)
      case "..":
        if dotDots == 2 && secure {
          throw CouchError("insecure_rewrite_rule", "too many ../.. segments", status: 500)
        }
        dotDots += 1
        parts.append(.literal(".."))
      default:
        if segment.hasPrefix(":") {
          parts.append(.bind(String(segment.dropFirst())))
        } else {
          parts.append(.literal(String(segment)))
        }
      }
    }
    return parts
  }

  /// The path's remaining segments and the bindings when `pattern` matches `parts`.
  static func bind(_ pattern: [Part], _ parts: [String]) -> (remaining: [String], Bindings)? {
    var bindings: Bindings = []
    var i = 0
    for (n, token) in pattern.enumerated() {
      if token == .all && n == pattern.count - 1 { return (Array(parts[i...]), bindings) }
      guard i < parts.count else { return nil }
      switch token {
      case .bind(let name): bindings.insert((name, .string(parts[i])), at: 0)
      case .literal(let text): guard text == parts[i] else { return nil }
      // `*` not last binds a segment, as any variable (CouchDB's `{bind, <<"*">>}`).
      case .all: bindings.insert(("*", .string(parts[i])), at: 0)
      }
      i += 1
    }
    return i == parts.count ? ([], bindings) : nil
  }

  /// A rule's query value with its `:name` (and `*`) variables replaced by their bindings,
  /// formatted as `formats` asks (`int`, `bool`).
  static func replace(_ value: JSONValue, _ bindings: Bindings, formats: JSONObject) -> JSONValue {
    func variable(_ name: String, default fallback: JSONValue) -> JSONValue {
      let bound = bindings.first { $0.name == name }?.value ?? fallback
      guard let format = formats[name]?.stringValue, let text = bound.stringValue else {
        return bound
      }
      switch format {
      case "int": return Int(text).map { JSONValue.int($0) } ?? bound
      case "bool":
        switch text.lowercased() {
        case "true": return .bool(true)
        case "false": return .bool(false)
        default: return bound
        }
      default: return bound
      }
    }
    switch value {
    case .string("*"): return variable("*", default: value)
    case .string(let text) where text.hasPrefix(":"):
      return variable(String(text.dropFirst()), default: value)
    case .array(let items):
      return .array(
        items.map { item in
          if case .string(let text) = item, text.hasPrefix(":") {
            return variable(String(text.dropFirst()), default: item)
          }
          return item
        })
    default: return value
    }
  }

  /// `mochiweb_util:quote_plus`: everything but letters, digits and `.-~_` percent-encoded,
  /// a space `+`.
  static func quotePlus(_ text: String) -> String {
    PercentDecoding.encode(text).split(separator: "%20", omittingEmptySubsequences: false)
      .joined(separator: "+")
  }

  /// `chttpd_rewrite:normalize_path`: `.` dropped, `..` takes the segment before it (kept when
  /// there is none), empty segments dropped; the query string is a segment like any other.
  static func normalize(_ path: String) -> String {
    var segments: [Substring] = []
    for segment in path.split(separator: "/", omittingEmptySubsequences: true) {
      switch segment {
      case ".": continue
      case "..":
        if segments.isEmpty || segments.last == ".." {
          segments.append("..")
        } else {
          segments.removeLast()
        }
      default: segments.append(segment)
      }
    }
    return "/" + segments.joined(separator: "/")
  }
}
