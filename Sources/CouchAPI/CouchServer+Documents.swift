import Auth
import Formats
import HTTPTypes
import Hummingbird
import JSON
import NIOCore
import Projections
import RevTree

extension CouchServer {
  // MARK: Documents

  /// `GET/HEAD/PUT/DELETE/COPY /{db}/{docid}`.
  ///
  /// `PUT` writes the document under the URL's id (a different `_id` in the body is ignored, as
  /// CouchDB does); with `?batch=ok` it answers `202 {"ok":true,"id":...}` without the rev, as
  /// CouchDB does (wikilog still makes the write durable before answering, and reports its
  /// error if it fails). `COPY` copies the document (`?rev=` or `If-Match` names the source
  /// revision) to the `Destination` header's id, which may end in `?rev=` to overwrite.
  func document(
    _ store: DocumentStore, db: String, id: String, request: Request, query: QueryParameters,
    context: Context, caller: Caller, access: DatabaseAccess
  ) async throws -> Response {
    let handler = try Self.documentMethods.handler(for: request.method)
    return try await handler(self)(store, db, id, request, query, context, caller, access)
  }

  /// The methods of `/{db}/{docid}` and their handlers (``MethodTable``).
  static let documentMethods = MethodTable<
    @Sendable (CouchServer) ->
      @Sendable (
        DocumentStore, String, String, Request, QueryParameters, Context, Caller, DatabaseAccess
      ) async throws -> Response
  >(
    [
      .get: documentGet, .head: documentGet, .put: documentPut, .delete: documentDelete,
      copy: documentCopy, .post: documentFormPost,
    ],
    allow: ["DELETE", "GET", "HEAD", "POST", "PUT", "COPY"])

  /// `GET and HEAD` of document.
  func documentGet(
    _ store: DocumentStore, db: String, id: String, request: Request, query: QueryParameters,
    context: Context, caller: Caller, access: DatabaseAccess
  ) async throws -> Response {
    try access.checkRead(id, in: store)
    return try getDocument(
      store, id: id, query: query, head: request.method == .head,
      accept: request.headers[.accept], ifNoneMatch: request.headers[.ifNoneMatch],
      access: access)
  }

  /// `PUT /{db}/{docid}`.
  func documentPut(
    _ store: DocumentStore, db: String, id: String, request: Request, query: QueryParameters,
    context: Context, caller: Caller, access: DatabaseAccess
  ) async throws -> Response {
    let body = try await self.body(of: request)
    let rev = try requestedRev(request, query)
    let result: DocumentWriteResult
    let replicated = query["new_edits"] == "false"
    if let type = request.headers[.contentType],
      type.lowercased().hasPrefix("multipart/related")
    {
      result = try await putMultipart(
        store, id: id, body: body, contentType: type, rev: rev,
        newEdits: !replicated, context: context, caller: caller, access: access)
    } else {
      // The body is parsed once, here: the checks and the store share the value.
      let parsed = Result { () throws(StoreError) in try DocumentInput.parse(body) }
      // A body `_rev` against `If-Match` (CouchDB names the etag; against `?rev=`, the store
      // names the query string).
      if query["rev"] == nil, let etag = request.headers[.ifMatch],
        case .success(.object(let object)) = parsed, let bodyRev = object["_rev"]?.stringValue,
        bodyRev
          != (etag.count >= 2 && etag.hasPrefix("\"") && etag.hasSuffix("\"")
            ? String(etag.dropFirst().dropLast()) : etag)
      {
        throw CouchError.badRequest("Document rev and etag have different values")
      }
      result = try await putParsed(
        store, db: db, id: id, parsed: parsed, rev: rev, replicated: replicated,
        context: context, caller: caller, access: access)
    }
    if query["batch"] == "ok" { return batchAccepted(result) }
    return writeResponse(result, location: location(db, id))
  }

