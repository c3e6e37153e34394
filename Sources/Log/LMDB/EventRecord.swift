/// The stored form of one event, the value under its big-endian position key in `log.events`.
///
/// ```
/// offset  size  field
/// 0       1     record format (1)
/// 1       8     timestamp, microseconds since 1970, little-endian
/// 9       var   stream version (LEB128)
///         var   type length (LEB128), then UTF-8 bytes
///         var   stream length (LEB128), then UTF-8 bytes
///         var   actor length (LEB128), then UTF-8 bytes
///         ...   payload (the rest)
/// n-4     4     CRC-32C, little-endian, of the 8-byte big-endian position followed by bytes 0..<n-4
/// ```
///
/// The checksum covers the position too, so a record found under the wrong key is detected.
enum EventRecord {
  static let format: UInt8 = 1
  static let fixedHeaderSize = 9
  static let checksumSize = 4

  struct DecodingError: Error {
    let reason: String
  }

  /// Appends the encoded record for an event to `buffer`.
  static func encode(
    into buffer: inout [UInt8], position: UInt64, timestamp: Int64, streamVersion: UInt64,
    type: String, stream: String, actor: String, payload: [UInt8]
  ) {
    let start = buffer.count
    buffer.append(format)
    appendLittleEndian(UInt64(bitPattern: timestamp), to: &buffer)
    appendVarint(streamVersion, to: &buffer)
    appendString(type, to: &buffer)
    appendString(stream, to: &buffer)
    appendString(actor, to: &buffer)
    buffer.append(contentsOf: payload)
    var crc = CRC32C.initial
    crc = CRC32C.update(crc, bigEndian: position)
    crc = unsafe buffer.withUnsafeBytes { unsafe CRC32C.update(crc, UnsafeRawBufferPointer(rebasing: $0[start...])) }
    appendLittleEndian32(CRC32C.finalize(crc), to: &buffer)
  }

  /// Reads the timestamp of a record without decoding the rest.
  static func timestamp(of bytes: UnsafeRawBufferPointer) throws(DecodingError) -> Int64 {
    guard bytes.count >= fixedHeaderSize + checksumSize, unsafe bytes[0] == format else {
      throw DecodingError(reason: "record header unreadable")
    }
    return Int64(bitPattern: unsafe readLittleEndian(bytes, at: 1))
  }

  /// Decodes a record, checking its checksum.
  static func decode(position: UInt64, bytes: UnsafeRawBufferPointer) throws(DecodingError) -> RecordedEvent {
    let count = bytes.count
    guard count >= fixedHeaderSize + checksumSize else {
      throw DecodingError(reason: "record of \(count) bytes is shorter than its header")
    }
    guard unsafe bytes[0] == format else {
      throw DecodingError(reason: "unknown record format \(unsafe bytes[0])")
    }
    let bodyEnd = count - checksumSize
    var crc = CRC32C.update(CRC32C.initial, bigEndian: position)
    crc = unsafe CRC32C.update(crc, UnsafeRawBufferPointer(rebasing: bytes[0..<bodyEnd]))
    let stored = unsafe UInt32(bytes[bodyEnd]) | UInt32(bytes[bodyEnd + 1]) << 8
      | UInt32(bytes[bodyEnd + 2]) << 16 | UInt32(bytes[bodyEnd + 3]) << 24
    guard CRC32C.finalize(crc) == stored else { throw DecodingError(reason: "checksum mismatch") }

    let timestamp = Int64(bitPattern: unsafe readLittleEndian(bytes, at: 1))
    var offset = fixedHeaderSize
    let streamVersion = try unsafe readVarint(bytes, &offset, end: bodyEnd)
    let type = try unsafe readString(bytes, &offset, end: bodyEnd)
    let stream = try unsafe readString(bytes, &offset, end: bodyEnd)
    let actor = try unsafe readString(bytes, &offset, end: bodyEnd)
    let payload = unsafe Array(UnsafeRawBufferPointer(rebasing: bytes[offset..<bodyEnd]))
    return RecordedEvent(
      position: LogPosition(position), streamVersion: streamVersion, timestampMicroseconds: timestamp,
      type: type, stream: stream, actor: actor, payload: payload)
  }

  // MARK: Primitives

  @inline(__always)
  static func appendLittleEndian(_ value: UInt64, to buffer: inout [UInt8]) {
    var v = value
    for _ in 0..<8 {
      buffer.append(UInt8(truncatingIfNeeded: v))
      v >>= 8
    }
  }

  @inline(__always)
  static func appendLittleEndian32(_ value: UInt32, to buffer: inout [UInt8]) {
    buffer.append(UInt8(truncatingIfNeeded: value))
    buffer.append(UInt8(truncatingIfNeeded: value >> 8))
    buffer.append(UInt8(truncatingIfNeeded: value >> 16))
    buffer.append(UInt8(truncatingIfNeeded: value >> 24))
  }

