import ArgumentParser
import Formats
import Foundation
import JSON
import Log
import Projections
import Query
import RevTree
import Wiki

#if canImport(Glibc)
  import Glibc
  #if canImport(CDispatch)
    import CDispatch  // where Glibc's `struct stat` is defined on Linux, for MemberImportVisibility
  #endif
#endif

struct Tail: AsyncParsableCommand {
  static let configuration = CommandConfiguration(
    abstract: "Print the changes feed, and with --follow keep printing new changes.",
    discussion: """
      By default one CouchDB _changes row per line (NDJSON), one row per document at its latest \
      change: {"seq":N,"id":...,"changes":[{"rev":...}],"deleted":true?,"doc":...?}. \
      With --history every revision ever written is a row, with "actor", "time" and "origin". \
      --since is exclusive, as CouchDB's: rows after it. --follow keeps running and prints \
      changes made by any process as they commit, one flushed line each, so \
      `wikilog tail --follow | jq` works; it ends with status 0 on Ctrl-C, SIGTERM or when the \
      reader of its output goes away.

      Examples:
        wikilog tail --since 0 --limit 10
        wikilog tail --since now --follow --format text
        wikilog tail --since 2026-11-21T09:00:00Z --history --actor alice
        wikilog tail --wiki w1 --type page --include-docs
        wikilog tail --doc-id 'w1:Home' --doc-id 'w1:Ideas' --style all_docs
      """)

  @OptionGroup var global: GlobalOptions
  @Option(help: "0 (everything), now, a sequence number, or an ISO-8601 time.")
  var since: String = "0"
  @Option(parsing: .unconditional, help: "Stop after this many rows.") var limit: Int?
  @Option(help: "main_only (the winner) or all_docs (every leaf revision).")
  var style: Style = .mainOnly
  @Flag(help: "Add each row's document.") var includeDocs = false
  @Flag(help: "With --include-docs: add _conflicts.") var conflicts = false
  @Flag(help: "Keep running and print new changes as they commit (by any process).")
  var follow = false
  @Flag(help: "Every revision event (with actor, time and origin), not one row per document.")
  var history = false
  @Option(help: "Only this wiki's documents (the wiki and its pages).") var wiki: String?
  @Option(name: .customLong("doc-id"), help: "Only this document (repeatable).")
  var docIDs: [String] = []
  @Option(help: "Only documents whose type field is this.") var type: String?
  @Option(help: "Only changes written by this actor.") var actor: String?
  @Option(help: "json (NDJSON rows, default) or text (time, #seq, actor, doc, rev, summary).")
  var format: Format = .json

  enum Style: String, ExpressibleByArgument {
    case mainOnly = "main_only"
    case allDocs = "all_docs"
  }

  enum Format: String, ExpressibleByArgument { case json, text }

  func validate() throws {
    if let limit, limit < 0 { throw ValidationError("--limit must be 0 or more") }
    _ = try Since(since)
  }

  func run() async throws {
    let db = try global.openStore(readOnly: true)
    defer { db.close() }
    let store = db.store
    var options = ChangesOptions()
    options.since = LogPosition(try Since(since).position(in: store.log))
    options.limit = limit
    options.style = style == .allDocs ? .allDocs : .mainOnly
    options.includeDocs = includeDocs || format == .text
    options.conflicts = conflicts
    options.history = history
    options.filter = wiki.map(DocumentFilter.wiki)
    if !docIDs.isEmpty { options.docIDs = Set(docIDs) }
    if let type {
      options.selector = try Selector(J.object(["type": .string(type)]))
    }
    let eventInfo = actor != nil || format == .text || history
    var writer = RowWriter(text: format == .text, includeDocs: includeDocs, history: history)
    var remaining = limit ?? .max
    if remaining == 0 { return }
    let actor = self.actor  // read the option once, not once per row
    if follow { Self.exitCleanlyOnSignalsAndClosedPipe() }

    // Everything up to the end of the log, in large chunks.
    let streamOptions = {
      var o = options
      o.limit = nil
      return o
    }()
    let stored =
      !streamOptions.includeDocs && streamOptions.selector == nil && !history
      && !eventInfo
    var last = LogPosition.start
    if stored {
      // Rows written straight from the stored records (`writeChangesJSON`), 8,192 at a time,
      // each chunk in a read transaction of its own.
      var chunk = streamOptions
      var since = options.since
      while remaining > 0 {
        chunk.since = since
        chunk.limit = min(remaining, 8192)
        guard
          let written = try store.writeChangesJSON(
            chunk, into: &writer.out.bytes, separator: [0x0A], countPending: false)
        else { break }
        if written.rows > 0 { writer.out.append(0x0A) }
        writer.out.flushIfLarge()
        remaining -= written.rows
        since = written.lastSeq
        if written.rows < chunk.limit! { break }
      }
      last = since
    } else {
      last = try pipedRows(
        store, streamOptions, eventInfo: eventInfo, actor: actor, writer: &writer,
        remaining: &remaining)
    }
    writer.out.flush()
    guard follow, remaining > 0 else { return }

    // Then live, one flushed line per row.
    for try await item in store.log.subscribe(after: last) {
      guard case .event(let event) = item,
        let row = try store.changeRow(for: event, options: options, eventInfo: eventInfo)
      else { continue }
      if let actor, row.actor != actor { continue }
      writer.write(row)
      writer.out.flush()
      remaining -= 1
      if remaining == 0 { return }
    }
  }

