import ArgumentParser
import Formats
import Foundation
import JSON
import Log
import Projections
import Query
import RevTree
import Wiki

struct Verify: ParsableCommand {
  static let configuration = CommandConfiguration(
    abstract: "Check the log and every projection.",
    discussion: """
      The log: dense positions, checksums, ordered times, the stream index, and its Merkle \
      tree recomputed from the events: the first position where the log disagrees with its \
      tree, or with the head given with --head (one published earlier), is reported, so a \
      rewritten, removed, reordered or inserted event is found even with a valid checksum. \
      Each projection \
      (docs, wiki, ...): rebuilt by replaying the log into scratch databases and compared entry \
      by entry with the live one. Attachments: every blob a revision references exists, with \
      its stored length and MD5. Exits with status 1 when anything is wrong.

      Examples:
        wikilog verify
        wikilog verify --json | jq .ok
        wikilog verify --head head-2026-11-01.json
      """)

  @OptionGroup var global: GlobalOptions
  @OptionGroup var output: JSONFlag
  @Option(
    help: ArgumentHelp(
      "A signed tree head (JSON) the log must still extend.", valueName: "HEAD.json"))
  var head: String?

  func run() throws {
    // The pages first, with plain file reads: opening the store reads the log through LMDB,
    // which a damaged page can crash.
    let directory = global.dataDirectory().directory(of: global.database)
    if FileManager.default.fileExists(atPath: directory + "/data.mdb") {
      let damaged: [String]
      do {
        damaged = try EventLog.checkPages(directory: directory)
      } catch {
        throw CLIError("\(error)")
      }
      if let first = damaged.first {
        let more = damaged.count > 1 ? " (and \(damaged.count - 1) more damaged page(s))" : ""
        throw CLIError(
          "\(directory)/data.mdb is damaged: \(first)\(more); restore it from a backup")
      }
    }
    let published = try head.map(TreeHeads.readHead)
    let db = try global.openStore()
    defer { db.close() }
    let progress = Progress()
    progress.update("verifying the log…")
    var report = try db.store.log.verify(
      head: published.map { EventLog.TreeHead(size: $0.size, root: $0.root) })
    if let published, let head {
      let key = try? db.store.log.publicKey(create: false).key
      if key.map(published.isSigned(by:)) != true {
        report.problems.append("\(head) is not signed by this database's key")
      }
    }
    var projections: [(String, [String])] = []
    // The design documents' view indexes (views-<signature>) are verified too.
    try ViewQueries(db.store).openIndexes()
    for name in db.store.projectionNames {
      progress.update("verifying projection \(name)…")
      if name.hasPrefix("views-") {
        // A view's functions run again: a failure of theirs is a finding, not the end.
        do {
          projections.append((name, try db.store.verify(name)))
        } catch {
          projections.append((name, ["could not be built again: \(error)"]))
        }
      } else {
        projections.append((name, try db.store.verify(name)))
      }
    }
    progress.update("verifying attachments…")
    // Files no event names are not a problem: what a crash between a blob and its event
    // leaves; compaction removes them.
    let (attachments, orphans) = try db.store.checkAttachments()
    progress.finish()
    let problems =
      report.problems.count + projections.reduce(0) { $0 + $1.1.count } + attachments.count
    if output.json {
      printJSON(
        J.object([
          "ok": .bool(problems == 0),
          "log": J.object([
            "events": J.int(report.eventCount), "streams": J.int(report.streamCount),
            "last_position": J.int(report.lastPosition.rawValue),
            "tree_size": report.tree.map { J.int($0.size) },
            "root": report.tree.map { .string(Hex.encode($0.root)) },
            "problems": J.strings(report.problems),
          ]),
          "projections": .object(
            JSONObject(projections.map { .init(key: $0.0, value: J.strings($0.1)) })),
          "attachments": J.object([
            "problems": J.strings(attachments), "unreferenced_files": J.int(orphans.files),
            "unreferenced_bytes": J.int(orphans.bytes),
          ]),
        ]))
    } else {
      var text = "log: \(report)\n"
      if let tree = report.tree, report.isValid {
        text += "merkle tree: \(tree.size) events, root \(Hex.encode(tree.root))\n"
      }
      for (name, differences) in projections {
        text += differences.isEmpty ? "projection \(name): ok\n" : "projection \(name):\n"
        for d in differences { text += "  \(d)\n" }
      }
      text += attachments.isEmpty ? "attachments: ok\n" : "attachments:\n"
      for p in attachments { text += "  \(p)\n" }
      if orphans.files > 0 {
        text +=
          "  \(orphans.files) file(s) no revision names (\(Compact.size(orphans.bytes))): left by an interrupted write; `wikilog compact` removes them once an hour old\n"
      }
      printText(text)
    }
    if problems > 0 { throw CLIError("verification found \(problems) problem(s)") }
  }
}

