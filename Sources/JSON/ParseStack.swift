/// A stack in memory its owner manages itself, so that the JSON parser's finished containers
/// take their elements by moving them (no retain and release per element); the revision tree
/// decoder keeps its open parents on one too. It starts on a caller-provided
/// (stack) buffer and grows onto the heap; ``release()`` destroys what is left. It is
/// non-copyable, so no copy can outlive or double-free the memory it owns.
@safe @usableFromInline
package struct ParseStack<Element>: ~Copyable {
  @usableFromInline package private(set) var base: UnsafeMutablePointer<Element>
  @usableFromInline package var count = 0
  @usableFromInline var capacity: Int
  @usableFromInline var owned = false

  @inlinable
  package init(_ initial: UnsafeMutableBufferPointer<Element>) {
    unsafe base = initial.baseAddress!
    capacity = initial.count
  }

  @inlinable @inline(__always)
  package mutating func push(_ e: consuming Element) {
    if count == capacity { grow() }
    unsafe (base + count).initialize(to: e)
    count += 1
  }

  @inlinable @inline(__always)
  package mutating func popLast() -> Element {
    count -= 1
    return unsafe (base + count).move()
  }

  @inline(never) @usableFromInline
  mutating func grow() {
    let newCapacity = max(capacity * 2, 16)
    let p = UnsafeMutablePointer<Element>.allocate(capacity: newCapacity)
    unsafe p.moveInitialize(from: base, count: count)
    if owned { unsafe base.deallocate() }
    unsafe base = p
    capacity = newCapacity
    owned = true
  }

  /// The elements from `start` on, moved into an array; the stack shrinks to `start`.
  package mutating func moveArray(from start: Int) -> [Element] {
    let n = count - start
    let from = unsafe base + start
    count = start
    // Not `Array(unsafeUninitializedCapacity:)`, whose unspecialized allocation looks metadata
    // up at run time on every call.
    var a: [Element] = []
    a.reserveCapacity(n)
    for j in 0..<n { a.append(unsafe (from + j).move()) }
    return a
  }

  package mutating func release() {
    unsafe base.deinitialize(count: count)
    count = 0
    if owned { unsafe base.deallocate() }
    owned = false
  }
}
