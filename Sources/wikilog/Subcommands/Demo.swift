import ArgumentParser
import Foundation
import JSON
import Projections
import RevTree
import Wiki

struct Demo: ParsableCommand {
  static let configuration = CommandConfiguration(
    abstract: "Seed a demo wiki into a database of the data directory, if that database is empty.",
    discussion: """
      Writes a TouchWiki wiki document, linked pages with some history by alice, bob and carol, a
      deleted page, and one conflict (two branches of a page written as replicated revisions).
      Does nothing when the database already has documents, so it is safe to run again.

      Example:
        wikilog demo --db /tmp/demo && wikilog serve --db /tmp/demo
        wikilog demo -d sandbox
      """)

  @OptionGroup var global: GlobalOptions

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
        return
      }
      let summary = try DemoWiki.seed(store)
      print("wikilog: seeded database '\(database)' in \(directory): \(summary)")
    } catch let error as StoreError {
      throw CLIError("\(error)")
    }
  }
}

/// The demo content: a small TouchWiki wiki written through the document store.
enum DemoWiki {
  static let wikiID = "demo"

  static func timestamp(_ minutesAgo: Int) -> String {
    let date = Date().addingTimeInterval(Double(-minutesAgo * 60))
    return ISO8601DateFormatter().string(from: date)
  }

  static func json(_ members: KeyValuePairs<String, JSONValue>) -> [UInt8] {
    JSONValue.object(JSONObject(members)).serialized()
  }

  static func page(_ title: String, _ markdown: String, by user: String, minutesAgo: Int)
    -> KeyValuePairs<String, JSONValue>
  {
    [
      "type": .string("page"), "wiki_id": .string(wikiID), "markdown": .string(markdown),
      "created_at": .string(timestamp(minutesAgo)), "updated_at": .string(timestamp(minutesAgo)),
      "updated_by": .string(user),
    ]
  }

  /// Writes everything; returns a one-line summary.
  static func seed(_ store: DocumentStore) throws -> String {
    func wiki(members: [String], minutesAgo: Int) -> [UInt8] {
      json([
        "type": .string("wiki"), "title": .string("Demo Wiki"), "owner_id": .string("alice"),
        "members": .array(members.map { .string($0) }),
        "markdown": .string("A wiki to try wikilog. Start at [[Home]]."),
        "created_at": .string(timestamp(120)), "updated_at": .string(timestamp(minutesAgo)),
      ])
    }
    func put(
      _ title: String, _ markdown: String, by user: String, rev: String? = nil, minutesAgo: Int
    )
      throws -> String
    {
      try store.put(
        json(page(title, markdown, by: user, minutesAgo: minutesAgo)), id: "\(wikiID):\(title)",
        rev: rev, actor: user
      ).rev!
    }

    var revisions = 0
    let wiki1 = try store.put(wiki(members: ["bob"], minutesAgo: 120), id: wikiID, actor: "alice")
    _ = try store.put(
      wiki(members: ["bob", "carol"], minutesAgo: 60), id: wikiID, rev: wiki1.rev, actor: "alice")
    revisions += 2

    let home1 = try put(
      "Home", "# Home\nWelcome! Read [[Getting Started]], then add to [[Ideas]].\n", by: "alice",
      minutesAgo: 110)
    _ = try put(
      "Home",
      "# Home\nWelcome! Read [[Getting Started]], then add to [[Ideas]].\n\nHow copies stay in step: [[Replication]].\n",
      by: "carol", rev: home1, minutesAgo: 40)
    let start1 = try put(
      "Getting Started", "# Getting Started\n1. Run `make serve`.\n2. Open [[Home]].\n", by: "bob",
      minutesAgo: 100)
    _ = try put(
      "Getting Started",
      "# Getting Started\n1. Run `make serve`.\n2. Open [[Home]].\n3. Follow `_changes?feed=continuous`.\n",
      by: "alice", rev: start1, minutesAgo: 50)
    let ideas1 = try put("Ideas", "# Ideas\n- an event log\n", by: "alice", minutesAgo: 90)
    let ideas2 = try put(
      "Ideas", "# Ideas\n- an event log\n- replication\n", by: "bob", rev: ideas1, minutesAgo: 80)
    _ = try put(
      "Replication",
      "# Replication\nwikilog speaks CouchDB's replication protocol. Back to [[Home]].\n",
      by: "carol", minutesAgo: 70)
    let scratch = try put("Scratch", "# Scratch\nto be deleted\n", by: "bob", minutesAgo: 65)
    _ = try store.delete("\(wikiID):Scratch", rev: scratch, actor: "alice")
    revisions += 10

    // One conflict: bob's laptop and carol's phone both edited Ideas offline; their revisions
    // arrive as replicated branches of the same parent.
    let parent = try RevID(ideas2)
    for (user, origin, line) in [
      ("bob", "demo:bob-laptop", "- drafts that autosave\n"),
      ("carol", "demo:carol-phone", "- offline editing on the phone\n"),
    ] {
      let body = JSONValue.object(
        JSONObject(
          page("Ideas", "# Ideas\n- an event log\n- replication\n" + line, by: user, minutesAgo: 30)
        ))
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
