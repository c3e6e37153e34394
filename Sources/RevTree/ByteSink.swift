/// A growable byte buffer for the JSON writers and the revision digest: plain stores into
/// memory it owns, without the uniqueness and capacity bookkeeping of `Array.append`.
///
/// Use it only through ``withByteSink(_:)``, which starts it on a stack buffer and frees
/// whatever it grew into; the sink must not escape the closure.
///
/// ```swift
/// let bytes = withByteSink { sink in
///   sink.append(UInt8(ascii: "x"))
///   return sink.array()
/// }
/// ```
struct ByteSink {
  private(set) var base: UnsafeMutablePointer<UInt8>
  private(set) var count = 0
  private var capacity: Int
  /// Whether `base` was allocated by the sink (else it is the caller's stack buffer).
  private var owned = false

  init(_ initial: UnsafeMutableBufferPointer<UInt8>) {
    base = initial.baseAddress!
    capacity = initial.count
  }

  /// The bytes written so far; valid until the next write.
  var bytes: UnsafeBufferPointer<UInt8> { UnsafeBufferPointer(start: base, count: count) }

  /// The bytes written so far, as an array.
  func array() -> [UInt8] {
    // Not `Array(unsafeUninitializedCapacity:)`: that goes through an unspecialized allocation
    // that looks the storage class's metadata up at run time on every call.
    var a: [UInt8] = []
    a.reserveCapacity(count)
    a.append(contentsOf: bytes)
    return a
  }

  /// Makes room for at least `n` more bytes.
  @inline(never)
  mutating func grow(_ n: Int) {
    let newCapacity = max(capacity * 2, count + n)
    let p = UnsafeMutablePointer<UInt8>.allocate(capacity: newCapacity)
    p.initialize(from: base, count: count)
    if owned { base.deallocate() }
    base = p
    capacity = newCapacity
    owned = true
  }

  /// Makes room for `n` more bytes so that the next appends do not grow the buffer.
  mutating func reserve(_ n: Int) {
    if capacity - count < n { grow(n) }
  }

  /// Forgets the bytes written, keeping the memory.
  mutating func removeAll() {
    count = 0
  }

  /// Frees memory the sink allocated.
  mutating func release() {
    if owned { base.deallocate() }
    owned = false
    capacity = 0
    count = 0
  }

  @inline(__always)
  mutating func append(_ b: UInt8) {
    if count == capacity { grow(1) }
    base[count] = b
    count += 1
  }

  @inline(__always)
  mutating func append(_ p: UnsafePointer<UInt8>, count n: Int) {
    if capacity - count < n { grow(n) }
    (base + count).update(from: p, count: n)
    count += n
  }

  @inline(__always)
  mutating func append(_ buffer: UnsafeBufferPointer<UInt8>) {
    if let p = buffer.baseAddress { append(p, count: buffer.count) }
  }

  /// Appends raw bytes.
  @inline(__always)
  mutating func append(raw buffer: UnsafeRawBufferPointer) {
    let n = buffer.count
    guard let p = buffer.baseAddress, n > 0 else { return }
    if capacity - count < n { grow(n) }
    UnsafeMutableRawPointer(base + count).copyMemory(from: p, byteCount: n)
    count += n
  }

  /// Appends the low `n` (at most 8) bytes of `word`, least significant first.
  @inline(__always)
  mutating func append(word: UInt64, count n: Int) {
    if capacity - count < 8 { grow(8) }
    UnsafeMutableRawPointer(base + count).storeBytes(of: word.littleEndian, as: UInt64.self)
    count += n
  }

  /// Appends the 8 bytes of `v`, most significant first.
  @inline(__always)
  mutating func append(bigEndian v: UInt64) {
    if capacity - count < 8 { grow(8) }
    UnsafeMutableRawPointer(base + count).storeBytes(of: v.bigEndian, as: UInt64.self)
    count += 8
  }

  /// Appends `v` as an unsigned LEB128 varint.
  @inline(__always)
  mutating func appendVarint(_ v: UInt64) {
    if capacity - count < 10 { grow(10) }
    var v = v
    while v >= 0x80 {
      base[count] = UInt8(truncatingIfNeeded: v) | 0x80
      count += 1
      v >>= 7
    }
    base[count] = UInt8(v)
    count += 1
  }

  /// Appends the UTF-8 bytes of `s`.
  @inline(__always)
  mutating func append(utf8 s: String) {
    var s = s
    s.withUTF8 { append($0) }
  }
}

/// Runs `body` with a sink that starts on a 1 KB stack buffer.
@inline(__always)
func withByteSink<R>(_ body: (inout ByteSink) -> R) -> R {
  withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 1024) { stack in
    var sink = ByteSink(stack)
    defer { sink.release() }
    return body(&sink)
  }
}
