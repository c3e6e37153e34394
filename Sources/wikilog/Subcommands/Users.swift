import ArgumentParser
import Auth
import Formats
import Foundation
import JSON
import Log
import Projections
import Query

struct UserCommand: ParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "user",
    abstract: "Manage the users of the data directory (its _users database).",
    discussion: """
      Users are CouchDB _users documents (org.couchdb.user:NAME); a password is stored only as \
      a PBKDF2-SHA256 derived key (600,000 iterations). Administrators have the _admin role. \
      `wikilog serve` signs users in with them (HTTP Basic, POST /_session cookies).

      Examples:
        wikilog user add ann --admin              # asks for the password (twice)
        printf '%s\\n' "$PW" | wikilog user add bob --role editor --password-stdin
        wikilog user passwd bob
        wikilog user list
        wikilog user disable bob                 # signs in no way until enabled
        wikilog user enable bob
        wikilog user remove bob
      """,
    subcommands: [
      UserAdd.self, UserPasswd.self, UserList.self, UserDisable.self, UserEnable.self,
      UserRemove.self,
    ])
}

/// The data directory with `_users` known, for the user and token commands.
struct UsersOptions: ParsableArguments {
  @OptionGroup var data: DataDirectoryOption

  func directory(readOnly: Bool = false) -> DataDirectory {
    DataDirectory(
      path: data.directory, options: .init(durability: .synced, readOnly: readOnly),
      systemDatabases: [.users])
  }

  /// `_users`, created when missing unless `readOnly`; nil when reading and it does not exist.
  func users(readOnly: Bool = false) throws -> (DataDirectory, UserStore)? {
    let dir = directory(readOnly: readOnly)
    if readOnly && !dir.exists(UserStore.databaseName) { return nil }
    if !readOnly {
      try FileManager.default.createDirectory(
        atPath: data.directory, withIntermediateDirectories: true)
    }
    return (dir, try UserStore(data: dir, create: !readOnly))
  }
}

struct PasswordOptions: ParsableArguments {
  @Flag(
    name: .customLong("password-stdin"),
    help: "Read the password from the first line of standard input instead of asking for it.")
  var fromStdin = false

  /// The new password: the first line of stdin, or asked twice on the terminal with echo off.
  func read(for name: String) throws -> String {
    if fromStdin {
      guard let line = Swift.readLine(strippingNewline: true), !line.isEmpty else {
        throw CLIError("no password on standard input")
      }
      return line
    }
    guard isatty(0) == 1 else {
      throw CLIError(
        "standard input is not a terminal to ask for the password; pass it with --password-stdin")
    }
    let first = try Terminal.askSecret("Password for \(name): ")
    guard !first.isEmpty else { throw CLIError("the password must not be empty") }
    let second = try Terminal.askSecret("Retype the password: ")
    guard first == second else { throw CLIError("the passwords do not match; nothing changed") }
    return first
  }
}

enum Terminal {
  /// Prints `prompt` on stderr and reads a line from the terminal with echo off.
  static func askSecret(_ prompt: String) throws -> String {
    writeStandardError(prompt)
    var saved = termios()
    guard unsafe tcgetattr(0, &saved) == 0 else { throw CLIError("cannot read the terminal") }
    var quiet = saved
    quiet.c_lflag &= ~tcflag_t(ECHO)
    _ = unsafe tcsetattr(0, TCSAFLUSH, &quiet)
    defer {
      _ = unsafe tcsetattr(0, TCSAFLUSH, &saved)
      writeStandardError("\n")
    }
    return Swift.readLine(strippingNewline: true) ?? ""
  }
}