  /// The checked write of a parsed document body (`PUT`, and a form's `POST`).
  func putParsed(
    _ store: DocumentStore, db: String, id: String, parsed: Result<JSONValue, StoreError>,
    rev: String?, replicated: Bool, context: Context, caller: Caller, access: DatabaseAccess
  ) async throws -> DocumentWriteResult {
    var parsed = parsed
    if access.policy?.stored != nil { parsed = .success(try access.stored(parsed.get())) }
    if case .success(.object(let object)) = parsed {
      parsed = .success(.object(try access.owned(object, id: id)))
    }
    try access.checkWrite(
      docID: id, body: try? parsed.get(), replicated: replicated, in: store)
    let document = try parsed.get()
    if replicated {
      return try await putReplicated(
        store, id: id, document: document, context: context, caller: caller)
    }
    let actor = caller.actor
    return try await store.putAsync(
      parsed: document, id: id, rev: rev, actor: actor, origin: replicationOrigin(context),
      idWinsOverBody: true)
  }

  /// `POST /{db}/{docid}` from an HTML form (`multipart/form-data`), as CouchDB's
  /// `chttpd_db` takes it: its `_rev` field names the revision (or a `_doc` field gives the
  /// whole document as JSON), and each `_attachments` file field becomes an attachment of its
  /// file name and type, beside the revision's others, in one new revision. The `Referer` must
  /// name this host (a page of another site cannot post it); another content type is `415`.
  func documentFormPost(
    _ store: DocumentStore, db: String, id: String, request: Request, query: QueryParameters,
    context: Context, caller: Caller, access: DatabaseAccess
  ) async throws -> Response {
    if access.plainWritesOnly { try requireServerAdmin(caller) }
    guard let referer = request.headers[.referer] else {
      throw CouchError.badRequest("Referer header required.")
    }
    let host = request.headers[settings.current.forwarded.host] ?? request.head.authority ?? ""
    guard Self.authority(ofURL: referer) == host.lowercased() else {
      throw CouchError.badRequest("Referer header must match host.")
    }
    guard let type = request.headers[.contentType],
      type.lowercased().hasPrefix("multipart/form-data"),
      let boundary = Multipart.boundary(of: type)
    else {
      throw CouchError(
        "bad_content_type", "Content-Type must be multipart/form-data", status: 415)
    }
    let body = try await self.body(of: request)
    guard let parts = Multipart.parse(body, boundary: boundary) else {
      throw CouchError.badRequest("The multipart/form-data body could not be read.")
    }
    var fields: [String: [UInt8]] = [:]
    var files: [(name: String, type: String, data: [UInt8])] = []
    for part in parts {
      let disposition = Self.dispositionParameters(part.headers["content-disposition"] ?? "")
      guard let field = disposition["name"] else { continue }
      if field == "_attachments", let file = disposition["filename"], !file.isEmpty {
        files.append(
          (file, part.headers["content-type"] ?? AttachmentInput.defaultContentType, part.body))
      } else if fields[field] == nil {
        fields[field] = part.body
      }
    }
    var document: JSONObject
    var rev: String?
    if let json = fields["_doc"] {
      guard case .object(let object) = try DocumentInput.parse(json) else {
        throw CouchError.badRequest("Document must be a JSON object")
      }
      document = object
      rev = object["_rev"]?.stringValue
    } else {
      guard let given = fields["_rev"].map({ String(decoding: $0, as: UTF8.self) }),
        !given.isEmpty
      else { throw CouchError.badRequest("The form has neither _rev nor _doc.") }
      rev = given
      try access.checkRead(id, in: store)
      var options = GetOptions()
      options.rev = given
      guard case .object(let object) = try store.get(id, options: options) else {
        throw StoreError.notFound("missing")
      }
      document = object
    }
    var attachments = document["_attachments"]?.objectValue ?? JSONObject()
    for file in files {
      attachments[file.name] = .object(
        JSONObject([
          "content_type": .string(file.type), "data": .string(Base64.encode(file.data)),
        ]))
    }
    if !attachments.members.isEmpty { document["_attachments"] = .object(attachments) }
    document["_id"] = nil
    let result = try await putParsed(
      store, db: db, id: id, parsed: .success(.object(document)), rev: rev, replicated: false,
      context: context, caller: caller, access: access)
    return writeResponse(result, location: location(db, id))
  }

