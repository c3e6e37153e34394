import Formats
public import JSON
import Synchronization

/// A ``ReplicationPeer`` on a CouchDB-compatible server: each step is the request CouchDB's
/// replicator makes (docs.couchdb.org, "Replication Protocol"), carried by a
/// ``CouchTransport`` (``HTTPTransport``: AsyncHTTPClient). Bodies are serialized and answers
/// parsed on the caller's task, off the replicator's actor, so that a batch being read and one
/// being written work on two cores.
///
/// ```swift
/// let peer = HTTPPeer(
///   transport: HTTPTransport(baseURL: "https://team.example", credentials: .basic(user: "alice", password: "…")),
///   database: "wiki", identity: "https://team.example/wiki/")
/// ```
public final class HTTPPeer: ReplicationPeer {
  public let transport: any CouchTransport
  /// The database name.
  public let database: String
  public let identity: String
  /// The largest `_bulk_docs` body sent at once (a batch is split above it).
  public let maximumWriteBytes: Int
  /// Set when the server answered `_bulk_get` with "not supported" (CouchDB before 2.3): the
  /// revisions are then asked for per document with `open_revs`.
  let noBulkGet = Mutex(false)

  public init(
    transport: any CouchTransport, database: String, identity: String,
    maximumWriteBytes: Int = 8 << 20
  ) {
    self.transport = transport
    self.database = database
    self.identity = identity
    self.maximumWriteBytes = maximumWriteBytes
  }

  /// `/{db}` percent-encoded, then `suffix`.
  func path(_ suffix: String = "") -> String {
    "/" + PercentDecoding.encode(database) + suffix
  }

  /// Where a request goes, for its errors: the identity (a URL without credentials) with what
  /// follows the database in `path`, so that an error says which side answered (as CouchDB's
  /// `could not open http://host/db/` does).
  func location(_ path: String) -> String {
    let database = self.path()
    guard path.hasPrefix(database) else { return path }
    var base = identity
    if base.hasSuffix("/") { base.removeLast() }
    return base + path.dropFirst(database.count)
  }

  func request(_ method: String, _ path: String, body: JSONValue? = nil) async throws -> JSONValue {
    try await send(method, path, body: body?.serialized())
  }

  func send(_ method: String, _ path: String, body: [UInt8]?) async throws -> JSONValue {
    let response = try await transport.send(method, path, body: body)
    return try Replicator.check(response, "\(method) \(location(path))")
  }

  public func open() async throws {
    _ = try await request("GET", path())
  }

  public func create() async throws {
    _ = try await request("PUT", path())
  }

  public func changes(_ request: PeerChangesRequest) async throws -> PeerChanges {
    var query =
      "style=all_docs&since=\(Replicator.queryText(request.since))&limit=\(request.limit)"
    if request.longpoll {
      query +=
        "&feed=longpoll&timeout=\(Replicator.Run.milliseconds(request.timeout))&heartbeat=\(Replicator.Run.milliseconds(request.heartbeat))"
    }
    var body: JSONValue?
    if let docIDs = request.docIDs {
      query += "&filter=_doc_ids"
      body = .object(JSONObject(["doc_ids": .array(docIDs.map { .string($0) })]))
    } else if let selector = request.selector {
      query += "&filter=_selector"
      body = .object(JSONObject(["selector": selector]))
    } else if let filter = request.filter {
      query += "&filter=" + PercentDecoding.encode(filter)
      for (key, value) in request.filterParameters.sorted(by: { $0.key < $1.key }) {
        query += "&" + PercentDecoding.encode(key) + "=" + PercentDecoding.encode(value)
      }
    }
    let answer = try await self.request(
      body == nil ? "GET" : "POST", path("/_changes?" + query), body: body)
    guard let results = answer["results"]?.arrayValue, let lastSeq = answer["last_seq"] else {
      throw ReplicatorError.malformed("_changes answer without results and last_seq")
    }
    var rows: [(id: String, revs: [String])] = []
    rows.reserveCapacity(results.count)
    for row in results {
      guard let id = row["id"]?.stringValue, let changes = row["changes"]?.arrayValue else {
        throw ReplicatorError.malformed("_changes row without id and changes")
      }
      rows.append((id, changes.compactMap { $0["rev"]?.stringValue }))
    }
    return PeerChanges(
      rows: rows, lastSeq: lastSeq,
      pending: answer["pending"]?.numberValue?.int64Value.map { Int($0) })
  }

  public func revsDiff(_ revisions: [(id: String, revs: [String])]) async throws -> [PeerMissing] {
    var asked = JSONObject()
    for (id, revs) in revisions {
      asked.members.append(.init(key: id, value: .array(revs.map { .string($0) })))
    }
    let diff = try await request("POST", path("/_revs_diff"), body: .object(asked))
    return (diff.objectValue?.members ?? []).map { member in
      PeerMissing(
        id: member.key,
        missing: (member.value["missing"]?.arrayValue ?? []).compactMap(\.stringValue),
        possibleAncestors: (member.value["possible_ancestors"]?.arrayValue ?? []).compactMap(
          \.stringValue))
    }
  }

