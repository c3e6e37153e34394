public import CouchAPI
public import JSON
public import Projections
import Replication
import RevTree

extension ServerReplications {
  /// How `_replicator` is served (CouchDB 3.4's `chttpd_auth_request`): the database exists
  /// only when the data directory knows it (`501` otherwise); creating or deleting it,
  /// `_all_docs` and `_changes` are for server administrators (401 `You are not a server
  /// admin.` for everyone else, signed in or not); everything else goes through its security
  /// object like any database's, whose default (none set) is CouchDB 3's `admin_only`. A
  /// member named in it writes documents of their own (``ReplicatorOwnership``), and sees
  /// other users' without their credentials.
  var policy: SystemDatabasePolicy {
    let documents = self.documents
    return SystemDatabasePolicy(
      name: ReplicatorDocuments.databaseName,
      unserved: {
        documents.isEnabled
          ? nil
          : CouchError.notImplemented(
            "server-side replication (the _replicator database)",
            "this data directory was opened without it")
      },
      gate: { resource, _ in
        let listings: Set = [
          "_all_docs", "_design_docs", "_local_docs", "_all_docs/queries",
          "_design_docs/queries", "_local_docs/queries", "_changes",
        ]
        if case .endpoint(let name) = resource, listings.contains(name) {
          throw CouchError("unauthorized", "You are not a server admin.", status: 401)
        }
      },
      shown: { doc, access, madeUpRev in
        ReplicatorOwnership.shown(doc, access: access, madeUpRev: madeUpRev)
      },
      owned: { object, id, access in try ReplicatorOwnership.owned(object, id: id, access: access)
      },
      checkWrite: { write, access, store in
        try ReplicatorOwnership.checkWrite(
          write.docID, body: write.body, access: access, store: store)
      },
      queryable: { access, store in try Self.ownDocuments(store, access: access) })
  }

  /// What a user who is not a database admin of `_replicator` finds with `_find` (the
  /// policy's ``SystemDatabasePolicy/queryable``): their own
  /// documents (and design documents). CouchDB shows others' documents without credentials,
  /// matched after stripping; wikilog's `_find` matches stored bodies, so a selector over
  /// another user's `source` would reveal its password one guess at a time: others' documents
  /// are left out instead.
  static func ownDocuments(_ store: DocumentStore, access: DatabaseAccess) throws
    -> DocumentFilter
  {
    var options = AllDocsOptions()
    options.includeDocs = true
    var own = Set<String>()
    for row in try store.allDocs(options).rows {
      guard let id = row["id"]?.stringValue else { continue }
      if id.hasPrefix("_design/")
        || (access.user.name != nil && row["doc"]?["owner"]?.stringValue == access.user.name)
      {
        own.insert(id)
      }
    }
    let ids = own
    return DocumentFilter(
      name: "_replicator_owner", parameters: ["owner": access.user.name ?? ""], wakeKeys: [],
      keys: { _ in [] }, includes: { ids.contains($0) })
  }

  /// `GET /_scheduler/docs[/_replicator]` (`states`, `skip`, `limit`) and
  /// `/_scheduler/docs/_replicator/{docid}`.
  func schedulerDocs(_ id: String?, _ r: ServerRequest) async throws -> JSONValue {
    let query = r.query
    guard documents.isEnabled, r.server.dataDirectory.exists(ReplicatorDocuments.databaseName)
    else {
      if id != nil { throw CouchError.notFound() }
      return .object(
        JSONObject(["total_rows": .int(0), "offset": .int(0), "docs": .array([])]))
    }
    if let id { return try documents.schedulerDoc(id) }
    var requested = Set<String>()
    if let text = query["states"] {
      let known: Set = [
        "initializing", "error", "running", "pending", "crashing", "completed", "failed",
      ]
      requested = Set(text.lowercased().split(separator: ",").map(String.init))
      let unknown = requested.subtracting(known)
      guard unknown.isEmpty else {
        throw CouchError(
          "query_parse_error",
          "Unknown states \(unknown.sorted()). Choose from: [initializing,error,running,pending,crashing,completed,failed]",
          status: 400)
      }
    }
    let documents = self.documents
    let states = requested
    let skip = try query.int("skip") ?? 0
    let limit = try query.int("limit")
    return try await r.blocking {
      try documents.schedulerDocs(states: states, skip: skip, limit: limit)
    }
  }
}

/// Who owns a `_replicator` document, and what others see of it: CouchDB 3.4's
/// `couch_replicator_docs:before_doc_update` and `after_doc_read`.
///
/// - A write (interactive or replicated; not of a design or `_local` document) gets `owner`:
///   the writer's name when it has none, or `null` and the writer is a database admin of
///   `_replicator`. A user who is not a database admin may not name another owner, nor change
///   or delete a document another user owns: 403 `forbidden` `Can't update replication
///   documents from other users.` (CouchDB checks the new body only; wikilog also checks the
///   stored document, so that a deletion or a bare edit cannot take another's document over).
/// - A read by a user who is not a database admin, of a document owned by someone else, shows
///   `source` and `target` without credentials (URL userinfo, `headers`, `auth`) and a made-up
///   `_rev` (CouchDB's "technically non-existent document body").
public enum ReplicatorOwnership {
  public static let otherUsers = "Can't update replication documents from other users."