  /// The `host[:port]` of an absolute URL, lowercased; nil when it has none.
  static func authority(ofURL url: String) -> String? {
    let utf8 = Array(url.utf8)
    guard let colon = utf8.firstIndex(of: UInt8(ascii: ":")), colon + 3 <= utf8.count,
      utf8[colon + 1] == UInt8(ascii: "/"), utf8[colon + 2] == UInt8(ascii: "/")
    else { return nil }
    let rest = String(decoding: utf8[(colon + 3)...], as: UTF8.self)
    let authority = rest.prefix { $0 != "/" && $0 != "?" && $0 != "#" }
    let host = authority.split(separator: "@").last.map(String.init) ?? ""
    return host.isEmpty ? nil : host.lowercased()
  }

  /// The parameters of a `Content-Disposition` value (`form-data; name="_rev"`), unquoted.
  static func dispositionParameters(_ value: String) -> [String: String] {
    var out: [String: String] = [:]
    for parameter in value.split(separator: ";").dropFirst() {
      let pair = parameter.drop { $0 == " " || $0 == "\t" }
      guard let equals = pair.firstIndex(of: "=") else { continue }
      var text = pair[pair.index(after: equals)...]
      if text.count >= 2, text.hasPrefix("\""), text.hasSuffix("\"") {
        text = text.dropFirst().dropLast()
      }
      out[pair[..<equals].lowercased()] = String(text)
    }
    return out
  }

  /// `DELETE /{db}/{docid}`.
  func documentDelete(
    _ store: DocumentStore, db: String, id: String, request: Request, query: QueryParameters,
    context: Context, caller: Caller, access: DatabaseAccess
  ) async throws -> Response {
    // The write check first: a document the caller may not see is refused as one that does
    // not exist is (403 when they may not write there), never with a 404 that tells it apart.
    try access.checkWrite(docID: id, body: nil, replicated: false, in: store)
    try access.checkRead(id, in: store)
    // Then, as CouchDB opens the document first: 404 `missing` or `deleted`, and only then
    // 409 without a `rev`.
    guard let winner = try store.record(id)?.tree.winner else {
      throw StoreError.notFound("missing")
    }
    guard winner.status == .available else { throw StoreError.notFound("deleted") }
    guard let rev = try requestedRev(request, query) else { throw StoreError.conflict }
    let actor = caller.actor
    let result = try await store.deleteAsync(
      id, rev: rev, actor: actor, origin: replicationOrigin(context))
    return writeResponse(result, status: .ok)
  }

  /// `COPY /{db}/{docid}`.
  func documentCopy(
    _ store: DocumentStore, db: String, id: String, request: Request, query: QueryParameters,
    context: Context, caller: Caller, access: DatabaseAccess
  ) async throws -> Response {
    try access.checkRead(id, in: store)
    return try await copyDocument(
      store, db: db, id: id, request: request, query: query, caller: caller, access: access)
  }

  /// CouchDB's refusal of a replicated write (`new_edits=false`) without a revision.
  static let replicatedWithoutRev =
    "When `new_edits: false`, the document needs `_rev` or `_revisions` specified"

  /// The `COPY` method (WebDAV's, which CouchDB uses).
  static let copy = HTTPRequest.Method("COPY")!

  /// `/{db}/{docid}`, percent-encoded, for `Location`.
  func location(_ db: String, _ id: String) -> String {
    "/\(PercentDecoding.encode(db))/\(PercentDecoding.encode(id))"
  }

