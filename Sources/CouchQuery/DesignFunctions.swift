import CouchAPI
import Formats
import HTTPTypes
import Hummingbird
import JSON
import Log
import NIOCore
import Projections
import Query
import RevTree

#if canImport(FoundationEssentials)
  import FoundationEssentials
#else
  import Foundation
#endif

extension QueryEndpoints {
  /// `_show`, `_list` and `_update` functions of a design document, run by the query server
  /// with CouchDB's request object:
  /// - `GET|POST /{db}/_design/{ddoc}/_show/{func}[/{docid}]`: the function's response for the
  ///   document (or null);
  /// - `GET|POST /{db}/_design/{ddoc}/_list/{func}/{view}` (or `…/{other-ddoc}/{view}`): the
  ///   function's output over the view's rows (queried with the request's view options);
  /// - `POST|PUT /{db}/_design/{ddoc}/_update/{func}[/{docid}]`: the function's document, saved
  ///   as the caller's edit, and its response (`X-Couch-Id`, `X-Couch-Update-NewRev`).
  static func designFunction(_ r: DatabaseRequest, kind: String) async throws -> Response {
    let (store, request, query, access) = (r.store, r.request, r.query, r.access)
    let ddoc = "_design/" + r.parameters["ddoc"]!
    let function = r.parameters["function"]!
    let rest = r.rest
    let method = request.method
    switch kind {
    case "_update": try r.allow([.post, .put])
    // A list answers OPTIONS too (`couch_mrview_show:handle_view_list_req`).
    case "_list": try r.allow([.get, .head, .post, .options])
    default: try r.allow([.get, .head, .post])
    }
    let design: JSONValue
    do {
      design = try await r.blocking { try store.get(ddoc) }
    } catch {
      throw CouchError("not_found", "missing", status: 404)
    }
    let section = ["_show": "shows", "_list": "lists", "_update": "updates"][kind]!
    guard design[section]?.objectValue?[function]?.stringValue != nil else {
      throw CouchError(
        "not_found", "missing function \(function) on design doc \(ddoc)", status: 404)
    }
    let bodyBytes = method == .get || method == .head ? [] : try await r.body()
    let docID = kind == "_list" ? nil : (rest.isEmpty ? nil : rest.joined(separator: "/"))
    let req = try await requestObject(r, body: bodyBytes, docID: docID)
    let rev = design["_rev"]?.stringValue ?? ""
    let language = design["language"]?.stringValue ?? "javascript"
    if kind == "_list" {
      return try await listFunction(
        r, design: design, ddoc: ddoc, rev: rev, language: language, function: function,
        body: bodyBytes, req: req)
    }
    // A show or an update function sees the document only if the caller may read it.
    var doc: JSONValue = .null
    if let docID {
      try access.checkRead(docID, in: store)
      doc = (try? await r.blocking { try store.get(docID) }) ?? .null
    }
    // A show's answer depends on the design document, the document, `Accept` and the user:
    // its ETag names them (`couch_mrview_show:show_etag`), and an `If-None-Match` naming it is
    // `304` without running the function.
    let showETag =
      kind == "_show"
      ? Self.showETag(
        designRev: rev, docRev: doc["_rev"]?.stringValue, accept: request.headers[.accept],
        user: r.user) : nil
    if let showETag, Self.matches(request.headers[.ifNoneMatch], showETag) {
      var headers = HTTPFields()
      headers[.eTag] = showETag
      headers[.contentLength] = "0"
      return Response(status: .notModified, headers: headers, body: ResponseBody())
    }
    let answer: JSONValue
    do {
      answer = try await r.blocking { [doc] in
        try Self.callFunction(
          store, language, design, ddoc, rev, [section, function], [doc, req])
      }
    } catch let error as CouchError
      where kind == "_show" && docID != nil && doc == .null && error.statusCode == 500
    {
      // As CouchDB's `render.js`: a show that fails on a document that does not exist is
      // that document's 404.
      throw CouchError("not_found", "document not found", status: 404)
    }
    switch kind {
    case "_show":
      guard case .array(let items) = answer, items.count == 2, items[0] == .string("resp") else {
        throw CouchError(
          "render_error", "the show function's answer is not a response", status: 500)
      }
      var response = Self.render(items[1], method: method, defaultStatus: .ok)
      if response.headers[.eTag] == nil, let showETag { response.headers[.eTag] = showETag }
      return response
    default:
      guard case .array(let items) = answer, items.count == 3, items[0] == .string("up") else {
        throw CouchError(
          "render_error", "the update function's answer is not [\"up\", doc, response]",
          status: 500)
      }
      var headers = HTTPFields()
      var status = HTTPResponse.Status.ok
      if case .object(var newDoc) = items[1] {
        // The function names the document (`doc._id`, `req.id`, `req.uuid`); the URL's id is
        // not taken for it, as in CouchDB.
        guard let given = newDoc["_id"], given != .null else {
          throw CouchError("bad_request", "Document id must not be empty", status: 400)
        }
        guard let id = given.stringValue else {
          throw CouchError("bad_request", "Document id must be a string", status: 400)
        }
        guard !id.isEmpty else {
          throw CouchError("bad_request", "Document id must not be empty", status: 400)
        }
        try access.checkWrite(docID: id, body: .object(newDoc), replicated: false, in: store)
        let result = try await store.putAsync(
          parsed: .object(newDoc), id: id, rev: newDoc["_rev"]?.stringValue, actor: r.actor)
        if let error = result.error { throw CouchError(error) }
        headers[HTTPField.Name("X-Couch-Id")!] = id
        headers[HTTPField.Name("X-Couch-Update-NewRev")!] = result.rev ?? ""
        status = .created
      }
      return Self.render(items[2], method: method, defaultStatus: status, extra: headers)
    }
  }

