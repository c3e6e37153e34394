import Foundation
public import JSON
import Log
public import Projections

extension DocumentStore {
  func designViews(_ ddocID: String) throws -> DesignViews {
    let doc = try get(ddocID)
    let rev = doc.objectValue?["_rev"]?.stringValue ?? ""
    return try DesignViews(id: ddocID, rev: rev, body: doc)
  }

  func viewIndex(_ group: DesignViews) throws -> (index: ViewIndex, follower: IndexFollower) {
    for follower in indexes {
      if let other = follower.index as? ViewIndex, other.group.id == group.id,
        other.name != group.indexName
      {
        closeIndex(named: other.name)
      }
    }
    let follower = try openIndex(ViewIndex(group, queryServers: state.queryServers))
    guard let index = follower.index as? ViewIndex else {
      throw StoreError.internalError("\(group.indexName) is not a view index")
    }
    return (index, follower)
  }

  func queryView(
    ddoc: String, view: String, query: ViewQuery,
    includes: (@Sendable (String) -> Bool)? = nil
  ) throws -> ViewResult {
    let group = try designViews(ddoc)
    guard group.view(named: view) != nil else { throw StoreError.notFound("missing_named_view") }
    let (index, follower) = try viewIndex(group)
    if query.update == .yes { try catchUp(index, follower) }
    let reductions = ReductionCache()
    var result = try follower.read { txn in
      try index.query(
        query, view: view, txn: txn, storage: follower.storage, includes: includes,
        reductions: reductions,
        document: { id, rev in try self.viewDocument(id, rev: rev, query: query) })
    }
    if query.updateSeq { result.updateSeq = try follower.checkpoint() }
    // JavaScript reductions of whole buckets, kept for the next query (best effort: a
    // read-only directory keeps none).
    if !reductions.isEmpty {
      try? follower.write { txn in try reductions.write(into: follower.storage, txn: txn) }
    }
    return result
  }

  /// Catches the view index up, after forgetting an earlier failure of its functions (a
  /// query runs them again); a failure is CouchDB's error for it.
  func catchUp(_ index: ViewIndex, _ follower: IndexFollower) throws {
    index.retryAfterFailure()
    do {
      try follower.catchUp()
    } catch {
      if let failure = index.lastFailure {
        let (name, reason) = failure.couchError
        switch failure {
        case .failed: throw StoreError(name, reason, code: .badRequest)
        default: throw StoreError(name, reason, code: .internalError)
        }
      }
      throw error
    }
  }

  /// A document for `include_docs`: the winner, or revision `rev`; nil when missing or
  /// deleted.
  func viewDocument(_ id: String, rev: String?, query: ViewQuery) throws -> JSONValue? {
    var options = GetOptions()
    options.rev = rev
    options.conflicts = query.conflicts ?? false
    options.attachments = query.attachments
    do {
      let doc = try get(id, options: options)
      if doc.objectValue?["_deleted"] == .bool(true) { return nil }
      return doc
    } catch let error as StoreError where error.code == .notFound {
      return nil
    }
  }

  func viewInfo(ddoc: String) throws -> JSONValue {
    let group = try designViews(ddoc)
    let (index, follower) = try viewIndex(group)
    let seq = try follower.checkpoint()
    let directory = log.path + "/" + index.name
    let fileSize =
      ((try? FileManager.default.attributesOfItem(atPath: directory + "/data.mdb"))?[.size]
      as? NSNumber)?.intValue ?? 0
    // The pages the index's databases use (not a walk over every row).
    let activeSize = try follower.read { txn in
      try follower.storage.all.reduce(0) { total, db in total + (try txn.pageBytes(of: db)) }
    }
    let building = state.indexTasks.running.contains { $0.index == index.name }
    let name = String(ddoc.dropFirst("_design/".count))
    return .object(
      JSONObject([
        .init(key: "name", value: .string(name)),
        .init(
          key: "view_index",
          value: .object(
            JSONObject([
              .init(
                key: "updates_pending",
                value: .object(
                  JSONObject([
                    .init(
                      key: "minimum",
                      value: .int(max(0, Int(try info.updateSeq.rawValue) - Int(seq)))),
                    .init(
                      key: "preferred",
                      value: .int(max(0, Int(try info.updateSeq.rawValue) - Int(seq)))),
                    .init(
                      key: "total", value: .int(max(0, Int(try info.updateSeq.rawValue) - Int(seq)))
                    ),
                  ]))),
              .init(key: "waiting_commit", value: .bool(false)),
              .init(key: "waiting_clients", value: .int(0)),
              .init(key: "updater_running", value: .bool(building)),
              .init(key: "update_seq", value: .int(seq)),
              .init(
                key: "sizes",
                value: .object(
                  JSONObject([
                    .init(key: "file", value: .int(fileSize)),
                    .init(key: "external", value: .int(activeSize)),
                    .init(key: "active", value: .int(activeSize)),
                  ]))),
              .init(key: "signature", value: .string(String(group.signature.prefix(32)))),
              .init(key: "purge_seq", value: .int(0)),
              .init(key: "language", value: .string(group.language)),
              .init(key: "compact_running", value: .bool(false)),
            ]))),
      ]))
  }

