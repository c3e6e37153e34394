import CLMDB
import Crypto

#if !canImport(CryptoKit)
  import COpenSSL
#endif

/// SHA-256 as the Merkle tree needs it: over fixed-size inputs and records where they lie, into
/// ``MerkleDigest`` values, with no allocation. On Linux it calls OpenSSL's libcrypto through its
/// public `SHA256_Init/Update/Final` (COpenSSL's `wikilog_sha256`), with the context on the
/// stack: swift-crypto's `SHA256` makes a context object per hash and copies the digest out
/// twice, which cost more than the hashing of a node (65 bytes, two blocks). Where swift-crypto
/// is CryptoKit (Apple platforms), its `SHA256`.
enum MerkleSHA256 {
  /// SHA-256 of the bytes `0x00 || position (8 bytes, big-endian) || record`.
  @inline(__always)
  static func leaf(position: UInt64, record: UnsafeRawBufferPointer) -> MerkleDigest {
    var prefix: (UInt64, UInt64) = (0, 0)
    unsafe withUnsafeMutableBytes(of: &prefix) { p in
      unsafe p.storeBytes(of: position.bigEndian, toByteOffset: 1, as: UInt64.self)
    }
    var digest = MerkleDigest()
    unsafe withUnsafeBytes(of: &prefix) { p in
      unsafe withUnsafeMutableBytes(of: &digest) { out in
        #if canImport(CryptoKit)
          var hasher = SHA256()
          unsafe hasher.update(bufferPointer: UnsafeRawBufferPointer(rebasing: p[0..<9]))
          unsafe hasher.update(bufferPointer: record)
          unsafe hasher.finalize().withUnsafeBytes { unsafe out.copyMemory(from: $0) }
        #else
          unsafe wikilog_sha256(
            p.baseAddress, 9, record.baseAddress, record.count,
            out.baseAddress.unsafelyUnwrapped.assumingMemoryBound(to: UInt8.self))
        #endif
      }
    }
    return digest
  }

  /// SHA-256 of the bytes `0x01 || left || right` (65 bytes, one call).
  @inline(__always)
  static func node(_ left: MerkleDigest, _ right: MerkleDigest) -> MerkleDigest {
    var input: (UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64) = (
      0, 0, 0, 0, 0, 0, 0, 0, 0
    )
    var digest = MerkleDigest()
    unsafe withUnsafeMutableBytes(of: &input) { p in
      unsafe p.storeBytes(of: 1, toByteOffset: 0, as: UInt8.self)
      unsafe p.storeBytes(of: left, toByteOffset: 1, as: MerkleDigest.self)
      unsafe p.storeBytes(of: right, toByteOffset: 33, as: MerkleDigest.self)
      unsafe withUnsafeMutableBytes(of: &digest) { out in
        #if canImport(CryptoKit)
          var hasher = SHA256()
          unsafe hasher.update(bufferPointer: UnsafeRawBufferPointer(rebasing: p[0..<65]))
          unsafe hasher.finalize().withUnsafeBytes { unsafe out.copyMemory(from: $0) }
        #else
          unsafe wikilog_sha256(
            p.baseAddress, 65, nil, 0,
            out.baseAddress.unsafelyUnwrapped.assumingMemoryBound(to: UInt8.self))
        #endif
      }
    }
    return digest
  }
}

extension MerkleDigest {
  /// The digest of 32 bytes; nil for any other count.
  init?(_ bytes: some Collection<UInt8>) {
    guard bytes.count == 32 else { return nil }
    var digest = MerkleDigest()
    unsafe withUnsafeMutableBytes(of: &digest) { out in
      for (i, b) in bytes.enumerated() { unsafe out[i] = b }
    }
    self = digest
  }

  /// The digest's 32 bytes.
  var bytes: [UInt8] {
    unsafe withUnsafeBytes(of: self) { unsafe Array($0) }
  }
}

/// The Merkle tree's reads over raw pages; everything returned is copied out of the map.
extension RawTransaction {
  /// The stored record of the event at `position`, copied (nil when there is none).
  func record(_ events: UInt32, at position: UInt64) throws(LMDBError) -> [UInt8]? {
    try get(events, position.bigEndianBytes)
  }

  /// The leaf hash of the event at `position` (nil when there is none).
  func leafHash(_ events: UInt32, erased: UInt32, at position: UInt64) throws(LMDBError)
    -> MerkleDigest?
  {
    guard let bytes = try unsafe lookup(events, position.bigEndianBytes) else { return nil }
    return try unsafe leaf(erased: erased, position: position, record: bytes)
  }