  /// `_list`: the view's rows through the list function, answered when it ends.
  static func listFunction(
    _ r: DatabaseRequest, design: JSONValue, ddoc: String, rev: String, language: String,
    function: String, body: [UInt8], req: JSONValue
  ) async throws -> Response {
    let (store, request, query, access, rest) = (r.store, r.request, r.query, r.access, r.rest)
    guard rest.count == 1 || rest.count == 2 else {
      throw CouchError("bad_request", "a list needs a view: _list/{func}/{view}", status: 400)
    }
    let viewDDoc = rest.count == 2 ? "_design/" + rest[0] : ddoc
    let viewName = rest.last!
    let includes: (@Sendable (String) -> Bool)?
    if let accessView = try access.view(store) {
      includes = { accessView.includes($0) }
    } else {
      includes = nil
    }
    // The view's options: the query string's, and for a POST the body's (`keys`, say).
    let posted = body.isEmpty ? nil : try CouchServer.json(parsing: body)
    let head: JSONValue
    let rows: [JSONValue]
    if viewName == "_all_docs" {
      // A list over `_all_docs` (`couch_mrview_show:handle_view_list` with the all-docs view).
      let found = try await r.blocking {
        try Self.allDocsRows(store, query: query, body: posted?.objectValue, includes: includes)
      }
      head = .object(
        JSONObject([
          .init(key: "total_rows", value: .int(found.totalRows)),
          .init(key: "offset", value: .int(found.offset)),
        ]))
      rows = found.rows
    } else {
      let viewQuery = try Self.viewQueries(query: query, body: posted, queries: false)[0]
      let result = try await r.blocking {
        try ViewQueries(store).query(
          ddoc: viewDDoc, view: viewName, query: viewQuery, includes: includes)
      }
      head = .object(
        JSONObject([
          .init(key: "total_rows", value: result.totalRows.map { .int($0) } ?? .null),
          .init(key: "offset", value: result.offset.map { .int($0) } ?? .null),
        ]))
      rows = result.rows
    }
    let (start, chunks, failure) = try await r.blocking {
      do {
        return try store.state.queryServers.with(language: language) {
          server throws(QueryServerError) -> (JSONValue, [String], (String, String)?) in
          let first = try server.callDesignFunction(
            ddoc: design, id: ddoc, rev: rev, scope: store.log.path, path: ["lists", function],
            arguments: [head, req])
          guard case .array(let s) = first, s.count == 3, s[0] == .string("start") else {
            throw .processFailed("the list function's first answer is not [\"start\", …]")
          }
          var out: [String] = (s[1].arrayValue ?? []).compactMap(\.stringValue)
          var ended = false
          do throws(QueryServerError) {
            for row in rows {
              let answer = try server.call(.array([.string("list_row"), row]))
              guard case .array(let a) = answer, a.count >= 2 else { break }
              out += (a[1].arrayValue ?? []).compactMap(\.stringValue)
              if a[0] == .string("end") {
                ended = true
                break
              }
            }
            if !ended {
              let last = try server.call(.array([.string("list_end")]))
              if case .array(let a) = last, a.count >= 2 {
                out += (a[1].arrayValue ?? []).compactMap(\.stringValue)
              }
            }
          } catch {
            // Once the list has started, CouchDB has sent its status and first chunks: a
            // function's error follows them inline, as `couch_mrview_show` writes it.
            guard case .failed(let name, let reason) = error else { throw error }
            return (s[2], out, (name, reason))
          }
          return (s[2], out, nil)
        }
      } catch let error as QueryServerError {
        let (name, reason) = error.couchError
        throw CouchError(name, reason, status: name == "not_acceptable" ? 406 : 500)
      }
    }
    var response = start.objectValue ?? JSONObject()
    // A list's answer is JSON unless its start says otherwise (`#extern_resp_args`'s default).
    var startHeaders = response["headers"]?.objectValue ?? JSONObject()
    if !startHeaders.members.contains(where: { $0.key.lowercased() == "content-type" }) {
      startHeaders["Content-Type"] = .string("application/json")
      response["headers"] = .object(startHeaders)
    }
    var text = chunks.joined()
    if let (name, reason) = failure {
      let error = JSONValue.object(
        JSONObject([
          .init(key: "code", value: .int(500)),
          .init(key: "error", value: .string(name == "not_acceptable" ? name : "render_error")),
          .init(key: "reason", value: .string("function raised error: " + reason)),
        ]))
      text += "\n" + String(decoding: error.serialized(), as: UTF8.self) + "\n"
    }
    response["body"] = .string(text)
    return Self.render(.object(response), method: request.method, defaultStatus: .ok)
  }

