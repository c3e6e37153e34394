import CLMDB
import Crypto

/// An event's Merkle leaf: the bytes `position (8 bytes, big-endian) || the record as stored`
/// (``EventRecord``'s layout, checksum included), hashed as RFC 6962 hashes a leaf:
/// SHA-256(0x00 || leaf bytes).
enum MerkleLeaf {
  @inline(__always)
  static func hash(position: UInt64, record: UnsafeRawBufferPointer) -> MerkleTree.Hash {
    var hasher = SHA256()
    var prefix: (UInt8, UInt64) = (0, position.bigEndian)
    unsafe withUnsafeBytes(of: &prefix.0) { unsafe hasher.update(bufferPointer: $0) }
    unsafe withUnsafeBytes(of: &prefix.1) { unsafe hasher.update(bufferPointer: $0) }
    unsafe hasher.update(bufferPointer: record)
    return unsafe hasher.finalize().withUnsafeBytes { unsafe Array($0) }
  }

  /// SHA-256(0x01 || left || right), fed to the hasher from the arrays in place (the generic
  /// `update(data:)` copies its argument).
  @inline(__always)
  static func node(_ left: MerkleTree.Hash, _ right: MerkleTree.Hash) -> MerkleTree.Hash {
    var hasher = SHA256()
    var tag: UInt8 = 1
    unsafe withUnsafeBytes(of: &tag) { unsafe hasher.update(bufferPointer: $0) }
    unsafe left.withUnsafeBytes { unsafe hasher.update(bufferPointer: $0) }
    unsafe right.withUnsafeBytes { unsafe hasher.update(bufferPointer: $0) }
    return unsafe hasher.finalize().withUnsafeBytes { unsafe Array($0) }
  }
}

/// The Merkle tree's reads over raw pages; everything returned is copied out of the map.
extension RawTransaction {
  /// The stored record of the event at `position`, copied (nil when there is none).
  func record(_ events: UInt32, at position: UInt64) throws(LMDBError) -> [UInt8]? {
    try get(events, position.bigEndianBytes)
  }

  /// The leaf hash of the event at `position` (nil when there is none).
  func leafHash(_ events: UInt32, at position: UInt64) throws(LMDBError) -> MerkleTree.Hash? {
    guard let bytes = try unsafe lookup(events, position.bigEndianBytes) else { return nil }
    return unsafe MerkleLeaf.hash(position: position, record: bytes)
  }

  /// Calls `body` with the key of each event record from `position` on and its leaf hash,
  /// until it returns false. Records are hashed as stored: their checksums are not checked.
  func forEachLeafHash(
    _ events: UInt32, from position: UInt64,
    _ body: (_ position: UInt64, _ hash: MerkleTree.Hash) throws -> Bool
  ) throws {
    let cursor = try openCursor(events)
    defer { cursor.close() }
    var entry = try unsafe cursor.get(.atOrAfter, key: position.bigEndianBytes)
    while let e = unsafe entry {
      let keySize = unsafe e.key.count
      guard keySize == 8 else {
        throw RecordFailure(position: 0, reason: "an event key of \(keySize) bytes")
      }
      let p = unsafe Keys.position(e.key)
      guard try unsafe body(p, MerkleLeaf.hash(position: p, record: e.value)) else { return }
      unsafe entry = try unsafe cursor.get(.next)
    }
  }
}

extension EventRecord {
  /// The event a Merkle leaf holds (`position || record`), its checksum checked; nil when the
  /// bytes are not a well-formed leaf.
  static func decode(leaf: [UInt8]) -> RecordedEvent? {
    guard leaf.count > 8, let position = UInt64(bigEndianBytes: leaf.prefix(8)) else { return nil }
    return unsafe leaf.withUnsafeBytes { bytes in
      try? unsafe decode(position: position, bytes: UnsafeRawBufferPointer(rebasing: bytes[8...]))
    }
  }
}
