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
  private var buffer: [UInt8] = []
  private var length: UInt64 = 0

  /// A fresh hasher.
  public init() {
    buffer.reserveCapacity(64)
  }

  private static let s: [UInt32] = [
    7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22,
    5, 9, 14, 20, 5, 9, 14, 20, 5, 9, 14, 20, 5, 9, 14, 20,
    4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23,
    6, 10, 15, 21, 6, 10, 15, 21, 6, 10, 15, 21, 6, 10, 15, 21,
  ]

  /// K[i] = floor(abs(sin(i + 1)) * 2^32), RFC 1321 section 3.4.
  private static let k: [UInt32] = [
    0xd76a_a478, 0xe8c7_b756, 0x2420_70db, 0xc1bd_ceee, 0xf57c_0faf, 0x4787_c62a, 0xa830_4613,
    0xfd46_9501, 0x6980_98d8, 0x8b44_f7af, 0xffff_5bb1, 0x895c_d7be, 0x6b90_1122, 0xfd98_7193,
    0xa679_438e, 0x49b4_0821, 0xf61e_2562, 0xc040_b340, 0x265e_5a51, 0xe9b6_c7aa, 0xd62f_105d,
    0x0244_1453, 0xd8a1_e681, 0xe7d3_fbc8, 0x21e1_cde6, 0xc337_07d6, 0xf4d5_0d87, 0x455a_14ed,
    0xa9e3_e905, 0xfcef_a3f8, 0x676f_02d9, 0x8d2a_4c8a, 0xfffa_3942, 0x8771_f681, 0x6d9d_6122,
    0xfde5_380c, 0xa4be_ea44, 0x4bde_cfa9, 0xf6bb_4b60, 0xbebf_bc70, 0x289b_7ec6, 0xeaa1_27fa,
    0xd4ef_3085, 0x0488_1d05, 0xd9d4_d039, 0xe6db_99e5, 0x1fa2_7cf8, 0xc4ac_5665, 0xf429_2244,
    0x432a_ff97, 0xab94_23a7, 0xfc93_a039, 0x655b_59c3, 0x8f0c_cc92, 0xffef_f47d, 0x8584_5dd1,
    0x6fa8_7e4f, 0xfe2c_e6e0, 0xa301_4314, 0x4e08_11a1, 0xf753_7e82, 0xbd3a_f235, 0x2ad7_d2bb,
    0xeb86_d391,
  ]

  /// Feeds bytes.
  public mutating func update(_ bytes: some Sequence<UInt8>) {
    if let done: Void = bytes.withContiguousStorageIfAvailable({ update(buffer: $0) }) {
      return done
    }
    let copy = Array(bytes)
    copy.withUnsafeBufferPointer { update(buffer: $0) }
  }

  /// Feeds bytes from a buffer.
  public mutating func update(buffer input: UnsafeBufferPointer<UInt8>) {
    length &+= UInt64(input.count)
    var i = 0
    if !buffer.isEmpty {
      let take = min(64 - buffer.count, input.count)
      buffer.append(contentsOf: input[0..<take])
      i = take
      if buffer.count == 64 {
        buffer.withUnsafeBufferPointer { processBlock($0.baseAddress!) }
        buffer.removeAll(keepingCapacity: true)
      }
    }
    while i + 64 <= input.count {
      processBlock(input.baseAddress! + i)
      i += 64
    }
    if i < input.count { buffer.append(contentsOf: input[i...]) }
  }

  private mutating func processBlock(_ p: UnsafePointer<UInt8>) {
    var m = (
      UInt32(0), UInt32(0), UInt32(0), UInt32(0), UInt32(0), UInt32(0), UInt32(0), UInt32(0),
      UInt32(0), UInt32(0), UInt32(0), UInt32(0), UInt32(0), UInt32(0), UInt32(0), UInt32(0)
    )
    withUnsafeMutableBytes(of: &m) { raw in
      let w = raw.bindMemory(to: UInt32.self)
      for j in 0..<16 {
        let b = p + 4 * j
        w[j] = UInt32(b[0]) | UInt32(b[1]) << 8 | UInt32(b[2]) << 16 | UInt32(b[3]) << 24
      }
    }
    var a = a0
    var b = b0
    var c = c0
    var d = d0
    withUnsafeBytes(of: &m) { raw in
      let w = raw.bindMemory(to: UInt32.self)
      MD5.s.withUnsafeBufferPointer { s in
        MD5.k.withUnsafeBufferPointer { k in
          for i in 0..<64 {
            var f: UInt32
            var g: Int
            switch i {
            case 0..<16:
              f = (b & c) | (~b & d)
              g = i
            case 16..<32:
              f = (d & b) | (~d & c)
              g = (5 &* i &+ 1) & 15
            case 32..<48:
              f = b ^ c ^ d
              g = (3 &* i &+ 5) & 15
            default:
              f = c ^ (b | ~d)
              g = (7 &* i) & 15
            }
            f = f &+ a &+ k[i] &+ w[g]
            a = d
            d = c
            c = b
            b = b &+ ((f << s[i]) | (f >> (32 - s[i])))
          }
        }
      }
    }
    a0 = a0 &+ a
    b0 = b0 &+ b
    c0 = c0 &+ c
    d0 = d0 &+ d
  }

  /// Pads, processes the last block and returns the digest as a ``RevHash``.
  public mutating func finalize() -> RevHash {
    let bitLength = length &* 8
    var pad: [UInt8] = [0x80]
    let rem = Int((length &+ 1) % 64)
    let zeros = rem <= 56 ? 56 - rem : 120 - rem
    pad.append(contentsOf: repeatElement(0, count: zeros))
    for i in 0..<8 { pad.append(UInt8(truncatingIfNeeded: bitLength >> (8 * UInt64(i)))) }
    let savedLength = length
    update(pad)
    length = savedLength
    var bytes = [UInt8]()
    bytes.reserveCapacity(16)
    for v in [a0, b0, c0, d0] {
      for i in 0..<4 { bytes.append(UInt8(truncatingIfNeeded: v >> (8 * UInt32(i)))) }
    }
    var hi: UInt64 = 0
    var lo: UInt64 = 0
    for i in 0..<8 { hi = hi << 8 | UInt64(bytes[i]) }
    for i in 8..<16 { lo = lo << 8 | UInt64(bytes[i]) }
    return RevHash(high: hi, low: lo)
  }

  /// The MD5 digest of `bytes`.
  public static func hash(_ bytes: some Sequence<UInt8>) -> RevHash {
    var m = MD5()
    m.update(bytes)
    return m.finalize()
  }
}
