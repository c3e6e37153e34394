import Formats
import Hummingbird
import JSON
import Log
import Projections

/// `_purge`, `_purged_infos`, `_purged_infos_limit` (CouchDB's) and `_redact` (wikilog's).
extension CouchServer {
  /// The request body of `_purge` and `_redact`: `{"docid": ["rev", ...], ...}`, checked as
  /// CouchDB checks `_purge`'s (at most 100 documents and 1,000 revisions).
  func erasureRequest(_ request: Request) async throws -> [(id: String, revs: [String])] {
    try Self.requireJSONContentType(request)
    guard case .object(let object) = try await jsonBody(of: request) else {
      throw CouchError.badRequest("Request body must be a JSON object")
    }
    var pairs: [(id: String, revs: [String])] = []
    for member in object.members {
      guard case .array(let values) = member.value else {
        throw CouchError.badRequest("Invalid list of revisions")
      }
      var revs: [String] = []
      for value in values {
        guard let rev = value.stringValue else { throw CouchError.badRequest("Invalid rev format") }
        revs.append(rev)
      }
      pairs.append((member.key, revs))
    }
    guard pairs.count <= 100 else {
      throw CouchError.badRequest("Exceeded maximum number of documents.")
    }
    guard pairs.reduce(0, { $0 + $1.revs.count }) <= 1000 else {
      throw CouchError.badRequest("Exceeded maximum number of revisions.")
    }
    return pairs
  }

  /// `POST /{db}/_purge` and `POST /{db}/_redact` (database admins, checked again in the
  /// write transaction; ``DataDirectory/erase(_:_:in:actor:origin:reason:dryRun:)``: the bytes
  /// leave the database's files). `?reason=` is kept in the event; `?dry_run=true` says what
  /// would be erased and erases nothing.
  ///
  /// - `_purge` (CouchDB's): the leaf revisions named leave their trees, with the branches only
  ///   they hold. `201 {"purge_seq": null, "purged": {"docid": [revs purged]}}`, every document
  ///   named listed. A purge is local: it does not replicate.
  /// - `_redact` (wikilog's): the revisions named, leaf or not, stay in their trees with their
  ///   ids; their bodies and attachments are erased, and reading one answers 404 `redacted`.
  ///   The current revision of a document is refused (409): write a new one first, or purge it.
  ///   `201 {"redacted": {"docid": [revs]}, "events": n, "attachments": n}`.
  func erase(
    _ kind: DocumentStore.ErasureKind, _ db: String, request: Request, query: QueryParameters,
    context: Context, caller: Caller
  ) async throws -> Response {
    let pairs = try await erasureRequest(request)
    // A partitioned database's ids name their partition (`400 illegal_docid`, as CouchDB's
    // `_purge` checks them).
    if let store = dataDirectory.storeIfOpen(db), store.isPartitioned {
      for (id, _) in pairs {
        do { try Partitions.validate(documentID: id) } catch { throw CouchError(error) }
      }
    }
    let erasure = try await dataDirectory.erase(
      kind, pairs, in: db, actor: caller.actor, origin: replicationOrigin(context),
      reason: query["reason"] ?? "", dryRun: query["dry_run"] == "true")
    let answer: JSONObject
    switch kind {
    case .purge:
      var purged = JSONObject()
      let done = Dictionary(erasure.revisions.map { ($0.id, $0.revs) }, uniquingKeysWith: +)
      for (id, _) in pairs where purged[id] == nil {
        purged[id] = .array((done[id] ?? []).map { .string($0) })
      }
      answer = JSONObject(["purge_seq": .null, "purged": .object(purged)])
    case .redact:
      answer = JSONObject([
        "redacted": erasure.json, "events": .int(erasure.events.count),
        "attachments": .int(erasure.blobs),
      ])
    }
    return CouchResponse.json(.object(answer), status: .created)
  }

  /// `GET /{db}/_purged_infos`: the purges the log holds, newest last, at most
  /// `purged_infos_limit` of them: `{"purged_infos": [{"id", "revs"}]}`.
  func purgedInfos(_ store: DocumentStore) throws -> Response {
    let infos = try store.purgedInfos()
    return CouchResponse.json(
      .object(
        JSONObject([
          "purged_infos": .array(
            infos.map { info in
              .object(
                JSONObject(["id": .string(info.id), "revs": .array(info.revs.map { .string($0) })])
              )
            })
        ])))
  }

  /// `GET/PUT /{db}/_purged_infos_limit`.
  func purgedInfosLimit(_ store: DocumentStore, request: Request, caller: Caller) async throws
    -> Response
  {
    switch request.method {
    case .get, .head:
      return CouchResponse.json(
        .int(try store.purgedInfosLimit), includeBody: request.method == .get)
    case .put:
      let value = try await jsonBody(of: request)
      guard let n = value.numberValue?.int64Value, value.numberValue?.isIntegerLiteral == true,
        n > 0, n <= Int64(Int32.max)
      else {
        throw CouchError.badRequest("`purged_infos_limit` must be positive integer")
      }
      try await store.setPurgedInfosLimit(Int(n), actor: caller.actor)
      return CouchResponse.ok()
    default:
      throw CouchError.methodNotAllowed(["GET", "HEAD", "PUT"])
    }
  }
}
