import ArgumentParser
import Auth
import Formats
import Foundation
import JSON
import Projections
import Query
import RevTree
import Wiki

struct Demo: ParsableCommand {
  static let configuration = CommandConfiguration(
    abstract: "Seed a demo wiki into a database of the data directory, if that database is empty.",
    discussion: """
      Writes a TouchWiki wiki document, linked pages with some history by alice, bob and \
      carol, a deleted page, and one conflict (two branches of a page written as replicated \
      revisions), all now: each document's created_at and updated_at are the times of the \
      writes that made it. Does nothing when the database already has documents, so it is safe \
      to run again.

      With --users it also adds the wikis garden (bob's, alice a member) and travel \
      (carol's alone), and signs-ins for them: the administrator admin and the users alice, \
      bob and carol, with random passwords kept in DIR/demo-sign-ins.txt (mode 0600) and \
      printed each time (`make serve` runs this).

      Example:
        wikilog demo --db /tmp/demo && wikilog serve --db /tmp/demo
        wikilog demo -d sandbox
        wikilog demo --users --db /tmp/demo
      """)

  @OptionGroup var global: GlobalOptions

  @Flag(help: "Also make the demo's users and their wikis, and print their sign-ins.")
  var users = false

  func run() throws {
    let directory = global.directory
    let database = global.database
    let data = DataDirectory.wiki(path: directory)
    defer { data.closeAll() }
    do {
      try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
      let store = try data.open(database, create: true)
      let info = try store.info
      if info.docCount + info.deletedDocCount > 0 {
        print(
          "wikilog: database '\(database)' in \(directory) already has documents; left as it is")
      } else {
        let summary = try DemoWiki.seed(store)
        print("wikilog: seeded database '\(database)' in \(directory): \(summary)")
        if users { try DemoWiki.seedMoreWikis(store) }
      }
      if users { print(try DemoUsers.ensure(directory: directory)) }
    } catch let error as StoreError {
      throw CLIError("\(error)")
    }
  }
}

/// The demo content: a small TouchWiki wiki written through the document store.
///
/// Every document's `created_at` and `updated_at` are real times: `updated_at` is taken just
/// before the write that carries it (as `wikilog wiki edit` does), so it is the time of that
/// write's event to within the moment the write takes, never a made-up past.
enum DemoWiki {
  static let wikiID = "demo"

  static func json(_ members: KeyValuePairs<String, JSONValue>) -> [UInt8] {
    JSONValue.object(JSONObject(members)).serialized()
  }

  static func page(_ markdown: String, by user: String, created: String, updated: String)
    -> KeyValuePairs<String, JSONValue>
  {
    [
      "type": .string("page"), "wiki_id": .string(wikiID), "markdown": .string(markdown),
      "created_at": .string(created), "updated_at": .string(updated),
      "updated_by": .string(user),
    ]
  }

  /// Writes everything; returns a one-line summary.
  static func seed(_ store: DocumentStore) throws -> String {
    var created: [String: String] = [:]  // each document's first write time
    /// The time of the write about to be made to `id`, and when `id` was created.
    func times(_ id: String) -> (created: String, updated: String) {
      let now = Time.now()
      if created[id] == nil { created[id] = now }
      return (created[id]!, now)
    }
    func wiki(members: [String]) -> [UInt8] {
      let (createdAt, updatedAt) = times(wikiID)
      return json([
        "type": .string("wiki"), "title": .string("Demo Wiki"), "owner_id": .string("alice"),
        "members": .array(members.map { .string($0) }),
        "markdown": .string("A wiki to try wikilog. Start at [[Home]]."),
        "created_at": .string(createdAt), "updated_at": .string(updatedAt),
      ])
    }
    func put(_ title: String, _ markdown: String, by user: String, rev: String? = nil)
      throws -> String
    {
      let id = "\(wikiID):\(title)"
      let (createdAt, updatedAt) = times(id)
      return try store.put(
        json(page(markdown, by: user, created: createdAt, updated: updatedAt)), id: id,
        rev: rev, actor: user
      ).rev!
    }

    var revisions = 0
    let wiki1 = try store.put(wiki(members: ["bob"]), id: wikiID, actor: "alice")
    _ = try store.put(wiki(members: ["bob", "carol"]), id: wikiID, rev: wiki1.rev, actor: "alice")
    revisions += 2

    let home1 = try put(
      "Home", "# Home\nWelcome! Read [[Getting Started]], then add to [[Ideas]].\n", by: "alice")
    _ = try put(
      "Home",
      "# Home\nWelcome! Read [[Getting Started]], then add to [[Ideas]].\n\nHow copies stay in step: [[Replication]].\n",
      by: "carol", rev: home1)
    let start1 = try put(
      "Getting Started", "# Getting Started\n1. Run `make serve`.\n2. Open [[Home]].\n", by: "bob")
    _ = try put(
      "Getting Started",
      "# Getting Started\n1. Run `make serve`.\n2. Open [[Home]].\n3. Follow `_changes?feed=continuous`.\n",
      by: "alice", rev: start1)
    let ideas1 = try put("Ideas", "# Ideas\n- an event log\n", by: "alice")
    let ideas2 = try put(
      "Ideas", "# Ideas\n- an event log\n- replication\n", by: "bob", rev: ideas1)
    _ = try put(
      "Replication",
      "# Replication\nwikilog speaks CouchDB's replication protocol. Back to [[Home]].\n",
      by: "carol")
    let scratch = try put("Scratch", "# Scratch\nto be deleted\n", by: "bob")
    _ = try store.delete("\(wikiID):Scratch", rev: scratch, actor: "alice")
    revisions += 10

    // One conflict: bob's laptop and carol's phone both edited Ideas offline; their revisions
    // arrive as replicated branches of the same parent.
    let parent = try RevID(ideas2)
    for (user, origin, line) in [
      ("bob", "demo:bob-laptop", "- drafts that autosave\n"),
      ("carol", "demo:carol-phone", "- offline editing on the phone\n"),
    ] {
      let (createdAt, updatedAt) = times("\(wikiID):Ideas")
      let markdown = "# Ideas\n- an event log\n- replication\n" + line
      let body = JSONValue.object(
        JSONObject(page(markdown, by: user, created: createdAt, updated: updatedAt)))
      let rev = RevisionDigest.revision(parent: parent, deleted: false, body: body)
      var members = body.objectValue!.members
      members.insert(
        contentsOf: [
          .init(key: "_id", value: .string("\(wikiID):Ideas")),
          .init(key: "_rev", value: .string(rev.description)),
          .init(
            key: "_revisions",
            value: .object(
              JSONObject([
                "start": .number(JSONNumber(Int64(rev.generation))),
                "ids": .array([.string(rev.hash.description), .string(parent.hash.description)]),
              ]))),
        ], at: 0)
      let failures = try store.bulkDocs(
        [.object(JSONObject(members))], newEdits: false, actor: user, origin: origin)
      if let error = failures.first?.error { throw error }
      revisions += 1
    }
    let info = try store.info
    return
      "\(info.docCount) documents (+\(info.deletedDocCount) deleted), \(revisions) revisions, 1 conflict on \(wikiID):Ideas"
  }
}

