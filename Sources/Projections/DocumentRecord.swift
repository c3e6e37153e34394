import Formats
import JSON
public import RevTree

/// One document's state in the `docs.byId` database: its revision tree (each revision pointing
/// to the log position of its body) and the position of its last change.
///
/// ```
/// u8 format (1) · string doc id · varint update seq · RevisionTree encoding (the rest)
/// ```
public struct DocumentRecord: Sendable, Equatable {
  public var docID: String
  /// The position of the event that last changed the document: its row in the changes feed.
  public var updateSeq: UInt64
  public var tree: RevisionTree

  public init(docID: String, updateSeq: UInt64 = 0, tree: RevisionTree = RevisionTree()) {
    self.docID = docID
    self.updateSeq = updateSeq
    self.tree = tree
  }

  static let format: UInt8 = 1

  func encoded() -> [UInt8] {
    var w = ByteWriter(capacity: 64)
    w.byte(Self.format)
    w.string(docID)
    w.varint(updateSeq)
    w.raw(tree.encoded())
    return w.bytes
  }

  public init(decoding bytes: [UInt8]) throws(StoreError) {
    var r = ByteReader(bytes)
    do {
      guard try r.byte() == Self.format else { throw ByteReader.Truncated() }
      docID = try r.string()
      updateSeq = try r.varint()
      tree = try RevisionTree(decoding: r.rest())
    } catch {
      throw StoreError.internalError("a stored document record is corrupt: \(error)")
    }
  }

  /// True when the document exists and its winner is not deleted.
  public var isLive: Bool { !tree.isEmpty && !tree.isDeleted }
}

/// How document ids become LMDB keys (`docs.byId`, `docs.local`, the `docs.bySeq` values, and the
/// access projection's `access.docs`).
///
/// An id of up to ``inlineBytes`` UTF-8 bytes is its own key, so `_all_docs` sorts by id bytes as
/// CouchDB's does. LMDB keys stop at 511 bytes, so a longer id (up to ``maxBytes``) is keyed by
/// its first ``inlineBytes`` bytes and the MD5 of the whole id: ``hashedBytes`` bytes, a length
/// no inline key has. Such ids still sort by their first 480 bytes; ids that share those sort
/// among themselves by the hash, and range reads (`startkey`, `endkey`, `_id` selectors)
/// compare the whole ids. The record under a key holds its id, and a read checks it, so two ids
/// whose keys collide can never be mixed (the second is refused).
///
/// ```
/// DocumentKey.key("a")                                      // [0x61]
/// DocumentKey.key(String(repeating: "x", count: 600)).count  // 496
/// ```
public enum DocumentKey {
  /// The longest document id stored, in UTF-8 bytes. CouchDB sets none by default
  /// (`max_document_id_length = infinity`); ids must also fit in a request line to be read by URL.
  public static let maxBytes = 16_384
  /// Ids of at most this many bytes are their own keys.
  public static let inlineBytes = 480
  /// The length of a long id's key: ``inlineBytes`` and a 16-byte MD5.
  public static let hashedBytes = inlineBytes + 16

  public static func key(_ id: String) -> [UInt8] {
    let count = id.utf8.count
    guard count > inlineBytes else { return Array(id.utf8) }
    let bytes = Array(id.utf8)
    var md5 = MD5()
    md5.update(bytes)
    return Array(bytes[0..<inlineBytes]) + md5.finalize().bytes
  }

  /// True for the key of an id longer than ``inlineBytes``: its bytes are not the id.
  public static func isHashed(_ key: some Collection<UInt8>) -> Bool { key.count > inlineBytes }

  /// The id a key names when it is inline; nil for a hashed key (read the record for it).
  public static func inlineID(_ key: [UInt8]) -> String? {
    isHashed(key) ? nil : String(decoding: key, as: UTF8.self)
  }

  /// Where a forward (`descending == false`) or backward scan must start so that it reaches
  /// every id at or past `id` in that direction: the id's own key when it is short, else its
  /// first ``inlineBytes`` bytes (forward) or those followed by 0xFF bytes (backward), since the
  /// long ids that share them sort by their hashes.
  public static func scanStart(_ id: String, descending: Bool) -> [UInt8] {
    scanStart(Array(id.utf8), descending: descending)
  }

  /// Whether `key` is a long id's key that shares its inline part with the long id `bound`:
  /// such rows come in hash order, so a range scan reads past `bound` through all of them.
  public static func sharesInlinePart(_ key: [UInt8], with bound: [UInt8]) -> Bool {
    isHashed(key) && bound.count > inlineBytes
      && key.prefix(inlineBytes).elementsEqual(bound.prefix(inlineBytes))
  }

  /// ``scanStart(_:descending:)`` for an id's bytes.
  public static func scanStart(_ bytes: [UInt8], descending: Bool) -> [UInt8] {
    guard bytes.count > inlineBytes else { return bytes }
    let prefix = Array(bytes[0..<inlineBytes])
    return descending ? prefix + [UInt8](repeating: 0xFF, count: 16) : prefix
  }

  /// Checks a document id as CouchDB does (`couch_doc:validate_docid`, refusals named
  /// `illegal_docid`), plus the length limit.
  public static func validate(_ id: String, allowLocal: Bool = false, checkLength: Bool = true)
    throws(StoreError)
  {
    guard !id.isEmpty else { throw StoreError.illegalDocID("Document id must not be empty") }
    // CouchDB's answer to `PUT /db/_local%2F`.
    if id == "_local/" { throw StoreError.badRequest("Invalid _local document id.") }
    if id == "_design/" {
      throw StoreError.illegalDocID("Illegal document id `\(id)`")
    }
    guard !checkLength || id.utf8.count <= maxBytes else {
      throw StoreError.illegalDocID(
        "Document id is \(id.utf8.count) bytes; wikilog stores ids of up to \(maxBytes) bytes")
    }
    if id.hasPrefix("_local/") && !allowLocal {
      throw StoreError.badRequest(
        "_local documents are written one at a time (PUT /{db}/_local/{id}), not as documents")
    }
    if id.hasPrefix("_"), !id.hasPrefix("_design/"), !(allowLocal && id.hasPrefix("_local/")) {
      throw StoreError.illegalDocID("Only reserved document ids may start with underscore.")
    }
  }
}
