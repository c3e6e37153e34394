import ArgumentParser
import Formats
import Foundation
import JSON
import Log
import Projections
import Query
import RevTree
import Wiki

struct Wiki: ParsableCommand {
  static let configuration = CommandConfiguration(
    abstract: "Wikis and their pages (TouchWiki documents).",
    discussion: """
      A wiki is a document {"type":"wiki","title","owner_id","members",...}; a page is a \
      document "<wiki id>:<Page Name>" {"type":"page","wiki_id","markdown","created_at", \
      "updated_at","updated_by"}. Every write of these types is checked (as CouchDB's \
      validate_doc_update would): a wiki needs a title, a non-empty owner_id and a members \
      array of user ids, and its id no ':'; a page needs markdown and a wiki_id equal to the \
      part of its id before ':', and a local edit needs that wiki to exist; created_at and \
      updated_at, when present, are ISO-8601 times. A refusal is a one-line forbidden error \
      and writes nothing. Documents of other types are free.

      Examples:
        wikilog wiki create "Recipes" --id recipes --owner ann --member bob
        echo '# Soup' | wikilog wiki edit recipes Soup --actor bob
        wikilog wiki pages recipes
        wikilog wiki show recipes Soup
        wikilog wiki backlinks recipes Soup
        wikilog wiki conflicts recipes Soup
        echo '# Soup, better' | wikilog wiki draft save recipes Soup --actor ann
        wikilog wiki draft publish recipes Soup --actor ann
      """,
    subcommands: [
      WikiCreate.self, WikiList.self, WikiPages.self, WikiShow.self, WikiEdit.self,
      WikiBacklinks.self, WikiConflicts.self, WikiDraft.self, WikiAccessHistory.self,
    ])

  static func queries(_ store: DocumentStore) throws -> WikiQueries {
    try WikiQueries(store)
  }

  /// The wiki `id`, or a one-line error.
  static func requireWiki(_ id: String, _ store: DocumentStore, global: GlobalOptions) throws
    -> WikiSummary
  {
    guard let wiki = try WikiQueries(store).wiki(id) else {
      throw CLIError(
        "no wiki '\(id)' in database '\(global.database)'; create it with: \(global.suggest("wiki create TITLE --id \(Shell.quote(id))"))"
      )
    }
    return wiki
  }

  /// A page's winning document, nil when it does not exist (or is deleted).
  static func page(_ id: String, _ store: DocumentStore) throws -> JSONObject? {
    do {
      return try store.get(id).objectValue
    } catch let error as StoreError where error.code == .notFound {
      return nil
    }
  }
}

struct WikiCreate: ParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "create", abstract: "Create a wiki.",
    discussion: """
      The owner defaults to the actor. Prints {"ok":true,"id":...,"rev":...}.

      Example:
        wikilog wiki create Recipes --id recipes --owner ann --member bob --member al
      """)

  @OptionGroup var global: GlobalOptions
  @OptionGroup var actor: ActorOptions
  @Argument(help: "The wiki's title.") var title: String
  @Option(help: "The wiki's id (default: a new UUID); no colon.") var id: String?
  @Option(help: "The owner (default: the actor).") var owner: String?
  @Option(help: "A member who may edit (repeatable).") var member: [String] = []

  func validate() throws {
    if let id, id.contains(":") || id.isEmpty {
      throw ValidationError("a wiki id may not be empty or contain ':' (page ids use it)")
    }
  }

  func run() throws {
    let db = try global.openStore()
    defer { db.close() }
    let wikiID = id ?? UUID().uuidString.lowercased()
    if (try? db.store.get(wikiID)) != nil {
      throw CLIError("a document '\(wikiID)' already exists in database '\(global.database)'")
    }
    let now = Time.now()
    let doc = J.object([
      "_id": .string(wikiID), "type": .string("wiki"), "title": .string(title),
      "owner_id": .string(owner ?? actor.name), "members": J.strings(member),
      "created_at": .string(now), "updated_at": .string(now),
    ])
    printJSON(try db.store.put(doc.serialized(), actor: actor.name).json)
  }
}

