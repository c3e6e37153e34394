import CLMDB
import Formats

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// The stored form of one event, the value under its big-endian position key in `log.events`.
///
/// ```
/// offset  size  field
/// 0       1     record format (1)
/// 1       8     timestamp, microseconds since 1970, little-endian
/// 9       var   stream version (LEB128; 0 for an event with no stream)
///         var   position of the stream's previous event (LEB128; 0 for the first)
///         var   type length (LEB128), then UTF-8 bytes
///         var   stream length (LEB128), then UTF-8 bytes
///         var   actor length (LEB128), then UTF-8 bytes
///         ...   payload (the rest)
/// n-4     4     CRC-32C, little-endian, of the 8-byte big-endian position followed by bytes 0..<n-4
/// ```
///
/// The checksum covers the position too, so a record found under the wrong key is detected. The
/// back pointer chains each stream's events, so reading a stream needs no index entry per event.
///
/// An erased event (``WriteTransaction/erase(_:payload:by:)``) has record format 2: the same
/// fields, and after the actor the position of the event that erased it (LEB128), then the
/// payload that replaced the original one. Its Merkle leaf hash, which covered the original
/// record, is kept in `log.erased`.
enum EventRecord {
  static let format: UInt8 = 1
  static let erasedFormat: UInt8 = 2
  static let fixedHeaderSize = 9
  static let checksumSize = 4

  struct DecodingError: Error {
    let reason: String
  }

  /// The fields the log decides for an event.
  struct Header {
    var position: UInt64
    var timestamp: Int64
    var streamVersion: UInt64
    var previous: UInt64
  }

  /// Puts the record for an event under its position with `MDB_RESERVE | MDB_APPEND` and encodes
  /// it straight into the reserved page space: no intermediate buffer, no copy. The strings'
  /// lengths are known without walking them (a native string stores its UTF-8 count).
  ///
  /// Returns the record's Merkle leaf hash (``MerkleSHA256/leaf(position:record:)``), hashed
  /// from the page it was written to (nil without `leafHash`). With a `hasher`, the record goes
  /// to it instead, as the `index`th of its batch, and nothing is hashed here.
  static func append(
    _ header: Header, _ event: borrowing NewEvent, into events: UInt32, of txn: RawTransaction,
    leafHash: Bool = true, hasher: LeafHasher? = nil, index: Int = 0
  )
    throws(LMDBError) -> MerkleDigest?
  {
    let typeCount = event.type.utf8.count
    let streamCount = event.stream.utf8.count
    let actorCount = event.actor.utf8.count
    let payloadCount = event.payload.count
    let size =
      fixedHeaderSize + varintSize(header.streamVersion) + varintSize(header.previous)
      + varintSize(UInt64(typeCount)) + typeCount + varintSize(UInt64(streamCount)) + streamCount
      + varintSize(UInt64(actorCount)) + actorCount + payloadCount + checksumSize
    let space = try unsafe txn.reserveAppend(events, position: header.position, size: size)
    let base = unsafe space.baseAddress.unsafelyUnwrapped
    unsafe base.storeBytes(of: format, as: UInt8.self)
    unsafe (base + 1).storeBytes(
      of: UInt64(bitPattern: header.timestamp).littleEndian, toByteOffset: 0, as: UInt64.self)
    var offset = fixedHeaderSize
    unsafe putVarint(header.streamVersion, base, &offset)
    unsafe putVarint(header.previous, base, &offset)
    unsafe putString(event.type, count: typeCount, base, &offset)
    unsafe putString(event.stream, count: streamCount, base, &offset)
    unsafe putString(event.actor, count: actorCount, base, &offset)
    if payloadCount > 0 {
      unsafe event.payload.withUnsafeBytes { p in
        unsafe (base + offset).copyMemory(from: p.baseAddress.unsafelyUnwrapped, byteCount: p.count)
      }
      offset += payloadCount
    }
    let crc = CRC32C.finalize(
      unsafe CRC32C.update(
        CRC32C.update(CRC32C.initial, bigEndian: header.position),
        UnsafeRawBufferPointer(start: base, count: offset)))
    unsafe (base + offset).storeBytes(of: crc.littleEndian, toByteOffset: 0, as: UInt32.self)
    if let hasher {
      unsafe hasher.publish(index, position: header.position, record: UnsafeRawBufferPointer(space))
      return nil
    }
    guard leafHash else { return nil }
    return unsafe MerkleSHA256.leaf(
      position: header.position, record: UnsafeRawBufferPointer(space))
  }

