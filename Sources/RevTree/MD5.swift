/// MD5 (RFC 1321) in pure Swift, for revision ids.
///
/// MD5 is broken as a cryptographic hash; here it only names revisions the way CouchDB and
/// PouchDB do (16 bytes, written as 32 hex characters). Do not use it for security.
///
/// ```swift
/// var md5 = MD5()
/// md5.update(Array("abc".utf8))
/// md5.finalize().description   // "900150983cd24fb0d6963f7d28e17f72"
/// MD5.hash(Array("abc".utf8))  // the same, in one call
/// ```
public struct MD5: Sendable {
  private var a0: UInt32 = 0x6745_2301
  private var b0: UInt32 = 0xefcd_ab89
  private var c0: UInt32 = 0x98ba_dcfe
  private var d0: UInt32 = 0x1032_5476
  /// The bytes of an incomplete block, `pending` of them.
  private var block: (UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64) =
    (0, 0, 0, 0, 0, 0, 0, 0)
  private var pending = 0
  private var length: UInt64 = 0

  /// A fresh hasher.
  public init() {}

  /// Feeds bytes.
  public mutating func update(_ bytes: some Sequence<UInt8>) {
    if let done: Void = bytes.withContiguousStorageIfAvailable({ unsafe update(buffer: $0) }) {
      return done
    }
    let copy = Array(bytes)
    unsafe copy.withUnsafeBufferPointer { unsafe update(buffer: $0) }
  }

  /// Feeds bytes from a buffer.
  public mutating func update(buffer input: UnsafeBufferPointer<UInt8>) {
    guard let base = input.baseAddress, input.count > 0 else { return }
    length &+= UInt64(input.count)
    var i = 0
    if pending > 0 {
      let take = min(64 - pending, input.count)
      let at = pending
      unsafe withUnsafeMutableBytes(of: &block) { raw in
        unsafe raw.baseAddress!.advanced(by: at).copyMemory(from: base, byteCount: take)
      }
      pending += take
      i = take
      if pending < 64 { return }
      let saved = block
      unsafe withUnsafeBytes(of: saved) { raw in
        unsafe MD5.compress(&a0, &b0, &c0, &d0, raw.baseAddress!)
      }
      pending = 0
    }
    while i + 64 <= input.count {
      unsafe MD5.compress(&a0, &b0, &c0, &d0, UnsafeRawPointer(base + i))
      i += 64
    }
    if i < input.count {
      let rest = input.count - i
      unsafe withUnsafeMutableBytes(of: &block) { raw in
        unsafe raw.baseAddress!.copyMemory(from: base + i, byteCount: rest)
      }
      pending = rest
    }
  }

  @inline(__always)
  private static func rotl(_ v: UInt32, _ s: UInt32) -> UInt32 {
    (v << s) | (v >> (32 &- s))
  }

  @inline(__always)
  private static func f(
    _ a: inout UInt32, _ b: UInt32, _ c: UInt32, _ d: UInt32, _ x: UInt32, _ s: UInt32,
    _ k: UInt32
  ) {
    a = b &+ rotl(a &+ (d ^ (b & (c ^ d))) &+ x &+ k, s)
  }

  @inline(__always)
  private static func g(
    _ a: inout UInt32, _ b: UInt32, _ c: UInt32, _ d: UInt32, _ x: UInt32, _ s: UInt32,
    _ k: UInt32
  ) {
    a = b &+ rotl(a &+ (c ^ (d & (b ^ c))) &+ x &+ k, s)
  }

  @inline(__always)
  private static func h(
    _ a: inout UInt32, _ b: UInt32, _ c: UInt32, _ d: UInt32, _ x: UInt32, _ s: UInt32,
    _ k: UInt32
  ) {
    a = b &+ rotl(a &+ (b ^ c ^ d) &+ x &+ k, s)
  }

  @inline(__always)
  private static func i(
    _ a: inout UInt32, _ b: UInt32, _ c: UInt32, _ d: UInt32, _ x: UInt32, _ s: UInt32,
    _ k: UInt32
  ) {
    a = b &+ rotl(a &+ (c ^ (b | ~d)) &+ x &+ k, s)
  }

