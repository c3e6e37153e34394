import ArgumentParser
import Foundation
import Log

struct LogCommand: ParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "log",
    abstract: "The raw event log under a database (every event, as stored).",
    discussion: """
      Document commands work on documents; these show the events they are made of, including \
      _local writes and settings, with their type, stream, actor and payload. Read-only: raw \
      appends are not offered, since an event the projections cannot read would stop the database.

      The log is also a Merkle tree (RFC 6962): `key`, `head`, `prove` and `check` give signed \
      tree heads and proofs that an auditor checks without trusting the server.

      Examples:
        wikilog log tail --since 0 --format text
        wikilog log head --json > head.json
        wikilog log prove 42 --head head.json --json > proof.json
        wikilog log check head.json proof.json --key "$(wikilog log key)"
      """,
    subcommands: [LogTail.self, LogKey.self, LogHead.self, LogProve.self, LogCheck.self])
}

struct LogTail: AsyncParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "tail",
    abstract: "Print the log's events in order, and with --follow keep printing new ones.",
    discussion: """
      Output is one JSON object per line (NDJSON), flushed line by line when following, so \
      `wikilog log tail --follow | jq` works. --since is exclusive, like CouchDB's: events after \
      it. --format text prints a line per event for people: time, #seq, actor, type, stream and \
      the payload decoded (a document event's revision and body as JSON, a draft's base \
      revision and text, any other payload as JSON or text when it is, else its size and first \
      bytes).

      Examples:
        wikilog log tail --since 0 --limit 10
        wikilog log tail --since now --follow --format text
        wikilog log tail --since 2026-11-21T09:00:00Z --stream 'w1:Home'
      """)

  @OptionGroup var global: GlobalOptions
  @Option(help: "0 (everything), now, a position, or an ISO-8601 time.") var since: String = "0"
  @Option(parsing: .unconditional, help: "Stop after this many events.") var limit: Int?
  @Flag(help: "Keep running and print new events as they are appended (by any process).")
  var follow = false
  @Option(help: "json (NDJSON, default) or text.") var format: OutputFormat = .json
  @Option(help: "Only events of this stream.") var stream: String?
  @Option(help: "Only events of this type.") var type: String?
  @Option(help: "Only events by this actor.") var actor: String?

  enum OutputFormat: String, ExpressibleByArgument { case json, text }

  func validate() throws {
    if let limit, limit < 0 { throw ValidationError("--limit must be 0 or more") }
    _ = try Since(since)
  }

  func run() async throws {
    let log = try global.open(readOnly: true)
    defer { log.close() }
    let start = LogPosition(try Since(since).position(in: log))
    var out = OutputBuffer()
    var remaining = limit ?? Int.max
    if remaining == 0 { return }
    let text = format == .text
    func matches(_ e: RecordedEvent) -> Bool {
      (stream == nil || e.stream == stream) && (type == nil || e.type == type)
        && (actor == nil || e.actor == actor)
    }
    func emit(_ e: RecordedEvent) {
      if text { EventFormatter.text(e, into: &out) } else { EventFormatter.json(e, into: &out) }
    }

    if !follow {
      var position = start
      while remaining > 0 {
        let batch = try log.read(after: position, limit: 4096)
        guard let last = batch.last else { break }
        for e in batch where matches(e) {
          emit(e)
          remaining -= 1
          if remaining == 0 { break }
        }
        position = last.position
        out.flush()
      }
      out.flush()
      return
    }

    Tail.exitCleanlyOnSignalsAndClosedPipe()
    var live = false
    for try await item in log.subscribe(after: start) {
      switch item {
      case .caughtUp:
        live = true
        out.flush()
      case .event(let e):
        guard matches(e) else { continue }
        emit(e)
        remaining -= 1
        if live || out.count > 1 << 16 || remaining == 0 { out.flush() }
        if remaining == 0 { return }
      }
    }
  }
}