  /// `COPY /{db}/{docid}` with `Destination: {target}` or `Destination: {target}?rev={rev}`:
  /// writes the body of the source document (its winner, or the revision `?rev=`/`If-Match`
  /// names) as a new revision of `target` (a new document, or an edit of the leaf `rev`;
  /// without `rev` an existing target is a `409` conflict). Answers `201` with the target's
  /// id and new rev, `ETag` and `Location`, as CouchDB.
  func copyDocument(
    _ store: DocumentStore, db: String, id: String, request: Request, query: QueryParameters,
    caller: Caller, access: DatabaseAccess
  ) async throws -> Response {
    guard let destination = request.headers[Self.destinationHeader] else {
      throw CouchError.badRequest("Destination header is mandatory for COPY.")
    }
    let lowered = destination.lowercased()
    if lowered.hasPrefix("http://") || lowered.hasPrefix("https://") {
      throw CouchError.badRequest("Destination URL must be relative.")
    }
    var targetID = Substring(destination)
    var targetRev: String?
    if let question = destination.firstIndex(of: "?") {
      targetID = destination[..<question]
      let parameter = destination[destination.index(after: question)...]
      guard let eq = parameter.firstIndex(of: "=") else {
        throw CouchError.badRequest("Destination header must be {docid} or {docid}?rev={rev}")
      }
      targetRev = String(parameter[parameter.index(after: eq)...])
    }
    let target = try PercentDecoding.decoded(targetID)
    if target.hasPrefix("_local/") || id.hasPrefix("_local/") {
      throw CouchError.notImplemented("COPY of _local documents")
    }
    // The attachments go by reference: the copy shares their blobs and keeps their `revpos`,
    // as CouchDB's copy keeps attachments already on disk.
    let source = try store.get(id, options: GetOptions(rev: try requestedRev(request, query)))
    // What the caller may read of it (in `_replicator`, another's without credentials).
    var body = access.shown(source).objectValue ?? JSONObject()
    body.members.removeAll { $0.key == "_id" || $0.key == "_rev" || $0.key == "_attachments" }
    body = try access.owned(body, id: target)
    var input = try DocumentInput(json: JSONValue.object(body).serialized())
    if let atts = source["_attachments"]?.objectValue, let rev = source["_rev"]?.stringValue {
      input.attachments = try store.attachments(id, names: atts.members.map(\.key), rev: rev)
        .map { .copied($0) }
    }
    if access.plainWritesOnly { try requireServerAdmin(caller) }
    try access.checkWrite(docID: target, body: .object(body), replicated: false, in: store)
    let actor = caller.actor
    let result = try await store.writeAsync(
      input, id: target, rev: targetRev, newEdits: true, actor: actor)
    return writeResponse(result, location: location(db, target))
  }

  /// The `Destination` request header of `COPY`.
  static let destinationHeader = HTTPField.Name("Destination")!

  /// CouchDB's answer to a `?batch=ok` write: `202 {"ok":true,"id":...}`, no rev, no `ETag`.
  func batchAccepted(_ result: DocumentWriteResult) -> Response {
    CouchResponse.json(
      .object(JSONObject(["ok": .bool(true), "id": .string(result.id)])), status: .accepted)
  }

  /// `?rev=` or `If-Match`; both must agree when given.
  func requestedRev(_ request: Request, _ query: QueryParameters) throws(CouchError)
    -> String?
  {
    let fromQuery = query["rev"]
    let fromHeader = request.headers[.ifMatch].map { value in
      value.count >= 2 && value.hasPrefix("\"") && value.hasSuffix("\"")
        ? String(value.dropFirst().dropLast()) : value
    }
    if let fromQuery, let fromHeader, fromQuery != fromHeader {
      throw .badRequest("Document rev and etag have different values.")
    }
    return fromQuery ?? fromHeader
  }

