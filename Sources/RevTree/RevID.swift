import Formats
import JSON

/// The signature part of a revision id: the `sig` in `N-sig`.
///
/// CouchDB keeps a signature that is exactly 32 hexadecimal characters as 16 raw bytes (an MD5
/// digest) and any other signature as its text. `RevHash` does the same: a 32-hex signature
/// (either case) becomes ``RevHash/digest(_:_:)``-backed bytes and is always written back in
/// lowercase, which is what CouchDB answers too. Other signatures are kept as text.
///
/// Hashes order the way CouchDB's Erlang binaries do: byte by byte over the stored form (the 16
/// raw bytes of a digest, the UTF-8 bytes of a text signature), a shorter prefix first. This is
/// the order of siblings in a tree and the tie-break of the winning revision.
///
/// ## Accepted characters
/// CouchDB itself accepts any non-empty signature and PouchDB generates 32 lowercase hex
/// characters. A replication peer in the wild sends hex digests (CouchDB, PouchDB, Couchbase) or
/// short tokens. `RevHash` accepts 1 to ``maxTextLength`` bytes drawn from the URL-unreserved set
/// `A-Z a-z 0-9 - . _ ~`, which never needs escaping in a URL, a header or a JSON string.
///
/// ```swift
/// let h = try RevHash("967A00DFF5E02ADD41819138ABB3284D")
/// print(h)           // 967a00dff5e02add41819138abb3284d
/// print(h.isDigest)  // true
/// ```
public struct RevHash: Hashable, Comparable, Sendable, CustomStringConvertible {
  /// The longest text signature accepted, in bytes.
  public static let maxTextLength = 128

  @usableFromInline
  enum Storage: Hashable, Sendable {
    /// 16 raw bytes, big-endian in two words so that integer order is byte order.
    case digest(UInt64, UInt64)
    /// Anything that is not 32 hex characters.
    case text([UInt8])
  }

  @usableFromInline
  var storage: Storage

  @usableFromInline
  init(storage: Storage) {
    self.storage = storage
  }

  /// Creates a hash from 16 raw digest bytes (the two words are read big-endian).
  ///
  /// ```swift
  /// let h = RevHash(high: 0x0123_4567_89ab_cdef, low: 0)
  /// ```
  public init(high: UInt64, low: UInt64) {
    storage = .digest(high, low)
  }

  /// Creates a hash from exactly 16 raw bytes, such as an MD5 digest.
  ///
  /// - Throws: ``RevIDError/invalidDigestLength(_:)`` if `bytes` is not 16 bytes long.
  public init(digestBytes bytes: some Collection<UInt8>) throws(RevIDError) {
    guard bytes.count == 16 else { throw .invalidDigestLength(bytes.count) }
    var hi: UInt64 = 0
    var lo: UInt64 = 0
    for (i, b) in bytes.enumerated() {
      if i < 8 { hi = hi << 8 | UInt64(b) } else { lo = lo << 8 | UInt64(b) }
    }
    storage = .digest(hi, lo)
  }

  /// Parses a signature, validating its characters and length.
  ///
  /// ```swift
  /// let h = try RevHash("abc")   // a text signature
  /// ```
  /// - Throws: ``RevIDError/emptyHash``, ``RevIDError/hashTooLong(_:)`` or
  ///   ``RevIDError/invalidHashCharacter(_:offset:)``.
  public init(_ text: String) throws(RevIDError) {
    // The same checks as the generic form below, on a String's contiguous bytes: that form
    // walks a `String.UTF8View` through its generic iterator, several times slower.
    let n = text.utf8.count
    if n > RevHash.maxTextLength { throw .hashTooLong(n) }
    // A native string's bytes where they lie; no array is made of them.
    var text = text
    let parsed = text.withUTF8 { bytes in
      Result { () throws(RevIDError) in try unsafe RevHash.parse(bytes) }
    }
    self = try parsed.get()
  }

