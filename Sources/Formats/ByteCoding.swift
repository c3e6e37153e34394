/// Little helpers for compact binary records (the values of projections and indexes):
/// varint-prefixed strings and byte strings, written by ``ByteWriter`` and read back by
/// ``ByteReader``.
public struct ByteWriter {
  public var bytes: [UInt8] = []

  public init(capacity: Int = 64) { bytes.reserveCapacity(capacity) }

  public mutating func byte(_ b: UInt8) { bytes.append(b) }

  public mutating func varint(_ value: UInt64) { Varint.append(value, to: &bytes) }

  public mutating func varint(_ value: Int) { varint(UInt64(value)) }

  public mutating func string(_ s: String) {
    let utf8 = s.utf8
    varint(utf8.count)
    bytes.append(contentsOf: utf8)
  }

  public mutating func data(_ d: [UInt8]) {
    varint(d.count)
    bytes.append(contentsOf: d)
  }

  public mutating func raw(_ d: some Sequence<UInt8>) { bytes.append(contentsOf: d) }
}

/// Reads what ``ByteWriter`` wrote; every read checks bounds and throws ``Truncated``.
public struct ByteReader {
  public struct Truncated: Error { public init() {} }

  public let bytes: [UInt8]
  public var offset: Int

  public init(_ bytes: [UInt8], offset: Int = 0) {
    self.bytes = bytes
    self.offset = offset
  }

  public var isAtEnd: Bool { offset >= bytes.count }

  public mutating func byte() throws(Truncated) -> UInt8 {
    guard offset < bytes.count else { throw Truncated() }
    defer { offset += 1 }
    return bytes[offset]
  }

  public mutating func varint() throws(Truncated) -> UInt64 {
    guard let value = Varint.read(bytes, at: &offset) else { throw Truncated() }
    return value
  }

  public mutating func int() throws(Truncated) -> Int {
    let v = try varint()
    guard v <= UInt64(Int.max) else { throw Truncated() }
    return Int(v)
  }

  public mutating func data() throws(Truncated) -> ArraySlice<UInt8> {
    let n = try int()
    guard n <= bytes.count - offset else { throw Truncated() }
    defer { offset += n }
    return bytes[offset..<offset + n]
  }

  public mutating func string() throws(Truncated) -> String {
    String(decoding: try data(), as: UTF8.self)
  }

  public mutating func rest() -> ArraySlice<UInt8> {
    defer { offset = bytes.count }
    return bytes[offset...]
  }
}

extension UInt64 {
  /// Reads eight big-endian bytes from an array; nil when there are fewer. The same as `Log`'s
  /// generic `init(bigEndianBytes:)`, without its cost on the projections' hot paths.
  public init?(bigEndianArray bytes: [UInt8]) {
    guard bytes.count >= 8 else { return nil }
    var v: UInt64 = 0
    for i in 0..<8 { v = v << 8 | UInt64(bytes[i]) }
    self = v
  }
}
