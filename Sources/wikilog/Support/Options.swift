import ArgumentParser
import Foundation
import JSON
import Log
import Projections
import Wiki

/// Options every command shares: where the data directory is and which database in it.
struct GlobalOptions: ParsableArguments {
  @Option(
    name: .long,
    help: ArgumentHelp(
      "The data directory (default: $WIKILOG_DB, else $XDG_DATA_HOME/wikilog or ~/.local/share/wikilog).",
      valueName: "dir"))
  var db: String?

  @Option(
    name: [.customShort("d"), .long],
    help: ArgumentHelp("The database in the data directory.", valueName: "name"))
  var database: String = "wiki"

  /// The data directory's path.
  var directory: String {
    if let db { return db }
    let env = ProcessInfo.processInfo.environment
    if let db = env["WIKILOG_DB"], !db.isEmpty { return db }
    let base =
      env["XDG_DATA_HOME"].flatMap { $0.isEmpty ? nil : $0 }
      ?? (NSHomeDirectory() + "/.local/share")
    return base + "/wikilog"
  }

  /// The data directory, with every log opened read-only or with the given durability.
  func dataDirectory(readOnly: Bool = false, durability: EventLog.Durability = .synced)
    -> DataDirectory
  {
    DataDirectory.wiki(
      path: directory, options: EventLog.Options(durability: durability, readOnly: readOnly))
  }

  /// Opens the selected database, which must exist (`wikilog init` creates it).
  func openStore(readOnly: Bool = false, durability: EventLog.Durability = .synced) throws
    -> OpenStore
  {
    do {
      try DataDirectory.validate(name: database)
    } catch let error as StoreError {
      throw CLIError(error.reason)
    }
    let data = dataDirectory(readOnly: readOnly, durability: durability)
    guard data.exists(database) else {
      throw CLIError(
        "no database '\(database)' in \(directory); create it with: wikilog init -d \(database)")
    }
    do {
      return OpenStore(data: data, store: try data.open(database))
    } catch let error as StoreError {
      throw CLIError("cannot open database '\(database)': \(error.reason)")
    }
  }

  /// The selected database's raw event log (for `wikilog log tail`), created if missing unless
  /// `readOnly`.
  func open(readOnly: Bool = false, durability: EventLog.Durability = .synced) throws -> EventLog {
    do {
      try DataDirectory.validate(name: database)
      if readOnly && !dataDirectory().exists(database) {
        throw CLIError(
          "no database '\(database)' in \(directory); create it with: wikilog init -d \(database)")
      }
      let path = dataDirectory().directory(of: database)
      return try EventLog(
        directory: path, options: .init(durability: durability, readOnly: readOnly))
    } catch let error as StoreError {
      throw CLIError(error.reason)
    } catch let error as CLIError {
      throw error
    } catch {
      throw CLIError("\(error)")
    }
  }
}

/// An open database and the data directory that owns it (which closes it when it goes away).
struct OpenStore {
  let data: DataDirectory
  let store: DocumentStore

  func close() { data.closeAll() }
}

/// Who a write is recorded as.
struct ActorOptions: ParsableArguments {
  @Option(help: "Who makes the change (default: $WIKILOG_ACTOR, else $USER).")
  var actor: String?

  var name: String {
    if let actor { return actor }
    let env = ProcessInfo.processInfo.environment
    if let a = env["WIKILOG_ACTOR"], !a.isEmpty { return a }
    if let u = env["USER"], !u.isEmpty { return u }
    return "unknown"
  }
}

/// `--json`: print structured output as JSON instead of a table.
struct JSONFlag: ParsableArguments {
  @Flag(name: .long, help: "Print JSON instead of text.") var json = false
}

/// A failure printed as one line on stderr (`wikilog: error: ...`), with a non-zero exit.
struct CLIError: Error, CustomStringConvertible {
  let description: String
  var code: Int32 = 1
  init(_ description: String, code: Int32 = 1) {
    self.description = description
    self.code = code
  }
}
