public import JSON
public import Log
import NIOPosix
public import Projections
import RevTree

#if canImport(FoundationEssentials)
  import FoundationEssentials
#else
  import Foundation
#endif

/// A ``ReplicationPeer`` on a ``Projections/DocumentStore`` of this process: the replicator
/// asks the store directly (its changes, `revsDiff`, `openRevs`, replicated `bulkDocs`, local
/// documents) — no HTTP server, no request parsed, no document serialized and parsed again. An
/// app's ``TypedDocuments`` sync and `wikilog replicate` between local databases use it.
///
/// It reads and writes as `user`: nil is the store's owner, who reads everything (as a server
/// administrator does); a user reads what the store's access rules and security object grant
/// them (``Projections/DocumentAccess``'s view of the store, the view the HTTP API reads
/// through) and writes through the store's checked write path (``Projections/WriteAccess/user``,
/// checked in the transaction that writes: a page of a wiki they are not in is refused, or held
/// until its wiki lets them in). Either way the store's validation runs (the TouchWiki schema,
/// design documents' `validate_doc_update`).
///
/// What it does not do, the HTTP endpoints do: design documents' filter functions (a
/// replication with `filter=ddoc/name` needs the server; the data directory's own filters,
/// such as the wiki's `wiki`, run here when given as `filters`), and the `_users` and
/// `_replicator` databases' rules for what a user writes there (hashing a clear password, a
/// document's owner).
///
/// ```swift
/// let source = CouchEndpoint(peer: StorePeer(store: wiki, identity: "file:///srv/wikilog/wiki"))
/// let target = CouchEndpoint(transport: HTTPTransport(baseURL: "https://team.example"), database: "wiki",
///                            identity: "https://team.example/wiki/")
/// try await Replicator(source: source, target: target).replicate()
/// ```
public struct StorePeer: ReplicationPeer {
  public let store: DocumentStore
  public let identity: String
  /// Who reads and writes; nil for the store's owner.
  public let user: UserContext?
  /// The actor the events of its writes name.
  public let actor: String
  /// The origin its writes' events record (where the revisions came from).
  public let origin: String
  /// The named filters a changes request may use (the data directory's).
  public let filters: DocumentFilters

  public init(
    store: DocumentStore, identity: String, user: UserContext? = nil,
    actor: String = "replicator", origin: String = "", filters: DocumentFilters = DocumentFilters()
  ) {
    self.filters = filters
    self.store = store
    self.identity = identity
    self.user = user
    self.actor = actor
    self.origin = origin
  }

  /// What `user` may read, when it is not everything: the rules' view of the store.
  func view() throws -> (any AccessView)? {
    guard let user, !user.isAdmin else { return nil }
    let security = try store.security()
    guard let rules = store.accessRules else {
      guard security.isMember(user) else {
        throw ReplicatorError.http(
          status: 403, error: "forbidden", reason: "You are not allowed to access this db.")
      }
      return nil
    }
    return try rules.view(for: user, isMember: security.isMember(user), in: store)
  }

  /// Runs `body` with the store's failures as CouchDB's HTTP answers them.
  func answering<T>(_ what: String, _ body: () async throws -> T) async throws -> T {
    do {
      return try await body()
    } catch let error as StoreError {
      throw ReplicatorError.http(
        status: error.code.httpStatus, error: error.error, reason: "\(what): \(error.reason)")
    }
  }

  public func open() async throws {
    try await answering("open \(identity)") { _ = try view() }
  }

  public func create() async throws {
    throw ReplicatorError.http(
      status: 412, error: "file_exists",
      reason: "The database could not be created, the file already exists.")
  }

  /// A seq as the store counts: a number, or CouchDB's `N-…` string.
  static func position(_ seq: JSONValue) -> LogPosition {
    if let n = seq.numberValue?.int64Value, n >= 0 { return LogPosition(UInt64(n)) }
    if let text = seq.stringValue {
      let digits = text.prefix { $0.isNumber }
      if let n = UInt64(digits) { return LogPosition(n) }
    }
    return .start
  }

  public func changes(_ request: PeerChangesRequest) async throws -> PeerChanges {
    var options = ChangesOptions()
    if let name = request.filter {
      let parameters = request.filterParameters
      guard
        let filter = try await answering(
          "_changes",
          { () throws(StoreError) in
            try filters.make(name, parameter: { parameters[$0] })
          })
      else {
        throw ReplicatorError.http(
          status: 400, error: "bad_request",
          reason:
            "filter \"\(name)\" runs in the server (a design document's filter function): replicate through its HTTP API"
        )
      }
      options.filter = filter
    }
    options.since = Self.position(request.since)
    options.limit = request.limit
    options.style = .allDocs
    if let ids = request.docIDs { options.docIDs = Set(ids) }
    let selector: Selector? = try await answering("_changes") {
      try request.selector.map { try Selector($0) }
    }
    options.selector = selector
    let store = self.store
    let view = try await answering("_changes") { try self.view() }
    let read: @Sendable (ChangesOptions) throws -> ChangesResult = { options in
      try view?.changes(options) ?? store.changes(options)
    }
    let first = options
    var result = try await answering("_changes") { try await blocking { try read(first) } }
    if result.results.isEmpty && request.longpoll {
      // Nothing yet: wait for a commit after it (or the feed's timeout), then read again.
      let after = result.lastSeq
      try await Self.waitForChange(store, after: after, timeout: request.timeout)
      options.since = after
      let again = options
      result = try await answering("_changes") { try await blocking { try read(again) } }
    }
    return PeerChanges(
      rows: result.results.map { ($0.id, $0.changes) }, lastSeq: .int(Int(result.lastSeq.rawValue)),
      pending: result.pending)
  }