  /// `GET /{db}/{docid}` with `rev`, `revs`, `revs_info`, `open_revs`, `latest`, `conflicts`,
  /// `deleted_conflicts`, `local_seq` (and `meta`, which is `conflicts` + `deleted_conflicts` +
  /// `revs_info`). As in CouchDB (`chttpd_db:parse_doc_query`), a flag is set by `true` alone;
  /// any other value (`True`, `1`, `yes`) is ignored, without an error.
  ///
  /// With `access`, each revision is shown as the caller may see it
  /// (``DatabaseAccess/shown(_:madeUpRev:)``).
  ///
  /// A revision read without metadata (no `revs_info`, `conflicts`, `deleted_conflicts`,
  /// `local_seq`) carries `ETag: "<rev>"`, and an `If-None-Match` naming it is `304 Not
  /// Modified` without a body, as `chttpd_db:send_doc` answers through `etag_respond`.
  func getDocument(
    _ store: DocumentStore, id: String, query: QueryParameters, head: Bool, accept: String? = nil,
    ifNoneMatch: String? = nil, access: DatabaseAccess? = nil
  ) throws -> Response {
    let meta = query.flag("meta")
    var options = GetOptions(
      rev: query["rev"], revs: query.flag("revs"),
      revsInfo: query.flag("revs_info") || meta,
      conflicts: query.flag("conflicts") || meta,
      deletedConflicts: query.flag("deleted_conflicts") || meta,
      latest: query.flag("latest"), localSeq: query.flag("local_seq"),
      attachments: query.flag("attachments"), attsSince: try query.stringArray("atts_since"),
      attEncodingInfo: query.flag("att_encoding_info"))
    if let openRevs = query["open_revs"] {
      options.rev = nil
      let which: OpenRevs
      if openRevs == "all" {
        which = .all
      } else {
        guard let revs = try query.stringArray("open_revs") else {
          throw CouchError.badRequest("open_revs must be \"all\" or a JSON array of revs")
        }
        which = .revs(revs)
      }
      if AcceptHeader.accepts(accept, "multipart/mixed") {
        return try openRevsMultipart(
          store, id: id, which, options: options, head: head, access: access)
      }
      let found = try store.openRevs(id, which, options: options)
      try Self.requireRevisions(found, which)
      let results = found.map { result in
        guard let access, let doc = result["ok"] else { return result }
        return JSONValue.object(JSONObject(["ok": access.shown(doc)]))
      }
      return CouchResponse.json(.array(results), includeBody: !head)
    }
    // `chttpd_db:send_doc_efficiently`: with `attachments=true`, a document that has
    // attachments goes as `multipart/related` when `Accept` takes it (an absent one does), its
    // attachments' bytes after the JSON rather than inline.
    let multipart = options.attachments && AcceptHeader.accepts(accept, "multipart/related")
    if multipart {
      options.follows = true
      options.attEncodingInfo = true
    }
    let stored = try store.get(id, options: options)
    let doc = access?.shown(stored, madeUpRev: !multipart) ?? stored
    var headers = HTTPFields()
    if let rev = doc["_rev"]?.stringValue { headers[.eTag] = "\"\(rev)\"" }
    let hasMeta =
      options.revsInfo || options.conflicts || options.deletedConflicts || options.localSeq
    if !hasMeta, let etag = headers[.eTag], Self.matches(ifNoneMatch, etag) {
      return Self.notModified(headers)
    }
    if multipart, doc["_attachments"]?.objectValue?.members.isEmpty == false {
      let (type, body) = try MultipartAnswer.document(
        doc, id: id, boundary: Multipart.newBoundary(), store: store)
      return body.response(
        contentType: type, headers: headers, head: head, store: store, server: self)
    }
    return CouchResponse.json(doc, includeBody: !head, headers: headers)
  }

  /// Whether an `If-None-Match` header names `etag` (or is `*`).
  /// Whether `If-None-Match` names `etag`: by weak comparison, as RFC 9110 has it for this
  /// header (`W/"1-abc"` names `"1-abc"`), or `*`.
  static func matches(_ ifNoneMatch: String?, _ etag: String) -> Bool {
    guard let ifNoneMatch else { return false }
    let strong = etag.hasPrefix("W/") ? String(etag.dropFirst(2)) : etag
    return ifNoneMatch.split(separator: ",").contains { candidate in
      var trimmed = candidate.filter { $0 != " " && $0 != "\t" }
      if trimmed.hasPrefix("W/") { trimmed.removeFirst(2) }
      return trimmed == strong || trimmed == "*"
    }
  }

  /// `304 Not Modified` with `headers` and, as CouchDB sends it, `Content-Length: 0`.
  static func notModified(_ headers: HTTPFields) -> Response {
    var headers = headers
    headers[.contentLength] = "0"
    return Response(status: .notModified, headers: headers, body: ResponseBody())
  }

  /// `PUT /{db}/{docid}?new_edits=false`: a replicated revision with its `_revisions`, stored
  /// under the URL's id.
  func putReplicated(
    _ store: DocumentStore, id: String, document: JSONValue, context: Context, caller: Caller
  ) async throws -> DocumentWriteResult {
    let input = try DocumentInput(document)
    guard let rev = input.rev else { throw CouchError.badRequest(Self.replicatedWithoutRev) }
    var object = input.full.objectValue ?? JSONObject()
    object.members.removeAll { $0.key == "_id" }
    object.members.insert(.init(key: "_id", value: .string(id)), at: 0)
    let doc = JSONValue.object(object)
    let actor = caller.actor
    let origin = replicationOrigin(context)
    let failures = try await store.bulkDocsAsync(
      [doc], newEdits: false, actor: actor, origin: origin)
    if let error = failures.first?.error { throw error }
    return DocumentWriteResult(id: id, rev: rev)
  }