  /// The most bytes a record can take, whatever its header, given the UTF-8 sizes of its
  /// event's type, stream and actor and the size of its payload.
  @inline(__always)
  static func sizeBound(typeCount: Int, streamCount: Int, actorCount: Int, payloadCount: Int)
    -> Int
  {
    fixedHeaderSize + 2 * 10 + varintSize(UInt64(typeCount)) + typeCount
      + varintSize(UInt64(streamCount)) + streamCount + varintSize(UInt64(actorCount))
      + actorCount + payloadCount + checksumSize
  }

  /// Writes a string's length (LEB128) and UTF-8 bytes at `offset`.
  @inline(__always)
  static func putString(
    _ string: String, count: Int, _ base: UnsafeMutableRawPointer, _ offset: inout Int
  ) {
    unsafe putVarint(UInt64(count), base, &offset)
    guard count > 0 else { return }
    let target = unsafe base + offset
    let copied: Void? = unsafe string.utf8.withContiguousStorageIfAvailable { utf8 in
      unsafe target.copyMemory(from: utf8.baseAddress.unsafelyUnwrapped, byteCount: count)
    }
    if copied == nil {  // a string without contiguous UTF-8 (bridged): copy it byte by byte
      _ = unsafe UnsafeMutableBufferPointer(
        start: target.assumingMemoryBound(to: UInt8.self), count: count
      ).initialize(from: string.utf8)
    }
    offset += count
  }

  /// Reads the timestamp of a record without decoding the rest.
  static func timestamp(of bytes: UnsafeRawBufferPointer) throws(DecodingError) -> Int64 {
    guard bytes.count >= fixedHeaderSize + checksumSize,
      unsafe bytes[0] == format || bytes[0] == erasedFormat
    else {
      throw DecodingError(reason: "record header unreadable")
    }
    return Int64(bitPattern: unsafe readLittleEndian(bytes, at: 1))
  }

  private static func checkedBodyEnd(position: UInt64, bytes: UnsafeRawBufferPointer)
    throws(DecodingError) -> Int
  {
    let count = bytes.count
    guard count >= fixedHeaderSize + checksumSize else {
      throw DecodingError(reason: "record of \(count) bytes is shorter than its header")
    }
    guard unsafe bytes[0] == format || bytes[0] == erasedFormat else {
      throw DecodingError(reason: "unknown record format \(unsafe bytes[0])")
    }
    let bodyEnd = count - checksumSize
    var crc = CRC32C.update(CRC32C.initial, bigEndian: position)
    crc = unsafe CRC32C.update(
      crc, UnsafeRawBufferPointer(start: bytes.baseAddress, count: bodyEnd))
    let stored = unsafe UInt32(
      littleEndian: bytes.loadUnaligned(fromByteOffset: bodyEnd, as: UInt32.self))
    guard CRC32C.finalize(crc) == stored else { throw DecodingError(reason: "checksum mismatch") }
    return bodyEnd
  }

  /// Where a record's fields are: offsets into its bytes, found after its checksum and its
  /// structure were checked, before any string or array is made.
  struct Fields {
    var timestamp: Int64
    var streamVersion: UInt64
    var previous: UInt64
    var typeStart: Int
    var typeEnd: Int
    var streamStart: Int
    var streamEnd: Int
    var actorStart: Int
    var actorEnd: Int
    var payloadStart: Int
    var payloadEnd: Int
    /// The position of the event that erased this one; 0 when it is not erased.
    var erasedBy: UInt64 = 0
  }

  /// Checks a record (checksum, format, lengths) and finds its fields.
  @inline(__always)
  static func fields(position: UInt64, bytes: UnsafeRawBufferPointer) throws(DecodingError)
    -> Fields
  {
    let bodyEnd = try unsafe checkedBodyEnd(position: position, bytes: bytes)
    return try unsafe layout(position: position, bytes: bytes, bodyEnd: bodyEnd)
  }

