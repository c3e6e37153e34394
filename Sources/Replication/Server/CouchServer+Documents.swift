import HTTPTypes
import Hummingbird
import JSON
import Projections
import RevTree

extension CouchServer {
  // MARK: Documents

  /// `GET/HEAD/PUT/DELETE /{db}/{docid}`.
  func document(
    _ store: DocumentStore, id: String, request: Request, query: QueryParameters, context: Context
  ) async throws -> Response {
    switch request.method {
    case .get, .head:
      return try getDocument(store, id: id, query: query, head: request.method == .head)
    case .put:
      let body = try await self.body(of: request)
      let rev = try requestedRev(request, query)
      if try !query.bool("new_edits", default: true) {
        return try await putReplicated(store, id: id, body: body, context: context)
      }
      let actor = options.actor
      let result = try await store.putAsync(body, id: id, rev: rev, actor: actor)
      return writeResponse(result)
    case .delete:
      guard let rev = try requestedRev(request, query) else { throw StoreError.conflict }
      let actor = options.actor
      let result = try await store.deleteAsync(id, rev: rev, actor: actor)
      return writeResponse(result, status: .ok)
    default:
      throw ReplicationError.methodNotAllowed(["DELETE", "GET", "HEAD", "PUT"])
    }
  }

  /// `?rev=` or `If-Match`; both must agree when given.
  func requestedRev(_ request: Request, _ query: QueryParameters) throws(ReplicationError)
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
  /// `revs_info`).
  func getDocument(_ store: DocumentStore, id: String, query: QueryParameters, head: Bool) throws
    -> Response
  {
    let meta = try query.bool("meta")
    var options = GetOptions(
      rev: query["rev"], revs: try query.bool("revs"),
      revsInfo: try query.bool("revs_info") || meta,
      conflicts: try query.bool("conflicts") || meta,
      deletedConflicts: try query.bool("deleted_conflicts") || meta,
      latest: try query.bool("latest"), localSeq: try query.bool("local_seq"))
    if let openRevs = query["open_revs"] {
      options.rev = nil
      let which: OpenRevs
      if openRevs == "all" {
        which = .all
      } else {
        guard let revs = try query.stringArray("open_revs") else {
          throw ReplicationError.badRequest("open_revs must be \"all\" or a JSON array of revs")
        }
        which = .revs(revs)
      }
      let results = try store.openRevs(id, which, options: options)
      return CouchResponse.json(.array(results), includeBody: !head)
    }
    let doc = try store.get(id, options: options)
    var headers = HTTPFields()
    if let rev = doc["_rev"]?.stringValue { headers[.eTag] = "\"\(rev)\"" }
    return CouchResponse.json(doc, includeBody: !head, headers: headers)
  }

  /// `PUT /{db}/{docid}?new_edits=false`: a replicated revision with its `_revisions`.
  func putReplicated(_ store: DocumentStore, id: String, body: [UInt8], context: Context)
    async throws -> Response
  {
    let input = try DocumentInput(json: body)
    if let bodyID = input.id, bodyID != id {
      throw ReplicationError.badRequest("Document id in the body does not match the URL")
    }
    guard let rev = input.rev else {
      throw ReplicationError.badRequest("new_edits=false requires _rev")
    }
    var object = input.full.objectValue ?? JSONObject()
    if input.id == nil { object.members.insert(.init(key: "_id", value: .string(id)), at: 0) }
    let doc = JSONValue.object(object)
    let actor = options.actor
    let origin = replicationOrigin(context)
    let failures = try await store.bulkDocsAsync(
      [doc], newEdits: false, actor: actor, origin: origin)
    if let error = failures.first?.error { throw error }
    return writeResponse(DocumentWriteResult(id: id, rev: rev))
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
  func local(_ store: DocumentStore, id: String, request: Request, query: QueryParameters)
    async throws -> Response
  {
    switch request.method {
    case .get, .head:
      return CouchResponse.json(try store.getLocal(id), includeBody: request.method == .get)
    case .put:
      let body = try await self.body(of: request)
      let rev = try requestedRev(request, query)
      let actor = options.actor
      let result = try await store.putLocalAsync(id, body, rev: rev, actor: actor)
      return writeResponse(result)
    case .delete:
      let rev = try requestedRev(request, query)
      let actor = options.actor
      let result = try await store.deleteLocalAsync(id, rev: rev, actor: actor)
      return writeResponse(result, status: .ok)
    default:
      throw ReplicationError.methodNotAllowed(["DELETE", "GET", "HEAD", "PUT"])
    }
  }
}