struct UserAdd: ParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "add", abstract: "Add a user with a password.",
    discussion: """
      Examples:
        wikilog user add ann --admin
        printf '%s\\n' "$PW" | wikilog user add bob --role editor --password-stdin
      """)

  @OptionGroup var options: UsersOptions
  @OptionGroup var actor: ActorOptions
  @OptionGroup var password: PasswordOptions
  @Argument(help: "The user's name (no ':', not starting with '_').") var name: String
  @Flag(help: "Make the user an administrator (the _admin role).") var admin = false
  @Option(name: .customLong("role"), help: "A role (repeat for more).") var roles: [String] = []

  func run() throws {
    guard let (data, users) = try options.users() else { return }
    defer { data.closeAll() }
    if try users.user(named: name) != nil {
      throw CLIError(
        "the user \(name) already exists; change the password with: wikilog user passwd \(Shell.quote(name))"
      )
    }
    let secret = try password.read(for: name)
    let roles =
      (admin ? [UserContext.adminRole] : [])
      + roles.filter { $0 != UserContext.adminRole || !admin }
    let user = try users.add(name: name, password: secret, roles: roles, actor: actor.name)
    printText(
      "added user \(user.name)"
        + (user.roles.isEmpty ? "" : " (roles: \(user.roles.joined(separator: ", ")))"))
  }
}

struct UserPasswd: ParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "passwd", abstract: "Set a user's password (ends their sessions).",
    discussion:
      "Examples:\n  wikilog user passwd ann\n  printf '%s\\n' \"$PW\" | wikilog user passwd ann --password-stdin"
  )

  @OptionGroup var options: UsersOptions
  @OptionGroup var actor: ActorOptions
  @OptionGroup var password: PasswordOptions
  @Argument(help: "The user's name.") var name: String

  func run() throws {
    guard let (data, users) = try options.users() else { return }
    defer { data.closeAll() }
    guard try users.user(named: name) != nil else { throw CLIError("no user \(name)") }
    try users.setPassword(of: name, to: try password.read(for: name), actor: actor.name)
    printText("changed the password of \(name)")
  }
}

struct UserList: ParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "list", abstract: "List the users and their roles (never their password hashes).",
    discussion: "Examples:\n  wikilog user list\n  wikilog user list --json")

  @OptionGroup var options: UsersOptions
  @OptionGroup var json: JSONFlag

  func run() throws {
    guard let (data, users) = try options.users(readOnly: true) else {
      if json.json { printJSON(.array([])) }
      return
    }
    defer { data.closeAll() }
    let all = try users.users()
    if json.json {
      printJSON(
        .array(
          all.map { user in
            .object(
              JSONObject([
                "name": .string(user.name), "roles": .array(user.roles.map(JSONValue.string)),
                "admin": .bool(user.isAdmin), "password": .bool(user.hasPassword),
                "disabled": .bool(user.isDisabled),
              ]))
          }))
      return
    }
    for user in all {
      var line = user.name
      if !user.roles.isEmpty { line += "  roles: " + user.roles.joined(separator: ", ") }
      if !user.hasPassword { line += "  (no password)" }
      if user.isDisabled { line += "  (disabled)" }
      printText(line)
    }
  }
}

struct UserDisable: ParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "disable",
    abstract:
      "Disable a user: their password, sessions and tokens sign nothing in until enabled.",
    discussion: "Examples:\n  wikilog user disable bob")

  @OptionGroup var options: UsersOptions
  @OptionGroup var actor: ActorOptions
  @Argument(help: "The user's name.") var name: String

  func run() throws { try setDisabled(options, actor, name, true) }
}

struct UserEnable: ParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "enable", abstract: "Enable a disabled user again.",
    discussion: "Examples:\n  wikilog user enable bob")

  @OptionGroup var options: UsersOptions
  @OptionGroup var actor: ActorOptions
  @Argument(help: "The user's name.") var name: String

  func run() throws { try setDisabled(options, actor, name, false) }
}

/// `user disable` and `user enable`: says so when there was nothing to change.
private func setDisabled(
  _ options: UsersOptions, _ actor: ActorOptions, _ name: String, _ disabled: Bool
) throws {
  guard let (data, users) = try options.users() else { throw CLIError("no user \(name)") }
  defer { data.closeAll() }
  guard let user = try users.user(named: name) else { throw CLIError("no user \(name)") }
  let word = disabled ? "disabled" : "enabled"
  guard user.isDisabled != disabled else {
    printText("user \(name) was already \(word)")
    return
  }
  try users.setDisabled(name, disabled, actor: actor.name)
  printText("\(word) user \(name)")
}

