/// A stack in memory its owner manages itself, so that the JSON parser's finished containers
/// take their elements by moving them (no retain and release per element); the revision tree
/// decoder keeps its open parents on one too. It starts on a caller-provided
/// (stack) buffer and grows onto the heap; ``release()`` destroys what is left.
struct ParseStack<Element> {
  private(set) var base: UnsafeMutablePointer<Element>
  var count = 0
  private var capacity: Int
  private var owned = false

  init(_ initial: UnsafeMutableBufferPointer<Element>) {
    base = initial.baseAddress!
    capacity = initial.count
  }

  @inline(__always)
  mutating func push(_ e: consuming Element) {
    if count == capacity { grow() }
    (base + count).initialize(to: e)
    count += 1
  }

  @inline(__always)
  mutating func popLast() -> Element {
    count -= 1
    return (base + count).move()
  }

  @inline(never)
  mutating func grow() {
    let newCapacity = max(capacity * 2, 16)
    let p = UnsafeMutablePointer<Element>.allocate(capacity: newCapacity)
    p.moveInitialize(from: base, count: count)
    if owned { base.deallocate() }
    base = p
    capacity = newCapacity
    owned = true
  }

  /// The elements from `start` on, moved into an array; the stack shrinks to `start`.
  mutating func moveArray(from start: Int) -> [Element] {
    let n = count - start
    let from = base + start
    count = start
    // Not `Array(unsafeUninitializedCapacity:)`, whose unspecialized allocation looks metadata
    // up at run time on every call.
    var a: [Element] = []
    a.reserveCapacity(n)
    for j in 0..<n { a.append((from + j).move()) }
    return a
  }

  mutating func release() {
    base.deinitialize(count: count)
    count = 0
    if owned { base.deallocate() }
    owned = false
  }
}