  static func callFunction(
    _ store: DocumentStore, _ language: String, _ design: JSONValue, _ id: String, _ rev: String,
    _ path: [String], _ arguments: [JSONValue]
  ) throws -> JSONValue {
    do {
      return try store.state.queryServers.with(language: language) {
        server throws(QueryServerError) in
        try server.callDesignFunction(
          ddoc: design, id: id, rev: rev, scope: store.log.path, path: path,
          arguments: arguments)
      }
    } catch {
      let (name, reason) = error.couchError
      throw CouchError(name, reason, status: name == "not_acceptable" ? 406 : 500)
    }
  }

  /// The rows of `_all_docs` for a list function: the view options that apply to it
  /// (`startkey`/`endkey`, `keys`, `descending`, `inclusive_end`, `include_docs`, `limit`,
  /// `skip`), the rows the caller may read.
  static func allDocsRows(
    _ store: DocumentStore, query: QueryParameters, body: JSONObject?,
    includes: (@Sendable (String) -> Bool)?
  ) throws -> (totalRows: Int, offset: Int, rows: [JSONValue]) {
    func value(_ names: String...) throws -> JSONValue? {
      for name in names {
        if let text = query[name] {
          do { return try JSONValue(parsing: Array(text.utf8)) } catch {
            throw CouchError("query_parse_error", "Invalid JSON for `\(name)`", status: 400)
          }
        }
        if let member = body?[name] { return member }
      }
      return nil
    }
    var options = AllDocsOptions()
    options.startKey = try value("startkey", "start_key")?.stringValue
    options.endKey = try value("endkey", "end_key")?.stringValue
    options.keys = try value("keys")?.arrayValue?.compactMap(\.stringValue)
    options.descending = try value("descending") == .bool(true)
    options.inclusiveEnd = try value("inclusive_end") != .bool(false)
    options.includeDocs = try value("include_docs") == .bool(true)
    options.limit = try value("limit")?.numberValue?.int64Value.map { Int($0) }
    options.skip = try value("skip")?.numberValue?.int64Value.map { Int($0) } ?? 0
    if let includes {
      options.visible = DocumentFilter(
        name: "_list_access", parameters: [:], wakeKeys: [], keys: { _ in [] },
        includes: includes)
    }
    let result = try store.allDocs(options)
    return (result.totalRows, result.offset, result.rows)
  }

  /// CouchDB's request object for design functions (`chttpd_external:json_req_obj`).
  static func requestObject(_ r: DatabaseRequest, body: [UInt8], docID: String?) async throws
    -> JSONValue
  {
    let (store, db, request, query) = (r.store, r.database, r.request, r.query)
    var queryObject = JSONObject()
    for (name, value) in query.pairs { queryObject[name] = .string(value) }
    // The header names as the client sent them (`Accept`, `User-Agent`), and `Host`, as
    // `chttpd_external:json_req_obj` gives them.
    var headers = JSONObject()
    if let authority = request.head.authority { headers["Host"] = .string(authority) }
    for field in request.headers { headers[field.name.rawName] = .string(field.value) }
    // The path's segments decoded, as CouchDB's `path_parts`.
    let path = request.uri.path.split(separator: "/").map {
      JSONValue.string((try? PercentDecoding.decode($0)) ?? String($0))
    }
    let info = try await r.blocking { try store.info }
    let security = try await r.blocking { try store.security() }
    return .object(
      JSONObject([
        .init(
          key: "info",
          value: .object(
            JSONObject([
              .init(key: "db_name", value: .string(db)),
              .init(key: "doc_count", value: .int(info.docCount)),
              .init(key: "update_seq", value: .string(store.sequenceString(info.updateSeq))),
            ]))),
        .init(key: "id", value: docID.map(JSONValue.string) ?? .null),
        .init(
          key: "uuid", value: .string(String(UUID().uuidString.lowercased().filter { $0 != "-" }))),
        .init(key: "method", value: .string(request.method.rawValue)),
        .init(key: "requested_path", value: .array(path)),
        .init(key: "path", value: .array(path)),
        .init(key: "raw_path", value: .string(request.uri.description)),
        .init(key: "query", value: .object(queryObject)),
        .init(key: "headers", value: .object(headers)),
        .init(
          key: "body",
          value: .string(body.isEmpty ? "undefined" : String(decoding: body, as: UTF8.self))),
        .init(key: "peer", value: .string("127.0.0.1")),
        .init(key: "form", value: .object(Self.form(request, body: body))),
        .init(key: "cookie", value: .object(Self.cookies(request))),
        .init(
          key: "userCtx",
          value: .object(
            JSONObject([
              .init(key: "db", value: .string(db)),
              .init(key: "name", value: r.user.name.map(JSONValue.string) ?? .null),
              .init(key: "roles", value: .array(r.user.roles.map(JSONValue.string))),
            ]))),
        .init(key: "secObj", value: security.json),
      ]))
  }