  /// The body to write: `object` with its `owner` set, or a refusal.
  public static func owned(_ object: JSONObject, id: String, access: DatabaseAccess)
    throws(CouchError)
    -> JSONObject
  {
    if id.hasPrefix("_design/") || id.hasPrefix("_local/") { return object }
    let name: JSONValue = access.user.name.map { .string($0) } ?? .null
    var object = object
    guard let owner = object["owner"] else {
      object["owner"] = name
      return object
    }
    if owner == name { return object }
    guard access.isAdmin else { throw CouchError("forbidden", otherUsers, status: 403) }
    if owner == .null { object["owner"] = name }
    return object
  }

  /// Refuses a write of document `docID` by a user who is not a database admin when the body
  /// names another owner or the stored document (its winning revision, when live) belongs to
  /// someone else.
  public static func checkWrite(
    _ docID: String, body: JSONObject?, access: DatabaseAccess, store: DocumentStore
  )
    throws
  {
    if access.isAdmin || docID.hasPrefix("_design/") || docID.hasPrefix("_local/") { return }
    let name: JSONValue = access.user.name.map { .string($0) } ?? .null
    if let body, body["owner"] ?? .null != name {
      throw StoreError.forbidden(otherUsers)
    }
    let stored: JSONValue
    do {
      stored = try store.get(docID)
    } catch let error as StoreError where error.code == .notFound {
      return
    }
    if (stored["owner"] ?? .null) != name {
      throw StoreError.forbidden(otherUsers)
    }
  }

  /// Whether `doc` is shown whole to the caller: always to a database admin, and to the
  /// document's owner.
  public static func showsWhole(_ doc: JSONValue, access: DatabaseAccess) -> Bool {
    if access.isAdmin { return true }
    if doc["_id"]?.stringValue?.hasPrefix("_design/") == true { return true }
    guard let name = access.user.name else { return false }
    return doc["owner"]?.stringValue == name
  }

  /// `doc` as the caller may see it (`after_doc_read`).
  /// With `madeUpRev` false (a multipart answer, whose attachments are found by revision) the
  /// revision is left as it is.
  public static func shown(_ doc: JSONValue, access: DatabaseAccess, madeUpRev: Bool = true)
    -> JSONValue
  {
    guard case .object(var object) = doc, !showsWhole(doc, access: access) else { return doc }
    for name in ["source", "target"] {
      if let value = object[name] { object[name] = stripCredentials(value) }
    }
    for name in ["source_proxy", "target_proxy"] {
      if let url = object[name]?.stringValue { object[name] = .string(strippedUserinfo(url)) }
    }
    // A made-up revision of the same generation: this body was never stored.
    if madeUpRev, let rev = object["_rev"]?.stringValue, let dash = rev.firstIndex(of: "-") {
      var hashed = object
      hashed["_rev"] = nil
      hashed["_revisions"] = nil
      let digest = MD5.hash(JSONValue.object(hashed).serialized()).description
      object["_rev"] = .string(String(rev[..<dash]) + "-" + digest)
      if case .object(var revisions)? = object["_revisions"],
        case .array(var ids)? = revisions["ids"], !ids.isEmpty
      {
        ids[0] = .string(digest)
        revisions["ids"] = .array(ids)
        object["_revisions"] = .object(revisions)
      }
    }
    return .object(object)
  }

  /// An endpoint without its credentials (`strip_credentials/1`): a URL without userinfo; an
  /// object without `headers` and `auth`, its `url` without userinfo.
  public static func stripCredentials(_ endpoint: JSONValue) -> JSONValue {
    switch endpoint {
    case .string(let url):
      return .string(strippedUserinfo(url))
    case .object(var object):
      object["headers"] = nil
      object["auth"] = nil
      if let url = object["url"]?.stringValue { object["url"] = .string(strippedUserinfo(url)) }
      return .object(object)
    default:
      return endpoint
    }
  }

  /// `url` without the `user:password@` of its authority.
  public static func strippedUserinfo(_ url: String) -> String {
    guard let scheme = url.firstRange(of: "://") else { return url }
    let rest = url[scheme.upperBound...]
    let authorityEnd = rest.firstIndex { $0 == "/" || $0 == "?" || $0 == "#" } ?? rest.endIndex
    guard let at = rest[..<authorityEnd].lastIndex(of: "@") else { return url }
    return String(url[..<scheme.upperBound]) + String(rest[rest.index(after: at)...])
  }
}
