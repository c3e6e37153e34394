/// A growable byte buffer for the JSON writers and the revision digest: plain stores into
/// memory it owns, without the uniqueness and capacity bookkeeping of `Array.append`.
///
/// Use it only through ``withByteSink(_:)``, which starts it on a stack buffer and frees
/// whatever it grew into; the sink must not escape the closure. It is non-copyable, so no
/// copy of it can outlive or double-free the memory it owns.
///
/// ```swift
/// let bytes = withByteSink { sink in
///   sink.append(UInt8(ascii: "x"))
///   return sink.array()
/// }
/// ```
@safe @usableFromInline
package struct ByteSink: ~Copyable {
  @usableFromInline var base: UnsafeMutablePointer<UInt8>
  /// Bytes written so far.
  @usableFromInline package internal(set) var count = 0
  @usableFromInline var capacity: Int
  /// Whether `base` was allocated by the sink (else it is the caller's stack buffer).
  @usableFromInline var owned = false

  @usableFromInline
  package init(_ initial: UnsafeMutableBufferPointer<UInt8>) {
    unsafe base = initial.baseAddress!
    capacity = initial.count
  }

  /// The bytes written so far; valid until the next write.
  @inlinable
  package var bytes: UnsafeBufferPointer<UInt8> {
    unsafe UnsafeBufferPointer(start: base, count: count)
  }

  /// The bytes written so far, as an array.
  package func array() -> [UInt8] {
    // Not `Array(unsafeUninitializedCapacity:)`: that goes through an unspecialized allocation
    // that looks the storage class's metadata up at run time on every call.
    var a: [UInt8] = []
    a.reserveCapacity(count)
    unsafe a.append(contentsOf: bytes)
    return a
  }

  /// Makes room for at least `n` more bytes.
  @inline(never) @usableFromInline
  mutating func grow(_ n: Int) {
    let newCapacity = max(capacity * 2, count + n)
    let p = UnsafeMutablePointer<UInt8>.allocate(capacity: newCapacity)
    unsafe p.initialize(from: base, count: count)
    if owned { unsafe base.deallocate() }
    unsafe base = p
    capacity = newCapacity
    owned = true
  }

  /// Makes room for `n` more bytes so that the next appends do not grow the buffer.
  @inlinable
  package mutating func reserve(_ n: Int) {
    if capacity - count < n { grow(n) }
  }

  /// Forgets the bytes written, keeping the memory.
  @inlinable
  package mutating func removeAll() {
    count = 0
  }

  /// Frees memory the sink allocated.
  @usableFromInline
  package mutating func release() {
    if owned { unsafe base.deallocate() }
    owned = false
    capacity = 0
    count = 0
  }

  @inlinable @inline(__always)
  package mutating func append(_ b: UInt8) {
    if count == capacity { grow(1) }
    unsafe base[count] = b
    count += 1
  }

  @inlinable @inline(__always)
  package mutating func append(_ p: UnsafePointer<UInt8>, count n: Int) {
    if capacity - count < n { grow(n) }
    unsafe (base + count).update(from: p, count: n)
    count += n
  }

  @inlinable @inline(__always)
  package mutating func append(_ buffer: UnsafeBufferPointer<UInt8>) {
    if let p = buffer.baseAddress { unsafe append(p, count: buffer.count) }
  }

  /// Appends raw bytes.
  @inlinable @inline(__always)
  package mutating func append(raw buffer: UnsafeRawBufferPointer) {
    let n = buffer.count
    guard let p = buffer.baseAddress, n > 0 else { return }
    if capacity - count < n { grow(n) }
    unsafe UnsafeMutableRawPointer(base + count).copyMemory(from: p, byteCount: n)
    count += n
  }

  /// Appends the low `n` (at most 8) bytes of `word`, least significant first.
  @inlinable @inline(__always)
  package mutating func append(word: UInt64, count n: Int) {
    if capacity - count < 8 { grow(8) }
    unsafe UnsafeMutableRawPointer(base + count).storeBytes(of: word.littleEndian, as: UInt64.self)
    count += n
  }

  /// Appends the 8 bytes of `v`, most significant first.
  @inlinable @inline(__always)
  package mutating func append(bigEndian v: UInt64) {
    if capacity - count < 8 { grow(8) }
    unsafe UnsafeMutableRawPointer(base + count).storeBytes(of: v.bigEndian, as: UInt64.self)
    count += 8
  }

  /// Appends `v` as an unsigned LEB128 varint.
  @inlinable @inline(__always)
  package mutating func appendVarint(_ v: UInt64) {
    if capacity - count < 10 { grow(10) }
    var v = v
    while v >= 0x80 {
      unsafe base[count] = UInt8(truncatingIfNeeded: v) | 0x80
      count += 1
      v >>= 7
    }
    unsafe base[count] = UInt8(v)
    count += 1
  }

  /// Appends the UTF-8 bytes of `s`.
  @inlinable @inline(__always)
  package mutating func append(utf8 s: String) {
    var s = s
    s.withUTF8 { unsafe append($0) }
  }
}

/// Runs `body` with a sink that starts on a 1 KB stack buffer.
@inlinable @inline(__always)
package func withByteSink<R>(_ body: (inout ByteSink) -> R) -> R {
  unsafe withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 1024) { stack in
    var sink = unsafe ByteSink(stack)
    defer { sink.release() }
    return body(&sink)
  }
}
