import ArgumentParser
import Foundation
import JSON
import Log
import Projections
import Query
import Wiki

struct Local: ParsableCommand {
  static let configuration = CommandConfiguration(
    abstract: "Read and write _local documents (never replicated, not in the changes feed).",
    discussion: """
      Ids may be given with or without the _local/ prefix.

      Examples:
        wikilog local put checkpoint '{"last_seq":42}'
        wikilog local get checkpoint
        wikilog local delete checkpoint --rev 0-1
      """,
    subcommands: [LocalGet.self, LocalPut.self, LocalDelete.self])

  static func bareID(_ id: String) -> String {
    id.hasPrefix("_local/") ? String(id.dropFirst(7)) : id
  }
}

struct LocalGet: ParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "get", abstract: "Print a _local document.",
    discussion: "Example:\n  wikilog local get checkpoint")

  @OptionGroup var global: GlobalOptions
  @Argument(help: "The local document's id.") var id: String

  func run() throws {
    let db = try global.openStore(readOnly: true)
    defer { db.close() }
    printJSON(try db.store.getLocal(Local.bareID(id)))
  }
}

struct LocalPut: ParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "put", abstract: "Write a _local document (JSON as an argument or on stdin).",
    discussion: """
      A _rev in the body must be the current one (0-N); without it the document is created or \
      overwritten only if it does not exist yet. Prints {"ok":true,"id":...,"rev":...}.

      Example:
        echo '{"last_seq":42}' | wikilog local put checkpoint
      """)

  @OptionGroup var global: GlobalOptions
  @OptionGroup var actor: ActorOptions
  @Argument(help: "The local document's id.") var id: String
  @Argument(help: "The document as JSON (default: standard input).") var document: String?

  func run() throws {
    let bytes = try Input.read(document)
    let db = try global.openStore()
    defer { db.close() }
    // As in CouchDB 3, a `_local` write is never a conflict: it gets the revision it names
    // plus one (the last write wins).
    printJSON(try db.store.putLocal(Local.bareID(id), bytes, actor: actor.name).json)
  }
}

struct LocalDelete: ParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "delete", abstract: "Delete a _local document.",
    discussion: "Example:\n  wikilog local delete checkpoint --rev 0-3")

  @OptionGroup var global: GlobalOptions
  @OptionGroup var actor: ActorOptions
  @Argument(help: "The local document's id.") var id: String
  @Option(help: "A revision 0-N (as in CouchDB 3, not compared with the stored one).")
  var rev: String?

  func run() throws {
    let db = try global.openStore()
    defer { db.close() }
    try Self.delete(id, rev: rev, db: db, global: global, actor: actor.name)
  }

  /// Deletes a `_local` document (`not_found` when there is none).
  static func delete(
    _ id: String, rev: String?, db: OpenStore, global: GlobalOptions, actor: String
  ) throws {
    printJSON(try db.store.deleteLocal(Local.bareID(id), rev: rev, actor: actor).json)
  }
}
