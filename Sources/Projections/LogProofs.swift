import Formats
import Foundation
public import JSON
public import Log

/// The JSON shapes of the log's signed tree heads and proofs, shared by `wikilog log` and
/// `GET /{db}/_log/head` and `/{db}/_log/proof`, and the check an auditor runs on them
/// (``check(head:proof:publicKey:)``), which needs nothing but the three.
///
/// A head:
/// ```json
/// {"size": 42, "root": "<64 hex digits>", "time": "2026-11-26T01:02:03.456Z",
///  "signature": "<base64, 64 bytes>", "public_key": "<base64, 32 bytes>", "key_id": "<16 hex>"}
/// ```
/// The signature is Ed25519 over `SignedTreeHead.signedBytes` (``SignedTreeHead``):
/// `"wikilog tree head v1\n" + size + "\n" + root hex + "\n" + time + "\n"`.
///
/// An inclusion proof: `{"type": "inclusion", "seq", "tree_size", "leaf" (base64 of the leaf
/// bytes: the 8-byte big-endian position and the record as stored), "leaf_hash", "path" (hex
/// hashes, from the leaf up), "event" (what the leaf holds, for reading)}`.
///
/// A consistency proof: `{"type": "consistency", "old_size", "old_root", "new_size",
/// "new_root", "path", "old_head" (the older signed head, when the proof was asked for with
/// one)}`.
public enum LogProofs {
  // MARK: Encoding

  public static func json(_ head: SignedTreeHead) -> JSONValue {
    .object(
      JSONObject([
        "size": .number(JSONNumber(Int64(head.size))),
        "root": .string(Hex.encode(head.root)),
        "time": .string(head.time),
        "signature": .string(Base64.encode(Array(head.signature))),
        "public_key": .string(Base64.encode(Array(head.publicKey))),
        "key_id": .string(SignedTreeHead.keyID(head.publicKey)),
      ]))
  }

  public static func json(_ proof: EventLog.InclusionProof) -> JSONValue {
    var members: [JSONObject.Member] = [
      .init(key: "type", value: .string("inclusion")),
      .init(key: "seq", value: .number(JSONNumber(Int64(proof.position.rawValue)))),
      .init(key: "tree_size", value: .number(JSONNumber(Int64(proof.treeSize)))),
      .init(key: "leaf", value: .string(Base64.encode(Array(proof.leaf)))),
      .init(
        key: "leaf_hash",
        value: .string(Hex.encode(proof.erasedLeafHash ?? MerkleTree.leafHash(proof.leaf)))),
      .init(key: "path", value: .array(proof.path.map { .string(Hex.encode($0)) })),
    ]
    // An erased event: the tree keeps its original leaf's hash; the leaf is what is left.
    if let erasedBy = proof.erasedBy {
      members.append(.init(key: "erased_by", value: .number(JSONNumber(Int64(erasedBy.rawValue)))))
    }
    if let event = EventLog.event(fromLeaf: proof.leaf) {
      members.append(.init(key: "event", value: json(event)))
    }
    return .object(JSONObject(members))
  }

  /// What a leaf holds, for people: the payload is in the leaf.
  static func json(_ event: RecordedEvent) -> JSONValue {
    .object(
      JSONObject([
        "seq": .number(JSONNumber(Int64(event.position.rawValue))),
        "time": .string(SignedTreeHead.timeString(event.timestamp)),
        "type": .string(event.type),
        "stream": .string(event.stream),
        "actor": .string(event.actor),
        "payload_bytes": .number(JSONNumber(Int64(event.payload.count))),
      ]))
  }

  public static func consistencyJSON(
    oldSize: UInt64, oldRoot: MerkleTree.Hash, newSize: UInt64, newRoot: MerkleTree.Hash,
    path: [MerkleTree.Hash], oldHead: SignedTreeHead? = nil
  ) -> JSONValue {
    var members: [JSONObject.Member] = [
      .init(key: "type", value: .string("consistency")),
      .init(key: "old_size", value: .number(JSONNumber(Int64(oldSize)))),
      .init(key: "old_root", value: .string(Hex.encode(oldRoot))),
      .init(key: "new_size", value: .number(JSONNumber(Int64(newSize)))),
      .init(key: "new_root", value: .string(Hex.encode(newRoot))),
      .init(key: "path", value: .array(path.map { .string(Hex.encode($0)) })),
    ]
    if let oldHead { members.append(.init(key: "old_head", value: json(oldHead))) }
    return .object(JSONObject(members))
  }

  // MARK: Decoding