  /// ``leaf(erased:position:record:)`` of a record copied out of the map.
  func leaf(erased: UInt32, position: UInt64, record: [UInt8]) throws(LMDBError) -> MerkleDigest {
    let result = unsafe record.withUnsafeBytes { bytes in
      Result { () throws(LMDBError) in
        try unsafe leaf(erased: erased, position: position, record: bytes)
      }
    }
    return try result.get()
  }

  /// The Merkle leaf hash of the stored `record` at `position`: hashed from it, or, for an
  /// erased event (record format 2), the hash of its original record kept in `log.erased`
  /// (hashed from the record as it is when that is missing: the tree's check then fails).
  @inline(__always)
  func leaf(erased: UInt32, position: UInt64, record: UnsafeRawBufferPointer) throws(LMDBError)
    -> MerkleDigest
  {
    if unsafe record.count > 0 && record[0] == EventRecord.erasedFormat && erased != UInt32.max,
      let stored = try unsafe lookup(erased, position.bigEndianBytes), stored.count == 32
    {
      return unsafe stored.loadUnaligned(as: MerkleDigest.self)
    }
    return unsafe MerkleSHA256.leaf(position: position, record: record)
  }

  /// Calls `body` with the key of each event record from `position` on and its leaf hash,
  /// until it returns false. Records are hashed as stored: their checksums are not checked.
  func forEachLeafHash(
    _ events: UInt32, erased: UInt32, from position: UInt64,
    _ body: (_ position: UInt64, _ hash: MerkleDigest) throws -> Bool
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
      guard try unsafe body(p, leaf(erased: erased, position: p, record: e.value)) else { return }
      unsafe entry = try unsafe cursor.get(.next)
    }
  }

  /// The stored tree node under `key` (a big-endian post-order number); nil when there is none,
  /// and a digest of another size reads as nil too.
  func merkleNode(_ merkle: UInt32, key: UInt64) throws(LMDBError) -> MerkleDigest? {
    var k = key.bigEndian
    let value = try unsafe withUnsafeBytes(of: &k) { (k) throws(LMDBError) in
      try unsafe get(merkle, k)
    }
    guard let value = unsafe value, value.count == 32 else { return nil }
    return unsafe value.loadUnaligned(as: MerkleDigest.self)
  }

  /// Stores a tree node under `key` (a big-endian post-order number), with `MDB_APPEND` when it
  /// sorts last (as every node the writer completes does), with a plain put otherwise.
  func putMerkleNode(_ merkle: UInt32, key: UInt64, _ hash: MerkleDigest) throws(LMDBError) {
    var k = key.bigEndian
    var v = hash
    try unsafe withUnsafeBytes(of: &k) { (k) throws(LMDBError) in
      try unsafe withUnsafeBytes(of: &v) { (v) throws(LMDBError) in
        var kv = unsafe MDB_val(k)
        var vv = unsafe MDB_val(v)
        let rc = unsafe mdb_put(pointer, merkle, &kv, &vv, UInt32(MDB_APPEND))
        if rc == MDB_KEYEXIST {
          try unsafe put(merkle, k, v)
        } else {
          try check(rc, "mdb_put")
        }
      }
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

/// What ``EventLog/verify(maxProblems:head:)`` checks of a record, read in place: its checksum
/// and structure checked, the stream's name made (a short name is stored inline in the string:
/// no allocation), type, actor and payload left where they lie.
struct CheckedRecord {
  var timestamp: Int64
  var streamVersion: UInt64
  var previous: UInt64
  var stream: String
  /// ``StreamLinkHash/of(key:version:position:)`` of this event: its stream's key in
  /// `log.streams`, its version, its position (0 without a stream).
  var linkHash: UInt64
  /// The same of the event it points back to: version − 1 at `previous` (0 for a first event).
  var previousLinkHash: UInt64
}

/// The stream links of a log as two multisets of hashes, compared by their sums: every event
/// with a stream adds (its stream's key, its version, its position) to one side; every event
/// after a stream's first adds (the key, its version − 1, its back pointer) to the other, and so
/// does every stored head (its key, version, last position). The sides are equal exactly when
/// each event but a stream's last is pointed back to once by the next version of its stream,
/// and each stream's last is its stored head: what ``EventLog/verify(maxProblems:head:)``
/// otherwise checks with a dictionary of every stream (slow for millions of streams). The hash
/// is the standard library's, seeded at random per process, so records cannot be made to
/// collide on purpose; when the sums differ, verify runs the dictionary pass to say where.
enum StreamLinkHash {
  @inline(__always)
  static func of(key: UnsafeRawBufferPointer, version: UInt64, position: UInt64) -> UInt64 {
    var hasher = Hasher()
    unsafe hasher.combine(bytes: key)
    hasher.combine(version)
    hasher.combine(position)
    return UInt64(bitPattern: Int64(hasher.finalize()))
  }
}

extension RawTransaction {
  /// Calls `body` with each event record in position order: its position (nil when its key is
  /// not 8 bytes), the record checked (``EventRecord/fields(position:bytes:)``) or why it fails,
  /// and, with `leafHashes`, its Merkle leaf hash (hashed as stored, whatever its checksum),
  /// from the same bytes in one pass.
  func forEachCheckedRecord(
    _ events: UInt32, erased: UInt32 = UInt32.max, leafHashes: Bool,
    _ body: (
      _ position: UInt64?, _ record: Result<CheckedRecord, RecordFailure>, _ leaf: MerkleDigest?
    ) throws -> Void
  ) throws {
    let cursor = try openCursor(events)
    defer { cursor.close() }
    var entry = try unsafe cursor.get(.first)
    while let e = unsafe entry {
      let keySize = unsafe e.key.count
      if keySize != 8 {
        try body(
          nil, .failure(RecordFailure(position: 0, reason: "an event key is \(keySize) bytes")),
          nil)
      } else {
        let p = unsafe Keys.position(e.key)
        let leaf = unsafe leafHashes ? try leaf(erased: erased, position: p, record: e.value) : nil
        do {
          let f = try unsafe EventRecord.fields(position: p, bytes: e.value)
          var record = CheckedRecord(
            timestamp: f.timestamp, streamVersion: f.streamVersion, previous: f.previous,
            stream: "", linkHash: 0, previousLinkHash: 0)
          if f.streamEnd > f.streamStart {
            record.stream = unsafe String(
              decoding: UnsafeRawBufferPointer(rebasing: e.value[f.streamStart..<f.streamEnd]),
              as: UTF8.self)
            // A name of up to maxInlineBytes is its key as stored in the record: its length
            // (LEB128), then its bytes (StreamKey.prefix); a longer one's key is computed.
            let hashes = { (key: UnsafeRawBufferPointer) -> (UInt64, UInt64) in
              (
                unsafe StreamLinkHash.of(key: key, version: f.streamVersion, position: p),
                f.streamVersion > 1
                  ? unsafe StreamLinkHash.of(
                    key: key, version: f.streamVersion - 1, position: f.previous) : 0
              )
            }
            let h =
              f.streamEnd - f.streamStart <= StreamKey.maxInlineBytes
              ? unsafe hashes(UnsafeRawBufferPointer(rebasing: e.value[f.typeEnd..<f.streamEnd]))
              : unsafe StreamKey.prefix(record.stream).withUnsafeBytes { unsafe hashes($0) }
            record.linkHash = h.0
            record.previousLinkHash = h.1
          }
          try body(p, .success(record), leaf)
        } catch let failure as EventRecord.DecodingError {
          try body(p, .failure(RecordFailure(position: p, reason: failure.reason)), leaf)
        }
      }
      unsafe entry = try unsafe cursor.get(.next)
    }
  }

  /// Calls `body` with each stored stream head in key order: the stream's name when its key
  /// holds it whole (names of ``StreamKey/maxInlineBytes`` bytes or fewer; nil for a hashed
  /// one), and the head (nil when the value is not 16 bytes).
  /// `linkHash` is ``StreamLinkHash/of(key:version:position:)`` of the key, version and last
  /// position (0 for a malformed head).
  func forEachStreamHead(
    _ streams: UInt32,
    _ body: (_ stream: String?, _ head: StreamHead?, _ linkHash: UInt64) throws -> Void
  ) throws {
    let cursor = try openCursor(streams)
    defer { cursor.close() }
    var entry = try unsafe cursor.get(.first)
    while let e = unsafe entry {
      var offset = 0
      var stream: String?
      let keySize = unsafe e.key.count
      if let length = try? unsafe EventRecord.readVarint(e.key, &offset, end: keySize),
        length <= UInt64(StreamKey.maxInlineBytes), UInt64(keySize - offset) == length
      {
        stream = unsafe String(
          decoding: UnsafeRawBufferPointer(rebasing: e.key[offset...]), as: UTF8.self)
      }
      var head: StreamHead?
      if unsafe e.value.count == 16 {
        head = unsafe StreamHead(
          version: UInt64(bigEndian: e.value.loadUnaligned(as: UInt64.self)),
          last: UInt64(bigEndian: e.value.loadUnaligned(fromByteOffset: 8, as: UInt64.self)))
      }
      var linkHash: UInt64 = 0
      if let head {
        linkHash = unsafe StreamLinkHash.of(key: e.key, version: head.version, position: head.last)
      }
      try body(stream, head, linkHash)
      unsafe entry = try unsafe cursor.get(.next)
    }
  }
}
