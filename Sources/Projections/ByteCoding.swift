import Formats

/// Little helpers for the compact binary records Projections stores.
package struct ByteWriter {
  package var bytes: [UInt8] = []

  package init(capacity: Int = 64) { bytes.reserveCapacity(capacity) }

  package mutating func byte(_ b: UInt8) { bytes.append(b) }

  package mutating func varint(_ value: UInt64) { Varint.append(value, to: &bytes) }

  package mutating func varint(_ value: Int) { varint(UInt64(value)) }

  package mutating func string(_ s: String) {
    let utf8 = s.utf8
    varint(utf8.count)
    bytes.append(contentsOf: utf8)
  }

  package mutating func data(_ d: [UInt8]) {
    varint(d.count)
    bytes.append(contentsOf: d)
  }

  package mutating func raw(_ d: some Sequence<UInt8>) { bytes.append(contentsOf: d) }
}

/// Reads what ``ByteWriter`` wrote; every read checks bounds and throws ``Truncated``.
package struct ByteReader {
  package struct Truncated: Error { package init() {} }

  package let bytes: [UInt8]
  package var offset: Int

  package init(_ bytes: [UInt8], offset: Int = 0) {
    self.bytes = bytes
    self.offset = offset
  }

  package var isAtEnd: Bool { offset >= bytes.count }

  package mutating func byte() throws(Truncated) -> UInt8 {
    guard offset < bytes.count else { throw Truncated() }
    defer { offset += 1 }
    return bytes[offset]
  }

  package mutating func varint() throws(Truncated) -> UInt64 {
    guard let value = Varint.read(bytes, at: &offset) else { throw Truncated() }
    return value
  }

  package mutating func int() throws(Truncated) -> Int {
    let v = try varint()
    guard v <= UInt64(Int.max) else { throw Truncated() }
    return Int(v)
  }

  package mutating func data() throws(Truncated) -> ArraySlice<UInt8> {
    let n = try int()
    guard n <= bytes.count - offset else { throw Truncated() }
    defer { offset += n }
    return bytes[offset..<offset + n]
  }

  package mutating func string() throws(Truncated) -> String {
    String(decoding: try data(), as: UTF8.self)
  }

  package mutating func rest() -> ArraySlice<UInt8> {
    defer { offset = bytes.count }
    return bytes[offset...]
  }
}

extension UInt64 {
  /// Reads eight big-endian bytes from an array; nil when there are fewer. The same as `Log`'s
  /// generic `init(bigEndianBytes:)`, without its cost on the projections' hot paths.
  package init?(bigEndianArray bytes: [UInt8]) {
    guard bytes.count >= 8 else { return nil }
    var v: UInt64 = 0
    for i in 0..<8 { v = v << 8 | UInt64(bytes[i]) }
    self = v
  }
}
