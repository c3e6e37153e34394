import ArgumentParser
import Formats
import Foundation
import JSON
import Log
import Projections
import Query
import RevTree
import Wiki

struct History: ParsableCommand {
  static let configuration = CommandConfiguration(
    abstract: "Every revision of a document: who, when, from where, and its Markdown diff.",
    discussion: """
      Oldest first. Each revision's diff of the markdown field is against the revision it was \
      made on (unified format). Revisions stemmed out of the revision tree still appear: the log \
      keeps them. --json prints an array of \
      {"seq", "time", "actor", "origin", "rev", "parent", "deleted", "insertions", "deletions", \
      "diff"} (and "proof" with --proof: the inclusion proof of the revision's event in a head \
      signed now, given in it as "head"; `wikilog log check` checks it).

      Examples:
        wikilog history 'w1:Home' --proof
        wikilog history 'w1:Home'
        wikilog history 'w1:Home' --json | jq '.[] | select(.actor == "bob")'
      """)

  @OptionGroup var global: GlobalOptions
  @OptionGroup var output: JSONFlag
  @Argument(help: "The document id.") var docID: String
  @Flag(help: "Leave the diffs out.") var noDiff = false
  @OptionGroup var proof: ProofOption

  func run() throws {
    let db = try global.openStore(readOnly: true)
    defer { db.close() }
    let entries = try db.store.history(of: docID)
    guard !entries.isEmpty else {
      throw CLIError("no document '\(docID)' in database '\(global.database)'")
    }
    let proofs = try proof.proofs(db.store.log, entries.map(\.seq), global)
    var out = OutputBuffer()
    if output.json {
      out.line(
        .array(
          entries.map { e in
            J.object([
              "seq": J.int(e.seq.rawValue),
              "time": .string(ISO8601.format(microseconds: e.timestampMicroseconds)),
              "actor": .string(e.actor), "origin": .string(e.origin), "rev": .string(e.rev),
              "parent": e.parentRev.map { .string($0) } ?? .null, "deleted": .bool(e.deleted),
              "insertions": J.int(e.insertions), "deletions": J.int(e.deletions),
              "diff": noDiff ? nil : .string(e.markdownDiff),
              "proof": proofs.flatMap { ProofOption.json($0.proofs[e.seq], head: $0.head) },
            ])
          }))
      out.flush()
      return
    }
    for (i, e) in entries.enumerated() {
      if i > 0 { out.append(0x0A) }
      out.line("revision \(e.rev)  (seq \(e.seq))")
      out.line("Date:    \(ISO8601.format(microseconds: e.timestampMicroseconds))")
      out.line("Author:  \(e.actor.isEmpty ? "-" : e.actor)")
      if !e.origin.isEmpty { out.line("Origin:  \(e.origin)") }
      if let parent = e.parentRev { out.line("Parent:  \(parent)") }
      if e.deleted { out.line("Deleted") }
      out.line("Changes: +\(e.insertions) -\(e.deletions)")
      if let proofs { out.line(ProofOption.text(proofs.proofs[e.seq])) }
      if !noDiff && !e.markdownDiff.isEmpty {
        out.append(0x0A)
        out.append(e.markdownDiff)
        if !e.markdownDiff.hasSuffix("\n") { out.append(0x0A) }
      }
      out.flushIfLarge()
    }
    if let proofs { out.append("\nhead:\n" + TreeHeads.text(proofs.head)) }
    out.flush()
  }
}