  @inline(__always)
  static func appendVarint(_ value: UInt64, to buffer: inout [UInt8]) {
    var v = value
    while v >= 0x80 {
      buffer.append(UInt8(truncatingIfNeeded: v) | 0x80)
      v >>= 7
    }
    buffer.append(UInt8(v))
  }

  @inline(__always)
  static func appendString(_ string: String, to buffer: inout [UInt8]) {
    var s = string
    s.withUTF8 { utf8 in
      appendVarint(UInt64(utf8.count), to: &buffer)
      unsafe buffer.append(contentsOf: utf8)
    }
  }

  @inline(__always)
  static func readLittleEndian(_ bytes: UnsafeRawBufferPointer, at offset: Int) -> UInt64 {
    unsafe UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: offset, as: UInt64.self))
  }

  @inline(__always)
  static func readVarint(_ bytes: UnsafeRawBufferPointer, _ offset: inout Int, end: Int) throws(DecodingError)
    -> UInt64
  {
    var result: UInt64 = 0
    var shift: UInt64 = 0
    while true {
      guard offset < end, shift < 64 else { throw DecodingError(reason: "truncated or overlong varint") }
      let byte = unsafe bytes[offset]
      offset += 1
      result |= UInt64(byte & 0x7F) << shift
      if byte < 0x80 { return result }
      shift += 7
    }
  }

  @inline(__always)
  static func readString(_ bytes: UnsafeRawBufferPointer, _ offset: inout Int, end: Int) throws(DecodingError)
    -> String
  {
    let length = try unsafe readVarint(bytes, &offset, end: end)
    guard length <= UInt64(end - offset) else { throw DecodingError(reason: "string runs past the record") }
    let stringEnd = offset + Int(length)
    defer { offset = stringEnd }
    return unsafe String(decoding: UnsafeRawBufferPointer(rebasing: bytes[offset..<stringEnd]), as: UTF8.self)
  }
}

/// CRC-32C (Castagnoli), slicing-by-8, as used by iSCSI, ext4 and LevelDB.
enum CRC32C {
  static let initial: UInt32 = 0xFFFF_FFFF

  static let tables: [UInt32] = {
    var t = [UInt32](repeating: 0, count: 8 * 256)
    for i in 0..<256 {
      var c = UInt32(i)
      for _ in 0..<8 { c = (c & 1) != 0 ? (c >> 1) ^ 0x82F6_3B78 : c >> 1 }
      t[i] = c
    }
    for i in 0..<256 {
      for k in 1..<8 { t[k * 256 + i] = (t[(k - 1) * 256 + i] >> 8) ^ t[Int(t[(k - 1) * 256 + i] & 0xFF)] }
    }
    return t
  }()

  @inline(__always)
  static func finalize(_ crc: UInt32) -> UInt32 { crc ^ 0xFFFF_FFFF }

  static func update(_ crc: UInt32, bigEndian value: UInt64) -> UInt32 {
    var v = value.bigEndian
    return unsafe withUnsafeBytes(of: &v) { unsafe update(crc, $0) }
  }

  static func update(_ crc: UInt32, _ bytes: UnsafeRawBufferPointer) -> UInt32 {
    var c = crc
    var i = 0
    let n = bytes.count
    unsafe tables.withUnsafeBufferPointer { t in
      while i + 8 <= n {
        let word = unsafe UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: i, as: UInt64.self))
        let lo = UInt32(truncatingIfNeeded: word) ^ c
        let hi = UInt32(truncatingIfNeeded: word >> 32)
        c =
          unsafe t[7 * 256 + Int(lo & 0xFF)] ^ t[6 * 256 + Int((lo >> 8) & 0xFF)]
          ^ t[5 * 256 + Int((lo >> 16) & 0xFF)] ^ t[4 * 256 + Int(lo >> 24)]
          ^ t[3 * 256 + Int(hi & 0xFF)] ^ t[2 * 256 + Int((hi >> 8) & 0xFF)]
          ^ t[1 * 256 + Int((hi >> 16) & 0xFF)] ^ t[Int(hi >> 24)]
        i += 8
      }
      while i < n {
        c = unsafe t[Int((c ^ UInt32(bytes[i])) & 0xFF)] ^ (c >> 8)
        i += 1
      }
    }
    return c
  }

  /// The checksum of a byte array (for tests and verification).
  static func checksum(_ bytes: [UInt8]) -> UInt32 {
    finalize(unsafe bytes.withUnsafeBytes { unsafe update(initial, $0) })
  }
}
