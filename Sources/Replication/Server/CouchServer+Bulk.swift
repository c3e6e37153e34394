import HTTPTypes
import Hummingbird
import JSON
import Projections
import RevTree

extension CouchServer {
  /// `POST /{db}/_bulk_docs` with `{"docs": [...], "new_edits": bool}`.
  ///
  /// With `new_edits` (the default) the answer lists every document's result; with
  /// `new_edits: false` (replication) only failures are listed, as CouchDB does: a fully
  /// successful replicated batch answers `201 []`.
  func bulkDocs(
    _ store: DocumentStore, request: Request, query: QueryParameters, context: Context
  ) async throws -> Response {
    let body = try await objectBody(of: request)
    guard let docs = body["docs"]?.arrayValue else {
      throw ReplicationError.badRequest("POST body must include `docs` parameter.")
    }
    var newEdits = try query.bool("new_edits", default: true)
    if let value = body["new_edits"] {
      guard let b = value.boolValue else {
        throw ReplicationError.badRequest("`new_edits` parameter must be a boolean.")
      }
      newEdits = b
    }
    let actor = options.actor
    let origin = replicationOrigin(context)
    let edits = newEdits
    let results = try await store.bulkDocsAsync(
      docs, newEdits: edits, actor: actor, origin: origin)
    var bytes: [UInt8] = [UInt8(ascii: "[")]
    for (i, result) in results.enumerated() {
      if i > 0 { bytes.append(contentsOf: ",\n".utf8) }
      result.json.serialize(into: &bytes)
    }
    bytes.append(UInt8(ascii: "]"))
    return CouchResponse.raw(bytes, status: .created)
  }