extension DemoWiki {
  /// Two more wikis, so that each demo user is a member of some and not of others: garden
  /// (bob's; alice a member) and travel (carol's alone).
  static func seedMoreWikis(_ store: DocumentStore) throws {
    for (id, title, owner, members, pages) in [
      ("garden", "Garden", "bob", ["alice"], [("Home", "# Garden\nTomatoes, then [[Beans]].\n")]),
      ("travel", "Travel", "carol", [String](), [("Home", "# Travel\nPlaces to go.\n")]),
    ] {
      let now = Time.now()
      _ = try store.put(
        json([
          "type": .string("wiki"), "title": .string(title), "owner_id": .string(owner),
          "members": .array(members.map { .string($0) }),
          "created_at": .string(now), "updated_at": .string(now),
        ]), id: id, actor: owner)
      for (page, markdown) in pages {
        let at = Time.now()
        _ = try store.put(
          json([
            "type": .string("page"), "wiki_id": .string(id), "markdown": .string(markdown),
            "created_at": .string(at), "updated_at": .string(at), "updated_by": .string(owner),
          ]), id: "\(id):\(page)", actor: owner)
      }
    }
  }
}

/// The demo's sign-ins: the administrator `admin` and the users alice, bob and carol, with
/// random passwords kept in `DIR/demo-sign-ins.txt` (mode 0600), so that `make serve` can
/// print them every time.
enum DemoUsers {
  static let names = ["admin", "alice", "bob", "carol"]

  /// Makes the users that are missing; returns the lines to print.
  static func ensure(directory: String) throws -> String {
    let file = directory + "/demo-sign-ins.txt"
    var known: [String: String] = [:]
    if let text = try? String(contentsOfFile: file, encoding: .utf8) {
      for line in text.split(separator: "\n") {
        let parts = line.split(separator: " ", maxSplits: 1).map(String.init)
        if parts.count == 2 { known[parts[0]] = parts[1] }
      }
    }
    let data = DataDirectory(path: directory, systemDatabases: [.users])
    defer { data.closeAll() }
    let users = try UserStore(data: data)
    for name in names where try users.user(named: name) == nil || known[name] == nil {
      let password = Hex.encode((0..<6).map { _ in UInt8.random(in: 0...255) })
      if try users.user(named: name) == nil {
        _ = try users.add(
          name: name, password: password, roles: name == "admin" ? [UserContext.adminRole] : [],
          actor: "demo")
      } else {
        try users.setPassword(of: name, to: password, actor: "demo")
      }
      known[name] = password
    }
    let text = names.map { "\($0) \(known[$0]!)" }.joined(separator: "\n") + "\n"
    FileManager.default.createFile(
      atPath: file, contents: Data(text.utf8), attributes: [.posixPermissions: 0o600])
    return "wikilog: demo sign-ins (name password; admin is an administrator):\n"
      + names.map { "  \($0) \(known[$0]!)" }.joined(separator: "\n")
  }
}
