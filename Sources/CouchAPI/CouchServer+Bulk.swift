import Auth
import HTTPTypes
import Hummingbird
import JSON
import Log
import Projections
import RevTree

extension CouchServer {
  /// CouchDB's checks of every document of a `_bulk_docs` request before any is written: a
  /// document whose special members are malformed fails the whole request
  /// (``DocumentInput/checkShape(_:)``), and so does a replicated one with neither `_rev` nor
  /// `_revisions` (`validate_revs`). The first failing document's error is thrown, as a loop in
  /// order would throw it.
  ///
  /// A large request is checked in two halves at once: the checks read every document's
  /// special members, strings the parser left out of the cache, and until the write begins the
  /// second core has nothing else to do for this request.
  static func checkShapes(_ docs: [JSONValue], newEdits: Bool) async throws {
    @Sendable func check(_ range: Range<Int>) -> (any Error)? {
      for i in range {
        do {
          try DocumentInput.checkShape(docs[i])
        } catch {
          return error
        }
        if !newEdits, let object = docs[i].objectValue, object["_rev"] == nil,
          object["_revisions"] == nil
        {
          return CouchError.badRequest(replicatedWithoutRev)
        }
      }
      return nil
    }
    guard docs.count >= shapeCheckHalves else {
      if let error = check(0..<docs.count) { throw error }
      return
    }
    let middle = docs.count / 2
    async let first = check(0..<middle)
    let second = check(middle..<docs.count)
    if let error = await first { throw error }
    if let error = second { throw error }
  }

  /// Requests with at least this many documents have their shapes checked in two halves.
  static let shapeCheckHalves = 256

  /// `POST /{db}/_bulk_docs` with `{"docs": [...], "new_edits": bool}`.
  ///
  /// With `new_edits` (the default) the answer lists every document's result; with
  /// `new_edits: false` (replication) only failures are listed, as CouchDB does: a fully
  /// successful replicated batch answers `201 []`.
  ///
  /// `"all_or_nothing": true` is refused as CouchDB 3 refuses it: `417` with a
  /// `not_implemented` error for every document, and nothing written.
  func bulkDocs(
    _ store: DocumentStore, request: Request, query: QueryParameters, context: Context,
    caller: Caller, access: DatabaseAccess
  ) async throws -> Response {
    try Self.requireJSONContentType(request)
    let requestBytes = try await self.body(of: request)
    let body = try Self.object(parsing: requestBytes)
    guard let given = body["docs"] else {
      throw CouchError.badRequest("POST body must include `docs` parameter.")
    }
    guard var docs = given.arrayValue else {
      throw CouchError.badRequest("`docs` parameter must be an array.")
    }
    // CouchDB's `max_document_size` fails the whole request (`couch_doc:from_json_obj_validate`
    // throws `request_entity_too_large` with the document's id): `413 document_too_large`. A
    // request no larger than the limit cannot hold such a document, so only a larger one is
    // measured document by document.
    if requestBytes.count > DocumentInput.maxBytes {
      for doc in docs where doc.serialized().count > DocumentInput.maxBytes {
        throw CouchError(
          "document_too_large", doc["_id"]?.stringValue ?? "", status: 413)
      }
    }
    var newEdits = query["new_edits"] != "false"
    if let value = body["new_edits"] {
      guard let b = value.boolValue else {
        throw CouchError.badRequest("`new_edits` parameter must be a boolean.")
      }
      newEdits = b
    }
    if newEdits, body["all_or_nothing"] == .bool(true) {
      return try allOrNothingRefused(docs)
    }
    try await Self.checkShapes(docs, newEdits: newEdits)
    if store.isPartitioned {
      // A partitioned database's ids are checked for the whole request first, as CouchDB's
      // `chttpd_db` does before it writes any (a document without `_id` would get a uuid,
      // which names no partition).
      for doc in docs {
        guard let id = doc["_id"]?.stringValue else {
          throw CouchError("illegal_docid", "Doc id must be of form partition:id", status: 400)
        }
        do { try Partitions.validate(documentID: id) } catch { throw CouchError(error) }
      }
    }
    if !access.storesAsSent {
      // A system database's policy (`_replicator`: each document gets its owner, and one
      // that belongs to another user fails the whole request, as CouchDB's
      // `before_doc_update` does in `fabric_doc_update`).
      docs = try docs.map { (doc: JSONValue) throws -> JSONValue in
        guard case .object(let object) = doc else { return doc }
        let id = object["_id"]?.stringValue ?? ""
        return .object(try access.owned(object, id: id))
      }
    }
    let actor = caller.actor
    let origin = replicationOrigin(context)
    let edits = newEdits
    // Each document the caller may not write is refused on its own (`forbidden`), the rest
    // are written; a wiki created earlier in the call counts for the pages after it. `_local`
    // documents' results are kept here too.
    var refused: [Int: DocumentWriteResult] = [:]
    var allowed: [JSONValue] = []
    var batch = AccessBatch()
    var locals: [(index: Int, id: String, doc: JSONValue)] = []
    let stored = access.policy?.stored
    for (i, var doc) in docs.enumerated() {
      guard var object = doc.objectValue else {
        allowed.append(doc)  // refused by the store as CouchDB refuses it
        continue
      }
      // What the database stores of every write (`_users`: a clear `password` hashed, as
      // `couch_users_db:before_doc_update` does).
      if let stored {
        object = try stored(object)
        doc = .object(object)
      }
      // A document without an id gets its generated one here, so that it is checked too.
      if object["_id"] == nil && edits {
        object.members.insert(.init(key: "_id", value: .string(newUUID())), at: 0)
        doc = .object(object)
      }
      guard let id = object["_id"]?.stringValue else {
        allowed.append(doc)
        continue
      }
      if id.hasPrefix("_local/") {
        // A `_local` document is written as `PUT /{db}/_local/{id}` writes it (CouchDB's
        // `update_docs` sets local documents apart, in both modes), all of them in one
        // transaction below.
        locals.append((i, String(id.dropFirst(7)), doc))
        continue
      }
      do {
        let deleted = object["_deleted"] == .bool(true)
        try access.checkWrite(
          AccessWrite(docID: id, body: deleted ? nil : object, replicated: !edits), in: store,
          batch: &batch)
        allowed.append(doc)
      } catch let error as StoreError {
        refused[i] = DocumentWriteResult(id: id, rev: object["_rev"]?.stringValue, error: error)
      }
    }
    for (index, result) in try await localBulkWrite(store, locals, actor, access) {
      refused[index] = result
    }
    let written =
      allowed.isEmpty
      ? [] : try await store.bulkDocsAsync(allowed, newEdits: edits, actor: actor, origin: origin)
    var results: [DocumentWriteResult] = []
    if refused.isEmpty {
      results = written
    } else if edits {
      var next = written.makeIterator()
      for i in docs.indices {
        if let r = refused[i] {
          results.append(r)
        } else if let r = next.next() {
          results.append(r)
        }
      }
    } else {
      // Replicated writes list failures only.
      results = refused.sorted { $0.key < $1.key }.map(\.value).filter { !$0.ok } + written
    }
    var bytes: [UInt8] = [UInt8(ascii: "[")]
    for (i, result) in results.enumerated() {
      if i > 0 { bytes.append(contentsOf: ",\n".utf8) }
      // CouchDB's error rows of edits name the id only (`chttpd_db:update_doc_result_to_json`);
      // those of replicated revisions name the revision too.
      let shown =
        edits && result.error != nil
        ? DocumentWriteResult(id: result.id, rev: nil, error: result.error) : result
      shown.json.serialize(into: &bytes)
    }
    bytes.append(UInt8(ascii: "]"))
    return CouchResponse.raw(bytes, status: .created)
  }

