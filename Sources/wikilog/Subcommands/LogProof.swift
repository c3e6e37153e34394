import ArgumentParser
import Formats
import Foundation
import JSON
import Log
import Projections
import Query

/// What the tree-head commands share: opening the log, signing a head, reading JSON files.
enum TreeHeads {
  /// The selected database's log, which must exist. Opened writable: a log made before the
  /// Merkle tree gets it here (``EventLog``'s upgrade), and other processes may go on writing.
  static func open(_ global: GlobalOptions) throws -> EventLog {
    if !global.dataDirectory().exists(global.database) { throw global.noDatabase() }
    return try global.open()
  }

  /// Signs the log's current head, saying so on standard error when a key had to be made.
  static func sign(_ log: EventLog, _ global: GlobalOptions) throws -> SignedTreeHead {
    do {
      let (head, created) = try log.signedTreeHead()
      if created { keyMade(log, global) }
      return head
    } catch {
      throw CLIError("cannot sign the tree head: \(error)")
    }
  }

  static func keyMade(_ log: EventLog, _ global: GlobalOptions) {
    printError(
      "wikilog: made a signing key for database '\(global.database)' (it had none): \(log.path)/\(EventLog.signingKeyFile)"
    )
  }

  /// The JSON in file `path` (`-`: standard input).
  static func readJSON(_ path: String, what: String) throws -> JSONValue {
    let bytes: [UInt8]
    if path == "-" {
      bytes = try Input.read()
    } else {
      guard let data = FileManager.default.contents(atPath: path) else {
        throw CLIError("cannot read \(what) \(path)")
      }
      bytes = Array(data)
    }
    return try Input.json(bytes, what: "in \(path)")
  }

  /// A head from file `path`.
  static func readHead(_ path: String) throws -> SignedTreeHead {
    do {
      return try LogProofs.head(try readJSON(path, what: "the head"))
    } catch let error as StoreError {
      throw CLIError("\(path) is not a tree head: \(error.reason)")
    }
  }

  /// Checks that `head` is this log's (its key) and that the log's first `head.size` events
  /// give its root: the log extends it.
  static func checkExtends(_ log: EventLog, _ head: SignedTreeHead, _ path: String) throws {
    let key = try log.publicKey(create: false).key
    guard head.isSigned(by: key) else {
      throw CLIError("\(path) is not signed by this database's key")
    }
    let size = try log.treeHead().size
    guard head.size <= size else {
      throw CLIError(
        "the log does not extend \(path): the head covers \(head.size) events, the log has \(size)")
    }
    let root = try log.treeRoot(size: head.size)
    guard root == head.root else {
      throw CLIError(
        "the log does not extend \(path): its first \(head.size) events give root \(Hex.encode(root)), the head says \(Hex.encode(head.root))"
      )
    }
  }

  static func text(_ head: SignedTreeHead) -> String {
    """
    size        \(head.size)
    root        \(Hex.encode(head.root))
    time        \(head.time)
    signature   \(Base64.encode(Array(head.signature)))
    public key  \(Base64.encode(Array(head.publicKey)))
    key id      \(SignedTreeHead.keyID(head.publicKey))

    """
  }
}

/// `--proof` for `history` and `audit`: each row with its inclusion proof in one head signed
/// when the command runs.
struct ProofOption: ParsableArguments {
  @Flag(
    name: .customLong("proof"),
    help:
      "With each row, the proof that its event is in the log (in a head signed now; check it with `wikilog log check`)."
  )
  var enabled = false

  /// The proofs of events at `positions` in one head signed now, or nil without `--proof`.
  func proofs(_ log: EventLog, _ positions: [LogPosition], _ global: GlobalOptions) throws
    -> (head: SignedTreeHead, proofs: [LogPosition: EventLog.InclusionProof])?
  {
    guard enabled else { return nil }
    let head = try TreeHeads.sign(log, global)
    var proofs: [LogPosition: EventLog.InclusionProof] = [:]
    for p in positions where p.rawValue <= head.size {
      proofs[p] = try log.inclusionProof(position: p, treeSize: head.size)
    }
    return (head, proofs)
  }

  /// A row's proof as JSON, with the head it leads to (`"head"`).
  static func json(_ proof: EventLog.InclusionProof?, head: SignedTreeHead) -> JSONValue? {
    guard let proof, var members = LogProofs.json(proof).objectValue?.members else { return nil }
    members.append(.init(key: "head", value: LogProofs.json(head)))
    return .object(JSONObject(members))
  }