  /// The fields of a record whose length and format were checked, its checksum not.
  @inline(__always)
  private static func layout(position: UInt64, bytes: UnsafeRawBufferPointer, bodyEnd: Int)
    throws(DecodingError) -> Fields
  {
    let timestamp = Int64(bitPattern: unsafe readLittleEndian(bytes, at: 1))
    var offset = fixedHeaderSize
    let streamVersion = try unsafe readVarint(bytes, &offset, end: bodyEnd)
    let previous = try unsafe readVarint(bytes, &offset, end: bodyEnd)
    let typeStart = try unsafe stringStart(bytes, &offset, end: bodyEnd)
    let typeEnd = offset
    let streamStart = try unsafe stringStart(bytes, &offset, end: bodyEnd)
    let streamEnd = offset
    let actorStart = try unsafe stringStart(bytes, &offset, end: bodyEnd)
    let actorEnd = offset
    var erasedBy: UInt64 = 0
    if unsafe bytes[0] == erasedFormat {
      erasedBy = try unsafe readVarint(bytes, &offset, end: bodyEnd)
      guard erasedBy > position else {
        throw DecodingError(reason: "erased by event \(erasedBy), not a later one")
      }
    }
    return Fields(
      timestamp: timestamp, streamVersion: streamVersion, previous: previous,
      typeStart: typeStart, typeEnd: typeEnd, streamStart: streamStart, streamEnd: streamEnd,
      actorStart: actorStart, actorEnd: actorEnd, payloadStart: offset, payloadEnd: bodyEnd,
      erasedBy: erasedBy)
  }

  /// Reads a string's length and moves `offset` past the string; returns where it starts.
  @inline(__always)
  private static func stringStart(_ bytes: UnsafeRawBufferPointer, _ offset: inout Int, end: Int)
    throws(DecodingError) -> Int
  {
    let length = try unsafe readVarint(bytes, &offset, end: end)
    guard length <= UInt64(end - offset) else {
      throw DecodingError(reason: "string runs past the record")
    }
    let start = offset
    offset += Int(length)
    return start
  }

  /// The event a checked record holds.
  @inline(__always)
  static func event(
    position: UInt64, bytes: UnsafeRawBufferPointer, fields f: Fields,
    strings: inout RepeatedStrings
  ) -> RecordedEvent {
    RecordedEvent(
      position: LogPosition(position), streamVersion: f.streamVersion,
      timestampMicroseconds: f.timestamp,
      type: unsafe string(bytes, f.typeStart, f.typeEnd, reusing: &strings.type),
      stream: unsafe string(bytes, f.streamStart, f.streamEnd),
      actor: unsafe string(bytes, f.actorStart, f.actorEnd, reusing: &strings.actor),
      payload: unsafe array(bytes, f.payloadStart, f.payloadEnd),
      erasedBy: f.erasedBy == 0 ? nil : LogPosition(f.erasedBy))
  }

  /// The type and stream of a record, read from its head without checking its checksum or
  /// copying its payload: what a follower needs to know which stream an event concerns (it
  /// reads the events it acts on with every check). Bounds and format are checked.
  static func heading(position: UInt64, bytes: UnsafeRawBufferPointer) throws(DecodingError)
    -> EventHeading
  {
    let count = bytes.count
    guard count >= fixedHeaderSize + checksumSize else {
      throw DecodingError(reason: "record of \(count) bytes is shorter than its header")
    }
    guard unsafe bytes[0] == format || bytes[0] == erasedFormat else {
      throw DecodingError(reason: "unknown record format \(unsafe bytes[0])")
    }
    let f = try unsafe layout(position: position, bytes: bytes, bodyEnd: count - checksumSize)
    var strings = RepeatedStrings()
    return EventHeading(
      position: LogPosition(position),
      type: unsafe string(bytes, f.typeStart, f.typeEnd, reusing: &strings.type),
      stream: unsafe string(bytes, f.streamStart, f.streamEnd))
  }

  /// Decodes a record, checking its checksum.
  static func decode(position: UInt64, bytes: UnsafeRawBufferPointer) throws(DecodingError)
    -> RecordedEvent
  {
    let f = try unsafe fields(position: position, bytes: bytes)
    return RecordedEvent(
      position: LogPosition(position), streamVersion: f.streamVersion,
      timestampMicroseconds: f.timestamp,
      type: unsafe string(bytes, f.typeStart, f.typeEnd),
      stream: unsafe string(bytes, f.streamStart, f.streamEnd),
      actor: unsafe string(bytes, f.actorStart, f.actorEnd),
      payload: unsafe array(bytes, f.payloadStart, f.payloadEnd),
      erasedBy: f.erasedBy == 0 ? nil : LogPosition(f.erasedBy))
  }