  /// `PUT /{db}/{docid}` with a `multipart/related` body: the document's JSON first, then the
  /// bytes of each `"follows": true` attachment in order (CouchDB's replicator sends documents
  /// with attachments so, gzip-stored ones still gzip with `encoding`).
  func putMultipart(
    _ store: DocumentStore, id: String, body: [UInt8], contentType: String, rev: String?,
    newEdits: Bool, context: Context, caller: Caller, access: DatabaseAccess
  ) async throws -> DocumentWriteResult {
    guard let boundary = Multipart.boundary(of: contentType),
      let parts = Multipart.parse(body, boundary: boundary), let first = parts.first
    else { throw CouchError.badRequest("malformed multipart/related body") }
    if let type = first.headers["content-type"],
      !type.lowercased().hasPrefix("application/json")
    {
      throw CouchError(
        "bad_content_type", "Content-Type must be application/json", status: 415)
    }
    if access.plainWritesOnly { try requireServerAdmin(caller) }
    var json = try access.owned(first.body, id: id)
    if access.policy?.stored != nil {
      json = try access.stored(DocumentInput.parse(json)).serialized()
    }
    var input = try DocumentInput(json: json)
    try input.attachFollowing(parts.dropFirst().map(\.body))
    try access.checkWrite(
      docID: id, body: try? JSONValue(parsing: json), replicated: !newEdits, in: store)
    let actor = caller.actor
    return try await store.writeAsync(
      input, id: id, rev: rev, newEdits: newEdits, origin: replicationOrigin(context),
      actor: actor)
  }

  /// `GET /{db}/{docid}?open_revs=...` when `Accept` takes `multipart/mixed` (an absent
  /// `Accept` does, as in CouchDB), as `chttpd_db:send_docs_multipart`: one part per revision,
  /// each as ``MultipartAnswer/document(_:id:boundary:store:)`` writes it (a revision with
  /// attachments to send a `multipart/related` part); a missing revision an
  /// `application/json; error="true"` part.
  func openRevsMultipart(
    _ store: DocumentStore, id: String, _ which: OpenRevs, options: GetOptions, head: Bool,
    access: DatabaseAccess? = nil
  ) throws -> Response {
    var options = options
    options.attachments = true
    options.follows = true
    options.attEncodingInfo = true
    let results = try store.openRevs(id, which, options: options)
    try Self.requireRevisions(results, which)
    let outer = Multipart.newBoundary()
    let inner = Multipart.newBoundary()
    var out = MultipartAnswer()
    out.append("--\(outer)")
    for result in results {
      if let stored = result["ok"] {
        let doc = access?.shown(stored, madeUpRev: false) ?? stored
        let (type, part) = try MultipartAnswer.document(
          doc, id: id, boundary: inner, store: store)
        out.append("\r\nContent-Type: \(type)\r\n\r\n")
        out.append(part)
      } else {
        out.append("\r\nContent-Type: application/json; error=\"true\"\r\n\r\n")
        out.append(result.serialized())
      }
      out.append("\r\n--\(outer)")
    }
    out.append("--")
    return out.response(
      contentType: "multipart/mixed; boundary=\"\(outer)\"", head: head, store: store, server: self)
  }

  /// `open_revs=all` of a document that does not exist: `404 not_found` `missing`, as
  /// `chttpd_db:db_doc_req` answers an empty result for `all` (a list of revisions answers
  /// each as missing instead).
  static func requireRevisions(_ results: [JSONValue], _ which: OpenRevs) throws(CouchError) {
    if case .all = which, results.isEmpty {
      throw CouchError("not_found", "missing", status: 404)
    }
  }

  /// `201 {"ok":true,"id":...,"rev":...}` with `ETag` and `Location`.
  func writeResponse(
    _ result: DocumentWriteResult, status: HTTPResponse.Status = .created, location: String? = nil
  ) -> Response {
    var headers = HTTPFields()
    if let rev = result.rev { headers[.eTag] = "\"\(rev)\"" }
    if let location { headers[.location] = location }
    return CouchResponse.json(result.json, status: status, headers: headers)
  }