struct WikiList: ParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "list", abstract: "List the wikis.",
    discussion: "Examples:\n  wikilog wiki list\n  wikilog wiki list --json")

  @OptionGroup var global: GlobalOptions
  @OptionGroup var output: JSONFlag

  func run() throws {
    let db = try global.openStore(readOnly: true)
    defer { db.close() }
    let wikis = try WikiQueries(db.store).wikis()
    if output.json {
      printJSON(.array(wikis.map(Self.json)))
    } else {
      printText(Self.table(wikis).text)
    }
  }

  /// A wiki as `wiki list --json` prints it.
  static func json(_ w: WikiSummary) -> JSONValue {
    J.object([
      "id": .string(w.id), "rev": .string(w.rev), "title": .string(w.title),
      "owner_id": w.owner.map { .string($0) } ?? .null, "members": J.strings(w.members),
      "pages": J.int(w.pageCount), "last_seq": J.int(w.lastUpdate.rawValue),
      "updated": .string(ISO8601.format(microseconds: w.lastUpdateMicroseconds)),
    ])
  }

  /// The wikis as `wiki list` prints them.
  static func table(_ wikis: [WikiSummary]) -> TextTable {
    var table = TextTable(header: ["ID", "TITLE", "OWNER", "MEMBERS", "PAGES", "UPDATED"])
    for w in wikis {
      table.add([
        w.id, w.title, w.owner ?? "-", w.members.isEmpty ? "-" : w.members.joined(separator: ","),
        String(w.pageCount), ISO8601.format(microseconds: w.lastUpdateMicroseconds),
      ])
    }
    return table
  }
}

struct WikiAccessHistory: ParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "access",
    abstract: "Who could read and edit a wiki when: every change of its owner and members.",
    discussion: """
      One line per change, oldest first: the seq and time from which it held, the owners \
      (who may also change the members and delete the wiki) and everyone who could read and \
      edit it. While conflicting revisions of the wiki document disagree, only what every \
      one grants counts. --json prints [{"seq","time","owners","members"}].

      Examples:
        wikilog wiki access demo
        wikilog wiki access demo --json
      """)

  @OptionGroup var global: GlobalOptions
  @OptionGroup var output: JSONFlag
  @Argument(help: "The wiki's id.") var wiki: String

  func run() throws {
    let db = try global.openStore(readOnly: true)
    defer { db.close() }
    let history = try WikiAccess().history(of: wiki, in: db.store)
    guard !history.isEmpty else {
      throw CLIError("no wiki '\(wiki)' in database '\(global.database)'")
    }
    if output.json {
      printJSON(
        .array(
          history.map { e in
            J.object([
              "seq": J.int(e.position.rawValue),
              "time": .string(ISO8601.format(microseconds: e.timestampMicroseconds)),
              "owners": J.strings(e.owners), "members": J.strings(e.members),
            ])
          }))
    } else {
      var table = TextTable(header: ["SEQ", "FROM", "OWNERS", "READ AND EDIT"])
      for e in history {
        table.add([
          String(e.position.rawValue), ISO8601.format(microseconds: e.timestampMicroseconds),
          e.owners.isEmpty ? "-" : e.owners.joined(separator: ","),
          e.members.isEmpty ? "(administrators only)" : e.members.joined(separator: ","),
        ])
      }
      printText(table.text)
    }
  }
}