  /// One 64-byte block (RFC 1321 section 3.4), the 64 steps written out.
  private static func compress(
    _ a0: inout UInt32, _ b0: inout UInt32, _ c0: inout UInt32, _ d0: inout UInt32,
    _ p: UnsafeRawPointer
  ) {
    @inline(__always) func word(_ j: Int) -> UInt32 {
      unsafe UInt32(littleEndian: p.loadUnaligned(fromByteOffset: 4 * j, as: UInt32.self))
    }
    let x0 = word(0)
    let x1 = word(1)
    let x2 = word(2)
    let x3 = word(3)
    let x4 = word(4)
    let x5 = word(5)
    let x6 = word(6)
    let x7 = word(7)
    let x8 = word(8)
    let x9 = word(9)
    let x10 = word(10)
    let x11 = word(11)
    let x12 = word(12)
    let x13 = word(13)
    let x14 = word(14)
    let x15 = word(15)
    var a = a0
    var b = b0
    var c = c0
    var d = d0
    f(&a, b, c, d, x0, 7, 0xd76a_a478)
    f(&d, a, b, c, x1, 12, 0xe8c7_b756)
    f(&c, d, a, b, x2, 17, 0x2420_70db)
    f(&b, c, d, a, x3, 22, 0xc1bd_ceee)
    f(&a, b, c, d, x4, 7, 0xf57c_0faf)
    f(&d, a, b, c, x5, 12, 0x4787_c62a)
    f(&c, d, a, b, x6, 17, 0xa830_4613)
    f(&b, c, d, a, x7, 22, 0xfd46_9501)
    f(&a, b, c, d, x8, 7, 0x6980_98d8)
    f(&d, a, b, c, x9, 12, 0x8b44_f7af)
    f(&c, d, a, b, x10, 17, 0xffff_5bb1)
    f(&b, c, d, a, x11, 22, 0x895c_d7be)
    f(&a, b, c, d, x12, 7, 0x6b90_1122)
    f(&d, a, b, c, x13, 12, 0xfd98_7193)
    f(&c, d, a, b, x14, 17, 0xa679_438e)
    f(&b, c, d, a, x15, 22, 0x49b4_0821)
    g(&a, b, c, d, x1, 5, 0xf61e_2562)
    g(&d, a, b, c, x6, 9, 0xc040_b340)
    g(&c, d, a, b, x11, 14, 0x265e_5a51)
    g(&b, c, d, a, x0, 20, 0xe9b6_c7aa)
    g(&a, b, c, d, x5, 5, 0xd62f_105d)
    g(&d, a, b, c, x10, 9, 0x0244_1453)
    g(&c, d, a, b, x15, 14, 0xd8a1_e681)
    g(&b, c, d, a, x4, 20, 0xe7d3_fbc8)
    g(&a, b, c, d, x9, 5, 0x21e1_cde6)
    g(&d, a, b, c, x14, 9, 0xc337_07d6)
    g(&c, d, a, b, x3, 14, 0xf4d5_0d87)
    g(&b, c, d, a, x8, 20, 0x455a_14ed)
    g(&a, b, c, d, x13, 5, 0xa9e3_e905)
    g(&d, a, b, c, x2, 9, 0xfcef_a3f8)
    g(&c, d, a, b, x7, 14, 0x676f_02d9)
    g(&b, c, d, a, x12, 20, 0x8d2a_4c8a)
    h(&a, b, c, d, x5, 4, 0xfffa_3942)
    h(&d, a, b, c, x8, 11, 0x8771_f681)
    h(&c, d, a, b, x11, 16, 0x6d9d_6122)
    h(&b, c, d, a, x14, 23, 0xfde5_380c)
    h(&a, b, c, d, x1, 4, 0xa4be_ea44)
    h(&d, a, b, c, x4, 11, 0x4bde_cfa9)
    h(&c, d, a, b, x7, 16, 0xf6bb_4b60)
    h(&b, c, d, a, x10, 23, 0xbebf_bc70)
    h(&a, b, c, d, x13, 4, 0x289b_7ec6)
    h(&d, a, b, c, x0, 11, 0xeaa1_27fa)
    h(&c, d, a, b, x3, 16, 0xd4ef_3085)
    h(&b, c, d, a, x6, 23, 0x0488_1d05)
    h(&a, b, c, d, x9, 4, 0xd9d4_d039)
    h(&d, a, b, c, x12, 11, 0xe6db_99e5)
    h(&c, d, a, b, x15, 16, 0x1fa2_7cf8)
    h(&b, c, d, a, x2, 23, 0xc4ac_5665)
    i(&a, b, c, d, x0, 6, 0xf429_2244)
    i(&d, a, b, c, x7, 10, 0x432a_ff97)
    i(&c, d, a, b, x14, 15, 0xab94_23a7)
    i(&b, c, d, a, x5, 21, 0xfc93_a039)
    i(&a, b, c, d, x12, 6, 0x655b_59c3)
    i(&d, a, b, c, x3, 10, 0x8f0c_cc92)
    i(&c, d, a, b, x10, 15, 0xffef_f47d)
    i(&b, c, d, a, x1, 21, 0x8584_5dd1)
    i(&a, b, c, d, x8, 6, 0x6fa8_7e4f)
    i(&d, a, b, c, x15, 10, 0xfe2c_e6e0)
    i(&c, d, a, b, x6, 15, 0xa301_4314)
    i(&b, c, d, a, x13, 21, 0x4e08_11a1)
    i(&a, b, c, d, x4, 6, 0xf753_7e82)
    i(&d, a, b, c, x11, 10, 0xbd3a_f235)
    i(&c, d, a, b, x2, 15, 0x2ad7_d2bb)
    i(&b, c, d, a, x9, 21, 0xeb86_d391)
    a0 = a0 &+ a
    b0 = b0 &+ b
    c0 = c0 &+ c
    d0 = d0 &+ d
  }

  /// Pads, processes the last block and returns the digest as a ``RevHash``.
  public mutating func finalize() -> RevHash {
    let bitLength = length &* 8
    let at = pending
    var tail = block
    unsafe withUnsafeMutableBytes(of: &tail) { raw in
      unsafe raw[at] = 0x80
      for z in (at + 1)..<64 { unsafe raw[z] = 0 }
    }
    if at >= 56 {
      unsafe withUnsafeBytes(of: tail) { unsafe MD5.compress(&a0, &b0, &c0, &d0, $0.baseAddress!) }
      tail = (0, 0, 0, 0, 0, 0, 0, 0)
    }
    tail.7 = bitLength.littleEndian
    unsafe withUnsafeBytes(of: tail) { unsafe MD5.compress(&a0, &b0, &c0, &d0, $0.baseAddress!) }
    pending = 0
    // The digest is a0 b0 c0 d0 little-endian; RevHash keeps it as two big-endian words.
    let hi = UInt64(a0.byteSwapped) << 32 | UInt64(b0.byteSwapped)
    let lo = UInt64(c0.byteSwapped) << 32 | UInt64(d0.byteSwapped)
    return RevHash(high: hi, low: lo)
  }

  /// The MD5 digest of `bytes`.
  public static func hash(_ bytes: some Sequence<UInt8>) -> RevHash {
    var m = MD5()
    m.update(bytes)
    return m.finalize()
  }
}