  /// `req.form`: a `application/x-www-form-urlencoded` body's fields (`+` a space,
  /// percent-decoded), as `chttpd_external:json_req_obj` gives them; empty for any other body.
  static func form(_ request: Request, body: [UInt8]) -> JSONObject {
    let type = request.headers[.contentType]?.lowercased() ?? ""
    guard type.hasPrefix("application/x-www-form-urlencoded"),
      let fields = try? QueryParameters(String(decoding: body, as: UTF8.self))
    else { return JSONObject() }
    return JSONObject(fields.pairs.map { .init(key: $0.name, value: .string($0.value)) })
  }

  /// `req.cookie`: the request's cookies by name (`mochiweb_request:parse_cookie`).
  static func cookies(_ request: Request) -> JSONObject {
    var members: [JSONObject.Member] = []
    for header in request.headers[values: .cookie] {
      for part in header.split(separator: ";") {
        let pair = part.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
        func trimmed(_ text: Substring) -> String {
          String(
            text.drop(while: { $0 == " " || $0 == "\t" }).reversed().drop(while: {
              $0 == " " || $0 == "\t"
            }).reversed())
        }
        let name = trimmed(pair[0])
        guard !name.isEmpty else { continue }
        let value = pair.count > 1 ? trimmed(pair[1]) : ""
        members.append(.init(key: name, value: .string(value)))
      }
    }
    return JSONObject(members)
  }

  /// The ETag of a show's answer: an MD5 of what it depends on, quoted.
  static func showETag(designRev: String, docRev: String?, accept: String?, user: UserContext)
    -> String
  {
    let parts = [
      designRev, docRev ?? "nil", accept ?? "", user.name ?? "null",
      user.roles.joined(separator: ","),
    ]
    return "\"" + MD5.hash(Array(parts.joined(separator: "\u{0}").utf8)).description + "\""
  }

  /// Whether an `If-None-Match` header names `etag` by weak comparison (`W/"…"` too), or is
  /// `*`.
  static func matches(_ ifNoneMatch: String?, _ etag: String) -> Bool {
    guard let ifNoneMatch else { return false }
    return ifNoneMatch.split(separator: ",").contains { candidate in
      var trimmed = candidate.filter { $0 != " " && $0 != "\t" }
      if trimmed.hasPrefix("W/") { trimmed.removeFirst(2) }
      return trimmed == etag || trimmed == "*"
    }
  }

  /// A design function's response object (`code`, `headers`, `body`, `json`, `base64`).
  static func render(
    _ response: JSONValue, method: HTTPRequest.Method, defaultStatus: HTTPResponse.Status,
    extra: HTTPFields = [:]
  ) -> Response {
    let object = response.objectValue ?? JSONObject()
    var fields = extra
    var bytes: [UInt8] = []
    var contentType = "text/html; charset=utf-8"
    if let json = object["json"] {
      bytes = json.serialized()
      contentType = "application/json"
    } else if let b64 = object["base64"]?.stringValue, let data = Base64.decode(b64) {
      bytes = data
      contentType = "application/binary"
    } else if let body = object["body"]?.stringValue {
      bytes = Array(body.utf8)
    }
    fields[.contentType] = contentType
    for member in object["headers"]?.objectValue?.members ?? [] {
      if let name = HTTPField.Name(member.key), let value = member.value.stringValue {
        fields[name] = value
      }
    }
    let code = object["code"]?.numberValue?.int64Value.map { Int($0) }
    let status = code.map { HTTPResponse.Status(code: $0) } ?? defaultStatus
    if method == .head {
      fields[.contentLength] = String(bytes.count)
      return Response(status: status, headers: fields, body: ResponseBody())
    }
    return Response(
      status: status, headers: fields, body: ResponseBody(byteBuffer: ByteBuffer(bytes: bytes)))
  }
}
