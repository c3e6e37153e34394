import ArgumentParser
import Auth
import CouchAPI
import Foundation
import JSON
import Log
import Projections
import Query
import Replication
import Wiki

/// `--db`: the data directory. Every command has it through ``GlobalOptions``; `serve`, which
/// serves every database in the directory, has it alone.
///
/// ArgumentParser hands an option group parsed by `wikilog` itself (`wikilog --db DIR serve`)
/// to a subcommand that declares a group of the same type, so `--db` is this one type
/// wherever it is declared.
struct DataDirectoryOption: ParsableArguments {
  @Option(
    name: .long,
    help: ArgumentHelp(
      "The data directory (default: $WIKILOG_DB, else $XDG_DATA_HOME/wikilog or ~/.local/share/wikilog).",
      valueName: "dir"))
  var db: String?

  /// The data directory's path.
  var directory: String { GlobalOptions.directory(db) }

  func validate() throws {
    // An empty path would be the file system's root to the calls below.
    if db?.isEmpty == true { throw ValidationError("--db names no directory (it is empty)") }
  }
}

/// `-d`: the database in the data directory.
struct DatabaseOption: ParsableArguments {
  @Option(
    name: [.customShort("d"), .long],
    help: ArgumentHelp("The database in the data directory.", valueName: "name"))
  var database: String = GlobalOptions.defaultDatabase
}

/// Options every command shares: where the data directory is and which database in it.
struct GlobalOptions: ParsableArguments {
  @OptionGroup var data: DataDirectoryOption
  @OptionGroup var name: DatabaseOption

  /// `--db` as given.
  var db: String? { data.db }
  /// `-d`, or the default database.
  var database: String { name.database }

  static let defaultDatabase = "wiki"

  /// The data directory's path.
  var directory: String { Self.directory(db) }

  /// The data directory: `db` when given, else $WIKILOG_DB, else the XDG data directory.
  static func directory(_ db: String?) -> String {
    if let db { return db }
    let env = ProcessInfo.processInfo.environment
    if let db = env["WIKILOG_DB"], !db.isEmpty { return db }
    let base =
      env["XDG_DATA_HOME"].flatMap { $0.isEmpty ? nil : $0 }
      ?? (NSHomeDirectory() + "/.local/share")
    return base + "/wikilog"
  }

  /// A command line to suggest in a hint: `wikilog` and `words`, followed by the `--db` this
  /// command was given and `-d` unless the database is the default one, so that the hint
  /// works when pasted as it is.
  func suggest(_ words: String) -> String {
    var line = "wikilog " + words
    if let db { line += " --db " + Shell.quote(db) }
    if database != Self.defaultDatabase { line += " -d " + Shell.quote(database) }
    return line
  }

  /// The error for a database that does not exist, with the commands that make one.
  func noDatabase() -> CLIError {
    // A --db that is not a usable directory (a file, a read-only place) is the real problem.
    // (`X/.` exists only for a directory, through links too.)
    let fm = FileManager.default
    if fm.fileExists(atPath: directory), !fm.fileExists(atPath: directory + "/.") {
      return CLIError(
        "\(directory) is a file, not a data directory; pass --db a directory (it is made when missing)"
      )
    }
    return CLIError(
      "no database '\(database)' in \(directory); create it with: \(suggest("init")) (or seed a demo wiki: \(suggest("demo")))"
    )
  }

  /// Makes a crash while the database is open (liblmdb following a damaged page the checks at
  /// open do not reach) end with one `wikilog: error:` line naming its file and exit status 1.
  func installCrashLine() {
    let file = dataDirectory().directory(of: database) + "/data.mdb"
    let verify = suggest("verify")
    FatalSignal.install { signal in
      "wikilog: error: reading \(file) crashed the process (\(signal)): the file is probably damaged; check it with: \(verify), and restore it from a backup"
    }
  }

  /// The data directory, with every log opened read-only or with the given durability. It
  /// knows `_users` (Auth's rules: no clear password is ever stored), so `-d _users` works
  /// for the document commands; `wikilog serve` opens its own, without it.
  func dataDirectory(readOnly: Bool = false, durability: EventLog.Durability = .synced)
    -> DataDirectory
  {
    DataDirectory.wiki(
      path: directory, options: EventLog.Options(durability: durability, readOnly: readOnly),
      systemDatabases: [.users, .replicator])
  }

  /// Opens the selected database, which must exist (`wikilog init` creates it).
  func openStore(readOnly: Bool = false, durability: EventLog.Durability = .synced) throws
    -> OpenStore
  {
    let data = dataDirectory(readOnly: readOnly, durability: durability)
    do {
      try data.check(name: database)
    } catch let error as StoreError {
      throw CLIError(error.reason)
    }
    guard data.exists(database) else { throw noDatabase() }
    installCrashLine()
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
      try dataDirectory().check(name: database)
      if readOnly && !dataDirectory().exists(database) { throw noDatabase() }
      let path = dataDirectory().directory(of: database)
      installCrashLine()
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

  func validate() throws {
    // The actor is printed in audit lines and history: a newline in it would forge lines.
    if let actor,
      actor.unicodeScalars.contains(where: { $0.properties.generalCategory == .control })
    {
      throw ValidationError("--actor may not contain control characters (such as newlines)")
    }
  }

  /// The user whose access the writes of `command` are checked against: the one its
  /// `--actor` names, with no roles, a member of every database's security object (whoever
  /// runs the command may open the files): the database's per-document rules decide, such as
  /// a wiki's owner and members. Nil without `--actor` (the operator's own tool: nothing is
  /// checked).
  static func user(of command: any ParsableCommand) -> UserContext? {
    for child in Mirror(reflecting: command).children {
      // `@OptionGroup var actor: ActorOptions` is stored as its wrapper.
      let options = (child.value as? OptionGroup<ActorOptions>)?.wrappedValue
      if let actor = options?.actor {
        return UserContext(name: actor, roles: [], isMemberOfEveryDatabase: true)
      }
    }
    return nil
  }

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

/// Quoting for the shell, for command lines printed in hints.
enum Shell {
  /// `word` as it is when the shell leaves it alone, else in single quotes.
  static func quote(_ word: String) -> String {
    let plain =
      !word.isEmpty
      && word.unicodeScalars.allSatisfy {
        ("a"..."z").contains($0) || ("A"..."Z").contains($0) || ("0"..."9").contains($0)
          || "/._-+:@%,".unicodeScalars.contains($0)
      }
    if plain { return word }
    return "'" + word.replacingOccurrences(of: "'", with: #"'\''"#) + "'"
  }
}
