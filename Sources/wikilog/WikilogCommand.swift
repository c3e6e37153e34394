import ArgumentParser
import Foundation
import Log

@main
struct WikilogCommand: AsyncParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "wikilog",
    abstract: "An append-only, auditable event log for a multi-user wiki, stored in LMDB.",
    discussion: """
      Every edit is an immutable event with a dense sequence number, a time and an actor.

      Examples:
        wikilog demo                         # create a demo log in the default directory
        wikilog tail --since 0               # every event, as NDJSON
        wikilog tail --follow --format text  # like tail -f
        echo '{"markdown":"# Hi"}' | wikilog append --type page.saved --stream 'w1:Home' --actor alice
        wikilog verify
      """,
    subcommands: [Demo.self, Append.self, Tail.self, Verify.self, Stats.self, Serve.self]
  )
}

/// Options every command shares.
struct GlobalOptions: ParsableArguments {
  @Option(
    name: .long,
    help: ArgumentHelp(
      "The log directory (default: $WIKILOG_DB, else $XDG_DATA_HOME/wikilog or ~/.local/share/wikilog).",
      valueName: "dir"))
  var db: String?

  var directory: String {
    if let db { return db }
    let env = ProcessInfo.processInfo.environment
    if let db = env["WIKILOG_DB"], !db.isEmpty { return db }
    let base =
      env["XDG_DATA_HOME"].flatMap { $0.isEmpty ? nil : $0 }
      ?? (NSHomeDirectory() + "/.local/share")
    return base + "/wikilog"
  }

  func open(readOnly: Bool = false, durability: EventLog.Durability = .synced) throws -> EventLog {
    do {
      return try EventLog(
        directory: directory, options: .init(durability: durability, readOnly: readOnly))
    } catch {
      throw CLIError("\(error)")
    }
  }
}

/// A failure printed as one line on stderr, with a non-zero exit.
struct CLIError: Error, CustomStringConvertible {
  let description: String
  init(_ description: String) { self.description = description }
}