  /// The record of the event at `position` whose stored record is `old`, erased by the event
  /// at `erasedBy`: the same time, stream version, back pointer, type, stream and actor, with
  /// `payload` instead of the original payload.
  static func erased(position: UInt64, old: [UInt8], erasedBy: UInt64, payload: [UInt8])
    throws(DecodingError) -> [UInt8]
  {
    let checked = unsafe old.withUnsafeBytes { bytes in
      Result { () throws(DecodingError) in try unsafe fields(position: position, bytes: bytes) }
    }
    let f = try checked.get()
    // The type's length prefix follows the two varints of the fixed header.
    let stringsStart = fixedHeaderSize + varintSize(f.streamVersion) + varintSize(f.previous)
    var record: [UInt8] = [erasedFormat]
    record.append(contentsOf: old[1..<stringsStart])
    record.append(contentsOf: old[stringsStart..<f.actorEnd])
    var value = erasedBy
    repeat {
      let byte = UInt8(value & 0x7F)
      value >>= 7
      record.append(value == 0 ? byte : byte | 0x80)
    } while value != 0
    record.append(contentsOf: payload)
    let crc = unsafe record.withUnsafeBytes {
      CRC32C.finalize(
        unsafe CRC32C.update(CRC32C.update(CRC32C.initial, bigEndian: position), $0))
    }
    // Little-endian, as every record's checksum.
    record.append(contentsOf: [
      UInt8(truncatingIfNeeded: crc), UInt8(truncatingIfNeeded: crc >> 8),
      UInt8(truncatingIfNeeded: crc >> 16), UInt8(truncatingIfNeeded: crc >> 24),
    ])
    return record
  }

  /// Decodes a record and the position of its stream's previous event.
  static func decodeWithLinks(position: UInt64, bytes: UnsafeRawBufferPointer) throws(DecodingError)
    -> (event: RecordedEvent, previous: UInt64)
  {
    let f = try unsafe fields(position: position, bytes: bytes)
    var strings = RepeatedStrings()
    return (
      unsafe event(position: position, bytes: bytes, fields: f, strings: &strings), f.previous
    )
  }

  /// The last type and actor decoded: a run of events of one type by one actor builds those
  /// strings once. (Streams change from one event to the next too often to gain from this.)
  struct RepeatedStrings {
    var type = ""
    var actor = ""
  }

  /// The string in `bytes[start..<end]`, or `last` when it has the same bytes (compared in
  /// place: a native string's UTF-8 is contiguous).
  @inline(__always)
  static func string(
    _ bytes: UnsafeRawBufferPointer, _ start: Int, _ end: Int, reusing last: inout String
  ) -> String {
    let n = end - start
    if n == 0 { return "" }
    let field = unsafe bytes.baseAddress.unsafelyUnwrapped + start
    if last.utf8.count == n,
      unsafe last.utf8.withContiguousStorageIfAvailable({
        unsafe memcmp($0.baseAddress.unsafelyUnwrapped, field, n) == 0
      }) == true
    {
      return last
    }
    let string = unsafe String(
      decoding: UnsafeRawBufferPointer(start: field, count: n), as: UTF8.self)
    last = string
    return string
  }

  @inline(__always)
  static func string(_ bytes: UnsafeRawBufferPointer, _ start: Int, _ end: Int) -> String {
    if start == end { return "" }
    return unsafe String(
      decoding: UnsafeRawBufferPointer(
        start: bytes.baseAddress.unsafelyUnwrapped + start, count: end - start),
      as: UTF8.self)
  }

  /// A copy of `bytes[start..<end]`. (`Array(_:)` of a buffer is specialized for `UInt8`;
  /// `Array(unsafeUninitializedCapacity:)` looks up the array's metadata at run time.)
  @inline(__always)
  static func array(_ bytes: UnsafeRawBufferPointer, _ start: Int, _ end: Int) -> [UInt8] {
    if start == end { return [] }
    return unsafe Array(
      UnsafeRawBufferPointer(start: bytes.baseAddress.unsafelyUnwrapped + start, count: end - start)
    )
  }

