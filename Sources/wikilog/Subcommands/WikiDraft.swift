import ArgumentParser
import Formats
import Foundation
import JSON
import Log
import Projections
import Query
import RevTree
import Wiki

struct WikiDraft: ParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "draft",
    abstract: "Unpublished edits of pages: save, list, show, discard, publish.",
    discussion: """
      A draft belongs to the user who saves it (the actor), one per user and page. Drafts are \
      events in the log, but not documents: they are not in the changes feed, not replicated and \
      not in page history until they are published. Publishing writes one page revision: on the \
      draft's base revision when the page has not changed since, else a three-way merge of the \
      draft with the current text against the base; overlapping edits are a conflict that \
      writes nothing and keeps the draft.

      Examples:
        echo '# Soup (draft)' | wikilog wiki draft save recipes Soup --actor ann
        wikilog wiki draft list --actor ann
        wikilog wiki draft show recipes Soup --actor ann
        wikilog wiki draft publish recipes Soup --actor ann
        wikilog wiki draft discard recipes Soup --actor ann
      """,
    subcommands: [
      WikiDraftSave.self, WikiDraftList.self, WikiDraftShow.self, WikiDraftDiscard.self,
      WikiDraftPublish.self,
    ])

  /// The drafts of an open database.
  static func drafts(_ db: OpenStore) throws -> Drafts {
    do {
      return try Drafts(db.store)
    } catch let error as StoreError {
      throw CLIError("this database keeps no drafts: \(error.reason)")
    }
  }

  /// A draft as JSON: `{"id","wiki_id","title","user","base_rev","markdown","autosaved",
  /// "created","updated","seq"}`.
  static func json(_ d: Draft, markdown: Bool = true) -> JSONValue {
    J.object([
      "id": .string(d.pageID), "wiki_id": .string(d.wikiID), "title": .string(d.title),
      "user": .string(d.user), "base_rev": d.baseRev.map { .string($0) } ?? .null,
      "markdown": markdown ? .string(d.markdown) : nil, "length": J.int(d.markdown.utf8.count),
      "autosaved": .bool(d.autosaved),
      "created": .string(ISO8601.format(microseconds: d.createdMicroseconds)),
      "updated": .string(ISO8601.format(microseconds: d.updatedMicroseconds)),
      "seq": J.int(d.seq.rawValue),
    ])
  }

  /// The error for a missing draft.
  static func noDraft(wiki: String, page: String, user: String, global: GlobalOptions)
    -> CLIError
  {
    let save =
      "wiki draft save \(Shell.quote(wiki)) \(Shell.quote(page)) --actor \(Shell.quote(user))"
    return CLIError(
      "no draft of '\(page)' in wiki '\(wiki)' by '\(user)'; save one with: \(global.suggest(save))"
    )
  }
}