struct Audit: ParsableCommand {
  static let configuration = CommandConfiguration(
    abstract: "Every write, filtered by wiki, user and time range: who did what, when.",
    discussion: """
      Lists every write in log order, one row per event. Times are ISO-8601 (a date alone \
      means its midnight UTC); --since is inclusive, --until inclusive to the microsecond. \
      --json prints an array of {"seq","time","actor","type","id","rev","deleted","origin"} \
      (and "proof" with --proof: the inclusion proof of the row's event in a head signed now).

      The EVENT column ("type" in --json) is one of:
        doc.edit         a document written here; "doc.edit (deleted)" for a deletion
        doc.replicated   a revision written by replication (ORIGIN: its source)
        local.put        a _local document written (DOCUMENT is _local/ID, REV 0-N)
        local.delete     a _local document deleted
        db.revs_limit    the revs limit changed (DOCUMENT is _revs_limit, no REV)
        doc.purge        revisions purged (REV lists them; their events are erased)
        doc.redact       revisions redacted (REV lists them; their bodies are erased)
        db.purged_infos_limit   the purged_infos_limit changed
        draft.save       a draft of a page saved (DOCUMENT is the page, REV its base)
        draft.autosave   a draft saved by the editor on its own
        draft.discard    a draft thrown away
        draft.publish    a draft published (REV is the page revision it wrote)

      Examples:
        wikilog audit --user alice
        wikilog audit --wiki w1 --since 2026-11-01 --until 2026-11-30T23:59:59Z
        wikilog audit --json --limit 100 | jq -r '.[].id'
      """)

  @OptionGroup var global: GlobalOptions
  @OptionGroup var output: JSONFlag
  @Option(help: "Only this wiki's documents.") var wiki: String?
  @Option(help: "Only writes by this user (actor).") var user: String?
  @Option(help: "From this time on (ISO-8601).") var since: String?
  @Option(help: "Up to this time (ISO-8601).") var until: String?
  @Option(parsing: .unconditional, help: "At most this many entries.") var limit: Int?
  @OptionGroup var proof: ProofOption

  func validate() throws {
    for (name, value) in [("--since", since), ("--until", until)] {
      if let value, !Time.isValid(value) {
        throw ValidationError(
          "\(name) takes an ISO-8601 time like 2026-11-21T09:00:00Z or 2026-11-21; got '\(value)'")
      }
    }
    if let limit, limit < 0 { throw ValidationError("--limit must be 0 or more") }
  }

  func run() throws {
    let db = try global.openStore(readOnly: true)
    defer { db.close() }
    let entries = try db.store.audit(
      AuditQuery(
        filter: wiki.map(DocumentFilter.wiki), actor: user,
        from: since.flatMap(Time.microseconds(parsing:)).map(Time.lowerBound),
        until: until.flatMap(Time.microseconds(parsing:)).map(Time.upperBound),
        limit: limit))
    let proofs = try proof.proofs(db.store.log, entries.map(\.seq), global)
    var out = OutputBuffer()
    if output.json {
      out.line(
        .array(
          entries.map { e in
            J.object([
              "seq": J.int(e.seq.rawValue),
              "time": .string(ISO8601.format(microseconds: e.timestampMicroseconds)),
              "actor": .string(e.actor), "type": .string(e.type), "id": .string(e.docID),
              "rev": .string(e.rev), "deleted": .bool(e.deleted), "origin": .string(e.origin),
              "proof": proofs.flatMap { ProofOption.json($0.proofs[e.seq], head: $0.head) },
            ])
          }))
      out.flush()
      return
    }
    var table = TextTable(header: ["TIME", "SEQ", "ACTOR", "EVENT", "DOCUMENT", "REV", "ORIGIN"])
    for e in entries {
      table.add([
        ISO8601.format(microseconds: e.timestampMicroseconds), String(e.seq.rawValue),
        e.actor.isEmpty ? "-" : e.actor, e.deleted ? "\(e.type) (deleted)" : e.type,
        e.docID, e.rev.isEmpty ? "-" : e.rev, e.origin.isEmpty ? "-" : e.origin,
      ])
    }
    out.append(table.text)
    if let proofs {
      // One line per row, in the table's order: the proof of the event at SEQ.
      out.append("\n")
      for e in entries {
        out.append("seq \(e.seq.rawValue)  " + ProofOption.text(proofs.proofs[e.seq]) + "\n")
      }
      out.append("\nhead:\n" + TreeHeads.text(proofs.head))
    }
    out.flush()
  }
}
