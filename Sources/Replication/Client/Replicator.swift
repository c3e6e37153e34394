public import JSON
import RevTree

#if canImport(FoundationEssentials)
  import FoundationEssentials
#else
  import Foundation
#endif

/// A one-shot CouchDB replication from a source database to a target database, following the
/// protocol's steps (docs.couchdb.org, "Replication Protocol"):
///
/// 1. `GET` both databases (they must exist).
/// 2. The replication id: a digest of the source and target identities.
/// 3. Read the checkpoints `_local/<replication id>` on both sides and start from the last
///    sequence both agree on (same session, or a session both histories share; else 0).
/// 4. Read `_changes?style=all_docs&since=...&limit=<batch>`, ask the target
///    `_revs_diff` which leaf revisions it lacks,
/// 5. fetch those with their history from the source (`_bulk_get?revs=true&latest=true`, with
///    `attachments=true` and each document's possible ancestors as `atts_since`) and
///    write them to the target with `_bulk_docs` and `new_edits: false`,
/// 6. `_ensure_full_commit` on the target, then write the checkpoint to both sides;
///    repeat until the feed is exhausted.
///
/// ```swift
/// let report = try await Replicator(source: a, target: b).replicate()
/// print(report.docsWritten, report.endSeq)
/// ```
public struct Replicator: Sendable {
  public let source: CouchEndpoint
  public let target: CouchEndpoint
  /// Changes per batch (CouchDB's replicator uses 500, PouchDB 100).
  public var batchSize: Int
  /// Sessions kept in a checkpoint's history.
  public var historyLimit = 50

  public init(source: CouchEndpoint, target: CouchEndpoint, batchSize: Int = 500) {
    self.source = source
    self.target = target
    self.batchSize = max(1, batchSize)
  }

  /// The id of the checkpoint documents, from the source and target identities.
  public var replicationID: String {
    MD5.hash(Array("wikilog-replication-1\n\(source.identity)\n\(target.identity)".utf8))
      .description
  }