struct WikiDraftSave: ParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "save", abstract: "Save (or autosave) a draft of a page.",
    discussion: """
      The Markdown is read from standard input (valid UTF-8), or, when that is a \
      terminal, edited in $VISUAL or $EDITOR starting from the open draft's text, else the page's. A new draft starts from \
      the page's current winning revision (none for a new page); saving an open draft again \
      keeps the revision it started from, so that publishing merges what others changed \
      since. Nothing is written when the draft's text is unchanged. Prints \
      {"ok":true,"id","base_rev","seq"}.

      Examples:
        echo '# Soup' | wikilog wiki draft save recipes Soup --actor ann
        wikilog wiki draft save recipes Soup --actor ann     # opens $EDITOR
        wikilog wiki draft save recipes Soup --autosave < soup.md
      """)

  @OptionGroup var global: GlobalOptions
  @OptionGroup var actor: ActorOptions
  @Argument(help: "The wiki's id.") var wiki: String
  @Argument(help: "The page's title.") var page: String
  @Flag(help: "Record the save as an autosave.") var autosave = false
  @Flag(help: "Edit in $VISUAL or $EDITOR even when standard input is not a terminal.")
  var editor = false

  func run() throws {
    let db = try global.openStore()
    defer { db.close() }
    _ = try Wiki.requireWiki(wiki, db.store, global: global)
    let drafts = try WikiDraft.drafts(db)
    let id = "\(wiki):\(page)"
    let user = actor.name
    let open = try drafts.draft(of: user, page: id)
    let current = open == nil ? try Wiki.page(id, db.store) : nil
    let markdown: String
    if editor || Input.stdinIsTerminal {
      let start = open?.markdown ?? current?["markdown"]?.stringValue ?? ""
      markdown = try WikiEdit.edit(start, name: page)
    } else {
      markdown = try Input.markdown()
    }
    if let open, open.markdown == markdown {
      printError("wikilog: the draft of \(id) is unchanged; nothing written")
      printJSON(Self.result(open))
      return
    }
    let baseRev = open != nil ? open!.baseRev : current?["_rev"]?.stringValue
    let saved = try drafts.save(
      user: user, page: id, baseRev: baseRev, markdown: markdown, autosave: autosave)
    printJSON(Self.result(saved))
  }

  static func result(_ d: Draft) -> JSONValue {
    J.object([
      "ok": .bool(true), "id": .string(d.pageID),
      "base_rev": d.baseRev.map { .string($0) } ?? .null, "seq": J.int(d.seq.rawValue),
    ])
  }
}

struct WikiDraftList: ParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "list", abstract: "List the actor's open drafts.",
    discussion: """
      --json prints an array of {"id","wiki_id","title","user","base_rev","markdown","length", \
      "autosaved","created","updated","seq"}.

      Examples:
        wikilog wiki draft list --actor ann
        wikilog wiki draft list --wiki recipes --json | jq -r '.[].title'
      """)

  @OptionGroup var global: GlobalOptions
  @OptionGroup var actor: ActorOptions
  @OptionGroup var output: JSONFlag
  @Option(help: "Only drafts of this wiki's pages.") var wiki: String?

  func run() throws {
    let db = try global.openStore(readOnly: true)
    defer { db.close() }
    let all = try WikiDraft.drafts(db).drafts(of: actor.name)
    let list = wiki.map { w in all.filter { $0.wikiID == w } } ?? all
    if output.json {
      printJSON(.array(list.map { WikiDraft.json($0) }))
      return
    }
    guard !list.isEmpty else { return }
    var table = TextTable(header: ["WIKI", "PAGE", "BASE", "UPDATED", "SAVED", "BYTES"])
    for d in list {
      table.add([
        d.wikiID, d.title, d.baseRev ?? "(new page)",
        ISO8601.format(microseconds: d.updatedMicroseconds), d.autosaved ? "autosave" : "save",
        String(d.markdown.utf8.count),
      ])
    }
    printText(table.text)
  }
}

struct WikiDraftShow: ParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "show", abstract: "Print the Markdown of the actor's draft of a page.",
    discussion: """
      --json prints the draft as in `wikilog wiki draft list --json`.

      Examples:
        wikilog wiki draft show recipes Soup --actor ann
        wikilog wiki draft show recipes Soup --actor ann --json | jq .base_rev
      """)

  @OptionGroup var global: GlobalOptions
  @OptionGroup var actor: ActorOptions
  @OptionGroup var output: JSONFlag
  @Argument(help: "The wiki's id.") var wiki: String
  @Argument(help: "The page's title.") var page: String

  func run() throws {
    let db = try global.openStore(readOnly: true)
    defer { db.close() }
    guard let d = try WikiDraft.drafts(db).draft(of: actor.name, page: "\(wiki):\(page)") else {
      throw WikiDraft.noDraft(wiki: wiki, page: page, user: actor.name, global: global)
    }
    if output.json {
      printJSON(WikiDraft.json(d))
    } else {
      var out = OutputBuffer()
      out.append(d.markdown)
      out.flush()
    }
  }
}

