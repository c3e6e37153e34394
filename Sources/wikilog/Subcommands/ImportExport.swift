import ArgumentParser
import Foundation
import JSON
import Log
import Projections
import Query
import RevTree
import Wiki

/// The NDJSON export format:
///
/// ```
/// {"wikilog_export":1,"database":"wiki","revs_limit":1000,"update_seq":42,"doc_count":2}
/// {"id":"w1","revisions":[{"_id":"w1","_rev":"1-…","_revisions":{"start":1,"ids":["…"]},…}]}
/// {"id":"w1:Home","revisions":[…, …]}
/// ```
/// One line per document (deleted ones included), by id; its revisions are every revision the
/// tree holds a body for, in the order they were written, each a CouchDB document with its full
/// stored `_revisions` (see `DocumentStore.exportedRevisions(of:txn:)`).
enum ExportFormat {
  static let version = 1
}

struct Export: ParsableCommand {
  static let configuration = CommandConfiguration(
    abstract: "Write every document with its full revision tree and bodies as NDJSON.",
    discussion: """
      The first line is a header {"wikilog_export":1,"database","revs_limit","update_seq", \
      "doc_count", "log_heads"}, where log_heads are {"database","head"}: the database's tree \
      head signed at export time (see `wikilog log head`), then the heads of the databases it \
      was itself imported from; then one line per document, {"id","revisions":[...]}, where each revision is \
      a CouchDB document with its _revisions path (as replication sends it), every revision \
      whose body the log holds, oldest first. `wikilog import` of this output rebuilds the same \
      revision trees, winners, conflicts and bodies. The documents come from one snapshot. \
      _local documents are not exported.

      Examples:
        wikilog export > backup.ndjson
        wikilog export | wikilog import --db /tmp/copy
      """)

  @OptionGroup var global: GlobalOptions

  func run() throws {
    let db = try global.openStore(readOnly: true)
    defer { db.close() }
    // The database's signed tree head, then the heads it carries from its own imports.
    let head = try TreeHeads.sign(db.store.log, global)
    let heads =
      [J.object(["database": .string(global.database), "head": LogProofs.json(head)])]
      + LogProofs.carriedHeads(in: db.store.log.path)
    var out = OutputBuffer()
    try ExportWriter.write(
      db.store, database: global.database, to: &out, progress: Progress(), logHeads: heads)
  }
}

struct Import: ParsableCommand {
  static let configuration = CommandConfiguration(
    abstract: "Load documents with their histories: a wikilog export or a CouchDB dump.",
    discussion: """
      Reads FILE or standard input, one of:

      A `wikilog export` (NDJSON): every revision is written with new_edits=false and its \
      _revisions path, oldest first, so every body is an event and the revision trees come out \
      as they were exported; the database takes the export's revs_limit. The export's signed \
      log heads (each checked against the key it names) are kept beside the database \
      (log.imported-heads.ndjson) and exported with it again: the new database's own log \
      and tree start afresh, since its events are new.

      NDJSON of CouchDB documents, one per line, each with _id and _rev (and _revisions).

      A CouchDB _all_docs?include_docs=true dump ({"rows":[{"doc":{...}}, ...]}): each \
      document's current revision.

      Revisions the database already has are skipped; others are merged as replication merges \
      them (conflicts are kept). The whole input is read and checked before anything is \
      written; it is then written in transactions of --batch-size revisions, synced at the end.

      Examples:
        wikilog import backup.ndjson -d restored
        curl -s 'http://couch:5984/db/_all_docs?include_docs=true' \\
          | wikilog import --origin http://couch:5984/db
      """)

  @OptionGroup var global: GlobalOptions
  @OptionGroup var actor: ActorOptions
  @OptionGroup var output: JSONFlag
  @Argument(help: "The file to read (default: standard input).") var file: String?
  @Option(help: "Where the documents came from, recorded with each revision.") var origin: String?
  @Option(help: "Revisions per transaction.") var batchSize: Int = 20_000

  func validate() throws {
    if batchSize < 1 { throw ValidationError("--batch-size must be at least 1") }
  }

  func run() throws {
    // A restore of whole histories, the operator's: `--actor` names who imported, and no
    // revision is checked against that user's access (a refusal half-way would leave half an
    // import).
    try WriteAccess.$user.withValue(nil) { try importAll() }
  }