  func compactViews(ddoc: String) throws {
    let group = try designViews(ddoc)
    let (index, _) = try viewIndex(group)
    try compactIndex(named: index.name)
  }

  @discardableResult
  func openViewIndexes() throws -> [String] {
    var options = AllDocsOptions()
    options.startKey = "_design/"
    options.endKey = "_design0"
    options.includeDocs = true
    var names: [String] = []
    for row in try allDocs(options).rows {
      guard let doc = row.objectValue?["doc"], let id = doc.objectValue?["_id"]?.stringValue,
        doc.objectValue?["language"]?.stringValue != "query",
        let group = try? DesignViews(
          id: id, rev: doc.objectValue?["_rev"]?.stringValue ?? "", body: doc),
        !group.views.isEmpty
      else { continue }
      names.append(try viewIndex(group).index.name)
    }
    return names
  }

  @discardableResult
  func viewCleanup() throws -> Int {
    var wanted = Set<String>()
    let all = try allDocs(
      {
        var o = AllDocsOptions()
        o.startKey = "_design/"
        o.endKey = "_design0"
        o.includeDocs = true
        return o
      }())
    for row in all.rows {
      guard let doc = row.objectValue?["doc"], let id = doc.objectValue?["_id"]?.stringValue,
        let group = try? DesignViews(
          id: id, rev: doc.objectValue?["_rev"]?.stringValue ?? "", body: doc)
      else { continue }
      wanted.insert(group.indexName)
    }
    var removed = 0
    let entries = (try? FileManager.default.contentsOfDirectory(atPath: log.path)) ?? []
    for entry in entries where entry.hasPrefix("views-") && !wanted.contains(entry) {
      closeIndex(named: entry)
      if (try? FileManager.default.removeItem(atPath: log.path + "/" + entry)) != nil {
        removed += 1
      }
    }
    return removed
  }
}

extension AsOfView {
  /// Answers `query` on view `view` of design document `ddoc` as the view was at the view's
  /// position: the design document as it was then (or, if it did not exist then, as it is
  /// now) applied to the documents as they were then. The index is built in the view's
  /// scratch directory, and goes with it.
  public func queryView(
    ddoc: String, view: String, query: ViewQuery,
    includes: (@Sendable (String) -> Bool)? = nil
  ) throws -> ViewResult {
    let group = try (try? scratch.designViews(ddoc)) ?? live.designViews(ddoc)
    return try queryView(group, view: view, query: query, includes: includes)
  }

  /// Answers `query` on view `view` of `group` (a design document's views, or views a program
  /// defines without storing them, as the wiki's time travel lists pages) as it was at the
  /// view's position.
  public func queryView(
    _ group: DesignViews, view: String, query: ViewQuery,
    includes: (@Sendable (String) -> Bool)? = nil
  ) throws -> ViewResult {
    guard group.view(named: view) != nil else { throw StoreError.notFound("missing_named_view") }
    let (index, follower) = try scratch.viewIndex(group)
    try scratch.catchUp(index, follower)
    var result = try follower.read { txn in
      try index.query(
        query, view: view, txn: txn, storage: follower.storage, includes: includes,
        document: { id, rev in try self.scratch.viewDocument(id, rev: rev, query: query) })
    }
    if query.updateSeq { result.updateSeq = position.rawValue }
    return result
  }
}