struct WikiDraftDiscard: ParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "discard", abstract: "Throw the actor's draft of a page away.",
    discussion: """
      The draft's events stay in the log (the audit trail shows them). Prints {"ok":true,"id"}.

      Example:
        wikilog wiki draft discard recipes Soup --actor ann
      """)

  @OptionGroup var global: GlobalOptions
  @OptionGroup var actor: ActorOptions
  @Argument(help: "The wiki's id.") var wiki: String
  @Argument(help: "The page's title.") var page: String

  func run() throws {
    let db = try global.openStore()
    defer { db.close() }
    let id = "\(wiki):\(page)"
    do {
      try WikiDraft.drafts(db).discard(user: actor.name, page: id)
    } catch let error as StoreError where error.code == .notFound {
      throw WikiDraft.noDraft(wiki: wiki, page: page, user: actor.name, global: global)
    }
    printJSON(J.object(["ok": .bool(true), "id": .string(id)]))
  }
}

struct WikiDraftPublish: ParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "publish", abstract: "Publish the actor's draft of a page as a page revision.",
    discussion: """
      Writes the draft on its base revision when that is still current, else merges it three \
      ways with the page's winning revision (against the base). Prints \
      {"ok":true,"id","rev","parent_rev","merged"} and closes the draft.

      When the draft's edits overlap changes made since its base (or the page was deleted), \
      nothing is written and the draft is kept; the exit status is 1 and the last line on \
      standard error is the error. Before it, standard error shows the merge with diff3 \
      markers (<<<<<<< draft, ||||||| base, =======, >>>>>>> current). With --json, standard \
      output gets {"ok":false,"error":"conflict","page","base_rev","base","draft","current_rev", \
      "current","current_deleted","marked"} instead.

      Examples:
        wikilog wiki draft publish recipes Soup --actor ann
        wikilog wiki draft publish recipes Soup --actor ann --json | jq -r .marked
      """)

  @OptionGroup var global: GlobalOptions
  @OptionGroup var actor: ActorOptions
  @Flag(name: .long, help: "On a conflict, print the texts as JSON on standard output.")
  var json = false
  @Argument(help: "The wiki's id.") var wiki: String
  @Argument(help: "The page's title.") var page: String

  func run() throws {
    let db = try global.openStore()
    defer { db.close() }
    let id = "\(wiki):\(page)"
    let result: DraftPublishResult
    do {
      result = try WikiDraft.drafts(db).publish(user: actor.name, page: id)
    } catch let error as StoreError where error.code == .notFound && error.draftConflict == nil {
      throw WikiDraft.noDraft(wiki: wiki, page: page, user: actor.name, global: global)
    } catch let error as StoreError {
      guard let conflict = error.draftConflict else { throw error }
      if json {
        var members = [JSONObject.Member(key: "ok", value: .bool(false))]
        members.append(.init(key: "error", value: .string("conflict")))
        members.append(contentsOf: conflict.json.objectValue?.members ?? [])
        printJSON(.object(JSONObject(members)))
      } else if let marked = conflict.markedText {
        writeStandardError(marked.hasSuffix("\n") || marked.isEmpty ? marked : marked + "\n")
      }
      if conflict.currentDeleted {
        throw CLIError(
          "\(id) was deleted (\(conflict.currentRev)) since the draft's base \(conflict.baseRev ?? "(new page)"); nothing written, the draft is kept"
        )
      }
      throw CLIError(
        "the draft of \(id) overlaps changes made since its base \(conflict.baseRev ?? "(new page)") (current \(conflict.currentRev)); nothing written, the draft is kept"
      )
    }
    printJSON(
      J.object([
        "ok": .bool(true), "id": .string(result.id), "rev": .string(result.rev),
        "parent_rev": result.parentRev.map { .string($0) } ?? .null,
        "merged": .bool(result.merged),
      ]))
  }
}