struct Stats: ParsableCommand {
  static let configuration = CommandConfiguration(
    abstract: "Show the database's counts, size and positions.",
    discussion: """
      Events, documents (live, deleted, with conflicts), size on disk, the committed and durable \
      log positions and each projection's checkpoint.

      Examples:
        wikilog stats
        wikilog stats --json | jq .documents
      """)

  @OptionGroup var global: GlobalOptions
  @OptionGroup var output: JSONFlag

  func run() throws {
    let db = try global.openStore(readOnly: true)
    defer { db.close() }
    let store = db.store
    let info = try store.info
    let committed = try store.log.committedPosition
    var conflicted = 0
    try store.forEachRecord { record, _ in
      if !record.tree.conflicts.isEmpty { conflicted += 1 }
      return true
    }
    let size =
      (try? FileManager.default.attributesOfItem(atPath: store.log.path + "/data.mdb")[.size]
        as? Int) ?? 0
    let checkpoints = try store.projectionCheckpoints()
    if output.json {
      printJSON(
        J.object([
          "path": .string(store.log.path), "database": .string(global.database),
          "events": J.int(committed.rawValue), "documents": J.int(info.docCount),
          "deleted": J.int(info.deletedDocCount), "conflicts": J.int(conflicted),
          "revs_limit": J.int(info.revsLimit), "size_bytes": J.int(size),
          "committed_position": J.int(committed.rawValue),
          "durable_position": J.int(store.log.durablePosition.rawValue),
          "checkpoints": .object(
            JSONObject(checkpoints.map { .init(key: $0.name, value: J.int($0.position.rawValue)) })),
        ]))
      return
    }
    var text = """
      path                \(store.log.path)
      database            \(global.database)
      events              \(committed)
      documents           \(info.docCount)
      deleted             \(info.deletedDocCount)
      with conflicts      \(conflicted)
      revs limit          \(info.revsLimit)
      size on disk        \(size) bytes
      committed position  \(committed)
      durable position    \(store.log.durablePosition)

      """
    for (name, position) in checkpoints {
      text += "checkpoint \(name)".padding(toLength: 20, withPad: " ", startingAt: 0)
      text += "\(position)\n"
    }
    printText(text)
  }
}

struct Rebuild: ParsableCommand {
  static let configuration = CommandConfiguration(
    abstract: "Rebuild projections from the log.",
    discussion: """
      Clears a projection's databases and replays the whole log into them, in one \
      transaction: readers see the old state until the new one is complete. Without a name, \
      every projection, in one pass over the log.

      Examples:
        wikilog rebuild
        wikilog rebuild wiki
      """)

  @OptionGroup var global: GlobalOptions
  @Argument(help: "The projection (docs, wiki); all of them when omitted.") var projection: String?

  func run() throws {
    let db = try global.openStore()
    defer { db.close() }
    // The design documents' view indexes (views-<signature>) too.
    try ViewQueries(db.store).openIndexes()
    let names = db.store.projectionNames
    if let projection, !names.contains(projection) {
      throw CLIError(
        "no projection named '\(projection)'; the projections are \(names.joined(separator: ", "))")
    }
    let progress = Progress()
    let events = try db.store.log.committedPosition
    if let projection {
      progress.update("rebuilding \(projection) from \(events) events…")
      try db.store.rebuild(projection)
      progress.finish()
      printText("rebuilt \(projection) from \(events) events")
    } else {
      // Every projection in one pass over the log.
      progress.update("rebuilding \(names.joined(separator: ", ")) from \(events) events…")
      try db.store.rebuildAll()
      progress.finish()
      for name in names { printText("rebuilt \(name) from \(events) events") }
    }
  }
}

