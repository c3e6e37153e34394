import ArgumentParser
import CouchAPI
import Foundation
import JSON
import Log
import Projections
import Query
import Replication
import Wiki

@main
struct WikilogCommand: AsyncParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "wikilog",
    abstract: "A CouchDB-compatible document database on an append-only, auditable event log.",
    discussion: """
      A data directory (--db) holds named databases (-d, default 'wiki'). Every write is an \
      immutable event with a dense sequence number, a time and an actor; documents, the changes \
      feed, wikis and pages are projections of the log.

      Examples:
        wikilog init
        wikilog wiki create Recipes --id w1 --actor alice
        echo '# Home' | wikilog wiki edit w1 Home --actor alice
        echo '{"_id":"note-1","text":"any JSON"}' | wikilog put --actor alice
        wikilog get w1 --revs-info
        wikilog tail --since 0 --follow | jq .
        wikilog history 'w1:Home'
        wikilog audit --user alice --since 2026-11-01
        wikilog replay --as-of 2026-11-20T18:00:00Z --doc 'w1:Home'
        echo '# Home, reworded' | wikilog wiki draft save w1 Home --actor alice
        wikilog export > backup.ndjson && wikilog import -d copy < backup.ndjson

      Errors are one line on stderr (wikilog: error: ...); exit status 1 when a command fails \
      (nothing is written then), 64 for a usage error.
      """,
    // One version for the command and the server (`GET /` reports it as the vendor version).
    version: "wikilog \(CouchServer.version)",
    subcommands: [
      Init.self,
      Put.self,
      Get.self,
      Attach.self,
      Delete.self,
      BulkDocs.self,
      RevsDiff.self,
      AllDocs.self,
      Find.self, IndexCommand.self, View.self, Grep.self, Search.self,
      Local.self,
      Config.self,
      Tail.self,
      History.self,
      Audit.self,
      Verify.self,
      Stats.self,
      Rebuild.self,
      Compact.self,
      Purge.self,
      Redact.self,
      Backup.self,
      Restore.self,
      Replay.self,
      Wiki.self,
      Import.self,
      Export.self,
      LogCommand.self,
      Demo.self,
      Serve.self,
      Replicate.self,
      UserCommand.self,
      TokenCommand.self,
      QueryServer.self,
    ]
  )

  /// `--db` and `-d` may also come before the subcommand: `wikilog --db DIR -d NAME tail`.
  @OptionGroup var global: GlobalOptions

  /// glibc's heap grows by 64 MiB at a time and gives memory back past 256 MiB free: with its
  /// defaults, the threads that prepare and write batches grew and trimmed their heaps (mmap,
  /// mprotect) for about a tenth of a replicated write's time (docs/benchmarks.md, the cost
  /// model). The same as `GLIBC_TUNABLES=glibc.malloc.top_pad=67108864:
  /// glibc.malloc.trim_threshold=268435456`, which still overrides it.
  static func tuneMalloc() {
    #if canImport(Glibc)
      guard ProcessInfo.processInfo.environment["GLIBC_TUNABLES"] == nil else { return }
      _ = glibcMallopt(-2, 64 << 20)  // M_TOP_PAD
      _ = glibcMallopt(-1, 256 << 20)  // M_TRIM_THRESHOLD
    #endif
  }

  static func main() async {
    signal(SIGPIPE, SIG_IGN)  // a closed pipe is an EPIPE write error, handled where we write
    tuneMalloc()
    do {
      var command = try parseAsRoot()
      // Writes made `--actor NAME` are NAME's: the database's access rules check each in the
      // transaction that commits it (``WriteAccess``), as they check the server's callers.
      let user = ActorOptions.user(of: command)
      if let parsed = command as? any AsyncParsableCommand {
        // The command stays on this task: the closure runs before `withValue` returns.
        nonisolated(unsafe) var asyncCommand = parsed
        try await WriteAccess.$user.withValue(user) { try await asyncCommand.run() }
      } else {
        try WriteAccess.$user.withValue(user) { try command.run() }
      }
    } catch {
      exit(reporting: error)
    }
  }

  /// Ends the process for `error`: help and clean exits as ArgumentParser prints them, anything
  /// else as one line on stderr.
  static func exit(reporting error: any Error) -> Never {
    switch error {
    case let e as CLIError: fail(e.description, code: e.code)
    // A failure of the store itself reads better without its HTTP error name.
    case let e as StoreError where e.error == "internal_server_error": fail(e.reason)
    case let e as StoreError: fail(e.description)
    case let e as LogError: fail(e.description)
    case let e as ExitCode: Foundation.exit(e.rawValue)
    default:
      let code = exitCode(for: error)
      if code == .success { exit(withError: error) }  // --help, --version
      let message = self.message(for: error)
      fail("\(message) (see: \(commandPath()) --help)", code: code.rawValue)
    }
  }

  static func fail(_ message: String, code: Int32 = 1) -> Never {
    let line = message.split(whereSeparator: \.isNewline).joined(separator: " ")
    printError("wikilog: error: \(line)")
    Foundation.exit(code)
  }

  /// `wikilog` and the subcommand names at the start of the arguments.
  static func commandPath() -> String {
    var path = ["wikilog"]
    var command: any ParsableCommand.Type = WikilogCommand.self
    var arguments = CommandLine.arguments.dropFirst()[...]
    while let argument = arguments.popFirst() {
      if ["--db", "-d", "--database"].contains(argument) {
        _ = arguments.popFirst()  // the option's value
        continue
      }
      if argument.hasPrefix("-") { continue }
      guard
        let sub = command.configuration.subcommands.first(where: {
          $0._commandName == argument
        })
      else { break }
      path.append(argument)
      command = sub
    }
    return path.joined(separator: " ")
  }
}

#if canImport(Glibc)
  /// `int mallopt(int param, int value)` of `<malloc.h>`, which the Glibc module does not
  /// export.
  @_silgen_name("mallopt")
  func glibcMallopt(_ parameter: Int32, _ value: Int32) -> Int32
#endif