  // MARK: _local documents

  /// `GET/PUT/DELETE /{db}/_local/{id}`: never replicated, never in `_changes`.
  ///
  /// In a database with per-document rules (a wiki database), a signed-in user who is not one
  /// of its admins has `_local` documents of their own (``localKey(_:access:)``): the
  /// checkpoints of their replications, which no other user can read, overwrite or delete.
  func local(
    _ store: DocumentStore, id: String, request: Request, query: QueryParameters, caller: Caller,
    access: DatabaseAccess
  ) async throws -> Response {
    // An id too long for the caller's key is 400, whatever the method.
    _ = try localKey(id, access: access)
    let handler = try Self.localMethods.handler(for: request.method)
    return try await handler(self)(store, id, request, query, caller, access)
  }

  /// The methods of `/{db}/_local/{id}` and their handlers (``MethodTable``).
  static let localMethods = MethodTable<
    @Sendable (CouchServer) ->
      @Sendable (DocumentStore, String, Request, QueryParameters, Caller, DatabaseAccess)
      async throws -> Response
  >(
    [.get: localGet, .head: localGet, .put: localPut, .delete: localDelete, copy: localCopy],
    allow: ["DELETE", "GET", "HEAD", "PUT"])

  /// `GET and HEAD` of local.
  func localGet(
    _ store: DocumentStore, id: String, request: Request, query: QueryParameters, caller: Caller,
    access: DatabaseAccess
  ) async throws -> Response {
    let key = try localKey(id, access: access)
    var doc = try store.getLocal(key)
    if key != id, case .object(var object) = doc {
      object["_id"] = .string("_local/" + id)
      doc = .object(object)
    }
    return CouchResponse.json(doc, includeBody: request.method == .get)
  }

  /// `PUT /{db}/_local/{id}`.
  func localPut(
    _ store: DocumentStore, id: String, request: Request, query: QueryParameters, caller: Caller,
    access: DatabaseAccess
  ) async throws -> Response {
    let key = try localKey(id, access: access)
    let body = try await self.body(of: request)
    let rev = try requestedRev(request, query)
    let actor = caller.actor
    let result = try await store.putLocalAsync(key, body, rev: rev, actor: actor)
    return writeResponse(Self.local(result, id: id))
  }

  /// `DELETE /{db}/_local/{id}`.
  func localDelete(
    _ store: DocumentStore, id: String, request: Request, query: QueryParameters, caller: Caller,
    access: DatabaseAccess
  ) async throws -> Response {
    let key = try localKey(id, access: access)
    let rev = try requestedRev(request, query)
    let actor = caller.actor
    let result = try await store.deleteLocalAsync(key, rev: rev, actor: actor)
    return writeResponse(Self.local(result, id: id), status: .ok)
  }

  /// `COPY /{db}/_local/{id}`.
  func localCopy(
    _ store: DocumentStore, id: String, request: Request, query: QueryParameters, caller: Caller,
    access: DatabaseAccess
  ) async throws -> Response {
    throw CouchError.notImplemented("COPY of _local documents")
  }

  /// The key under which the caller's `_local/{id}` is kept: `id` itself, shared, for
  /// administrators, anonymous callers and databases without per-document rules (CouchDB's
  /// way); `org.wikilog.user.<hex of the name>.{id}` for any other signed-in user.
  func localKey(_ id: String, access: DatabaseAccess) throws -> String {
    guard access.rules != nil, !access.isAdmin, let name = access.user.name else { return id }
    let key = "org.wikilog.user." + Hex.encode(Array(name.utf8)) + "." + id
    if key.utf8.count > DocumentKey.inlineBytes {
      let limit = DocumentKey.inlineBytes - (key.utf8.count - id.utf8.count)
      throw CouchError.badRequest(
        "_local document id is \(id.utf8.count) bytes after _local/; the limit for this user is \(limit)"
      )
    }
    return key
  }

  /// A write's result with the id the caller named.
  static func local(_ result: DocumentWriteResult, id: String) -> DocumentWriteResult {
    DocumentWriteResult(
      id: result.id.hasPrefix("_local/") ? "_local/" + id : id, rev: result.rev,
      error: result.error)
  }
}
