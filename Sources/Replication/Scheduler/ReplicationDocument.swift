public import JSON
public import Projections
import RevTree

#if canImport(FoundationEssentials)
  import FoundationEssentials
#else
  import Foundation
#endif

extension SystemDatabase {
  /// `_replicator`: CouchDB's database of persistent replications. Each document describes one
  /// (`source`, `target`, `continuous`, `create_target`, `doc_ids`, `selector`, `filter` with
  /// `query_params`, `since_seq`, `worker_batch_size`); a server whose data directory
  /// knows this database runs them (``ReplicatorDocuments``). A document that does not describe
  /// a replication is refused with 403 `forbidden` (``ReplicationDocumentValidator``), as
  /// CouchDB's `before_doc_update` refuses it.
  ///
  /// ```swift
  /// let data = DataDirectory(path: dir, systemDatabases: [.users, .replicator])
  /// ```
  public static var replicator: SystemDatabase {
    SystemDatabase(
      name: ReplicatorDocuments.databaseName,
      validation: DocumentValidation([ReplicationDocumentValidator()]))
  }
}

/// The rules of `_replicator` documents (CouchDB's `couch_replicator_docs:before_doc_update`):
/// a live document must parse as a replication (``ReplicationDocument``). Deletions, design
/// documents and documents whose `_replication_state` is `failed` are not checked.
public struct ReplicationDocumentValidator: DocumentValidator {
  public init() {}

  public func validate(_ docID: String, body: JSONObject, deleted: Bool) throws(StoreError)
    -> DocumentRequirement?
  {
    if deleted || docID.hasPrefix("_design/") { return nil }
    if body["_replication_state"]?.stringValue == "failed" { return nil }
    do {
      _ = try ReplicationDocument(body)
    } catch {
      throw .validation(error.reason)
    }
    return nil
  }
}

/// A `_replicator` document read as a replication.
///
/// Endpoints are URLs, or objects with `url` and `headers` (an `Authorization` header) or
/// `auth.basic` (`username`, `password`); local database names are refused, as in CouchDB 3.
/// Options are checked as CouchDB's `couch_replicator_parse:convert_options/1` checks them
/// (booleans, an array of `doc_ids`, an object `selector`, an object `query_params`; at most
/// one of `doc_ids`, `filter` and `selector`).
struct ReplicationDocument {
  let replicator: Replicator
  let continuous: Bool
  /// The user the document belongs to (`owner`, else `user_ctx.name`).
  let user: String?
  /// What identifies the replication the document asks for: its body without the fields that
  /// start with `_` (those the scheduler writes back included). A document edited into the
  /// same replication keeps its job.
  let key: [UInt8]

  /// The id of the job: the replication id, with `+continuous` for a continuous one
  /// (CouchDB's `{BaseId, Ext}`).
  var jobID: String { replicator.replicationID + (continuous ? "+continuous" : "") }

  init(_ body: JSONObject) throws(StoreError) {
    guard let source = body["source"], source != .null, let target = body["target"],
      target != .null
    else {
      throw .badRequest("Missing replicator database")
    }
    for name in ["continuous", "create_target", "cancel", "winning_revs_only", "use_bulk_get"] {
      if let value = body[name], value.boolValue == nil {
        throw .badRequest("parameter `\(name)` must be a boolean")
      }
    }
    if let ids = body["doc_ids"], ids != .null {
      guard let list = ids.arrayValue else {
        throw .badRequest("parameter `doc_ids` must be an array")
      }
      guard list.allSatisfy({ $0.stringValue != nil }) else {
        throw .badRequest("parameter `doc_ids` must be an array of strings")
      }
    }
    if let selector = body["selector"], selector.objectValue == nil {
      throw .badRequest("parameter `selector` must be a JSON object")
    }
    if let parameters = body["query_params"], parameters.objectValue == nil {
      throw .badRequest("parameter `query_params` must be an object")
    }
    if let filter = body["filter"], filter.stringValue == nil {
      throw .badRequest("parameter `filter` must be a string")
    }
    let filters = ["doc_ids", "filter", "selector"].filter { name in
      body[name].map { $0 != .null } ?? false
    }
    if filters.count > 1 {
      throw .badRequest("`doc_ids`,`filter`,`selector` are mutually exclusive")
    }
    for name in ["source", "target"] {
      let spec = body[name]
      if let url = spec?.stringValue ?? spec?["url"]?.stringValue, url.contains("://"),
        CouchURL(url) == nil
      {
        throw .badRequest("\(name) has an invalid url")
      }
    }
    var request = body
    request["cancel"] = nil
    replicator = try Replicator.described(request)
    continuous = body["continuous"]?.boolValue ?? false
    user = body["owner"]?.stringValue ?? body["user_ctx"]?["name"]?.stringValue
    var keyed = JSONObject()
    for member in body.members where !member.key.hasPrefix("_") && member.key != "owner" {
      keyed.members.append(member)
    }
    key = JSONValue.object(keyed).serialized()
  }

  /// An endpoint as `/_scheduler/docs` shows it: a URL without its credentials (an object's
  /// `url`; its `headers` and `auth` never), or null when it is not a URL
  /// (`couch_replicator:strip_url_creds/1`).
  static func strippedURL(_ spec: JSONValue?) -> JSONValue {
    guard let text = spec?.stringValue ?? spec?["url"]?.stringValue, let url = CouchURL(text)
    else { return .null }
    return .string(url.description + "/")
  }
}