  /// A row's proof as text: its leaf hash and path.
  static func text(_ proof: EventLog.InclusionProof?) -> String {
    guard let proof else { return "Proof:   none (the event came after the head)" }
    return
      "Proof:   leaf \(Hex.encode(MerkleTree.leafHash(proof.leaf))) in \(proof.treeSize) events, path "
      + (proof.path.isEmpty ? "(empty)" : proof.path.map(Hex.encode).joined(separator: " "))
  }
}

struct LogKey: ParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "key",
    abstract: "Print the database's public key, which checks its signed tree heads.",
    discussion: """
      Each database has an Ed25519 key, made by `wikilog init` and kept in its directory \
      (log.key, mode 0600); a database made before keys existed gets one here, and a line on \
      standard error says so. Prints the 32-byte public key in base64; publish it beside the \
      heads. --json prints {"algorithm":"ed25519","public_key","key_id"}.

      Examples:
        wikilog log key > wiki.pub
        wikilog log key --json
      """)

  @OptionGroup var global: GlobalOptions
  @OptionGroup var output: JSONFlag

  func run() throws {
    let log = try TreeHeads.open(global)
    defer { log.close() }
    let (key, created) = try log.publicKey(create: true)
    if created { TreeHeads.keyMade(log, global) }
    let base64 = Base64.encode(Array(key))
    if output.json {
      printJSON(
        J.object([
          "algorithm": .string("ed25519"), "public_key": .string(base64),
          "key_id": .string(SignedTreeHead.keyID(key)),
        ]))
    } else {
      printText(base64)
    }
  }
}

struct LogHead: ParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "head",
    abstract: "Sign and print the log's tree head: its size, Merkle root and time.",
    discussion: """
      A head vouches for the whole log up to its size: publish it (a mail, another server, a \
      paper notebook) and later check that the log still extends it (`wikilog log prove \
      --from`, `wikilog verify --head`). --json prints {"size","root","time","signature",\
      "public_key","key_id"}; the signature is Ed25519 over the UTF-8 text \
      "wikilog tree head v1\\n<size>\\n<root hex>\\n<time>\\n".

      Examples:
        wikilog log head --json > head-2026-11-26.json
      """)

  @OptionGroup var global: GlobalOptions
  @OptionGroup var output: JSONFlag

  func run() throws {
    let log = try TreeHeads.open(global)
    defer { log.close() }
    let head = try TreeHeads.sign(log, global)
    if output.json { printJSON(LogProofs.json(head)) } else { printText(TreeHeads.text(head)) }
  }
}