  /// The `_local` documents of a `_bulk_docs` call, written in one transaction, each as
  /// ``local(_:id:request:query:caller:access:)`` writes it (its `_rev` as the body gives it,
  /// the caller's own key in a wiki database): each one's result or error, by its index.
  func localBulkWrite(
    _ store: DocumentStore, _ locals: [(index: Int, id: String, doc: JSONValue)], _ actor: String,
    _ access: DatabaseAccess
  ) async throws -> [(Int, DocumentWriteResult)] {
    guard !locals.isEmpty else { return [] }
    var out: [(Int, DocumentWriteResult)] = []
    var written: [(index: Int, id: String, rev: String?)] = []
    var writes: [(id: String, json: [UInt8])] = []
    for local in locals {
      let rev = local.doc["_rev"]?.stringValue
      do {
        writes.append((try localKey(local.id, access: access), local.doc.serialized()))
        written.append((local.index, local.id, rev))
      } catch let error as CouchError {
        out.append(
          (
            local.index,
            DocumentWriteResult(
              id: "_local/" + local.id, rev: rev, error: .badRequest(error.reason))
          ))
      }
    }
    let results = try await store.putLocalsAsync(writes, actor: actor)
    for (local, result) in zip(written, results) {
      out.append(
        (
          local.index,
          result.ok
            ? Self.local(result, id: local.id)
            : DocumentWriteResult(id: "_local/" + local.id, rev: local.rev, error: result.error)
        ))
    }
    return out
  }

  /// CouchDB 3's answer to `all_or_nothing` (`fabric_doc_update:validate_atomic_update`): every
  /// document is checked as a write would check it (a malformed one is a `400` first), then
  /// each gets `{"id","rev","error":"not_implemented","reason"}` (`rev` is `0-` for a new
  /// document, an id is made up for one without) in a `417`.
  func allOrNothingRefused(_ docs: [JSONValue]) throws -> Response {
    var results: [JSONValue] = []
    for doc in docs {
      let input = try DocumentInput(doc)
      results.append(
        .object(
          JSONObject([
            "id": .string(input.id ?? newUUID()),
            "rev": .string(input.rev ?? "0-"),
            "error": .string("not_implemented"),
            "reason": .string("all_or_nothing is not supported"),
          ])))
    }
    return CouchResponse.json(.array(results), status: .expectationFailed)
  }

