import ArgumentParser
import Foundation
import JSON
import Log
import Projections
import Query
import Wiki

struct Config: ParsableCommand {
  static let configuration = CommandConfiguration(
    abstract: "Show or change the database's settings.",
    discussion: """
      Examples:
        wikilog config revs-limit        # print it
        wikilog config revs-limit 100    # set it (from each document's next write)
      """,
    subcommands: [RevsLimit.self])
}

struct RevsLimit: ParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "revs-limit",
    abstract: "How many ancestors each leaf keeps in its revision tree (_revs_limit).",
    discussion: "Examples:\n  wikilog config revs-limit\n  wikilog config revs-limit 100")

  @OptionGroup var global: GlobalOptions
  @OptionGroup var actor: ActorOptions
  @Argument(help: "The new limit (at least 1); omit it to print the current one.") var limit: Int?

  func validate() throws {
    if let limit, limit < 1 { throw ValidationError("the revs limit must be at least 1") }
  }

  func run() throws {
    let db = try global.openStore(readOnly: limit == nil)
    defer { db.close() }
    if let limit {
      try db.store.setRevsLimit(limit, actor: actor.name)
    }
    printText(String(try db.store.revsLimit))
  }
}