  func importAll() throws {
    let progress = Progress()
    let db = try global.openStore(durability: .unsynced)  // fail early on a missing database
    defer { db.close() }
    let bytes: [UInt8]
    if let file, file != "-" {
      guard let data = FileManager.default.contents(atPath: file) else {
        throw CLIError("cannot read \(file)")
      }
      bytes = Array(data)
    } else {
      bytes = try Input.read(limit: nil)
    }
    progress.update("reading \(bytes.count) bytes…")
    let parsed = try Self.parse(bytes, progress: progress)
    let store = db.store
    // The heads are checked before anything is written, and kept once the import is done.
    for (i, value) in parsed.logHeads.enumerated() {
      do {
        let head = try LogProofs.head(value["head"] ?? .null)
        guard head.isSigned(by: head.publicKey) else {
          throw CLIError("log head \(i + 1) of the export does not verify; nothing was imported")
        }
      } catch let error as StoreError {
        throw CLIError("log head \(i + 1) of the export: \(error.reason); nothing was imported")
      }
    }
    let source = origin ?? file.map { "file:" + $0 } ?? "import"

    // Paths longer than the revs_limit would be stemmed on the way in: raise it for the import.
    let longest = parsed.revisions.reduce(1) { max($0, $1.revisions?.ids.count ?? 1) }
    let before = try store.revsLimit
    let target = parsed.revsLimit ?? before
    if longest > before { try store.setRevsLimit(longest, actor: actor.name) }
    var events = 0
    var written = 0
    var start = 0
    do {
      while start < parsed.revisions.count {
        let end = min(start + batchSize, parsed.revisions.count)
        events += try store.importRevisions(
          Array(parsed.revisions[start..<end]), actor: actor.name, origin: source)
        written = end
        start = end
        progress.update("imported \(written) of \(parsed.revisions.count) revisions")
      }
    } catch {
      // A storage failure part way (disk full, say): what was committed stays, and is synced;
      // the revs_limit goes back to what it was.
      progress.finish()
      if longest > before { try? store.setRevsLimit(before, actor: actor.name) }
      try? store.log.sync()
      throw CLIError(
        "import stopped after \(written) of \(parsed.revisions.count) revisions: \(error)")
    }
    if try store.revsLimit != target { try store.setRevsLimit(target, actor: actor.name) }
    try store.log.sync()
    do {
      try LogProofs.carry(parsed.logHeads, into: store.log.path)
    } catch let error as StoreError {
      throw CLIError(
        "the documents are imported, but the export's log heads are not kept: \(error.reason)")
    }
    progress.finish()
    if output.json {
      printJSON(
        J.object([
          "ok": .bool(true), "documents": J.int(parsed.documents), "revisions": J.int(written),
          "events": J.int(events), "revs_limit": J.int(target),
          "log_heads": J.int(parsed.logHeads.count),
        ]))
    } else {
      printText(
        "imported \(parsed.documents) documents, \(written) revisions (\(events) new) into '\(global.database)'"
      )
    }
  }

  struct Parsed {
    var revisions: [DocumentInput] = []
    var ids = Set<String>()
    var revsLimit: Int?
    var logHeads: [JSONValue] = []
    var documents: Int { ids.count }
  }

  static func checked(_ value: JSONValue) -> Result<DocumentInput, StoreError> {
    Result { () throws(StoreError) in
      let input = try DocumentInput(value)
      try DocumentStore.checkImportable(input)
      return input
    }
  }

  /// Reads and checks the whole input; throws a one-line error naming the line or row at
  /// fault, before anything is written.
  static func parse(_ bytes: [UInt8], progress: Progress) throws -> Parsed {
    var parsed = Parsed()
    var lineStart = 0
    var lineNumber = 0
    func add(_ value: JSONValue, at place: String, id expected: String? = nil) throws {
      let input: DocumentInput
      switch checked(value) {
      case .success(let value): input = value
      case .failure(let error): throw CLIError("\(place): \(error.reason); nothing was imported")
      }
      if let expected, input.id != expected {
        throw CLIError(
          "\(place): a revision of '\(input.id ?? "")' in the line of '\(expected)'; nothing was imported"
        )
      }
      parsed.revisions.append(input)
      if let id = input.id { parsed.ids.insert(id) }
    }

    // A CouchDB dump is one JSON object with "rows"; find out from its first line.
    let firstLineEnd = bytes.firstIndex(of: 0x0A) ?? bytes.count
    let firstLine = (try? JSONValue(parsing: bytes[0..<firstLineEnd]))?.objectValue
    if firstLine == nil || (firstLine?["rows"] != nil && firstLine?["_id"] == nil) {
      let value = try Input.json(bytes, what: "input (neither NDJSON nor a CouchDB dump)")
      guard let rows = value["rows"]?.arrayValue else {
        throw CLIError(
          #"expected a wikilog export (NDJSON) or a CouchDB _all_docs dump with "rows""#)
      }
      for (i, row) in rows.enumerated() {
        guard let doc = row["doc"], doc != .null else { continue }  // deleted or missing rows
        try add(doc, at: "row \(i + 1)")
      }
      return parsed
    }

    while lineStart < bytes.count {
      let lineEnd = bytes[lineStart...].firstIndex(of: 0x0A) ?? bytes.count
      let line = bytes[lineStart..<lineEnd]
      lineStart = lineEnd + 1
      lineNumber += 1
      if line.allSatisfy({ $0 == 0x20 || $0 == 0x09 || $0 == 0x0D }) { continue }
      let place = "line \(lineNumber)"
      let value: JSONValue
      do {
        value = try JSONValue(parsing: line)
      } catch {
        throw CLIError("\(place): malformed JSON (\(error)); nothing was imported")
      }
      guard let object = value.objectValue else {
        throw CLIError("\(place): expected a JSON object; nothing was imported")
      }
      if let version = object["wikilog_export"] {
        guard lineNumber == 1, version.numberValue?.int64Value == Int64(ExportFormat.version)
        else {
          throw CLIError(
            "\(place): unsupported export header \(String(decoding: value.serialized(), as: UTF8.self))"
          )
        }
        if let limit = object["revs_limit"]?.numberValue?.int64Value, limit >= 1 {
          parsed.revsLimit = Int(limit)
        }
        if let heads = object["log_heads"] {
          guard let list = heads.arrayValue else {
            throw CLIError("\(place): log_heads must be an array; nothing was imported")
          }
          parsed.logHeads = list
        }
        continue
      }
      if let id = object["id"]?.stringValue, let revisions = object["revisions"]?.arrayValue {
        for (i, revision) in revisions.enumerated() {
          try add(revision, at: "\(place), revision \(i + 1)", id: id)
        }
      } else {
        try add(value, at: place)
      }
      if lineNumber % 10_000 == 0 { progress.update("checked \(lineNumber) lines") }
    }
    return parsed
  }
}