  /// The rows that need decoding (documents, selectors, history, the event's actor), read by
  /// a helper thread while this one writes; the position read up to.
  func pipedRows(
    _ store: DocumentStore, _ options: ChangesOptions, eventInfo: Bool, actor: String?,
    writer: inout RowWriter, remaining: inout Int
  ) throws -> LogPosition {
    let pipe = RowPipe()
    pipe.start { pipe in
      var batch: [ChangeRow] = []
      batch.reserveCapacity(RowPipe.batchSize)
      let last = try store.forEachChange(options, eventInfo: eventInfo) { row in
        batch.append(row)
        guard batch.count == RowPipe.batchSize else { return true }
        defer { batch.removeAll(keepingCapacity: true) }
        return pipe.send(batch)
      }
      if !batch.isEmpty { _ = pipe.send(batch) }
      return last
    }
    while true {
      switch try pipe.receive() {
      case .rows(let rows):
        for row in rows {
          if let actor, row.actor != actor { continue }
          writer.write(row)
          writer.out.flushIfLarge()
          remaining -= 1
          if remaining == 0 {
            pipe.cancel()
            return row.seq
          }
        }
      case .end(let position):
        return position
      }
    }
  }

  /// SIGINT and SIGTERM end a following tail with status 0, and so does the reader of its
  /// output going away even while nothing is being written (a pipe reports POLLERR then).
  static func exitCleanlyOnSignalsAndClosedPipe() {
    signal(SIGINT) { _ in _exit(0) }
    signal(SIGTERM) { _ in _exit(0) }
    var st = stat()
    guard unsafe fstat(STDOUT_FILENO, &st) == 0,
      st.st_mode & S_IFMT == S_IFIFO || st.st_mode & S_IFMT == S_IFSOCK
    else { return }
    Thread.detachNewThread {
      var fd = pollfd(fd: STDOUT_FILENO, events: 0, revents: 0)
      while true {
        let n = unsafe poll(&fd, 1, -1)
        if n > 0 && Int32(fd.revents) & (Int32(POLLERR) | Int32(POLLHUP)) != 0 { _exit(0) }
        if n < 0 && errno != EINTR { return }
      }
    }
  }
}

/// Writes feed rows as NDJSON (built byte by byte: millions of rows go through here) or as
/// one line of text each.
struct RowWriter {
  var out = OutputBuffer()
  let text: Bool
  let includeDocs: Bool
  /// Add `actor`, `time` and `origin` (history rows).
  let history: Bool

