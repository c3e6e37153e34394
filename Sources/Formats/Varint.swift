/// Unsigned LEB128 varints, as the log's records, revision trees and projections' rows store
/// lengths and numbers: seven bits a byte, least significant first, the high bit set on every
/// byte but the last.
///
/// ```swift
/// var bytes: [UInt8] = []
/// Varint.append(300, to: &bytes)          // [0xAC, 0x02]
/// var at = 0
/// Varint.read(bytes, at: &at)             // 300, at == 2
/// ```
public enum Varint {
  /// The bytes `value` takes.
  @inlinable @inline(__always)
  public static func size(_ value: UInt64) -> Int {
    value == 0 ? 1 : (64 - value.leadingZeroBitCount + 6) / 7
  }

  /// Hands `value`'s bytes to `emit`, first to last.
  @inlinable @inline(__always)
  public static func encode(_ value: UInt64, _ emit: (UInt8) -> Void) {
    var v = value
    while v >= 0x80 {
      emit(UInt8(truncatingIfNeeded: v) | 0x80)
      v >>= 7
    }
    emit(UInt8(v))
  }

  /// Appends `value` to `bytes`.
  @inlinable
  public static func append(_ value: UInt64, to bytes: inout [UInt8]) {
    encode(value) { bytes.append($0) }
  }

  /// The varint at `index` of `bytes`, moving `index` past it; nil when the bytes end before
  /// it does (`index` is then the end) or it does not fit 64 bits (`index` is then at the byte
  /// that overflows).
  @inlinable @inline(__always)
  public static func read<Bytes: Collection<UInt8>>(_ bytes: Bytes, at index: inout Bytes.Index)
    -> UInt64?
  {
    var result: UInt64 = 0
    var shift: UInt64 = 0
    while index != bytes.endIndex {
      let byte = bytes[index]
      // Past 64 bits: stopped at the byte that overflows.
      if shift == 63 && byte > 1 { return nil }
      bytes.formIndex(after: &index)
      result |= UInt64(byte & 0x7F) << shift
      if byte < 0x80 { return result }
      shift += 7
    }
    return nil
  }
}