  /// Runs until the source's feed is exhausted.
  ///
  /// - Throws: ``ReplicatorError`` for an HTTP failure or an answer that is not CouchDB's shape.
  public func replicate() async throws -> ReplicationReport {
    _ = try await request(source, "GET", source.path())
    _ = try await request(target, "GET", target.path())
    let checkpointPath = "/_local/" + PercentDecoding.encode(replicationID)
    let sourceLog = try await checkpoint(source, checkpointPath)
    let targetLog = try await checkpoint(target, checkpointPath)
    let startSeq = Self.startSequence(sourceLog?.document, targetLog?.document)
    let sessionID = String(UUID().uuidString.lowercased().filter { $0 != "-" })
    let startTime = ISO8601Format.now()

    var report = ReplicationReport(sessionID: sessionID, startSeq: startSeq, endSeq: startSeq)
    var since = startSeq
    var sourceRev = sourceLog?.rev
    var targetRev = targetLog?.rev
    while true {
      let changes = try await request(
        source, "GET",
        source.path(
          "/_changes?style=all_docs&since=\(Self.queryText(since))&limit=\(batchSize)"))
      guard let results = changes["results"]?.arrayValue, let lastSeq = changes["last_seq"] else {
        throw ReplicatorError.malformed("_changes answer without results and last_seq")
      }
      if results.isEmpty { break }
      report.batches += 1
      report.docsRead += results.count

      // Which leaf revisions does the target lack?
      var asked = JSONObject()
      for row in results {
        guard let id = row["id"]?.stringValue, let changes = row["changes"]?.arrayValue else {
          throw ReplicatorError.malformed("_changes row without id and changes")
        }
        let revs = changes.compactMap { $0["rev"]?.stringValue }
        report.missingChecked += revs.count
        asked.members.append(.init(key: id, value: .array(revs.map { .string($0) })))
      }
      let diff = try await request(
        target, "POST", target.path("/_revs_diff"), body: JSONValue.object(asked))
      var wanted: [JSONValue] = []
      for member in diff.objectValue?.members ?? [] {
        // As CouchDB's replicator: attachments the target's possible ancestors have come as
        // stubs, the rest with their data (`atts_since`).
        let ancestors = member.value["possible_ancestors"]?.arrayValue ?? []
        for rev in member.value["missing"]?.arrayValue ?? [] {
          var entry = JSONObject(["id": .string(member.key), "rev": rev])
          if !ancestors.isEmpty {
            entry.members.append(.init(key: "atts_since", value: .array(ancestors)))
          }
          wanted.append(.object(entry))
        }
      }
      report.missingFound += wanted.count

      if !wanted.isEmpty {
        // Fetch them with their history and write them as they are.
        let fetched = try await request(
          source, "POST", source.path("/_bulk_get?revs=true&latest=true&attachments=true"),
          body: .object(JSONObject(["docs": .array(wanted)])))
        var docs: [JSONValue] = []
        for result in fetched["results"]?.arrayValue ?? [] {
          for entry in result["docs"]?.arrayValue ?? [] {
            if let doc = entry["ok"] {
              docs.append(doc)
            } else {
              report.docWriteFailures += 1
            }
          }
        }
        if !docs.isEmpty {
          let written = try await request(
            target, "POST", target.path("/_bulk_docs"),
            body: .object(JSONObject(["docs": .array(docs), "new_edits": .bool(false)])))
          let failures = written.arrayValue?.count ?? 0
          report.docWriteFailures += failures
          report.docsWritten += docs.count - failures
        }
        _ = try await request(
          target, "POST", target.path("/_ensure_full_commit"), body: .object(JSONObject()))
      }

      since = lastSeq
      report.endSeq = lastSeq
      let log = checkpointDocument(
        sessionID: sessionID, startTime: startTime, report: report,
        previous: sourceLog?.document ?? targetLog?.document)
      sourceRev = try await writeCheckpoint(source, checkpointPath, log, rev: sourceRev)
      targetRev = try await writeCheckpoint(target, checkpointPath, log, rev: targetRev)
      if let pending = changes["pending"]?.numberValue?.int64Value, pending == 0 { break }
    }
    return report
  }

  // MARK: Checkpoints

  /// Reads `_local/<id>`; nil when absent.
  func checkpoint(_ endpoint: CouchEndpoint, _ path: String) async throws -> (
    document: JSONValue, rev: String?
  )? {
    let response = try await endpoint.transport.send("GET", endpoint.path(path), body: nil)
    if response.status == 404 { return nil }
    let value = try Self.check(response, "GET \(endpoint.path(path))")
    return (value, value["_rev"]?.stringValue)
  }

  func writeCheckpoint(_ endpoint: CouchEndpoint, _ path: String, _ log: JSONObject, rev: String?)
    async throws -> String?
  {
    var doc = log
    if let rev { doc.members.insert(.init(key: "_rev", value: .string(rev)), at: 0) }
    let answer = try await request(endpoint, "PUT", endpoint.path(path), body: .object(doc))
    return answer["rev"]?.stringValue
  }

  /// CouchDB's replication log: the current session and a history of earlier ones.
  func checkpointDocument(
    sessionID: String, startTime: String, report: ReplicationReport, previous: JSONValue?
  ) -> JSONObject {
    let entry = JSONValue.object(
      JSONObject([
        "session_id": .string(sessionID),
        "start_time": .string(startTime),
        "end_time": .string(ISO8601Format.now()),
        "start_last_seq": report.startSeq,
        "end_last_seq": report.endSeq,
        "recorded_seq": report.endSeq,
        "missing_checked": .number(JSONNumber(Int64(report.missingChecked))),
        "missing_found": .number(JSONNumber(Int64(report.missingFound))),
        "docs_read": .number(JSONNumber(Int64(report.docsRead))),
        "docs_written": .number(JSONNumber(Int64(report.docsWritten))),
        "doc_write_failures": .number(JSONNumber(Int64(report.docWriteFailures))),
      ]))
    var history = (previous?["history"]?.arrayValue ?? []).filter {
      $0["session_id"]?.stringValue != sessionID
    }
    history.insert(entry, at: 0)
    return JSONObject([
      "session_id": .string(sessionID),
      "source_last_seq": report.endSeq,
      "replication_id_version": .number(1),
      "history": .array(Array(history.prefix(historyLimit))),
    ])
  }