  public func revisions(_ wanted: [PeerWanted]) async throws -> [PeerRevision] {
    if !noBulkGet.withLock({ $0 }) {
      let entries: [JSONValue] = wanted.flatMap { want in
        want.revs.map { rev in
          var entry = JSONObject(["id": .string(want.id), "rev": .string(rev)])
          if !want.attsSince.isEmpty {
            entry.members.append(
              .init(key: "atts_since", value: .array(want.attsSince.map { .string($0) })))
          }
          return JSONValue.object(entry)
        }
      }
      do {
        let fetched = try await request(
          "POST", path("/_bulk_get?revs=true&latest=true&attachments=true"),
          body: .object(JSONObject(["docs": .array(entries)])))
        var out: [PeerRevision] = []
        for result in fetched["results"]?.arrayValue ?? [] {
          let id = result["id"]?.stringValue ?? "?"
          for entry in result["docs"]?.arrayValue ?? [] {
            if let doc = entry["ok"] {
              out.append(.document(.json(doc)))
            } else if let error = entry["error"], error.objectValue != nil {
              out.append(
                .failed(
                  PeerRefusal(
                    id: id, rev: error["rev"]?.stringValue,
                    error: error["error"]?.stringValue ?? "",
                    reason: error["reason"]?.stringValue ?? "")))
            } else {
              out.append(
                .failed(
                  PeerRefusal(
                    id: id, rev: nil, error: entry["error"]?.stringValue ?? "", reason: "")))
            }
          }
        }
        return out
      } catch ReplicatorError.http(let status, _, _)
        where [400, 404, 405, 406, 415, 501].contains(status)
      {
        // CouchDB before 2.3 and other peers without `_bulk_get`.
        noBulkGet.withLock { $0 = true }
      }
    }
    var out: [PeerRevision] = []
    for want in wanted {
      var query = "revs=true&latest=true&attachments=true&open_revs="
      query += PercentDecoding.encode(
        String(
          decoding: JSONValue.array(want.revs.map { .string($0) }).serialized(), as: UTF8.self))
      if !want.attsSince.isEmpty {
        query +=
          "&atts_since="
          + PercentDecoding.encode(
            String(
              decoding: JSONValue.array(want.attsSince.map { .string($0) }).serialized(),
              as: UTF8.self))
      }
      let answer = try await request(
        "GET", path("/" + PercentDecoding.encode(want.id) + "?" + query))
      for entry in answer.arrayValue ?? [] {
        out.append(PeerRevision(openRevsEntry: entry, id: want.id))
      }
    }
    return out
  }

  public func write(_ docs: ArraySlice<PeerDocument>) async throws -> [PeerRefusal] {
    var refused: [PeerRefusal] = []
    for batch in try Self.bulkDocsBodies(docs, limit: maximumWriteBytes) {
      let written = try await send("POST", path("/_bulk_docs"), body: batch.body)
      for row in written.arrayValue ?? [] where row["error"] != nil {
        let id = row["id"]?.stringValue ?? "?"
        let rev =
          row["rev"]?.stringValue
          ?? docs[batch.range].first { $0.id == id }?.rev
        refused.append(
          PeerRefusal(
            id: id, rev: rev, error: row["error"]?.stringValue ?? "",
            reason: row["reason"]?.stringValue ?? ""))
      }
    }
    return refused
  }

  /// The `_bulk_docs` bodies of `docs`: consecutive runs of them, each body at most `limit`
  /// bytes unless one document alone is larger, each document serialized once.
  static func bulkDocsBodies(_ docs: ArraySlice<PeerDocument>, limit: Int) throws -> [(
    range: Range<Int>, body: [UInt8]
  )] {
    let head = Array(#"{"docs":["#.utf8)
    let tail = Array(#"],"new_edits":false}"#.utf8)
    var out: [(range: Range<Int>, body: [UInt8])] = []
    var body = head
    var start = docs.startIndex
    for i in docs.indices {
      let bytes = try docs[i].serialized()
      if i > start, body.count + bytes.count + tail.count > limit {
        out.append((start..<i, body + tail))
        body = head
        start = i
      }
      if i > start { body.append(UInt8(ascii: ",")) }
      body.append(contentsOf: bytes)
    }
    if start < docs.endIndex { out.append((start..<docs.endIndex, body + tail)) }
    return out
  }

  public func writeOne(_ doc: PeerDocument) async throws {
    _ = try await request(
      "PUT", path("/" + PercentDecoding.encode(doc.id) + "?new_edits=false"), body: try doc.json())
  }

  public func ensureFullCommit() async throws {
    _ = try await request("POST", path("/_ensure_full_commit"), body: .object(JSONObject()))
  }

  public func localDocument(_ id: String) async throws -> JSONValue? {
    let path = path("/_local/" + PercentDecoding.encode(id))
    let response = try await transport.send("GET", path, body: nil)
    if response.status == 404 { return nil }
    return try Replicator.check(response, "GET \(location(path))")
  }

  public func putLocalDocument(_ id: String, _ body: JSONObject) async throws -> String? {
    let answer = try await request(
      "PUT", path("/_local/" + PercentDecoding.encode(id)), body: .object(body))
    return answer["rev"]?.stringValue
  }
}
