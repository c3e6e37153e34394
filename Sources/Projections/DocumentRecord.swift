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

  init(decoding bytes: [UInt8]) throws(StoreError) {
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

/// How document ids become LMDB keys: their UTF-8 bytes, so `_all_docs` sorts by id bytes as
/// CouchDB's does. LMDB keys are at most 511 bytes; longer ids are refused.
enum DocumentKey {
  static let maxBytes = 500

  static func key(_ id: String) -> [UInt8] { Array(id.utf8) }

  /// Checks a document id as CouchDB does, plus the key-length limit.
  static func validate(_ id: String, allowLocal: Bool = false, checkLength: Bool = true)
    throws(StoreError)
  {
    guard !id.isEmpty else { throw StoreError.badRequest("Document id must not be empty") }
    guard !checkLength || id.utf8.count <= maxBytes else {
      throw StoreError.badRequest(
        "Document id is \(id.utf8.count) bytes; wikilog accepts ids up to \(maxBytes) bytes")
    }
    if id.hasPrefix("_local/") && !allowLocal {
      throw StoreError.badRequest(
        "_local documents are written with putLocal (PUT /db/_local/id), not as documents")
    }
    if id.hasPrefix("_") {
      let reserved = id.hasPrefix("_design/") || (allowLocal && id.hasPrefix("_local/"))
      guard reserved, id.count > (id.hasPrefix("_design/") ? 8 : 7) else {
        throw StoreError.badRequest("Only reserved document ids may start with underscore.")
      }
    }
  }
}
