import ArgumentParser
import Formats
import Foundation
import JSON
import Log
import Projections
import Query
import RevTree
import Wiki

struct Replay: ParsableCommand {
  static let configuration = CommandConfiguration(
    abstract: "Show or export the store as it was at a position or time of its log.",
    discussion: """
      Replays the log up to --as-of (a position, inclusive, 0 for the empty store; or an \
      ISO-8601 time: every event committed at or before it) into a temporary copy, removed \
      afterwards; the database itself is only read. Shows a summary by default: the position \
      and time reached, the document counts and the wikis with their page counts (--json for \
      JSON). --doc shows one document as it was (with the options of `wikilog get`), --wiki \
      lists a wiki's pages as they were, and --export (or --format ndjson) writes every \
      document as it was, in the format of `wikilog export` (which `wikilog import` reads).

      Examples:
        wikilog replay --as-of 120
        wikilog replay --as-of 2026-11-20T18:00:00Z --json
        wikilog replay --as-of 2026-11-20 --doc 'w1:Home' --revs-info --conflicts
        wikilog replay --as-of 120 --wiki w1
        wikilog replay --as-of 120 --export before.ndjson
        wikilog replay --as-of 120 --format ndjson | wikilog import -d then
      """)

  enum Format: String, ExpressibleByArgument, CaseIterable {
    case summary, ndjson
  }

  /// A parsed `--as-of`.
  enum AsOf {
    case position(UInt64)
    /// Microseconds since 1970: every event committed at or before it.
    case time(Int64)

    init(_ text: String) throws {
      if let n = UInt64(text) {
        self = .position(n)
      } else if let micros = Time.microseconds(parsing: text) {
        self = .time(micros)
      } else {
        throw ValidationError(
          "--as-of takes a log position or an ISO-8601 time like 2026-11-21T09:00:00Z; got '\(text)'"
        )
      }
    }
  }

  @OptionGroup var global: GlobalOptions
  @Option(
    name: .customLong("as-of"),
    help: ArgumentHelp(
      "A log position (0: the empty store) or an ISO-8601 time.", valueName: "seq|time"))
  var asOf: String
  @Option(help: "summary or ndjson (every document, as `wikilog export` writes them).")
  var format: Format = .summary
  @Option(
    help: ArgumentHelp(
      "Write every document as it was to this file (- for standard output).", valueName: "file"))
  var export: String?
  @Option(help: ArgumentHelp("Show this document as it was.", valueName: "doc-id"))
  var doc: String?
  @Option(help: ArgumentHelp("List this wiki's pages as they were.", valueName: "wiki-id"))
  var wiki: String?
  @OptionGroup var output: JSONFlag
  @OptionGroup(title: "Options with --doc") var read: DocumentReadOptions

  func validate() throws {
    _ = try AsOf(asOf)
    let exporting = export != nil || format == .ndjson
    if [exporting, doc != nil, wiki != nil].filter({ $0 }).count > 1 {
      throw ValidationError("give one of --doc, --wiki and --export/--format ndjson")
    }
    let readOptions =
      read.rev != nil || read.revs || read.revsInfo || read.openRevs != nil || read.conflicts
      || read.deletedConflicts || read.latest || read.localSeq
    if readOptions && doc == nil {
      throw ValidationError("--rev, --revs, --revs-info, --open-revs, --conflicts, ... need --doc")
    }
    if output.json && (exporting || doc != nil) {
      throw ValidationError("--json goes with the summary and --wiki (--doc and exports are JSON)")
    }
    if export == "" {
      throw ValidationError("--export needs a file name, or - for standard output")
    }
  }

  func run() throws {
    let db = try global.openStore(readOnly: true)
    defer { db.close() }
    let store = db.store
    let log = store.log
    let last = try log.committedPosition
    let target: UInt64
    switch try AsOf(asOf) {
    case .position(let n):
      guard n <= last.rawValue else {
        throw CLIError(
          "--as-of \(n) is past the end of the log of database '\(global.database)' (last position \(last.rawValue))"
        )
      }
      target = n
    case .time(let micros):
      guard let first = try log.event(at: LogPosition(1)) else {
        throw CLIError(
          "the log of database '\(global.database)' is empty: nothing happened at or before \(asOf)"
        )
      }
      guard micros >= first.timestampMicroseconds else {
        throw CLIError(
          "--as-of \(asOf) is before the first event of database '\(global.database)' (seq 1 at \(ISO8601.format(microseconds: first.timestampMicroseconds)))"
        )
      }
      // The last event committed at or before `micros` (timestamps never decrease in the log).
      let after =
        micros == .max
        ? nil
        : try log.read {
          try $0.firstPosition(atOrAfterMicroseconds: micros + 1)
        }
      target = after.map { $0.rawValue - 1 } ?? last.rawValue
    }
    let progress = Progress()
    progress.update("replaying \(target) events...")
    let view = try store.asOf(LogPosition(target))
    progress.finish()
    defer { view.close() }
    let position = view.position
    let location = "in database '\(global.database)' as of seq \(position.rawValue)"

    if let doc {
      try read.print(doc, from: view, location: location)
    } else if let wiki {
      let queries = try WikiQueries(view)
      let pages = try queries.pages(in: wiki)
      if pages.isEmpty, try queries.wiki(wiki) == nil {
        throw CLIError("no wiki '\(wiki)' \(location)")
      }
      WikiPages.print(pages, json: output.json)
    } else if export != nil || format == .ndjson {
      try writeExport(view)
    } else {
      try summary(view, log: log)
    }
  }

  func writeExport(_ view: AsOfView) throws {
    var out = OutputBuffer()
    let path = export ?? "-"
    guard path != "-" else {
      try ExportWriter.write(view, database: global.database, to: &out, progress: Progress())
      return
    }
    let file = try FileOutput(path)
    out.fd = file.fd
    out.file = file
    let count: Int
    do {
      count = try ExportWriter.write(
        view, database: global.database, to: &out, progress: Progress())
    } catch {
      file.abandon()
      throw error
    }
    try file.commit()
    printError(
      "wikilog: wrote \(count) document\(count == 1 ? "" : "s") as of seq \(view.position.rawValue) to \(path)"
    )
  }

  func summary(_ view: AsOfView, log: EventLog) throws {
    let position = view.position
    let info = try view.info
    var conflicted = 0
    try view.forEachRecord { record, _ in
      if !record.tree.conflicts.isEmpty { conflicted += 1 }
      return true
    }
    let wikis = try WikiQueries(view).wikis()
    let time = try position.rawValue == 0 ? nil : log.event(at: position)?.timestampMicroseconds
    if output.json {
      printJSON(
        J.object([
          "database": .string(global.database), "as_of": .string(asOf),
          "seq": J.int(position.rawValue),
          "time": time.map { .string(ISO8601.format(microseconds: $0)) } ?? .null,
          "documents": J.int(info.docCount), "deleted": J.int(info.deletedDocCount),
          "conflicts": J.int(conflicted), "revs_limit": J.int(info.revsLimit),
          "wikis": .array(wikis.map(WikiList.json)),
        ]))
      return
    }
    var text = "database    \(global.database)\n"
    text += "as of       seq \(position.rawValue)"
    text += time.map { ", \(ISO8601.format(microseconds: $0))\n" } ?? " (the empty store)\n"
    text +=
      "documents   \(info.docCount) (\(info.deletedDocCount) deleted, \(conflicted) with conflicts)\n"
    text += "revs limit  \(info.revsLimit)\n"
    text += "wikis       \(wikis.count)\n"
    if !wikis.isEmpty { text += "\n" + WikiList.table(wikis).text }
    printText(text)
  }
}