struct Compact: ParsableCommand {
  static let configuration = CommandConfiguration(
    abstract: "Compact a database's file, keeping every event.",
    discussion: """
      LMDB reuses the pages old transactions freed but never shrinks its file. This writes a \
      compacted copy (only the pages in use, every event and projection record kept) and \
      swaps it in, as POST /{db}/_compact does. It needs the database alone: while another \
      process (a server, a tail --follow) has it open, it refuses and changes nothing.

      Example:
        wikilog compact -d wiki
      """)

  @OptionGroup var global: GlobalOptions

  func run() throws {
    let db = try global.openStore()
    defer { db.close() }
    do {
      // Compaction also removes attachment blobs no event names, once an hour old.
      let result = try db.data.compact(global.database)
      var text =
        "compacted \(global.database): data.mdb \(Self.size(result.bytesBefore)) -> \(Self.size(result.bytesAfter))"
      if result.blobs.files > 0 {
        text +=
          "\nremoved \(result.blobs.files) attachment file(s) no revision names (\(Self.size(result.blobs.bytes)))"
      }
      printText(text)
    } catch let error as StoreError {
      throw CLIError("cannot compact '\(global.database)': \(error.reason)")
    }
  }

  static func size(_ bytes: Int) -> String {
    bytes >= 1 << 20
      ? "\(bytes / (1 << 20)).\(bytes % (1 << 20) * 10 / (1 << 20)) MiB" : "\(bytes) bytes"
  }
}

struct Backup: ParsableCommand {
  static let configuration = CommandConfiguration(
    abstract: "Back a database up: a consistent, compacted copy, taken while it serves.",
    discussion: """
      Writes the database's log as it is at one moment (LMDB's copy with compaction, in a \
      read transaction: a running server goes on taking writes) and its attachments into \
      DEST/NAME, so that DEST is a data directory holding the database. Check a backup with \
      `wikilog verify --db DEST -d NAME`; bring it back with `wikilog restore DEST`.

      Examples:
        wikilog backup /backups/2026-11-25
        wikilog verify --db /backups/2026-11-25 -d wiki
      """)

  @OptionGroup var global: GlobalOptions
  @Argument(help: "The data directory to write the backup into (it may exist, without NAME).")
  var destination: String

  func validate() throws {
    if destination.isEmpty { throw ValidationError("the backup's directory is empty") }
  }

  func run() throws {
    let db = try global.openStore(readOnly: true)
    defer { db.close() }
    do {
      let bytes = try db.data.backup(global.database, to: destination)
      printText(
        "backed up \(global.database) into \(destination): data.mdb \(Compact.size(bytes)); check it with: wikilog verify --db \(Shell.quote(destination)) -d \(Shell.quote(global.database))"
      )
    } catch let error as StoreError {
      throw CLIError("cannot back up '\(global.database)': \(error.reason)")
    }
  }
}

struct Restore: ParsableCommand {
  static let configuration = CommandConfiguration(
    abstract: "Bring a database back from a backup made by wikilog backup.",
    discussion: """
      Checks the backup's pages and records first, then copies it in beside the other \
      databases and puts it in place in one step. The database must not exist: delete a \
      damaged one first (stop the server and remove its directory, or DELETE /NAME).

      Example:
        wikilog restore /backups/2026-11-25 -d wiki
      """)

  @OptionGroup var global: GlobalOptions
  @Argument(help: "The data directory a backup was written into.") var source: String

  func validate() throws {
    if source.isEmpty { throw ValidationError("the backup's directory is empty") }
  }

  func run() throws {
    let data = global.dataDirectory()
    defer { data.closeAll() }
    do {
      try data.restore(global.database, from: source)
      printText("restored \(global.database) from \(source)")
    } catch let error as StoreError {
      throw CLIError("cannot restore '\(global.database)': \(error.reason)")
    }
  }
}