  /// `POST /{db}/_bulk_get` with `{"docs": [{"id", "rev"?}]}` and `revs`, `latest` (and the other
  /// document options) in the query. Answers
  /// `{"results": [{"id", "docs": [{"ok": doc} | {"error": {"id","rev","error","reason"}}]}]}`.
  func bulkGet(
    _ store: DocumentStore, request: Request, query: QueryParameters, access: DatabaseAccess
  ) async throws -> Response {
    let body = try await objectBody(of: request)
    guard let docs = body["docs"]?.arrayValue else {
      throw CouchError.badRequest("Missing JSON list of 'docs'.")
    }
    // Flags as for a document read: `true` sets one, anything else is ignored.
    var options = GetOptions(
      revs: query.flag("revs"), revsInfo: query.flag("revs_info"),
      conflicts: query.flag("conflicts"), deletedConflicts: query.flag("deleted_conflicts"),
      latest: query.flag("latest"), localSeq: query.flag("local_seq"),
      attachments: query.flag("attachments"), attEncodingInfo: query.flag("att_encoding_info"))
    // `chttpd_db:bulk_get_is_multipart`: an `Accept` that does not take JSON but takes
    // `multipart/mixed` or `multipart/related`.
    let accept = request.headers[.accept]
    if !AcceptHeader.accepts(accept, "application/json"),
      AcceptHeader.accepts(accept, "multipart/mixed")
        || AcceptHeader.accepts(accept, "multipart/related")
    {
      options.attachments = true
      options.follows = true
      options.attEncodingInfo = true
      let type =
        AcceptHeader.accepts(accept, "multipart/mixed") ? "multipart/mixed" : "multipart/related"
      let items = docs
      let multipartOptions = options
      let answer = try await blocking { [self] in
        try bulkGetMultipart(store, items, options: multipartOptions, access: access)
      }
      return answer.body.response(
        contentType: "\(type); boundary=\"\(answer.boundary)\"", head: false, store: store,
        server: self)
    }
    var bytes: [UInt8] = Array(#"{"results":["#.utf8)
    let getOptions = options
    try store.read { txn in
      for (i, item) in docs.enumerated() {
        if i > 0 { bytes.append(contentsOf: ",\n".utf8) }
        if !bulkGetJSON(store, item, options: getOptions, access: access, txn: txn, into: &bytes) {
          bulkGetResult(store, item, options: getOptions, access: access, madeUpRev: true)
            .serialize(into: &bytes)
        }
      }
    }
    bytes.append(contentsOf: "]}".utf8)
    return CouchResponse.raw(bytes)
  }

  /// ``bulkGetResult(_:_:options:access:madeUpRev:)`` of an item naming a revision the caller
  /// may read, written into `bytes` in one read transaction for the whole request, the stored
  /// bodies copied as they are (``DocumentStore/openRevsJSON(_:_:options:txn:)``); false, with
  /// nothing written, for anything else (errors, no `rev`, `_replicator`'s documents shown
  /// without credentials), which `bulkGetResult` answers.
  func bulkGetJSON(
    _ store: DocumentStore, _ item: JSONValue, options: GetOptions, access: DatabaseAccess,
    txn: ReadTransaction, into bytes: inout [UInt8]
  ) -> Bool {
    guard access.showsAsStored, let object = item.objectValue,
      let id = object["id"]?.stringValue, let rev = object["rev"]?.stringValue
    else { return false }
    var options = options
    if let since = object["atts_since"], since != .array([]) {
      guard let revs = since.stringArray else { return false }
      options.attsSince = revs
    }
    guard (try? access.canRead(id, in: store, txn: txn)) == true,
      let found = try? store.openRevsJSON(id, .revs([rev]), options: options, txn: txn)
    else { return false }
    bytes.append(contentsOf: #"{"id":"#.utf8)
    JSONValue.string(id).serialize(into: &bytes)
    bytes.append(contentsOf: #","docs":["#.utf8)
    for (i, entry) in found.enumerated() {
      if i > 0 { bytes.append(UInt8(ascii: ",")) }
      switch entry {
      case .ok(let doc):
        bytes.append(contentsOf: #"{"ok":"#.utf8)
        bytes.append(contentsOf: doc)
        bytes.append(UInt8(ascii: "}"))
      case .missing(let missing):
        Self.bulkGetFailure(id: id, rev: missing, .notFound("missing")).serialize(into: &bytes)
      }
    }
    bytes.append(contentsOf: "]}".utf8)
    return true
  }

  /// `_bulk_get` as `chttpd_db:bulk_get_ret_multipart` sends it: for each revision a part
  /// after the outer boundary — `X-Doc-Id`, `X-Rev-Id` and a `multipart/related` body when it
  /// has attachment data to send, else its JSON — and `application/json; error="true"` parts
  /// for failures; both boundaries are `--` and a random hex string, as CouchDB's are.
  func bulkGetMultipart(
    _ store: DocumentStore, _ items: [JSONValue], options: GetOptions, access: DatabaseAccess
  ) throws -> (boundary: String, body: MultipartAnswer) {
    let outer = "--" + Multipart.newBoundary()
    let inner = "--" + Multipart.newBoundary()
    var out = MultipartAnswer()
    for item in items {
      let result = bulkGetResult(store, item, options: options, access: access)
      let id = result["id"]?.stringValue ?? ""
      for entry in result["docs"]?.arrayValue ?? [] {
        out.append("\r\n--\(outer)")
        if let doc = entry["ok"] {
          let (type, part) = try MultipartAnswer.document(
            doc, id: id, boundary: inner, store: store)
          if type == "application/json" {
            out.append("\r\nContent-Type: application/json\r\n\r\n")
          } else {
            out.append("\r\nX-Doc-Id: \(id)")
            if let rev = doc["_rev"]?.stringValue { out.append("\r\nX-Rev-Id: \(rev)") }
            out.append("\r\nContent-Type: multipart/related; boundary=\(inner)\r\n\r\n")
          }
          out.append(part)
        } else {
          out.append("\r\nContent-Type: application/json; error=\"true\"\r\n\r\n")
          out.append((entry["error"] ?? entry).serialized())
        }
      }
    }
    if !items.isEmpty { out.append("\r\n--\(outer)--\r\n") }
    return (outer, out)
  }

  /// One item of `_bulk_get`; each revision as the caller may see it
  /// (``DatabaseAccess/shown(_:madeUpRev:)``).
  func bulkGetResult(
    _ store: DocumentStore, _ item: JSONValue, options: GetOptions, access: DatabaseAccess,
    madeUpRev: Bool = false
  ) -> JSONValue {
    var options = options
    func result(_ id: String, _ docs: [JSONValue]) -> JSONValue {
      .object(JSONObject(["id": .string(id), "docs": .array(docs)]))
    }
    guard let object = item.objectValue, let id = object["id"]?.stringValue else {
      let id = item.objectValue?["id"]?.stringValue ?? ""
      return result(
        id,
        [Self.bulkGetFailure(id: id, rev: nil, .badRequest("document id missing or not a string"))])
    }
    let rev = object["rev"]?.stringValue
    if object["rev"] != nil && rev == nil {
      return result(id, [Self.bulkGetFailure(id: id, rev: nil, .badRequest("Invalid rev format"))])
    }
    // `atts_since` per document (`chttpd_db:bulk_get_parse_atts_since`): implies attachments.
    if let since = object["atts_since"], since != .array([]) {
      guard let revs = since.stringArray else {
        return result(
          id,
          [
            Self.bulkGetFailure(
              id: id, rev: rev, .badRequest("att_since value must be array of revs."))
          ])
      }
      options.attsSince = revs
    }
    if store.isPartitioned {
      do throws(StoreError) { try Partitions.validate(documentID: id) } catch {
        // As CouchDB answers it: the `rev` asked for, null when none was.
        return result(
          id,
          [
            .object(
              JSONObject([
                "error": .object(
                  JSONObject([
                    "id": .string(id), "rev": rev.map(JSONValue.string) ?? .null,
                    "error": .string(error.error), "reason": .string(error.reason),
                  ]))
              ]))
          ])
      }
    }
    do {
      try access.checkRead(id, in: store)
      guard let rev else {
        let doc = access.shown(try store.get(id, options: options), madeUpRev: madeUpRev)
        return result(id, [.object(JSONObject(["ok": doc]))])
      }
      let found = try store.openRevs(id, .revs([rev]), options: options)
      return result(
        id,
        found.map { entry in
          if let missing = entry["missing"]?.stringValue {
            return Self.bulkGetFailure(id: id, rev: missing, .notFound("missing"))
          }
          if let doc = entry["ok"] {
            return .object(JSONObject(["ok": access.shown(doc, madeUpRev: madeUpRev)]))
          }
          return entry
        })
    } catch {
      return result(id, [Self.bulkGetFailure(id: id, rev: rev, CouchError(error))])
    }
  }

  /// A `_bulk_get` entry for a revision not sent: `{"error": {"id","rev","error","reason"}}`.
  static func bulkGetFailure(id: String, rev: String?, _ e: CouchError) -> JSONValue {
    .object(
      JSONObject([
        "error": .object(
          JSONObject([
            "id": .string(id), "rev": .string(rev ?? "undefined"), "error": .string(e.error),
            "reason": .string(e.reason),
          ]))
      ]))
  }

  /// `POST /{db}/_revs_diff` with `{docid: [revs]}`: the revisions this database lacks.
  func revsDiff(_ store: DocumentStore, request: Request, access: DatabaseAccess) async throws
    -> Response
  {
    let body = try await objectBody(of: request)
    var asked: [(id: String, revs: [String])] = []
    asked.reserveCapacity(body.count)
    for member in body.members {
      guard let revs = member.value.stringArray else {
        throw CouchError.badRequest("revs for \(member.key) must be a JSON array of strings")
      }
      asked.append((member.key, revs))
    }
    let diffs = try revsDiffAnswer(store, asked, access: access)
    var out = JSONObject()
    out.members.reserveCapacity(diffs.count)
    for (id, missing, ancestors) in diffs {
      var entry = JSONObject(["missing": .array(missing.map { .string($0) })])
      if !ancestors.isEmpty {
        entry.members.append(
          .init(key: "possible_ancestors", value: .array(ancestors.map { .string($0) })))
      }
      out.members.append(.init(key: id, value: .object(entry)))
    }
    return CouchResponse.json(.object(out))
  }

  /// ``visibleRevsDiff(_:_:access:)``, with the revisions CouchDB reads but no tree here can
  /// hold (`0-abc`, `1-xyz!`) missing, as CouchDB answers revisions it lacks (a replication
  /// from a peer that has such revisions then counts them as write failures instead of
  /// stopping); a revision CouchDB cannot read either is 400, as there.
  func revsDiffAnswer(
    _ store: DocumentStore, _ asked: [(id: String, revs: [String])], access: DatabaseAccess
  ) throws -> [(id: String, missing: [String], ancestors: [String])] {
    var kept: [(id: String, revs: [RevID])] = []
    var extra: [[String]] = []
    for entry in asked {
      var revs: [RevID] = []
      var odd: [String] = []
      for rev in entry.revs {
        if let parsed = try? RevID(rev) {
          revs.append(parsed)
        } else if DocumentInput.isCouchRevision(rev) {
          odd.append(rev)
        } else {
          throw CouchError.badRequest("Invalid rev format")
        }
      }
      kept.append((entry.id, revs))
      extra.append(odd)
    }
    // The diffs come in the order asked, for the documents that lack something.
    var diffs = try visibleRevsDiff(store, kept, access: access)[...]
    var out: [(id: String, missing: [String], ancestors: [String])] = []
    for (k, entry) in kept.enumerated() {
      var diff: RevsDiff?
      if let next = diffs.first, next.id == entry.id {
        diff = next.diff
        diffs = diffs.dropFirst()
      }
      let missing = (diff?.missing.map(\.description) ?? []) + extra[k]
      guard !missing.isEmpty else { continue }
      out.append((entry.id, missing, diff?.possibleAncestors.map(\.description) ?? []))
    }
    return out
  }

  /// `POST /{db}/_missing_revs` with `{docid: [revs]}`: `{"missing_revs": {docid: [revs]}}`,
  /// the revisions this database lacks, for the documents that lack any (CouchDB's older
  /// form of `_revs_diff`).
  func missingRevs(_ store: DocumentStore, request: Request, access: DatabaseAccess) async throws
    -> Response
  {
    let body = try await objectBody(of: request)
    var asked: [(id: String, revs: [String])] = []
    for member in body.members {
      guard let revs = member.value.stringArray else {
        throw CouchError.badRequest("revs for \(member.key) must be a JSON array of strings")
      }
      asked.append((member.key, revs))
    }
    var missing = JSONObject()
    for (id, revs, _) in try revsDiffAnswer(store, asked, access: access) {
      missing.members.append(.init(key: id, value: .array(revs.map { .string($0) })))
    }
    return CouchResponse.json(.object(JSONObject(["missing_revs": .object(missing)])))
  }

  /// ``DocumentStore/revsDiff(revisions:)`` as the caller may see it: a document they may not read
  /// lacks every revision asked about, as if it did not exist.
  func visibleRevsDiff(
    _ store: DocumentStore, _ asked: [(id: String, revs: [RevID])], access: DatabaseAccess
  ) throws -> [(id: String, diff: RevsDiff)] {
    guard access.restricted else { return try store.revsDiff(revisions: asked) }
    var visible: [(id: String, revs: [RevID])] = []
    var hidden: [String: [RevID]] = [:]
    for entry in asked {
      if try access.canRead(entry.id, in: store) {
        visible.append(entry)
      } else {
        hidden[entry.id] = entry.revs
      }
    }
    var found: [String: RevsDiff] = [:]
    for (id, diff) in try store.revsDiff(revisions: visible) { found[id] = diff }
    var out: [(id: String, diff: RevsDiff)] = []
    for entry in asked {
      if let diff = found[entry.id] {
        out.append((entry.id, diff))
      } else if let revs = hidden[entry.id] {
        let diff = RevisionTree().revsDiff(revs)
        if !diff.missing.isEmpty { out.append((entry.id, diff)) }
      }
    }
    return out
  }

  /// `GET/POST /{db}/_all_docs`: `keys`, `key`, `startkey`/`start_key`, `endkey`/`end_key`,
  /// `inclusive_end`, `descending`, `include_docs`, `conflicts`, `limit` (`0`: no rows),
  /// `skip` and `update_seq` (the seq the rows were read at, as `_changes` writes seqs).
  func allDocs(
    _ store: DocumentStore, request: Request, query: QueryParameters, access: DatabaseAccess,
    namespace: AllDocsNamespace = .all
  ) async throws -> Response {
    let (keys, options) = try await requestKeys(request, query)
    return CouchResponse.json(
      try await allDocsJSON(
        store, query: options, keys: keys, access: access, namespace: namespace),
      includeBody: request.method != .head)
  }

  /// The `keys` of an `_all_docs`-shaped request (the body's for `POST`, else the query's;
  /// any JSON values) and its options: the query string's, then a `POST` body's other members
  /// (`limit`, `include_docs`, ...) behind them, as `couch_mrview_http:parse_body_and_query`
  /// reads the body first and the query string over it.
  func requestKeys(_ request: Request, _ query: QueryParameters) async throws
    -> (keys: [JSONValue]?, options: QueryParameters)
  {
    func fromQuery() throws -> [JSONValue]? {
      guard let value = try query.json("keys") else { return nil }
      guard let array = value.arrayValue else {
        throw query.error("`keys` parameter must be an array.")
      }
      return array
    }
    switch request.method {
    case .get, .head:
      return (try fromQuery(), query)
    case .post:
      // As `couch_httpd:validate_ctype/2`: a body that is not declared JSON is 415.
      try Self.requireJSONContentType(request)
      let body = try await objectBody(of: request)
      var options = QueryParameters(
        pairs: query.pairs.map { ($0.name, $0.value) }
          + body.members.filter { $0.key != "keys" }.map {
            ($0.key, $0.value.stringValue ?? String(decoding: $0.value.serialized(), as: UTF8.self))
          })
      options.errorName = query.errorName
      if let keys = body["keys"] {
        guard let array = keys.arrayValue else {
          throw CouchError.badRequest("`keys` body member must be an array.")
        }
        return (array, options)
      }
      return (try fromQuery(), options)
    default:
      throw CouchError.methodNotAllowed(["GET", "HEAD", "POST"])
    }
  }

  /// `POST /{db}/_all_docs/queries` (and `_design_docs/queries`, `_local_docs/queries`):
  /// `{"queries": [{...}, ...]}`, each query's members read as the query string's options
  /// are (their JSON values), answered `{"results": [...]}` in order.
  func allDocsQueries(
    _ store: DocumentStore, request: Request, query: QueryParameters, access: DatabaseAccess,
    namespace: AllDocsNamespace
  ) async throws -> Response {
    guard request.method == .post else { throw CouchError.methodNotAllowed(["POST"]) }
    let body = try await objectBody(of: request)
    guard let queries = body["queries"]?.arrayValue else {
      throw query.error("`queries` member must be an array of query objects.")
    }
    var results: [JSONValue] = []
    for item in queries {
      guard let object = item.objectValue else {
        throw query.error("each of `queries` must be a JSON object.")
      }
      var keys: [JSONValue]?
      if let value = object["keys"] {
        guard let array = value.arrayValue else {
          throw query.error("`keys` member must be an array.")
        }
        keys = array
      }
      var options = QueryParameters(
        pairs: object.members.filter { $0.key != "keys" }.map {
          ($0.key, String(decoding: $0.value.serialized(), as: UTF8.self))
        })
      options.errorName = query.errorName
      switch namespace {
      case .local:
        results.append(
          try await localDocsJSON(
            store, query: options, keys: try Self.stringKeys(keys, query), access: access))
      default:
        results.append(
          try await allDocsJSON(
            store, query: options, keys: keys, access: access, namespace: namespace))
      }
    }
    return CouchResponse.json(.object(JSONObject(["results": .array(results)])))
  }

  /// `keys` as document ids, for `_local_docs` (whose keys must be strings).
  static func stringKeys(_ keys: [JSONValue]?, _ query: QueryParameters) throws(CouchError)
    -> [String]?
  {
    guard let keys else { return nil }
    let strings = keys.compactMap(\.stringValue)
    guard strings.count == keys.count else {
      throw query.error("`keys` member must be an array of strings.")
    }
    return strings
  }

  /// One `_all_docs` (or `_design_docs`) answer for these options. With `keys`, `offset` is
  /// null, as CouchDB answers; a key that is not a string names no document: CouchDB's
  /// `{"key": …, "error": "not_found"}` row in its place (`_design_docs` leaves it out, as any
  /// key outside its namespace), `skip` and `limit` counting it.
  func allDocsJSON(
    _ store: DocumentStore, query: QueryParameters, keys: [JSONValue]?, access: DatabaseAccess,
    namespace: AllDocsNamespace
  ) async throws -> JSONValue {
    store.withSequenceString(
      try await allDocsRows(store, query: query, keys: keys, access: access, namespace: namespace))
  }

  /// ``allDocsJSON(_:query:keys:access:namespace:)`` with `update_seq` a number.
  func allDocsRows(
    _ store: DocumentStore, query: QueryParameters, keys: [JSONValue]?, access: DatabaseAccess,
    namespace: AllDocsNamespace
  ) async throws -> JSONValue {
    guard let keys else {
      return try await allDocsJSON(
        store, query: query, ids: nil, access: access, namespace: namespace)
    }
    let ids = keys.compactMap(\.stringValue)
    var answer: JSONValue
    if ids.count == keys.count || namespace == .design {
      answer = try await allDocsJSON(
        store, query: query, ids: ids, access: access, namespace: namespace)
    } else {
      let limit = try query.int("limit")
      let skip = try query.int("skip") ?? 0
      var unlimited = QueryParameters(
        pairs: query.pairs.filter { $0.name != "limit" && $0.name != "skip" }.map {
          ($0.name, $0.value)
        })
      unlimited.errorName = query.errorName
      answer = try await allDocsJSON(
        store, query: unlimited, ids: ids, access: access, namespace: namespace)
      var found = (answer["rows"]?.arrayValue ?? []).makeIterator()
      var rows: [JSONValue] = []
      for key in keys {
        if key.stringValue != nil {
          if let row = found.next() { rows.append(row) }
        } else {
          rows.append(
            .object(
              JSONObject([
                .init(key: "key", value: key), .init(key: "error", value: .string("not_found")),
              ])))
        }
      }
      let page = rows.dropFirst(max(0, skip)).prefix(limit.map { max(0, $0) } ?? rows.count)
      if case .object(var object) = answer {
        object["rows"] = .array(Array(page))
        answer = .object(object)
      }
    }
    if case .object(var object) = answer {
      object["offset"] = .null
      answer = .object(object)
    }
    return answer
  }

  /// ``allDocsJSON(_:query:keys:access:namespace:)`` for keys that are document ids.
  func allDocsJSON(
    _ store: DocumentStore, query: QueryParameters, ids keys: [String]?, access: DatabaseAccess,
    namespace: AllDocsNamespace
  ) async throws -> JSONValue {
    var options = AllDocsOptions()
    let view = try access.view(store)
    options.visible = view?.filter
    options.keys = keys
    // Booleans as CouchDB reads view options: `true`/`false` in any case, else 400.
    options.descending = try query.bool("descending")
    options.inclusiveEnd = try query.bool("inclusive_end", default: true)
    options.includeDocs = try query.bool("include_docs")
    options.conflicts = try query.bool("conflicts")
    options.attachments = try query.bool("attachments")
    options.attEncodingInfo = try query.bool("att_encoding_info")
    options.updateSeq = try query.bool("update_seq")
    options.limit = try queryLimit(
      try query.int("limit"), partitioned: store.isPartitioned && query["partition"] != nil)
    options.skip = try query.int("skip") ?? 0
    if let key = try query.json("key") {
      if options.keys == nil {
        // One key: a range of one, or nothing when the key is not a string.
        guard let s = key.stringValue else {
          if namespace == .design {
            return try Self.designDocs(store, options, empty: true, view: view).json
          }
          return try Self.emptyAllDocs(store, options, view: view)
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
    // `partition` (`/{db}/_partition/{p}/_all_docs`, or the parameter): the partition's ids
    // alone, counted among themselves (`couch_mrview_util:apply_all_docs_partition`).
    var partitionStart: String?
    if let partition = query["partition"], namespace == .all {
      guard store.isPartitioned else {
        throw CouchError(
          "query_parse_error", "`partition` parameter is not supported on this db", status: 400)
      }
      do { try Partitions.validate(partition: partition) } catch { throw CouchError(error) }
      let (first, past) = Partitions.range(of: partition)
      if options.descending {
        if options.startKey.map({ !Array($0.utf8).lexicographicallyPrecedes(Array(past.utf8)) })
          ?? true
        {
          options.startKey = past
        }
        if options.endKey.map({ Array($0.utf8).lexicographicallyPrecedes(Array(first.utf8)) })
          ?? true
        {
          options.endKey = first
        }
      } else {
        if options.startKey.map({ Array($0.utf8).lexicographicallyPrecedes(Array(first.utf8)) })
          ?? true
        {
          options.startKey = first
        }
        if options.endKey.map({ !Array($0.utf8).lexicographicallyPrecedes(Array(past.utf8)) })
          ?? true
        {
          options.endKey = past
          options.inclusiveEnd = false
        }
      }
      if let keys = options.keys {
        options.keys = keys.filter { Partitions.isMember($0, of: partition) }
      }
      partitionStart = options.descending ? past : first
    }
    let limited = options
    let result: JSONValue
    if namespace == .design {
      let isEmpty = empty
      result = try await reading(limit: nil) {
        try Self.designDocs(store, limited, empty: isEmpty, view: view)
      }.json
    } else if empty {
      result = try Self.emptyAllDocs(store, options, view: view)
    } else {
      var found = try await reading(limit: options.limit) { try store.allDocs(limited) }
      if let partition = query["partition"], view == nil {
        // Counted within the partition: its documents, and those of it before the first row.
        let counts = try await blocking { try store.partitionInfo(partition) }
        var before = AllDocsOptions()
        before.startKey = partitionStart
        before.descending = limited.descending
        before.limit = 0
        let preceding = before
        let outside = try await blocking { try store.allDocs(preceding).offset }
        found.totalRows = counts.docCount
        if limited.keys == nil { found.offset = max(0, found.offset - outside) }
      }
      if let view {
        // The counts of what the caller may see, never the database's.
        if found.rows.isEmpty && found.offset == found.totalRows { found.offset = view.docCount }
        found.totalRows = view.docCount
        if found.updateSeq != nil { found.updateSeq = view.updateSeq }
      }
      result = found.json
    }
    return result
  }

  /// Which documents an `_all_docs`-shaped answer lists.
  enum AllDocsNamespace {
    /// `_all_docs`.
    case all
    /// `_design_docs`: design documents only.
    case design
    /// `_local_docs`.
    case local
  }

  /// `GET/POST /{db}/_design_docs`: `_all_docs` of the design documents alone (couch_mrview's
  /// `_design` namespace), with the same options: `total_rows` counts the design documents
  /// the caller sees, `offset` counts among them, and `keys` that are not design ids are left
  /// out (fabric's `filter_keys_by_namespace`).
  static func designDocs(
    _ store: DocumentStore, _ options: AllDocsOptions, empty: Bool, view: (any AccessView)?
  ) throws -> AllDocsResult {
    // Every design document the caller sees, in id order ('/' < '0': `_design0` ends them).
    var every = options
    every.keys = nil
    every.startKey = "_design/"
    every.endKey = "_design0"
    every.inclusiveEnd = false
    every.descending = false
    every.limit = nil
    every.skip = 0
    // With `keys` these rows only count the design documents.
    if options.keys != nil { every.includeDocs = false }
    let all = try store.allDocs(every)
    func id(_ row: JSONValue) -> [UInt8] { Array((row["id"]?.stringValue ?? "").utf8) }
    var rows = all.rows.sorted { id($0).lexicographicallyPrecedes(id($1)) }
    let total = rows.count
    // The caller's seq under per-document access, as `_all_docs` answers it.
    let updateSeq = all.updateSeq.map { view?.updateSeq ?? $0 }
    if let keys = options.keys {
      var keyed = options
      keyed.keys = keys.filter { $0.hasPrefix("_design/") }
      var found = try store.allDocs(keyed)
      found.totalRows = total
      found.updateSeq = updateSeq
      return found
    }
    if empty { return AllDocsResult(totalRows: total, offset: 0, rows: [], updateSeq: updateSeq) }
    if options.descending { rows.reverse() }
    let (first, inRange) = Self.idRange(
      rows, id: id, start: options.startKey.map { Array($0.utf8) },
      end: options.endKey.map { Array($0.utf8) }, inclusiveEnd: options.inclusiveEnd,
      descending: options.descending)
    let skipped = min(options.skip, inRange.count)
    let shown = inRange.dropFirst(skipped)
    // CouchDB's offset: the design documents before the first row (or before where it
    // would be with `limit=0`); all of them when there is none.
    let offset = shown.isEmpty ? total : first + skipped
    return AllDocsResult(
      totalRows: total, offset: offset,
      rows: Array(options.limit.map { shown.prefix($0) } ?? shown), updateSeq: updateSeq)
  }

  /// Of `rows`, in the order a listing walks them (ids ascending, or descending), those from
  /// `start` to `end` as `_all_docs` bounds them, and the index of the first (how many come
  /// before `start`).
  static func idRange<Row>(
    _ rows: [Row], id: (Row) -> [UInt8], start: [UInt8]?, end: [UInt8]?, inclusiveEnd: Bool,
    descending: Bool
  ) -> (first: Int, rows: ArraySlice<Row>) {
    func beforeStart(_ x: [UInt8]) -> Bool {
      guard let start else { return false }
      return descending ? start.lexicographicallyPrecedes(x) : x.lexicographicallyPrecedes(start)
    }
    func pastEnd(_ x: [UInt8]) -> Bool {
      guard let end else { return false }
      if x == end { return !inclusiveEnd }
      return descending ? x.lexicographicallyPrecedes(end) : end.lexicographicallyPrecedes(x)
    }
    let first = rows.firstIndex { !beforeStart(id($0)) } ?? rows.count
    return (first, rows[first...].prefix { !pastEnd(id($0)) })
  }

  /// `GET/POST /{db}/_local_docs`: the caller's `_local` documents (in a wiki database a
  /// signed-in user who is not one of its admins sees their own, ``localKey(_:access:)``;
  /// wikilog's reserved `_local/org.wikilog.*` are never listed) as `_all_docs` lists
  /// documents: `{"id","key","value":{"rev"}}` rows, `doc` with `include_docs`, `keys`
  /// (`not_found` rows for missing ones), `startkey`/`endkey`, `inclusive_end`,
  /// `descending`, `skip` and `limit`; `total_rows` and `offset` are null, as CouchDB 3
  /// answers them.
  func localDocs(
    _ store: DocumentStore, request: Request, query: QueryParameters, access: DatabaseAccess
  ) async throws -> Response {
    let (keys, options) = try await requestKeys(request, query)
    return CouchResponse.json(
      try await localDocsJSON(
        store, query: options, keys: try Self.stringKeys(keys, query), access: access),
      includeBody: request.method != .head)
  }

  /// One `_local_docs` answer for these options.
  func localDocsJSON(
    _ store: DocumentStore, query: QueryParameters, keys: [String]?, access: DatabaseAccess
  ) async throws -> JSONValue {
    let descending = try query.bool("descending")
    let inclusiveEnd = try query.bool("inclusive_end", default: true)
    let includeDocs = try query.bool("include_docs")
    let limit = try query.int("limit")
    let skip = try query.int("skip") ?? 0
    // Bounds as `_all_docs` reads them: one that is not a string collates before every id
    // (null, booleans, numbers) or after every id (arrays, objects).
    var empty = false
    func bound(_ names: String..., isStart: Bool) throws -> [UInt8]? {
      for name in names {
        guard let value = try query.json(name) else { continue }
        switch Self.collationBound(value) {
        case .string(let s): return Array(s.utf8)
        case .beforeStrings: if isStart == descending { empty = true }
        case .afterStrings: if isStart != descending { empty = true }
        }
        return nil
      }
      return nil
    }
    var start = try bound("start_key", "startkey", isStart: true)
    var end = try bound("end_key", "endkey", isStart: false)
    // `total_rows` and `offset` are null, as CouchDB 3 answers them for local documents.
    func answer(_ rows: [JSONValue]) -> JSONValue {
      .object(JSONObject(["total_rows": .null, "offset": .null, "rows": .array(rows)]))
    }
    if let key = try query.json("key"), keys == nil {
      guard let s = key.stringValue else { return answer([]) }
      start = Array(s.utf8)
      end = start
    }
    if empty && keys == nil { return answer([]) }
    let prefix = try localKey("", access: access)
    let (startID, endID) = (start, end)
    return answer(
      try await reading(limit: limit) { () throws -> [JSONValue] in
        var docs: [(id: [UInt8], rev: String, body: JSONObject)] = []
        for doc in try store.localDocuments(prefix: prefix) {
          let name = String(doc.id.dropFirst(prefix.count))
          if prefix.isEmpty && name.hasPrefix("org.wikilog.") { continue }
          docs.append((Array(("_local/" + name).utf8), doc.rev, doc.body))
        }
        docs.sort { $0.id.lexicographicallyPrecedes($1.id) }
        func row(_ doc: (id: [UInt8], rev: String, body: JSONObject)) -> JSONValue {
          let id = String(decoding: doc.id, as: UTF8.self)
          var members: [JSONObject.Member] = [
            .init(key: "id", value: .string(id)), .init(key: "key", value: .string(id)),
            .init(key: "value", value: .object(JSONObject(["rev": .string(doc.rev)]))),
          ]
          if includeDocs {
            let identity: [JSONObject.Member] = [
              .init(key: "_id", value: .string(id)), .init(key: "_rev", value: .string(doc.rev)),
            ]
            members.append(
              .init(key: "doc", value: .object(JSONObject(identity + doc.body.members))))
          }
          return .object(JSONObject(members))
        }
        guard let keys else {
          if descending { docs.reverse() }
          let range = Self.idRange(
            docs, id: \.id, start: startID, end: endID, inclusiveEnd: inclusiveEnd,
            descending: descending)
          return range.rows.dropFirst(skip).prefix(limit ?? Int.max).map(row)
        }
        let byID = Dictionary(docs.map { ($0.id, $0) }, uniquingKeysWith: { a, _ in a })
        let wanted = (descending ? keys.reversed() : keys).filter { $0.hasPrefix("_local/") }
        return wanted.dropFirst(skip).prefix(limit ?? Int.max).map { key in
          byID[Array(key.utf8)].map(row)
            ?? .object(JSONObject(["key": .string(key), "error": .string("not_found")]))
        }
      })
  }

  static func emptyAllDocs(
    _ store: DocumentStore, _ options: AllDocsOptions, view: (any AccessView)? = nil
  ) throws -> JSONValue {
    let info = try store.info
    return AllDocsResult(
      totalRows: view?.docCount ?? info.docCount, offset: 0, rows: [],
      updateSeq: options.updateSeq ? (view?.updateSeq ?? info.updateSeq) : nil
    ).json
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
