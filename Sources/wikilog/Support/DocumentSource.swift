import ArgumentParser
import Foundation
import JSON
import Log
import Projections
import Query
import RevTree
import Wiki

/// What `get`, `export` and `replay` read documents from: the live store, or an as-of view of
/// it.
protocol DocumentSource {
  var info: DatabaseInfo { get throws }
  func get(_ id: String, options: GetOptions) throws -> JSONValue
  func openRevs(_ id: String, _ which: OpenRevs, options: GetOptions) throws -> [JSONValue]
  func getLocal(_ id: String) throws -> JSONValue
  func forEachRecord(
    after: String?, chunk: Int, _ body: (DocumentRecord, ReadTransaction) throws -> Bool) throws
  func exportedRevisions(of record: DocumentRecord, txn: ReadTransaction) throws -> [JSONValue]
}

extension DocumentStore: DocumentSource {}
extension AsOfView: DocumentSource {}

/// The options of CouchDB's GET /db/docid, shared by `get` and `replay --doc`.
struct DocumentReadOptions: ParsableArguments {
  @Option(help: "This revision instead of the winner.") var rev: String?
  @Flag(help: "Add _revisions, the revision's history.") var revs = false
  @Flag(help: "Add _revs_info, each ancestor and whether its body is available.")
  var revsInfo = false
  @Option(
    help:
      "'all' leaves, or a JSON array of revisions: print {\"ok\": doc} / {\"missing\": rev} for each."
  )
  var openRevs: String?
  @Flag(help: "Add _conflicts.") var conflicts = false
  @Flag(help: "Add _deleted_conflicts.") var deletedConflicts = false
  @Flag(help: "With --rev or --open-revs: the leaves below the named revisions instead.")
  var latest = false
  @Flag(help: "Add _local_seq, the document's update sequence.") var localSeq = false
  @Flag(help: "Attachments with their data inline (base64) instead of stubs.")
  var attachments = false

  /// Prints document `docID` of `source` as GET /db/docid would answer with these options;
  /// `location` ("in database 'wiki'") completes the not-found error.
  func print(_ docID: String, from source: some DocumentSource, location: String) throws {
    if docID.hasPrefix("_local/") {
      printJSON(try source.getLocal(String(docID.dropFirst(7))))
      return
    }
    let options = GetOptions(
      rev: rev, revs: revs, revsInfo: revsInfo, conflicts: conflicts,
      deletedConflicts: deletedConflicts, latest: latest, localSeq: localSeq,
      attachments: attachments)
    guard let openRevs else {
      do {
        printJSON(try source.get(docID, options: options))
      } catch let error as StoreError where error.code == .notFound {
        let what = rev.map { "revision \($0) of '\(docID)'" } ?? "document '\(docID)'"
        throw CLIError("not_found: \(what) is \(error.reason) \(location)")
      }
      return
    }
    let which: OpenRevs
    if openRevs == "all" {
      which = .all
    } else {
      guard let list = try Input.json(Array(openRevs.utf8), what: "in --open-revs").arrayValue,
        list.allSatisfy({ $0.stringValue != nil })
      else {
        throw CLIError("--open-revs takes 'all' or a JSON array of revision strings")
      }
      which = .revs(list.compactMap(\.stringValue))
    }
    printJSON(.array(try source.openRevs(docID, which, options: options)))
  }
}

/// The NDJSON export format of `wikilog export` (and `wikilog replay --export`).
enum ExportWriter {
  /// Writes `source`'s header line and documents to `out`, flushing as it goes; returns the
  /// number of documents written.
  @discardableResult
  static func write(
    _ source: some DocumentSource, database: String, to out: inout OutputBuffer,
    progress: Progress, logHeads: [JSONValue]? = nil
  ) throws -> Int {
    let info = try source.info
    out.line(
      J.object([
        "wikilog_export": J.int(ExportFormat.version), "database": .string(database),
        "revs_limit": J.int(info.revsLimit), "update_seq": J.int(info.updateSeq.rawValue),
        "doc_count": J.int(info.docCount),
        "log_heads": logHeads.map { .array($0) },
      ]))
    var count = 0
    try source.forEachRecord(after: nil, chunk: .max) { record, txn in
      let revisions = try source.exportedRevisions(of: record, txn: txn)
      guard !revisions.isEmpty else { return true }
      out.line(J.object(["id": .string(record.docID), "revisions": .array(revisions)]))
      out.flushIfLarge()
      count += 1
      if count % 1000 == 0 { progress.update("exported \(count) documents") }
      return true
    }
    out.flush()
    progress.finish()
    return count
  }
}