  /// A head from its JSON; `bad_request` naming what is wrong.
  public static func head(_ value: JSONValue) throws -> SignedTreeHead {
    guard case .object = value else { throw StoreError.badRequest("a tree head is a JSON object") }
    let size = try uint(value, "size")
    let root = try hash(value["root"], "root")
    guard let time = value["time"]?.stringValue else {
      throw StoreError.badRequest("the head has no \"time\" string")
    }
    guard let signature = value["signature"]?.stringValue.flatMap({ Base64.decode($0) }),
      signature.count == 64
    else { throw StoreError.badRequest("the head's \"signature\" is not 64 bytes of base64") }
    guard let key = value["public_key"]?.stringValue.flatMap({ Base64.decode($0) }),
      key.count == 32
    else { throw StoreError.badRequest("the head's \"public_key\" is not 32 bytes of base64") }
    return SignedTreeHead(
      size: size, root: root, time: time, signature: Array(signature), publicKey: Array(key))
  }

  /// A public key given as base64 (as `wikilog log key` prints it) or hex.
  public static func publicKey(_ text: String) -> [UInt8]? {
    let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
    if trimmed.count == 64, let bytes = Hex.decode(trimmed) { return bytes }
    if let data = Base64.decode(trimmed), data.count == 32 { return data }
    return nil
  }

  static func uint(_ value: JSONValue, _ key: String) throws -> UInt64 {
    guard let n = value[key]?.numberValue?.int64Value, n >= 0 else {
      throw StoreError.badRequest("\"\(key)\" must be a non-negative integer")
    }
    return UInt64(n)
  }

  static func hash(_ value: JSONValue?, _ name: String) throws -> MerkleTree.Hash {
    guard let text = value?.stringValue, let bytes = Hex.decode(text), bytes.count == 32 else {
      throw StoreError.badRequest("\"\(name)\" must be a hash: 64 hex digits")
    }
    return bytes
  }

  static func path(_ value: JSONValue) throws -> [MerkleTree.Hash] {
    guard let items = value["path"]?.arrayValue else {
      throw StoreError.badRequest("the proof has no \"path\" array")
    }
    return try items.map { try hash($0, "path") }
  }

  // MARK: Heads carried by export and import

  /// The file in a database's directory that keeps the heads of the databases it was imported
  /// from (NDJSON, one `{"database","head"}` per line, oldest first).
  public static let carriedHeadsFile = "log.imported-heads.ndjson"

  /// The heads database directory `directory` carries from its imports.
  public static func carriedHeads(in directory: String) -> [JSONValue] {
    guard let data = FileManager.default.contents(atPath: directory + "/" + carriedHeadsFile)
    else { return [] }
    return data.split(separator: 0x0A).compactMap { try? JSONValue(parsing: Array($0)) }
  }

  /// Checks heads carried in an export (`{"database","head"}` each, the head signed by the key
  /// it names) and appends them to `directory`'s carried heads; returns how many.
  @discardableResult
  public static func carry(_ heads: [JSONValue], into directory: String) throws -> Int {
    var text = ""
    for (i, entry) in heads.enumerated() {
      guard let database = entry["database"]?.stringValue, let value = entry["head"] else {
        throw StoreError.badRequest("log head \(i + 1) of the export has no database or head")
      }
      let head = try Self.head(value)
      guard head.isSigned(by: head.publicKey) else {
        throw StoreError.badRequest(
          "log head \(i + 1) of the export (database '\(database)') has a signature that does not verify"
        )
      }
      text += String(decoding: entry.serialized(), as: UTF8.self) + "\n"
    }
    guard !text.isEmpty else { return 0 }
    let path = directory + "/" + carriedHeadsFile
    if !FileManager.default.fileExists(atPath: path) {
      FileManager.default.createFile(atPath: path, contents: nil)
    }
    guard let handle = FileHandle(forWritingAtPath: path) else {
      throw StoreError.internalError("cannot write \(path)")
    }
    defer { try? handle.close() }
    do {
      try handle.seekToEnd()
      try handle.write(contentsOf: Data(text.utf8))
      try handle.synchronize()
    } catch {
      throw StoreError.internalError("cannot write \(path): \(error.localizedDescription)")
    }
    return heads.count
  }

  // MARK: Checking

  /// What ``check(head:proof:publicKey:)`` found.
  public struct CheckResult: Sendable {
    /// True only when the head is signed by the key and the proof holds for it.
    public var holds: Bool
    /// One line per finding, for people.
    public var lines: [String]
  }