struct WikiPages: ParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "pages", abstract: "List a wiki's pages.",
    discussion: "Example:\n  wikilog wiki pages recipes")

  @OptionGroup var global: GlobalOptions
  @OptionGroup var output: JSONFlag
  @Argument(help: "The wiki's id.") var wiki: String

  func run() throws {
    let db = try global.openStore(readOnly: true)
    defer { db.close() }
    let queries = try WikiQueries(db.store)
    let pages = try queries.pages(in: wiki)
    if pages.isEmpty, try queries.wiki(wiki) == nil {
      _ = try Wiki.requireWiki(wiki, db.store, global: global)
    }
    Self.print(pages, json: output.json)
  }

  /// Prints pages as a table, or as a JSON array of {"id","title","rev","updated_by",
  /// "updated_at","length"}.
  static func print(_ pages: [WikiPageInfo], json: Bool) {
    if json {
      printJSON(
        .array(
          pages.map { p in
            J.object([
              "id": .string(p.id), "title": .string(p.title), "rev": .string(p.rev),
              "updated_by": p.updatedBy.map { .string($0) } ?? .null,
              "updated_at": p.updatedAt.map { .string($0) } ?? .null, "length": J.int(p.length),
            ])
          }))
      return
    }
    var table = TextTable(header: ["TITLE", "REV", "UPDATED BY", "UPDATED AT", "BYTES"])
    for p in pages {
      table.add([p.title, p.rev, p.updatedBy ?? "-", p.updatedAt ?? "-", String(p.length)])
    }
    printText(table.text)
  }
}

struct WikiShow: ParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "show", abstract: "Print a page's Markdown.",
    discussion: """
      Examples:
        wikilog wiki show recipes Soup
        wikilog wiki show recipes Soup --rev 2-9a1f...
      """)

  @OptionGroup var global: GlobalOptions
  @Argument(help: "The wiki's id.") var wiki: String
  @Argument(help: "The page's title.") var page: String
  @Option(help: "This revision instead of the current one.") var rev: String?

  func run() throws {
    let db = try global.openStore(readOnly: true)
    defer { db.close() }
    let id = "\(wiki):\(page)"
    let doc: JSONValue
    do {
      doc = try db.store.get(id, options: GetOptions(rev: rev))
    } catch let error as StoreError where error.code == .notFound {
      throw CLIError(
        rev == nil
          ? "no page '\(page)' in wiki '\(wiki)'" : "page '\(page)' has no revision \(rev!)")
    }
    printText(doc["markdown"]?.stringValue ?? "")
  }
}