  /// Returns after the first commit past `after`, or after `timeout`.
  static func waitForChange(_ store: DocumentStore, after: LogPosition, timeout: Duration)
    async throws
  {
    try await withThrowingTaskGroup(of: Void.self) { group in
      group.addTask {
        for try await _ in store.changeNotices(after: after) { return }
      }
      group.addTask { try await Task.sleep(for: timeout) }
      _ = try await group.next()
      group.cancelAll()
    }
  }

  public func revsDiff(_ revisions: [(id: String, revs: [String])]) async throws -> [PeerMissing] {
    try await answering("_revs_diff") {
      let view = try self.view()
      // A document the user may not read lacks every revision, as the API answers.
      let visible = revisions.filter { view?.includes($0.id) ?? true }
      var found: [String: PeerMissing] = [:]
      found.reserveCapacity(visible.count)
      for (id, diff) in try store.revsDiff(visible) {
        found[id] = PeerMissing(
          id: id, missing: diff.missing.map(\.description),
          possibleAncestors: diff.possibleAncestors.map(\.description))
      }
      var out: [PeerMissing] = []
      for (id, revs) in revisions {
        if let diff = found[id] {
          out.append(diff)
        } else if !(view?.includes(id) ?? true) {
          out.append(PeerMissing(id: id, missing: revs, possibleAncestors: []))
        }
      }
      return out
    }
  }

  /// Each revision as the store holds it (``Projections/StoredRevision``), or as its JSON
  /// document when it has attachments (their data inline, stubs for those `attsSince`'s
  /// revisions have).
  public func revisions(_ wanted: [PeerWanted]) async throws -> [PeerRevision] {
    let view = try await answering("_bulk_get") { try self.view() }
    let store = self.store
    return try await blocking {
      try store.read { txn in
        var out: [PeerRevision] = []
        for want in wanted {
          guard view?.includes(want.id) ?? true else {
            for rev in want.revs {
              out.append(
                .failed(PeerRefusal(id: want.id, rev: rev, error: "not_found", reason: "missing")))
            }
            continue
          }
          var options = GetOptions()
          options.revs = true
          options.latest = true
          options.attachments = true
          if !want.attsSince.isEmpty { options.attsSince = want.attsSince }
          let found: [StoredRevisionRead]
          do {
            found = try store.storedRevisions(want.id, .revs(want.revs), options: options, txn: txn)
          } catch let error as StoreError {
            for rev in want.revs {
              out.append(
                .failed(
                  PeerRefusal(id: want.id, rev: rev, error: error.error, reason: error.reason)))
            }
            continue
          }
          for entry in found {
            switch entry {
            case .stored(let revision): out.append(.document(.stored(revision)))
            case .document(let doc): out.append(.document(.json(doc)))
            case .missing(let rev):
              out.append(
                .failed(PeerRefusal(id: want.id, rev: rev, error: "not_found", reason: "missing")))
            }
          }
        }
        return out
      }
    }
  }

  /// Revisions read from another store of this process are written as they were stored
  /// (``Projections/DocumentStore/replicateAsync(_:actor:origin:)``); a batch with any JSON
  /// document (one with attachments, or from another peer) is written as `_bulk_docs` writes
  /// it, all of it in one transaction, in its order.
  public func write(_ docs: ArraySlice<PeerDocument>) async throws -> [PeerRefusal] {
    var stored: [StoredRevision]? = []
    stored?.reserveCapacity(docs.count)
    for doc in docs {
      guard case .stored(let revision) = doc else {
        stored = nil
        break
      }
      stored?.append(revision)
    }
    let (store, user, actor, origin) = (self.store, self.user, self.actor, self.origin)
    let results = try await answering("_bulk_docs") {
      try await WriteAccess.$user.withValue(user) {
        if let stored {
          return try await store.replicateAsync(stored, actor: actor, origin: origin)
        }
        return try await store.bulkDocsAsync(
          docs.map { try $0.json() }, newEdits: false, actor: actor, origin: origin)
      }
    }
    return results.compactMap { result in
      guard let error = result.error else { return nil }
      return PeerRefusal(id: result.id, rev: result.rev, error: error.error, reason: error.reason)
    }
  }

  public func writeOne(_ doc: PeerDocument) async throws {
    if let refusal = try await write([doc][...]).first {
      throw ReplicatorError.http(
        status: refusal.error == "forbidden" ? 403 : refusal.error == "unauthorized" ? 401 : 400,
        error: refusal.error, reason: "PUT \(doc.id): \(refusal.reason)")
    }
  }

  public func ensureFullCommit() async throws {
    // Every write of the store is durable when it returns (a synced commit).
  }

  public func localDocument(_ id: String) async throws -> JSONValue? {
    try await answering("GET _local/\(id)") {
      _ = try self.view()
      do {
        return try store.getLocal(id)
      } catch let error as StoreError where error.code == .notFound {
        return nil
      }
    }
  }

  public func putLocalDocument(_ id: String, _ body: JSONObject) async throws -> String? {
    try await answering("PUT _local/\(id)") {
      _ = try self.view()
      var body = body
      let rev = body["_rev"]?.stringValue
      body.members.removeAll { $0.key == "_rev" || $0.key == "_id" }
      let result = try await store.putLocalAsync(
        id, JSONValue.object(body).serialized(), rev: rev, actor: actor)
      if let error = result.error { throw error }
      return result.rev
    }
  }
}

/// Runs `body`, a read of the store, on NIO's thread pool, off the caller's executor.
func blocking<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
  try await NIOThreadPool.singleton.runIfActive { try body() }
}