  /// Where to start: the source's last seq when both logs end with the same session, else the
  /// recorded seq of the newest session both histories share, else 0 (CouchDB's
  /// `compare_replication_logs`).
  static func startSequence(_ sourceLog: JSONValue?, _ targetLog: JSONValue?) -> JSONValue {
    guard let sourceLog, let targetLog else { return .number(0) }
    if let session = sourceLog["session_id"]?.stringValue,
      session == targetLog["session_id"]?.stringValue,
      let seq = sourceLog["source_last_seq"]
    {
      return seq
    }
    let targetSessions = Set(
      (targetLog["history"]?.arrayValue ?? []).compactMap { $0["session_id"]?.stringValue })
    for entry in sourceLog["history"]?.arrayValue ?? [] {
      if let session = entry["session_id"]?.stringValue, targetSessions.contains(session),
        let seq = entry["recorded_seq"]
      {
        return seq
      }
    }
    return .number(0)
  }

  // MARK: HTTP

  func request(
    _ endpoint: CouchEndpoint, _ method: String, _ path: String, body: JSONValue? = nil
  ) async throws -> JSONValue {
    let response = try await endpoint.transport.send(method, path, body: body?.serialized())
    return try Self.check(response, "\(method) \(path)")
  }

  static func check(_ response: CouchTransportResponse, _ what: String) throws -> JSONValue {
    let value: JSONValue
    do {
      value = try JSONValue(parsing: response.body)
    } catch {
      throw ReplicatorError.malformed(
        "\(what) answered \(response.status) with a body that is not JSON")
    }
    guard (200..<300).contains(response.status) else {
      throw ReplicatorError.http(
        status: response.status, error: value["error"]?.stringValue ?? "",
        reason: "\(what): " + (value["reason"]?.stringValue ?? ""))
    }
    return value
  }

  /// A seq as a query value: numbers as they are, strings percent-encoded.
  static func queryText(_ seq: JSONValue) -> String {
    if let s = seq.stringValue { return PercentDecoding.encode(s) }
    return String(decoding: seq.serialized(), as: UTF8.self)
  }
}

/// What one ``Replicator/replicate()`` did (CouchDB's replication history fields).
public struct ReplicationReport: Sendable, Hashable {
  public var sessionID: String
  /// The source seq replication started after, and the last one it reached.
  public var startSeq: JSONValue
  public var endSeq: JSONValue
  public var batches = 0
  /// Rows read from the source's changes feed.
  public var docsRead = 0
  /// Leaf revisions asked about with `_revs_diff`, and how many the target lacked.
  public var missingChecked = 0
  public var missingFound = 0
  /// Revisions written to the target, and those that could not be fetched or written.
  public var docsWritten = 0
  public var docWriteFailures = 0

  public init(sessionID: String, startSeq: JSONValue, endSeq: JSONValue) {
    self.sessionID = sessionID
    self.startSeq = startSeq
    self.endSeq = endSeq
  }
}

/// Why a replication stopped.
public enum ReplicatorError: Error, Sendable, Hashable, CustomStringConvertible {
  /// A non-2xx answer, with CouchDB's error name and reason.
  case http(status: Int, error: String, reason: String)
  /// An answer that is not in CouchDB's shape.
  case malformed(String)

  public var description: String {
    switch self {
    case .http(let status, let error, let reason): "HTTP \(status) \(error): \(reason)"
    case .malformed(let what): "malformed answer: \(what)"
    }
  }
}

/// ISO-8601 timestamps for checkpoint histories.
enum ISO8601Format {
  static func now() -> String {
    Date.now.formatted(.iso8601)
  }
}