struct WikiEdit: ParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "edit", abstract: "Create or update a page from Markdown.",
    discussion: """
      The Markdown is read from standard input (valid UTF-8), or, when that is a \
      terminal, edited in $VISUAL or $EDITOR (vi by default) starting from the current text. Sets wiki_id, markdown, \
      updated_at and updated_by (the actor), and created_at for a new page; other fields are \
      kept. Writes nothing when the text is unchanged or the editor fails. --rev names the \
      revision the edit is made on (see `wikilog wiki pages`): the edit is then refused, \
      with the current revision, when the page has changed since; without it the edit is made \
      on the current revision.

      Examples:
        printf '# Soup\\nSee [[Stock]]\\n' | wikilog wiki edit recipes Soup --actor bob
        echo '# Soup, hotter' | wikilog wiki edit recipes Soup --rev 1-ad1c...
        wikilog wiki edit recipes Soup          # opens $EDITOR
        EDITOR=nano wikilog wiki edit recipes Soup --editor < /dev/null
      """)

  @OptionGroup var global: GlobalOptions
  @OptionGroup var actor: ActorOptions
  @Argument(help: "The wiki's id.") var wiki: String
  @Argument(help: "The page's title.") var page: String
  @Option(
    help:
      "The revision the edit is made on (default: the current one); refused if the page has changed since."
  )
  var rev: String?
  @Flag(help: "Edit in $VISUAL or $EDITOR even when standard input is not a terminal.")
  var editor = false

  func run() throws {
    let db = try global.openStore()
    defer { db.close() }
    _ = try Wiki.requireWiki(wiki, db.store, global: global)
    let id = "\(wiki):\(page)"
    let showAndRetry = { (current: String) in
      "to edit the current text, see it with \(global.suggest("wiki show \(Shell.quote(wiki)) \(Shell.quote(page))")) and pass --rev \(current)"
    }
    let current: JSONObject?
    if let rev {
      // The revision named, which must exist; the store checks that it is still a leaf.
      do {
        current = try db.store.get(id, options: GetOptions(rev: rev)).objectValue
      } catch let error as StoreError where error.code == .notFound {
        throw Conflicts.error(
          docID: id, given: rev, store: db.store, fix: showAndRetry,
          fixDeleted: { _ in "to write it again, leave out --rev" })
      }
    } else {
      current = try Wiki.page(id, db.store)
    }
    let old = current?["markdown"]?.stringValue ?? ""
    let markdown: String
    if editor || Input.stdinIsTerminal {
      markdown = try Self.edit(old, name: page)
    } else {
      markdown = try Input.markdown()
    }
    if current != nil && markdown == old {
      printError("wikilog: \(id) is unchanged; nothing written")
      return
    }
    let now = Time.now()
    var members = (current?.members ?? []).filter {
      !["_id", "type", "wiki_id", "markdown", "updated_at", "updated_by"].contains($0.key)
    }
    if current?["created_at"] == nil {
      members.append(.init(key: "created_at", value: .string(now)))
    }
    members.append(contentsOf: [
      .init(key: "type", value: .string("page")), .init(key: "wiki_id", value: .string(wiki)),
      .init(key: "markdown", value: .string(markdown)),
      .init(key: "updated_at", value: .string(now)),
      .init(key: "updated_by", value: .string(actor.name)),
    ])
    let base = current?["_rev"]?.stringValue
    do {
      let result = try db.store.put(
        JSONValue.object(JSONObject(members)).serialized(), id: id, rev: base, actor: actor.name)
      printJSON(result.json)
    } catch let error as StoreError where error.code == .conflict {
      // --rev is no longer a leaf, or the page changed while it was being edited.
      throw Conflicts.error(
        docID: id, given: base, store: db.store, fix: showAndRetry,
        fixDeleted: { _ in "to write it again, leave out --rev" })
    }
  }

  /// Runs the user's editor on `text` in a temporary file and returns what it saved.
  static func edit(_ text: String, name: String) throws -> String {
    let env = ProcessInfo.processInfo.environment
    let editor = [env["VISUAL"], env["EDITOR"]].compactMap { $0 }.first { !$0.isEmpty } ?? "vi"
    let safe = name.map { $0.isLetter || $0.isNumber ? $0 : "-" }
    let path = NSTemporaryDirectory() + "wikilog-\(getpid())-\(String(safe)).md"
    try Data(text.utf8).write(to: URL(fileURLWithPath: path))
    defer { try? FileManager.default.removeItem(atPath: path) }
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/bin/sh")
    process.arguments = ["-c", "\(editor) \"$1\"", "sh", path]
    try process.run()
    process.waitUntilExit()
    guard process.terminationStatus == 0 else {
      throw CLIError(
        "the editor (\(editor)) failed with status \(process.terminationStatus); nothing written")
    }
    return String(decoding: try Data(contentsOf: URL(fileURLWithPath: path)), as: UTF8.self)
  }
}

struct WikiBacklinks: ParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "backlinks", abstract: "The pages that link to a page ([[Page Name]]).",
    discussion: "Example:\n  wikilog wiki backlinks recipes Stock")

  @OptionGroup var global: GlobalOptions
  @OptionGroup var output: JSONFlag
  @Argument(help: "The wiki's id.") var wiki: String
  @Argument(help: "The page's title (it need not exist).") var page: String

  func run() throws {
    let db = try global.openStore(readOnly: true)
    defer { db.close() }
    let queries = try WikiQueries(db.store)
    let titles = try queries.backlinks(to: page, in: wiki)
    if titles.isEmpty, try queries.wiki(wiki) == nil, try queries.pages(in: wiki).isEmpty {
      _ = try Wiki.requireWiki(wiki, db.store, global: global)
    }
    if output.json {
      printJSON(J.strings(titles))
    } else if !titles.isEmpty {
      printText(titles.joined(separator: "\n"))
    }
  }
}