  /// `POST /{db}/_bulk_get` with `{"docs": [{"id", "rev"?}]}` and `revs`, `latest` (and the other
  /// document options) in the query. Answers
  /// `{"results": [{"id", "docs": [{"ok": doc} | {"error": {"id","rev","error","reason"}}]}]}`.
  func bulkGet(_ store: DocumentStore, request: Request, query: QueryParameters) async throws
    -> Response
  {
    let body = try await objectBody(of: request)
    guard let docs = body["docs"]?.arrayValue else {
      throw ReplicationError.badRequest("Missing JSON list of 'docs'.")
    }
    let options = GetOptions(
      revs: try query.bool("revs"), revsInfo: try query.bool("revs_info"),
      conflicts: try query.bool("conflicts"),
      deletedConflicts: try query.bool("deleted_conflicts"), latest: try query.bool("latest"),
      localSeq: try query.bool("local_seq"))
    var bytes: [UInt8] = Array(#"{"results":["#.utf8)
    for (i, item) in docs.enumerated() {
      if i > 0 { bytes.append(contentsOf: ",\n".utf8) }
      bulkGetResult(store, item, options: options).serialize(into: &bytes)
    }
    bytes.append(contentsOf: "]}".utf8)
    return CouchResponse.raw(bytes)
  }

  func bulkGetResult(_ store: DocumentStore, _ item: JSONValue, options: GetOptions) -> JSONValue {
    func failure(id: String, rev: String?, _ e: ReplicationError) -> JSONValue {
      .object(
        JSONObject([
          "error": .object(
            JSONObject([
              "id": .string(id), "rev": .string(rev ?? "undefined"), "error": .string(e.error),
              "reason": .string(e.reason),
            ]))
        ]))
    }
    func result(_ id: String, _ docs: [JSONValue]) -> JSONValue {
      .object(JSONObject(["id": .string(id), "docs": .array(docs)]))
    }
    guard let object = item.objectValue, let id = object["id"]?.stringValue else {
      let id = item.objectValue?["id"]?.stringValue ?? ""
      return result(
        id, [failure(id: id, rev: nil, .badRequest("document id missing or not a string"))])
    }
    let rev = object["rev"]?.stringValue
    if object["rev"] != nil && rev == nil {
      return result(id, [failure(id: id, rev: nil, .badRequest("Invalid rev format"))])
    }
    do {
      guard let rev else {
        return result(id, [.object(JSONObject(["ok": try store.get(id, options: options)]))])
      }
      let found = try store.openRevs(id, .revs([rev]), options: options)
      return result(
        id,
        found.map { entry in
          if let missing = entry["missing"]?.stringValue {
            return failure(id: id, rev: missing, .notFound("missing"))
          }
          return entry
        })
    } catch {
      return result(id, [failure(id: id, rev: rev, ReplicationError(error))])
    }
  }

  /// `POST /{db}/_revs_diff` with `{docid: [revs]}`: the revisions this database lacks.
  func revsDiff(_ store: DocumentStore, request: Request) async throws -> Response {
    let body = try await objectBody(of: request)
    var asked: [(id: String, revs: [String])] = []
    asked.reserveCapacity(body.count)
    for member in body.members {
      guard let revs = member.value.stringArray else {
        throw ReplicationError.badRequest("revs for \(member.key) must be a JSON array of strings")
      }
      asked.append((member.key, revs))
    }
    let diffs = try store.revsDiff(asked)
    var out = JSONObject()
    out.members.reserveCapacity(diffs.count)
    for (id, diff) in diffs {
      var entry = JSONObject([
        "missing": .array(diff.missing.map { .string($0.description) })
      ])
      if !diff.possibleAncestors.isEmpty {
        entry.members.append(
          .init(
            key: "possible_ancestors",
            value: .array(diff.possibleAncestors.map { .string($0.description) })))
      }
      out.members.append(.init(key: id, value: .object(entry)))
    }
    return CouchResponse.json(.object(out))
  }

  /// `GET/POST /{db}/_all_docs`.
  func allDocs(_ store: DocumentStore, request: Request, query: QueryParameters) async throws
    -> Response
  {
    var options = AllDocsOptions()
    switch request.method {
    case .get, .head:
      options.keys = try query.stringArray("keys")
    case .post:
      let body = try await objectBody(of: request)
      if let keys = body["keys"] {
        guard let strings = keys.stringArray else {
          throw query.error("`keys` member must be an array of strings.")
        }
        options.keys = strings
      } else {
        options.keys = try query.stringArray("keys")
      }
    default:
      throw ReplicationError.methodNotAllowed(["GET", "HEAD", "POST"])
    }
    options.descending = try query.bool("descending")
    options.inclusiveEnd = try query.bool("inclusive_end", default: true)
    options.includeDocs = try query.bool("include_docs")
    options.conflicts = try query.bool("conflicts")
    options.limit = try query.int("limit")
    options.skip = try query.int("skip") ?? 0
    if let key = try query.json("key") {
      if options.keys == nil {
        // One key: a range of one, or nothing when the key is not a string.
        guard let s = key.stringValue else {
          return CouchResponse.json(
            try Self.emptyAllDocs(store), includeBody: request.method != .head)
        }
        options.startKey = s
        options.endKey = s
        options.inclusiveEnd = true
      }
    }
    // A start or end that is not a string collates before every id (null, booleans, numbers)
    // or after every id (arrays, objects), as in CouchDB's collation.
    var empty = false
    if let start = try query.json("start_key") ?? query.json("startkey") {
      switch Self.collationBound(start) {
      case .string(let s): options.startKey = s
      case .beforeStrings: if options.descending { empty = true }
      case .afterStrings: if !options.descending { empty = true }
      }
    }
    if let end = try query.json("end_key") ?? query.json("endkey") {
      switch Self.collationBound(end) {
      case .string(let s): options.endKey = s
      case .beforeStrings: if !options.descending { empty = true }
      case .afterStrings: if options.descending { empty = true }
      }
    }
    let limited = options
    let result =
      empty
      ? try Self.emptyAllDocs(store)
      : try await reading(limit: options.limit) { try store.allDocs(limited).json }
    return CouchResponse.json(result, includeBody: request.method != .head)
  }

  static func emptyAllDocs(_ store: DocumentStore) throws -> JSONValue {
    .object(
      JSONObject([
        "total_rows": .int(try store.info.docCount), "offset": .int(0), "rows": .array([]),
      ]))
  }

  enum CollationBound {
    case beforeStrings
    case string(String)
    case afterStrings
  }

  static func collationBound(_ value: JSONValue) -> CollationBound {
    switch value {
    case .string(let s): .string(s)
    case .array, .object: .afterStrings
    default: .beforeStrings
    }
  }
}