struct UserRemove: ParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "remove", abstract: "Remove a user (their tokens stop working).",
    discussion: "Examples:\n  wikilog user remove bob")

  @OptionGroup var options: UsersOptions
  @OptionGroup var actor: ActorOptions
  @Argument(help: "The user's name.") var name: String

  func run() throws {
    guard let (data, users) = try options.users() else { return }
    defer { data.closeAll() }
    guard try users.user(named: name) != nil else { throw CLIError("no user \(name)") }
    try users.remove(name: name, actor: actor.name)
    printText("removed user \(name)")
  }
}

struct TokenCommand: ParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "token",
    abstract: "Manage API tokens (Authorization: Token token=...).",
    discussion: """
      A token is shown once, when it is made; only its SHA-256 is stored. `wikilog serve` signs \
      in the request that sends it (Authorization: Token token=...) as its user.

      Examples:
        wikilog token create ann --name laptop    # prints the token
        wikilog token list ann
        wikilog token revoke 0f3a9c1d2b4e5f60
      """,
    subcommands: [TokenCreate.self, TokenList.self, TokenRevoke.self])
}

struct TokenCreate: ParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "create", abstract: "Make an API token for a user and print it (once).",
    discussion: "Examples:\n  wikilog token create ann --name laptop")

  @OptionGroup var options: UsersOptions
  @OptionGroup var actor: ActorOptions
  @Argument(help: "The user the token signs in.") var user: String
  @Option(name: .customLong("name"), help: "A label to tell the token apart.") var label: String?

  func run() throws {
    guard let (data, users) = try options.users() else { return }
    defer { data.closeAll() }
    guard try users.user(named: user) != nil else { throw CLIError("no user \(user)") }
    let made = try APITokens(users: users).create(user: user, label: label, actor: actor.name)
    printError(
      "token \(made.record.id) for \(user): it is shown only now; revoke it with: wikilog token revoke \(made.record.id)"
    )
    printText(made.token)
  }
}

struct TokenList: ParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "list", abstract: "List API tokens (ids, users, labels, times; never secrets).",
    discussion: "Examples:\n  wikilog token list\n  wikilog token list ann --json")

  @OptionGroup var options: UsersOptions
  @OptionGroup var json: JSONFlag
  @Argument(help: "Only this user's tokens.") var user: String?

  func run() throws {
    guard let (data, users) = try options.users(readOnly: true) else {
      if json.json { printJSON(.array([])) }
      return
    }
    defer { data.closeAll() }
    let tokens = try APITokens(users: users).list(user: user)
    func time(_ date: Date?) -> String { date.map { ISO8601.format($0) } ?? "never" }
    if json.json {
      printJSON(
        .array(
          tokens.map { t in
            .object(
              JSONObject([
                "id": .string(t.id), "user": .string(t.user),
                "name": t.label.map(JSONValue.string) ?? .null,
                "created_at": .string(time(t.createdAt)),
                "last_used_at": t.lastUsedAt.map { .string(time($0)) } ?? .null,
              ]))
          }))
      return
    }
    for t in tokens {
      printText(
        "\(t.id)  \(t.user)  \(t.label ?? "-")  created \(time(t.createdAt))  last used \(time(t.lastUsedAt))"
      )
    }
  }
}

struct TokenRevoke: ParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "revoke", abstract: "Revoke an API token: it stops working at once.",
    discussion: "Examples:\n  wikilog token revoke 0f3a9c1d2b4e5f60")

  @OptionGroup var options: UsersOptions
  @OptionGroup var actor: ActorOptions
  @Argument(help: "The token's id (see wikilog token list).") var id: String

  func run() throws {
    guard let (data, users) = try options.users() else { return }
    defer { data.closeAll() }
    do {
      try APITokens(users: users).revoke(id: id, actor: actor.name)
    } catch let error as StoreError where error.code == .notFound {
      throw CLIError("no token \(id) (see: wikilog token list)")
    }
    printText("revoked token \(id)")
  }
}