  /// Whether `bytes[start..<end]` equals one of `candidates`.
  @inline(__always)
  static func matches(
    _ bytes: UnsafeRawBufferPointer, _ start: Int, _ end: Int, anyOf candidates: [[UInt8]]
  ) -> Bool {
    let n = end - start
    for candidate in candidates where candidate.count == n {
      if n == 0 { return true }
      let equal = unsafe candidate.withUnsafeBytes {
        unsafe memcmp(
          $0.baseAddress.unsafelyUnwrapped, bytes.baseAddress.unsafelyUnwrapped + start, n)
          == 0
      }
      if equal { return true }
    }
    return false
  }

  // MARK: Primitives

  @inline(__always)
  static func varintSize(_ value: UInt64) -> Int { Varint.size(value) }

  @inline(__always)
  static func putVarint(_ value: UInt64, _ base: UnsafeMutableRawPointer, _ offset: inout Int) {
    var at = offset
    Varint.encode(value) { byte in
      unsafe (base + at).storeBytes(of: byte, as: UInt8.self)
      at += 1
    }
    offset = at
  }

  @inline(__always)
  static func putBytes(
    _ bytes: UnsafeRawBufferPointer, _ base: UnsafeMutableRawPointer, _ offset: inout Int
  ) {
    guard let source = bytes.baseAddress, bytes.count > 0 else { return }
    unsafe (base + offset).copyMemory(from: source, byteCount: bytes.count)
    offset += bytes.count
  }

  @inline(__always)
  static func appendVarint(_ value: UInt64, to buffer: inout [UInt8]) {
    Varint.append(value, to: &buffer)
  }

  @inline(__always)
  static func readLittleEndian(_ bytes: UnsafeRawBufferPointer, at offset: Int) -> UInt64 {
    unsafe UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: offset, as: UInt64.self))
  }

  @inline(__always)
  static func readVarint(_ bytes: UnsafeRawBufferPointer, _ offset: inout Int, end: Int)
    throws(DecodingError)
    -> UInt64
  {
    guard let value = unsafe Varint.read(bytes[..<end], at: &offset) else {
      throw DecodingError(reason: "truncated or overlong varint")
    }
    return value
  }
}

/// CRC-32C (Castagnoli), as used by iSCSI, ext4 and LevelDB: the CPU's instruction where there is
/// one, else slicing-by-8 tables.
enum CRC32C {
  static let initial: UInt32 = 0xFFFF_FFFF
  static let hardware = wikilog_crc32c_hardware() != 0

  static let tables: [UInt32] = {
    var t = [UInt32](repeating: 0, count: 8 * 256)
    for i in 0..<256 {
      var c = UInt32(i)
      for _ in 0..<8 { c = (c & 1) != 0 ? (c >> 1) ^ 0x82F6_3B78 : c >> 1 }
      t[i] = c
    }
    for i in 0..<256 {
      for k in 1..<8 {
        t[k * 256 + i] = (t[(k - 1) * 256 + i] >> 8) ^ t[Int(t[(k - 1) * 256 + i] & 0xFF)]
      }
    }
    return t
  }()

  @inline(__always)
  static func finalize(_ crc: UInt32) -> UInt32 { crc ^ 0xFFFF_FFFF }

  @inline(__always)
  static func update(_ crc: UInt32, bigEndian value: UInt64) -> UInt32 {
    var v = value.bigEndian
    return unsafe withUnsafeBytes(of: &v) { unsafe update(crc, $0) }
  }

  @inline(__always)
  static func update(_ crc: UInt32, _ bytes: UnsafeRawBufferPointer) -> UInt32 {
    if hardware { return unsafe wikilog_crc32c_update(crc, bytes.baseAddress, bytes.count) }
    return unsafe software(crc, bytes)
  }

  static func software(_ crc: UInt32, _ bytes: UnsafeRawBufferPointer) -> UInt32 {
    var c = crc
    var i = 0
    let n = bytes.count
    unsafe tables.withUnsafeBufferPointer { t in
      while i + 8 <= n {
        let word = unsafe UInt64(
          littleEndian: bytes.loadUnaligned(fromByteOffset: i, as: UInt64.self))
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

  /// The checksum of a byte array, with the CPU's instruction or, with `software`, the tables.
  static func checksum(_ bytes: [UInt8], software useTables: Bool = false) -> UInt32 {
    finalize(
      unsafe bytes.withUnsafeBytes {
        unsafe useTables ? software(initial, $0) : update(initial, $0)
      })
  }
}