  /// Parses a signature held in any string type; see ``init(_:)-(String)``.
  public init(_ text: some StringProtocol) throws(RevIDError) {
    let utf8 = text.utf8
    // Count lazily: never walk a huge hostile string further than needed.
    var n = 0
    for _ in utf8 {
      n += 1
      if n > RevHash.maxTextLength { throw .hashTooLong(utf8.count) }
    }
    self = try RevHash.parse(utf8)
  }

  /// Parses a signature from its UTF-8 bytes, as ``init(_:)`` does from text: the form for
  /// decoders that hold bytes (a stored event), with no `String` made on the way.
  ///
  /// - Throws: the errors of ``init(_:)``.
  public init(utf8 bytes: ArraySlice<UInt8>) throws(RevIDError) {
    self = try RevHash.parse(bytes)
  }

  @usableFromInline
  static func parse(_ bytes: some Collection<UInt8>) throws(RevIDError) -> RevHash {
    let n = bytes.count
    if n == 0 { throw .emptyHash }
    if n > maxTextLength { throw .hashTooLong(n) }
    if n == 32 {
      var hi: UInt64 = 0
      var lo: UInt64 = 0
      var i = 0
      var allHex = true
      for b in bytes {
        guard let v = Hex.value(b) else {
          allHex = false
          break
        }
        if i < 16 { hi = hi << 4 | UInt64(v) } else { lo = lo << 4 | UInt64(v) }
        i += 1
      }
      if allHex { return RevHash(storage: .digest(hi, lo)) }
    }
    var offset = 0
    for b in bytes {
      guard isAllowed(b) else { throw .invalidHashCharacter(b, offset: offset) }
      offset += 1
    }
    return RevHash(storage: .text(Array(bytes)))
  }

  @inline(__always)
  static func isAllowed(_ b: UInt8) -> Bool {
    switch b {
    case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "a")...UInt8(ascii: "z"),
      UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "-"), UInt8(ascii: "."),
      UInt8(ascii: "_"), UInt8(ascii: "~"):
      true
    default: false
    }
  }

  /// Whether this is a 16-byte digest (written as 32 lowercase hex characters).
  public var isDigest: Bool {
    if case .digest = storage { return true }
    return false
  }

  /// The stored bytes: 16 raw bytes for a digest, the UTF-8 text otherwise.
  public var bytes: [UInt8] {
    switch storage {
    case .digest(let hi, let lo):
      var out = [UInt8]()
      out.reserveCapacity(16)
      for s in stride(from: 56, through: 0, by: -8) {
        out.append(UInt8(truncatingIfNeeded: hi >> UInt64(s)))
      }
      for s in stride(from: 56, through: 0, by: -8) {
        out.append(UInt8(truncatingIfNeeded: lo >> UInt64(s)))
      }
      return out
    case .text(let t):
      return t
    }
  }

  /// The signature as text: 32 lowercase hex characters for a digest.
  public var description: String {
    switch storage {
    case .digest(let hi, let lo):
      return unsafe String(unsafeUninitializedCapacity: 32) { buf in
        let digits: StaticString = "0123456789abcdef"
        let d = unsafe digits.utf8Start
        for i in 0..<16 {
          unsafe buf[i] = unsafe d[Int((hi >> UInt64(60 - 4 * i)) & 0xF)]
          unsafe buf[16 + i] = unsafe d[Int((lo >> UInt64(60 - 4 * i)) & 0xF)]
        }
        return 32
      }
    case .text(let t):
      return String(decoding: t, as: UTF8.self)
    }
  }

  /// The length of the textual form in UTF-8 bytes (32 for a digest).
  package var textCount: Int {
    switch storage {
    case .digest: 32
    case .text(let t): t.count
    }
  }

  /// Appends the textual form's UTF-8 bytes to `out` (no allocation for digests).
  @usableFromInline
  package func appendText(to out: inout [UInt8]) {
    switch storage {
    case .digest(let hi, let lo):
      let digits: StaticString = "0123456789abcdef"
      let d = unsafe digits.utf8Start
      for i in 0..<16 { unsafe out.append(d[Int((hi >> UInt64(60 - 4 * i)) & 0xF)]) }
      for i in 0..<16 { unsafe out.append(d[Int((lo >> UInt64(60 - 4 * i)) & 0xF)]) }
    case .text(let t):
      out.append(contentsOf: t)
    }
  }

  /// CouchDB's order: byte-wise over the stored bytes, shorter prefix first.
  ///
  /// A text signature whose bytes equal a digest's 16 raw bytes sorts after the digest (CouchDB
  /// would treat the two as the same revision; `RevHash` keeps them apart).
  public static func < (a: RevHash, b: RevHash) -> Bool {
    compare(a, b) < 0
  }

  /// Three-way comparison in CouchDB's order.
  @inlinable
  static func compare(_ a: RevHash, _ b: RevHash) -> Int {
    switch (a.storage, b.storage) {
    case (.digest(let ah, let al), .digest(let bh, let bl)):
      if ah != bh { return ah < bh ? -1 : 1 }
      if al != bl { return al < bl ? -1 : 1 }
      return 0
    default:
      let ab = a.bytes
      let bb = b.bytes
      let n = min(ab.count, bb.count)
      for i in 0..<n where ab[i] != bb[i] { return ab[i] < bb[i] ? -1 : 1 }
      if ab.count != bb.count { return ab.count < bb.count ? -1 : 1 }
      if a.isDigest != b.isDigest { return a.isDigest ? -1 : 1 }
      return 0
    }
  }
}