  /// Checks a proof against a signed head with the log's public key, and nothing else: the
  /// head's signature, then an inclusion proof (the leaf is the event shown, and its audit path
  /// leads to the head's root) or a consistency proof (the head's tree extends the older one,
  /// whose signature is checked too when the proof carries it).
  public static func check(head headJSON: JSONValue, proof: JSONValue, publicKey: [UInt8])
    -> CheckResult
  {
    var lines: [String] = []
    func fail(_ line: String) -> CheckResult {
      CheckResult(holds: false, lines: lines + [line])
    }
    let head: SignedTreeHead
    do { head = try Self.head(headJSON) } catch {
      return fail("the head is malformed: \(reason(error))")
    }
    guard head.publicKey == publicKey else {
      return fail(
        "the head names key \(SignedTreeHead.keyID(head.publicKey)), not the key given (\(SignedTreeHead.keyID(publicKey)))"
      )
    }
    guard head.isSigned(by: publicKey) else {
      return fail("the head's signature does not verify with the key")
    }
    lines.append(
      "head: \(head.size) events, root \(Hex.encode(head.root)), signed at \(head.time) by key \(SignedTreeHead.keyID(publicKey)): signature ok"
    )
    do {
      switch proof["type"]?.stringValue {
      case "inclusion":
        let seq = try uint(proof, "seq")
        let size = try uint(proof, "tree_size")
        guard size == head.size else {
          return fail("the proof is for a tree of \(size) events, the head's has \(head.size)")
        }
        guard let leafText = proof["leaf"]?.stringValue,
          let leaf = Base64.decode(leafText)
        else { return fail("the proof has no base64 \"leaf\"") }
        guard let event = EventLog.event(fromLeaf: leaf) else {
          return fail("the leaf is not an event record (or its checksum does not match)")
        }
        guard event.position.rawValue == seq else {
          return fail("the leaf holds event \(event.position), the proof claims \(seq)")
        }
        if let shown = proof["event"], !sameMembers(shown, json(event)) {
          return fail("the \"event\" shown is not the one the leaf holds")
        }
        // An erased event's proof proves the kept hash of its original leaf, not the leaf it
        // shows (what the erasure left of it).
        var leafHash = MerkleTree.leafHash(leaf)
        if let erasedBy = proof["erased_by"]?.numberValue?.int64Value {
          guard event.erasedBy?.rawValue == UInt64(erasedBy) else {
            return fail("the leaf does not say it was erased by event \(erasedBy)")
          }
          leafHash = try hash(proof["leaf_hash"], "leaf_hash")
        }
        guard seq >= 1, seq <= size,
          MerkleTree.verifyInclusion(
            index: seq - 1, size: size, leafHash: leafHash, path: try path(proof),
            root: head.root)
        else {
          return fail("the audit path does not lead from event \(seq) to the head's root")
        }
        if let erasedBy = event.erasedBy {
          lines.append(
            "event \(seq) (\(event.type) on '\(event.stream)' by \(event.actor) at \(SignedTreeHead.timeString(event.timestamp))) is in the log of \(size) events, erased by event \(erasedBy): inclusion proof of its original leaf ok"
          )
          return CheckResult(holds: true, lines: lines)
        }
        lines.append(
          "event \(seq) (\(event.type) on '\(event.stream)' by \(event.actor) at \(SignedTreeHead.timeString(event.timestamp))) is in the log of \(size) events: inclusion proof ok"
        )
      case "consistency":
        let oldSize = try uint(proof, "old_size")
        let newSize = try uint(proof, "new_size")
        let oldRoot = try hash(proof["old_root"], "old_root")
        let newRoot = try hash(proof["new_root"], "new_root")
        guard newSize == head.size, newRoot == head.root else {
          return fail("the proof leads to a tree of \(newSize) events that is not the head's")
        }
        if let old = proof["old_head"] {
          let oldHead = try Self.head(old)
          guard oldHead.isSigned(by: publicKey) else {
            return fail("the older head's signature does not verify with the key")
          }
          guard oldHead.size == oldSize, oldHead.root == oldRoot else {
            return fail("the older head is not the tree the proof starts from")
          }
          lines.append("older head: \(oldSize) events, signed at \(oldHead.time): signature ok")
        }
        guard
          MerkleTree.verifyConsistency(
            oldSize: oldSize, newSize: newSize, oldRoot: oldRoot, newRoot: newRoot,
            path: try path(proof))
        else {
          return fail(
            "the log of \(newSize) events does not extend the log of \(oldSize) events with root \(Hex.encode(oldRoot))"
          )
        }
        lines.append(
          "the log of \(newSize) events extends the log of \(oldSize) events: consistency proof ok")
      default:
        return fail("the proof's \"type\" must be \"inclusion\" or \"consistency\"")
      }
    } catch {
      return fail("the proof is malformed: \(reason(error))")
    }
    return CheckResult(holds: true, lines: lines)
  }

  /// Whether two objects have the same members, in any order.
  static func sameMembers(_ a: JSONValue, _ b: JSONValue) -> Bool {
    guard let a = a.objectValue, let b = b.objectValue, a.count == b.count else { return false }
    return b.allSatisfy { a[$0.key] == $0.value }
  }

  static func reason(_ error: any Error) -> String {
    (error as? StoreError)?.reason ?? "\(error)"
  }
}