  mutating func write(_ row: ChangeRow) {
    if text {
      writeText(row)
      return
    }
    out.append(#"{"seq":"#)
    out.append(decimal: row.seq.rawValue)
    out.append(#","id":"#)
    EventFormatter.quote(row.id, into: &out)
    out.append(#","changes":["#)
    for (i, rev) in row.changes.enumerated() {
      out.append(i == 0 ? #"{"rev":"# : #",{"rev":"#)
      EventFormatter.quote(rev, into: &out)
      out.append(UInt8(ascii: "}"))
    }
    out.append(UInt8(ascii: "]"))
    if row.deleted { out.append(#","deleted":true"#) }
    if includeDocs, let doc = row.doc {
      out.append(#","doc":"#)
      doc.serialize(into: &out.bytes)
    }
    // History rows say who, when and from where.
    if history, let actor = row.actor, let micros = row.timestampMicroseconds {
      out.append(#","actor":"#)
      EventFormatter.quote(actor, into: &out)
      out.append(#","time":""#)
      out.append(ISO8601.format(microseconds: micros))
      out.append(UInt8(ascii: "\""))
      if let origin = row.origin, !origin.isEmpty {
        out.append(#","origin":"#)
        EventFormatter.quote(origin, into: &out)
      }
    }
    out.append("}\n")
  }

  /// `2026-11-21T09:00:00.123456Z  #12  alice  w1:Home  3-9f1c...  page: # Home` (#12: the
  /// row's seq, what `--since` and `replay --as-of` take)
  mutating func writeText(_ row: ChangeRow) {
    let time = row.timestampMicroseconds.map { ISO8601.format(microseconds: $0) } ?? "-"
    let actor = (row.actor ?? "").isEmpty ? "-" : row.actor!
    var line = "\(time)  #\(row.seq.rawValue)  \(actor)  \(row.id)  \(row.changes.first ?? "-")"
    if row.changes.count > 1 { line += " (+\(row.changes.count - 1) leaves)" }
    line += "  " + Summary.of(row.doc, deleted: row.deleted)
    if let origin = row.origin, !origin.isEmpty { line += "  (from \(origin))" }
    out.line(line)
  }
}

/// One-line summaries of documents for people.
enum Summary {
  static func of(_ doc: JSONValue?, deleted: Bool) -> String {
    if deleted { return "deleted" }
    guard let object = doc?.objectValue else { return "" }
    let type = object["type"]?.stringValue
    var text: String
    if let markdown = object["markdown"]?.stringValue {
      text =
        markdown.split(whereSeparator: \.isNewline).first.map {
          $0.trimmingCharacters(in: .whitespaces)
        } ?? ""
      if text.isEmpty { text = "(empty)" }
    } else if let title = object["title"]?.stringValue {
      text = title
    } else {
      let body = JSONObject(object.members.filter { !$0.key.hasPrefix("_") && $0.key != "type" })
      text = String(decoding: JSONValue.object(body).serialized(), as: UTF8.self)
    }
    if text.count > 72 { text = String(text.prefix(71)) + "…" }
    return type.map { "\($0): \(text)" } ?? text
  }
}

/// Rows handed from a reading thread to the writing one, a few batches ahead at most.
final class RowPipe: @unchecked Sendable {
  /// Rows per hand-over.
  static let batchSize = 2048
  /// Batches the reader may be ahead.
  static let depth = 4

  enum Item {
    case rows([ChangeRow])
    case end(LogPosition)
  }

  // Guarded by `lock`.
  private var items: [Result<Item, any Error>] = []
  private var cancelled = false
  private let lock = NSLock()
  private let available = DispatchSemaphore(value: 0)
  private let slots = DispatchSemaphore(value: RowPipe.depth)

  /// Runs `produce` on a thread of its own; what it returns (or throws) ends the stream.
  func start(_ produce: @escaping @Sendable (RowPipe) throws -> LogPosition) {
    Thread.detachNewThread { [self] in
      let end = Result { try produce(self) }.map(Item.end)
      lock.withLock { items.append(end) }
      available.signal()
    }
  }

  /// Hands a batch over, waiting while the writer is `depth` batches behind; false once the
  /// writer has stopped reading (the reader then stops).
  func send(_ rows: [ChangeRow]) -> Bool {
    slots.wait()
    let open = lock.withLock {
      if !cancelled { items.append(.success(.rows(rows))) }
      return !cancelled
    }
    if open { available.signal() }
    return open
  }

  /// The next batch, or the end with the position the reader reached; rethrows its error.
  func receive() throws -> Item {
    available.wait()
    let item = lock.withLock { items.removeFirst() }
    if case .success(.rows) = item { slots.signal() }
    return try item.get()
  }

  /// The writer stops reading: the reader's next ``send(_:)`` returns false.
  func cancel() {
    lock.withLock { cancelled = true }
    slots.signal()
  }
}