/// A revision id `N-sig`: a generation and a ``RevHash``.
///
/// Revision ids compare the way CouchDB picks a winner among leaves of equal deletedness: by
/// generation, then by hash bytes.
///
/// Parsing never crashes and never reads far into hostile input: a string longer than
/// ``maxLength`` bytes is rejected before it is examined.
///
/// ```swift
/// let rev = try RevID("3-967a00dff5e02add41819138abb3284d")
/// rev.generation          // 3
/// rev.description         // "3-967a00dff5e02add41819138abb3284d"
/// try RevID("0-abc")      // throws RevIDError.generationOutOfRange
/// ```
///
/// Generations are decimal, without sign or leading zeros, from 1 to ``maxGeneration``
/// (2^53 − 1, the largest integer a JavaScript peer such as PouchDB handles exactly).
public struct RevID: Hashable, Comparable, Sendable, CustomStringConvertible {
  /// The largest generation accepted: 2^53 − 1.
  public static let maxGeneration = 9_007_199_254_740_991

  /// The longest revision id string accepted, in bytes.
  public static let maxLength = 16 + 1 + RevHash.maxTextLength

  /// The generation, `N` in `N-sig`: 1 for a new document, parent's + 1 for an edit.
  public let generation: Int
  /// The signature, `sig` in `N-sig`.
  public let hash: RevHash

  /// Creates a revision id from its parts.
  ///
  /// - Throws: ``RevIDError/generationOutOfRange`` if `generation` is not in
  ///   `1...RevID.maxGeneration`.
  public init(generation: Int, hash: RevHash) throws(RevIDError) {
    guard generation >= 1, generation <= RevID.maxGeneration else { throw .generationOutOfRange }
    self.generation = generation
    self.hash = hash
  }

  @usableFromInline
  init(unchecked generation: Int, hash: RevHash) {
    self.generation = generation
    self.hash = hash
  }

  /// Parses `N-sig`.
  ///
  /// ```swift
  /// let rev = try RevID("1-abc")
  /// ```
  /// - Throws: a ``RevIDError`` describing the first problem found: ``RevIDError/empty``,
  ///   ``RevIDError/tooLong(_:)``, ``RevIDError/missingDash``,
  ///   ``RevIDError/invalidGeneration``, ``RevIDError/generationOutOfRange``, or a hash error.
  public init(_ string: String) throws(RevIDError) {
    // As the generic form below, without walking `String.UTF8View` through a generic iterator.
    if string.utf8.count > RevID.maxLength { throw .tooLong }
    self = try RevID.parse(Array(string.utf8))
  }

