import Foundation
import Testing

@Suite struct UserCommandTests {
  @Test func usersEndToEnd() throws {
    let cli = try CLI()
    let secret = "S3cret-never-in-the-log"
    #expect(
      try cli.ok(
        ["user", "add", "ann", "--admin", "--role", "editor", "--password-stdin"],
        stdin: secret + "\n"
      ).stdout == "added user ann (roles: _admin, editor)\n")
    try cli.ok(["user", "add", "bob", "--password-stdin"], stdin: "bobs-password\n")
    try cli.fails(["user", "add", "ann", "--password-stdin"], stdin: "x\n", "already exists")
    // Not a terminal and no --password-stdin: refused, nothing written.
    try cli.fails(["user", "add", "cat"], "--password-stdin")
    try cli.fails(["user", "add", "_cat", "--password-stdin"], stdin: "x\n", "underscore")
    // A newline in a name, an actor or a token label would forge lines in lists and audits.
    try cli.fails(
      ["user", "add", "eve\nmallory  admin", "--password-stdin"], stdin: "x\n",
      "control characters")
    try cli.fails(
      ["put", #"{"_id":"d"}"#, "--actor", "eve\nbob"], status: 64, "control characters")
    try cli.fails(
      ["token", "create", "bob", "--name", "laptop\nforged"], "control characters")
    let list = try cli.ok(["user", "list"])
    #expect(list.lines == ["ann  roles: _admin, editor", "bob"])
    let json = try cli.ok(["user", "list", "--json"]).stdout
    #expect(json.contains(#""admin":true"#))
    for leak in ["derived_key", "salt", secret] { #expect(!json.contains(leak)) }
    #expect(!list.stdout.contains("derived_key"))

    try cli.ok(["user", "passwd", "bob", "--password-stdin"], stdin: "new-bob-password\n")
    try cli.fails(["user", "passwd", "nobody", "--password-stdin"], stdin: "x\n", "no user nobody")

    // The clear passwords are in neither the export nor the log file.
    let export = try cli.ok(["export", "-d", "_users"]).stdout
    #expect(export.contains("org.couchdb.user:ann"))
    #expect(export.contains("derived_key"))
    for leak in [secret, "bobs-password", "new-bob-password"] {
      #expect(!export.contains(leak))
      let bytes = try Data(contentsOf: URL(fileURLWithPath: cli.path + "/_users/data.mdb"))
      #expect(bytes.range(of: Data(leak.utf8)) == nil, "\(leak) in data.mdb")
    }
    // Writing a clear password through the generic commands is refused.
    try cli.fails(
      ["put", "-d", "_users"],
      stdin:
        #"{"_id":"org.couchdb.user:eve","name":"eve","type":"user","roles":[],"password":"pw"}"#,
      "clear password")
    try cli.fails(
      ["put", "-d", "_users"],
      stdin: #"{"_id":"org.couchdb.user:eve","name":"mallory","type":"user","roles":[]}"#,
      "org.couchdb.user:name")

    // Disable and enable: listed, said when there was nothing to do, refused for no user.
    #expect(try cli.ok(["user", "disable", "bob"]).stdout == "disabled user bob\n")
    #expect(
      try cli.ok(["user", "list"]).lines == ["ann  roles: _admin, editor", "bob  (disabled)"])
    #expect(try cli.ok(["user", "list", "--json"]).stdout.contains(#""disabled":true"#))
    #expect(try cli.ok(["user", "disable", "bob"]).stdout == "user bob was already disabled\n")
    try cli.fails(["user", "disable", "nobody"], "no user nobody")
    #expect(try cli.ok(["user", "enable", "bob"]).stdout == "enabled user bob\n")
    #expect(try cli.ok(["user", "list"]).lines == ["ann  roles: _admin, editor", "bob"])

    try cli.ok(["user", "remove", "bob"])
    #expect(try cli.ok(["user", "list"]).lines == ["ann  roles: _admin, editor"])
    try cli.fails(["user", "remove", "bob"], "no user bob")
  }

  @Test func tokensEndToEnd() throws {
    let cli = try CLI()
    try cli.ok(["user", "add", "ann", "--password-stdin"], stdin: "pw\n")
    let made = try cli.ok(["token", "create", "ann", "--name", "laptop"])
    let token = made.stdout.trimmingCharacters(in: .newlines)
    #expect(token.hasPrefix("wlt_"))
    #expect(made.stderr.contains("shown only now"))
    let id = String(token.dropFirst(4).prefix(16))
    let list = try cli.ok(["token", "list"])
    #expect(list.lines.count == 1)
    #expect(list.stdout.hasPrefix("\(id)  ann  laptop  created "))
    #expect(list.stdout.contains("last used never"))
    #expect(!list.stdout.contains(String(token.suffix(64))))
    #expect(try cli.ok(["token", "list", "bob"]).stdout.isEmpty)
    let json = try cli.ok(["token", "list", "ann", "--json"]).array()
    #expect((json.first as? [String: Any])?["id"] as? String == id)
    try cli.fails(["token", "create", "nobody"], "no user nobody")
    let bytes = try Data(contentsOf: URL(fileURLWithPath: cli.path + "/_users/data.mdb"))
    #expect(bytes.range(of: Data(token.suffix(64).utf8)) == nil)
    try cli.ok(["token", "revoke", id])
    #expect(try cli.ok(["token", "list"]).stdout.isEmpty)
    try cli.fails(["token", "revoke", id], "no token \(id)")
  }
}
