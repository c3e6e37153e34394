/// How a stream name becomes its key in `log.streams` and the prefix of its keys in
/// `log.streamIndex`.
///
/// Each record points back to its stream's previous event, and `log.streams` holds each stream's
/// head (version and last position), so an append writes one head per stream and transaction
/// instead of an index entry per event. `log.streamIndex` holds a checkpoint every
/// ``checkpointInterval`` versions, `prefix ++ big-endian version`, so a read from any version
/// walks at most that many back pointers before it reaches what it wants.
///
/// Keys are `LEB128(utf8 length) ++ utf8 bytes`, plus the big-endian version in the index. The length prefix keeps
/// one stream's keys from running into another's ("a" vs "a\u{0}..."). LMDB keys are limited to
/// 511 bytes, so a name longer than ``maxInlineBytes`` keeps its first bytes and a 128-bit hash of
/// the whole name; readers compare the stored event's stream name, so a hash collision can never
/// mix two streams' events.
enum StreamKey {
  static let maxInlineBytes = 400
  static let checkpointInterval: UInt64 = 64
  static let keptPrefixBytes = 384

  static func prefix(_ stream: String) -> [UInt8] {
    let utf8 = Array(stream.utf8)
    var key: [UInt8] = []
    key.reserveCapacity(min(utf8.count, maxInlineBytes) + 10 + 8)
    EventRecord.appendVarint(UInt64(utf8.count), to: &key)
    if utf8.count <= maxInlineBytes {
      key.append(contentsOf: utf8)
    } else {
      key.append(contentsOf: utf8[0..<keptPrefixBytes])
      for seed: UInt64 in [0xCBF2_9CE4_8422_2325, 0x84222325_CBF29CE4] {
        var h = seed
        for b in utf8 { h = (h ^ UInt64(b)) &* 0x0000_0100_0000_01B3 }
        key.appendBigEndian(h)
      }
    }
    return key
  }

  static func key(prefix: [UInt8], version: UInt64) -> [UInt8] {
    var key = prefix
    key.appendBigEndian(version)
    return key
  }

  /// The same scheme for idempotency keys, which are also user strings of any length.
  static func idempotency(_ key: String) -> [UInt8] { prefix(key) }
}

extension UInt64 {
  /// Eight big-endian bytes: keys that sort like the numbers (positions, versions, counters).
  @inlinable public var bigEndianBytes: [UInt8] {
    let v = self
    return [
      UInt8(truncatingIfNeeded: v >> 56), UInt8(truncatingIfNeeded: v >> 48),
      UInt8(truncatingIfNeeded: v >> 40), UInt8(truncatingIfNeeded: v >> 32),
      UInt8(truncatingIfNeeded: v >> 24), UInt8(truncatingIfNeeded: v >> 16),
      UInt8(truncatingIfNeeded: v >> 8), UInt8(truncatingIfNeeded: v),
    ]
  }

  /// Reads eight big-endian bytes; nil when there are fewer.
  @inlinable public init?(bigEndianBytes bytes: some Collection<UInt8>) {
    guard bytes.count >= 8 else { return nil }
    var v: UInt64 = 0
    var i = bytes.startIndex
    for _ in 0..<8 {
      v = v << 8 | UInt64(bytes[i])
      bytes.formIndex(after: &i)
    }
    self = v
  }
}

extension [UInt8] {
  @inlinable
  mutating func appendBigEndian(_ value: UInt64) {
    for shift in stride(from: 56, through: 0, by: -8) {
      append(UInt8(truncatingIfNeeded: value >> UInt64(shift)))
    }
  }
}
