import ArgumentParser
import JSON
import Log
import Projections

/// `wikilog purge` and `wikilog redact`: forgetting on purpose, with the same guarantees as
/// `POST /{db}/_purge` and `_redact`.
struct Purge: AsyncParsableCommand {
  static let configuration = CommandConfiguration(
    abstract: "Purge leaf revisions of a document: gone from every file, proofs intact.",
    discussion: """
      As CouchDB's _purge: each leaf REV named leaves the document's tree with the revisions \
      only it descends from (a document left without revisions is gone); a revision that is \
      not a leaf is not purged. The events that carried their bodies and attachments are \
      erased in one transaction with a purge event (who, when, --reason), the database is \
      compacted and the attachment files no revision names are removed: when this returns, \
      their bytes are in no file of the database. The log's tree keeps the erased events' \
      leaf hashes, so proofs and signed heads taken before still check. A purge does not \
      replicate; backups taken before are yours to handle. --dry-run lists what would be \
      erased and changes nothing. It needs the database alone (no server running on it).

      Examples:
        wikilog purge 'w1:Home' 3-5d2e... --reason 'password pasted' --dry-run
        wikilog purge 'w1:Home' 3-5d2e... --reason 'password pasted'
      """)

  @OptionGroup var global: GlobalOptions
  @OptionGroup var actor: ActorOptions
  @Argument(help: "The document id.") var docID: String
  @Argument(help: "The leaf revisions to purge.") var revs: [String]
  @Option(help: "Why, kept in the purge's event.") var reason = ""
  @Flag(help: "List what would be erased; change nothing.") var dryRun = false

  func run() async throws {
    try await Erase.run(
      .purge, docID: docID, revs: revs, reason: reason, dryRun: dryRun, global: global,
      actor: actor.name)
  }
}

struct Redact: AsyncParsableCommand {
  static let configuration = CommandConfiguration(
    abstract: "Redact revisions of a document: bodies erased, ids and history kept.",
    discussion: """
      Each REV named, leaf or not, stays in the document's tree with its id; its body and \
      attachments are erased from every event that carried them, in one transaction with a \
      redaction event (who, when, --reason), and the database is compacted so that the \
      bytes are in no file of it. Reading a redacted revision answers not_found "redacted"; \
      history and blame show who redacted it and when. The current revision cannot be \
      redacted: write a new one first (or purge it). Proofs and signed heads taken before \
      still check. --dry-run lists what would be erased and changes nothing.

      Examples:
        wikilog redact 'w1:Home' 2-9c1f... --reason 'customer address' --dry-run
        wikilog redact 'w1:Home' 2-9c1f... 1-77aa... --reason 'customer address'
      """)

  @OptionGroup var global: GlobalOptions
  @OptionGroup var actor: ActorOptions
  @Argument(help: "The document id.") var docID: String
  @Argument(help: "The revisions to redact.") var revs: [String]
  @Option(help: "Why, kept in the redaction's event.") var reason: String
  @Flag(help: "List what would be erased; change nothing.") var dryRun = false

  func run() async throws {
    try await Erase.run(
      .redact, docID: docID, revs: revs, reason: reason, dryRun: dryRun, global: global,
      actor: actor.name)
  }
}

enum Erase {
  static func run(
    _ kind: DocumentStore.ErasureKind, docID: String, revs: [String], reason: String,
    dryRun: Bool, global: GlobalOptions, actor: String
  ) async throws {
    guard !revs.isEmpty else { throw CLIError("name at least one revision of '\(docID)'") }
    let db = try global.openStore()
    defer { db.close() }
    let erasure: Erasure
    do {
      erasure = try await db.data.erase(
        kind, [(docID, revs)], in: global.database, actor: actor, origin: "cli",
        reason: reason, dryRun: dryRun)
    } catch let error as StoreError {
      throw CLIError(
        "cannot \(kind == .purge ? "purge" : "redact") in '\(global.database)': \(error.reason)")
    }
    let erased = erasure.revisions.first?.revs ?? []
    let verb = kind == .purge ? "purge" : "redact"
    guard !erased.isEmpty else {
      printText(
        kind == .purge
          ? "nothing to purge: none of those is a leaf revision of '\(docID)'"
          : "nothing to redact: none of those is a revision of '\(docID)' with a body")
      return
    }
    var lines = [
      (dryRun ? "would \(verb) " : (kind == .purge ? "purged " : "redacted ")) + "\(docID): "
        + erased.joined(separator: " "),
      (dryRun ? "would erase " : "erased ") + "\(erasure.events.count) event(s): "
        + erasure.events.map { String($0.rawValue) }.joined(separator: " "),
    ]
    if erasure.blobs > 0 {
      lines.append(
        (dryRun ? "would remove " : "removed ") + "\(erasure.blobs) attachment file(s)")
    }
    if !dryRun {
      lines.append("compacted '\(global.database)': the erased bytes are in no file of it")
    }
    printText(lines.joined(separator: "\n"))
  }
}