struct WikiConflicts: ParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "conflicts", abstract: "A page's conflicting revisions and how they would merge.",
    discussion: """
      Without PAGE: the wiki's pages that have conflicting revisions (replication keeps every \
      conflict that arrives), one a line, or with --json \
      [{"id","winner","conflicts":[rev...]}].

      For each live leaf that lost to the winner, a three-way merge of its Markdown with the \
      winner's against their nearest common ancestor that has a body: the merged text when it is \
      clean, the text with diff3 conflict markers otherwise. Nothing is written. --json prints \
      {"id","winner","conflicts":[{"rev","base","clean","regions","merged"}]}.

      Example:
        wikilog wiki conflicts recipes Soup
        wikilog wiki conflicts recipes
      """)

  @OptionGroup var global: GlobalOptions
  @OptionGroup var output: JSONFlag
  @Argument(help: "The wiki's id.") var wiki: String
  @Argument(help: "The page's title (without it: every page of the wiki in conflict).")
  var page: String?

  func run() throws {
    let db = try global.openStore(readOnly: true)
    defer { db.close() }
    let store = db.store
    guard let page else {
      var rows: [JSONValue] = []
      var text = ""
      for info in try WikiQueries(store).pages(in: wiki) {
        guard let record = try store.record(info.id), !record.tree.conflicts.isEmpty else {
          continue
        }
        let revs = record.tree.conflicts.map(\.description)
        rows.append(
          J.object([
            "id": .string(info.id), "winner": .string(info.rev), "conflicts": J.strings(revs),
          ]))
        text += "\(info.id)  winner \(info.rev)  conflicting: \(revs.joined(separator: " "))\n"
      }
      if output.json {
        printJSON(.array(rows))
      } else {
        printText(rows.isEmpty ? "no page of wiki '\(wiki)' has conflicts" : text)
      }
      return
    }
    let id = "\(wiki):\(page)"
    guard let record = try store.record(id), let winner = record.tree.winner else {
      throw CLIError("no page '\(page)' in wiki '\(wiki)'")
    }
    func markdown(_ rev: RevID) throws -> String {
      try store.get(id, options: GetOptions(rev: rev.description))["markdown"]?.stringValue ?? ""
    }
    let ours = try markdown(winner.rev)
    var results: [JSONValue] = []
    var text = "page \(id): winner \(winner.rev)"
    let conflicts = record.tree.conflicts
    text += conflicts.isEmpty ? ", no conflicts\n" : ", \(conflicts.count) conflicting\n"
    for rev in conflicts {
      let base = record.tree.nearestCommonAncestor(of: winner.rev, and: rev, withBody: true)
      let baseText = try base.map { try markdown($0.rev) } ?? ""
      let theirs = try markdown(rev)
      let merged: String
      let regions: Int
      switch ThreeWayMerge.merge(base: baseText, ours: ours, theirs: theirs) {
      case .merged(let result):
        merged = result
        regions = 0
      case .conflict(let conflict):
        merged = conflict.markedText(
          oursLabel: winner.rev.description, baseLabel: base?.rev.description ?? "(no base)",
          theirsLabel: rev.description)
        regions = conflict.regions.count
      }
      results.append(
        J.object([
          "rev": .string(rev.description),
          "base": base.map { .string($0.rev.description) } ?? .null, "clean": .bool(regions == 0),
          "regions": J.int(regions), "merged": .string(merged),
        ]))
      text += "\n=== \(rev) with the winner, base \(base?.rev.description ?? "none"): "
      text += regions == 0 ? "merges cleanly ===\n" : "\(regions) conflicting region(s) ===\n"
      text += merged
      if !merged.isEmpty && !merged.hasSuffix("\n") { text += "\n" }
    }
    if output.json {
      printJSON(
        J.object([
          "id": .string(id), "winner": .string(winner.rev.description),
          "conflicts": .array(results),
        ]))
    } else {
      printText(text)
    }
  }
}