struct LogProve: ParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "prove",
    abstract: "Prove that an event is in the log, or that the log extends an older head.",
    discussion: """
      With SEQ: the inclusion proof of the event at that sequence number in the tree of a \
      head: the one given with --head (which this log must still extend), else a head signed \
      now, included in the proof as "head". With --from: the consistency proof from that older \
      head to a head signed now; the exit status is 1, and no proof is printed, when the log \
      does not extend the older head (events were changed, removed or reordered). Check a \
      proof with `wikilog log check`, which needs only the head, the proof and the key.

      Examples:
        wikilog log prove 42 --json > proof-42.json
        wikilog log prove 42 --head head.json --json
        wikilog log prove --from head-2026-11-01.json --json > since-november.json
      """)

  @OptionGroup var global: GlobalOptions
  @OptionGroup var output: JSONFlag
  @Argument(help: "The sequence number of the event.") var seq: UInt64?
  @Option(help: ArgumentHelp("A head (JSON) to prove the event in.", valueName: "HEAD.json"))
  var head: String?
  @Option(
    help: ArgumentHelp("An older head (JSON) to prove the log extends.", valueName: "OLD_HEAD.json")
  )
  var from: String?

  func validate() throws {
    switch (seq, from) {
    case (nil, nil):
      throw ValidationError("give SEQ (an inclusion proof) or --from (a consistency proof)")
    case (.some, .some): throw ValidationError("give SEQ or --from, not both")
    case (nil, .some) where head != nil: throw ValidationError("--head goes with SEQ")
    case (.some(0), _): throw ValidationError("SEQ starts at 1")
    default: break
    }
  }

  func run() throws {
    let log = try TreeHeads.open(global)
    defer { log.close() }
    if let from {
      let old = try TreeHeads.readHead(from)
      try TreeHeads.checkExtends(log, old, from)
      let new = try TreeHeads.sign(log, global)
      let path = try log.consistencyProof(oldSize: old.size, newSize: new.size)
      var proof = LogProofs.consistencyJSON(
        oldSize: old.size, oldRoot: old.root, newSize: new.size, newRoot: new.root, path: path,
        oldHead: old)
      proof = adding("head", LogProofs.json(new), to: proof)
      if output.json {
        printJSON(proof)
      } else {
        printText(
          "the log of \(new.size) events extends the head of \(old.size) events in \(from)\n"
            + "path (\(path.count) hashes):\n" + path.map { "  \(Hex.encode($0))\n" }.joined()
            + "\nhead:\n" + TreeHeads.text(new))
      }
      return
    }
    guard let seq else { return }
    let signed: SignedTreeHead
    var includeHead = false
    if let head {
      signed = try TreeHeads.readHead(head)
      try TreeHeads.checkExtends(log, signed, head)
    } else {
      signed = try TreeHeads.sign(log, global)
      includeHead = true
    }
    guard seq <= signed.size else {
      throw CLIError("no event \(seq) in the head's tree of \(signed.size) events")
    }
    let proof = try log.inclusionProof(position: LogPosition(seq), treeSize: signed.size)
    var json = LogProofs.json(proof)
    if includeHead { json = adding("head", LogProofs.json(signed), to: json) }
    if output.json {
      printJSON(json)
    } else {
      let event = EventLog.event(fromLeaf: proof.leaf)
      printText(
        "event \(seq)\(event.map { " (\($0.type) on '\($0.stream)' by \($0.actor))" } ?? "") is in the log of \(signed.size) events with root \(Hex.encode(signed.root))\n"
          + "leaf hash \(Hex.encode(MerkleTree.leafHash(proof.leaf)))\n"
          + "path (\(proof.path.count) hashes):\n"
          + proof.path.map { "  \(Hex.encode($0))\n" }.joined()
          + (includeHead ? "\nhead:\n" + TreeHeads.text(signed) : ""))
    }
  }

  func adding(_ key: String, _ value: JSONValue, to object: JSONValue) -> JSONValue {
    guard var members = object.objectValue?.members else { return object }
    members.append(.init(key: key, value: value))
    return .object(JSONObject(members))
  }
}

struct LogCheck: ParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "check",
    abstract: "Check a proof against a signed head with the log's public key, and nothing else.",
    discussion: """
      Needs no database and no server: checks the head's Ed25519 signature, then the proof \
      (an inclusion proof: the leaf is the event shown and its path leads to the head's root; \
      a consistency proof: the head's log extends the older one). Exit status 0 only when \
      everything holds. PUBLIC_KEY is the base64 `wikilog log key` prints (or 64 hex digits), \
      or a file holding it.

      Examples:
        wikilog log check head.json proof-42.json --key "$(cat wiki.pub)"
        wikilog log check new-head.json since-november.json --key wiki.pub
      """)

  @Argument(help: ArgumentHelp("The signed head.", valueName: "HEAD.json")) var headFile: String
  @Argument(help: ArgumentHelp("The proof.", valueName: "PROOF.json")) var proofFile: String
  @Option(
    help: ArgumentHelp("The log's public key, or a file holding it.", valueName: "PUBLIC_KEY"))
  var key: String

  func run() throws {
    var keyText = key
    if LogProofs.publicKey(key) == nil, let data = FileManager.default.contents(atPath: key) {
      keyText = String(decoding: data, as: UTF8.self)
    }
    guard let publicKey = LogProofs.publicKey(keyText) else {
      throw CLIError(
        "--key is not an Ed25519 public key (32 bytes in base64 or hex) nor a file holding one")
    }
    let head = try TreeHeads.readJSON(headFile, what: "the head")
    let proof = try TreeHeads.readJSON(proofFile, what: "the proof")
    let result = LogProofs.check(head: head, proof: proof, publicKey: publicKey)
    if result.holds {
      printText(result.lines.joined(separator: "\n"))
    } else {
      if result.lines.count > 1 { printText(result.lines.dropLast().joined(separator: "\n")) }
      throw CLIError("the proof does not hold: \(result.lines.last ?? "")")
    }
  }
}