  /// Parses `N-sig` held in any string type; see ``init(_:)-(String)``.
  public init(_ string: some StringProtocol) throws(RevIDError) {
    let utf8 = string.utf8
    var n = 0
    for _ in utf8 {
      n += 1
      if n > RevID.maxLength { throw .tooLong }
    }
    self = try RevID.parse(Array(utf8))
  }

  /// Parses `N-sig` from UTF-8 bytes.
  ///
  /// - Throws: see ``init(_:)``.
  public init(utf8 bytes: some Collection<UInt8>) throws(RevIDError) {
    if bytes.count > RevID.maxLength { throw .tooLong }
    self = try RevID.parse(Array(bytes))
  }

  static func parse(_ b: [UInt8]) throws(RevIDError) -> RevID {
    if b.isEmpty { throw .empty }
    guard let dash = b.firstIndex(of: UInt8(ascii: "-")) else { throw .missingDash }
    if dash == 0 { throw .invalidGeneration }
    if b[0] == UInt8(ascii: "0") {
      // "0-x" is out of range; "01-x" is not canonical.
      if dash == 1 { throw .generationOutOfRange }
      throw .invalidGeneration
    }
    var gen = 0
    for i in 0..<dash {
      let c = b[i]
      guard c >= UInt8(ascii: "0"), c <= UInt8(ascii: "9") else { throw .invalidGeneration }
      if i >= 16 { throw .generationOutOfRange }
      gen = gen * 10 + Int(c - UInt8(ascii: "0"))
    }
    guard gen <= maxGeneration else { throw .generationOutOfRange }
    let hash = try RevHash.parse(b[(dash + 1)...])
    return RevID(unchecked: gen, hash: hash)
  }

  /// `N-sig`, with a digest written as 32 lowercase hex characters.
  public var description: String {
    "\(generation)-\(hash)"
  }

  /// CouchDB's order: generation, then hash bytes.
  public static func < (a: RevID, b: RevID) -> Bool {
    if a.generation != b.generation { return a.generation < b.generation }
    return RevHash.compare(a.hash, b.hash) < 0
  }
}

/// Why a revision id or hash was rejected.
///
/// ```swift
/// do { _ = try RevID("x") } catch { print(error) }  // missingDash
/// ```
public enum RevIDError: Error, Equatable, Sendable, CustomStringConvertible {
  /// The string is empty.
  case empty
  /// The string is longer than ``RevID/maxLength`` bytes.
  case tooLong
  /// There is no `-` between generation and signature.
  case missingDash
  /// The generation is not a plain decimal number (sign, leading zero, other characters).
  case invalidGeneration
  /// The generation is 0 or larger than ``RevID/maxGeneration``.
  case generationOutOfRange
  /// Nothing follows the dash.
  case emptyHash
  /// The signature is longer than ``RevHash/maxTextLength`` bytes.
  case hashTooLong(Int)
  /// The signature contains a byte outside `A-Z a-z 0-9 - . _ ~`.
  case invalidHashCharacter(UInt8, offset: Int)
  /// Raw digest bytes must be exactly 16.
  case invalidDigestLength(Int)

  public var description: String {
    switch self {
    case .empty: "empty revision id"
    case .tooLong: "revision id longer than \(RevID.maxLength) bytes"
    case .missingDash: "revision id has no '-' between generation and signature"
    case .invalidGeneration: "revision generation is not a plain decimal number"
    case .generationOutOfRange: "revision generation must be between 1 and \(RevID.maxGeneration)"
    case .emptyHash: "revision signature is empty"
    case .hashTooLong(let n): "revision signature is \(n) bytes, more than \(RevHash.maxTextLength)"
    case .invalidHashCharacter(let b, let o):
      "revision signature has invalid byte 0x\(String(b, radix: 16)) at offset \(o)"
    case .invalidDigestLength(let n): "a digest must be 16 bytes, got \(n)"
    }
  }
}
