#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// The thread that hashes a large append's Merkle leaves while the writer goes on with its puts.
///
/// A write transaction that appends many events (``EventLog/merkleWorkerThreshold`` or more)
/// hands the tree to this worker for the rest of the transaction: the writer encodes each record
/// into its page as before, then copies the leaf's bytes (`0x00 || position || record`) into a
/// chunk; each full chunk is published to the worker, which hashes its leaves and folds them
/// into the frontier, in order, keeping the stored subtrees it completes
/// (``EventLog/merkleStoredLevel`` and up) for the writer to put. Before the transaction
/// commits, begins a savepoint or ends, the writer finishes the chunks it published
/// (``finish(into:put:)``, ``cancel(into:)``): it hashes itself those the worker has not
/// taken, waits for the one the worker is on, and takes the frontier back, so the head stored
/// at commit covers every event the transaction wrote, as when the writer hashes them itself.
/// Chunks are folded strictly in order, whoever hashes them.
///
/// ```
/// writer:  put 1..64  copy  | put 65..128 copy | ... | put ..1000 | hash 961..1000 | nodes, head, commit
/// worker:                   | hash 1..64       | hash 65..128 ... | hash 897..960 |
/// ```
///
/// One worker per log, made on first use and kept (its thread sleeps on a condition variable
/// between transactions) until the log closes (``stop()``). Used only under the log's write
/// lock, by one writer at a time. The chunks are fixed slots that the writer fills and the
/// worker reads after the mutex hands them over; records larger than ``largeRecord`` are hashed
/// by the writer and handed over as digests, so chunks never grow.
@safe final class MerkleHashWorker: @unchecked Sendable {
  /// Bytes of leaf input per chunk.
  static let chunkBytes = 64 << 10
  /// Leaves per chunk at most: what the writer waits for at the end is one chunk's hashing.
  static let chunkEntries = 128
  /// Chunks the writer may fill ahead of the worker.
  static let slotCount = 4
  /// Records larger than this are hashed by the writer (their copy would cost as much).
  static let largeRecord = 8 << 10
  /// Marks an entry that holds a digest (32 bytes), not a leaf's input.
  private static let digestFlag: UInt32 = 1 << 31

  /// Whether a second thread can help: more than one processor online.
  static let isUseful: Bool = {
    #if canImport(Glibc)
      return sysconf(Int32(_SC_NPROCESSORS_ONLN)) > 1
    #else
      return false
    #endif
  }()

  /// A stored subtree the worker completed: its key in `log.merkle` and its hash.
  struct Node {
    var key: UInt64
    var hash: MerkleDigest
  }

  // The chunks: slot i's bytes at `bytes + i * chunkBytes`, the end offset of each of its
  // entries at `ends + i * chunkEntries` (with `digestFlag` for a digest), its entry count at
  // `counts[i]`. Written by the writer before it publishes the slot, read by the worker after.
  private let bytes: UnsafeMutableRawPointer
  private let ends: UnsafeMutablePointer<UInt32>
  private let counts: UnsafeMutablePointer<Int>

  private let mutex: UnsafeMutablePointer<pthread_mutex_t>
  /// Signalled when a chunk is published or the worker must stop.
  private let work: UnsafeMutablePointer<pthread_cond_t>
  /// Signalled when the worker finishes a chunk.
  private let done: UnsafeMutablePointer<pthread_cond_t>

  // Under the mutex (`published` is changed by the writer only, so it reads it without).
  /// Chunks published since the worker was made.
  private var published = 0
  /// Chunks taken to be hashed, by the worker or by the writer (``help(until:)``).
  private var claimed = 0
  /// Chunks hashed and folded into the frontier, in order: a chunk is folded only once every
  /// chunk before it is.
  private var consumed = 0
  private var workerWaits = false
  private var writerWaits = false
  private var stopping = false
  /// Subtrees the worker completed that the writer has not taken, in the order completed.
  private var ready: [Node] = []

  // The worker's between `start` and the writer's wait at the end; the writer's otherwise.
  private var frontier = MerkleFrontier()

  // The writer's.
  /// Whether a transaction's leaves are being handed over.
  private(set) var isActive = false
  private var thread: pthread_t?
  /// The slot being filled, its bytes used and its entries.
  private var fill = 0
  private var fillUsed = 0
  private var fillCount = 0
  /// `published` when the writer last took the completed subtrees.
  private var drainedAt = 0
  /// The subtrees taken from `ready`, being put (swapped with it, so neither allocates).
  private var taken: [Node] = []
  /// The leaf hashes of a chunk the writer hashes itself, and the subtrees it completes.
  private var helped: [MerkleDigest] = []
  private var helpedNodes: [Node] = []

  init() {
    unsafe bytes = .allocate(
      byteCount: Self.chunkBytes * Self.slotCount, alignment: MemoryLayout<UInt64>.alignment)
    unsafe ends = .allocate(capacity: Self.chunkEntries * Self.slotCount)
    unsafe counts = .allocate(capacity: Self.slotCount)
    unsafe counts.initialize(repeating: 0, count: Self.slotCount)
    unsafe mutex = .allocate(capacity: 1)
    unsafe mutex.initialize(to: pthread_mutex_t())
    unsafe _ = pthread_mutex_init(mutex, nil)
    unsafe work = .allocate(capacity: 1)
    unsafe work.initialize(to: pthread_cond_t())
    unsafe _ = pthread_cond_init(work, nil)
    unsafe done = .allocate(capacity: 1)
    unsafe done.initialize(to: pthread_cond_t())
    unsafe _ = pthread_cond_init(done, nil)
    ready.reserveCapacity(256)
    taken.reserveCapacity(256)
    helped.reserveCapacity(Self.chunkEntries)
    helpedNodes.reserveCapacity(64)
  }

  deinit {
    unsafe _ = pthread_cond_destroy(done)
    unsafe done.deallocate()
    unsafe _ = pthread_cond_destroy(work)
    unsafe work.deallocate()
    unsafe _ = pthread_mutex_destroy(mutex)
    unsafe mutex.deallocate()
    unsafe counts.deallocate()
    unsafe ends.deallocate()
    unsafe bytes.deallocate()
  }

  // MARK: The writer's side

  /// Takes `frontier` over (leaving the writer a stale one until ``finish(into:put:)`` or
  /// ``cancel(into:)`` hands it back); from now on leaves go through ``add(position:record:)``.
  /// False when the thread cannot be started: the writer goes on hashing itself.
  func start(frontier: inout MerkleFrontier) -> Bool {
    precondition(!isActive, "a Merkle hashing session is already running")
    if thread == nil, !startThread() { return false }
    lock()
    swap(&self.frontier, &frontier)
    ready.removeAll(keepingCapacity: true)
    unlock()
    taken.removeAll(keepingCapacity: true)
    fill = published % Self.slotCount
    fillUsed = 0
    fillCount = 0
    drainedAt = published
    isActive = true
    return true
  }

  /// Hands over the leaf of the record just written at `position` (its bytes where they lie,
  /// copied here before the next write moves them).
  @inline(__always)
  func add(position: UInt64, record: UnsafeRawBufferPointer) {
    let large = record.count > Self.largeRecord
    let size = large ? MemoryLayout<MerkleDigest>.size : 9 + record.count
    if fillCount == Self.chunkEntries || fillUsed + size > Self.chunkBytes { publish(next: true) }
    let target = unsafe bytes + fill * Self.chunkBytes + fillUsed
    if large {
      unsafe target.storeBytes(
        of: MerkleSHA256.leaf(position: position, record: record), as: MerkleDigest.self)
    } else {
      unsafe target.storeBytes(of: 0, as: UInt8.self)
      unsafe target.storeBytes(of: position.bigEndian, toByteOffset: 1, as: UInt64.self)
      if record.count > 0 {
        unsafe (target + 9).copyMemory(
          from: record.baseAddress.unsafelyUnwrapped, byteCount: record.count)
      }
    }
    fillUsed += size
    unsafe ends[fill * Self.chunkEntries + fillCount] =
      UInt32(fillUsed) | (large ? Self.digestFlag : 0)
    fillCount += 1
  }

  /// Whether the worker may have completed subtrees since the writer last took them: a few
  /// chunks were published since.
  @inline(__always)
  var shouldDrain: Bool { published &- drainedAt >= 2 }

  /// Puts (with `put`) the subtrees the worker has completed so far, in order, without waiting.
  func drain(_ put: (_ key: UInt64, _ hash: MerkleDigest) throws -> Void) rethrows {
    drainedAt = published
    lock()
    swap(&ready, &taken)
    unlock()
    defer { taken.removeAll(keepingCapacity: true) }
    for node in taken { try put(node.key, node.hash) }
  }

  /// Ends the session: publishes the last chunk, puts the subtrees completed meanwhile, waits
  /// for the worker, hands the frontier back into `frontier` (covering every leaf added) and
  /// puts the rest. When `put` throws, the session is over all the same.
  func finish(
    into frontier: inout MerkleFrontier, put: (_ key: UInt64, _ hash: MerkleDigest) throws -> Void
  ) rethrows {
    precondition(isActive, "no Merkle hashing session is running")
    if fillCount > 0 { publish(next: false) }
    do {
      try drain(put)
    } catch {
      cancel(into: &frontier)
      throw error
    }
    waitForWorker(into: &frontier)
    swap(&ready, &taken)
    defer { taken.removeAll(keepingCapacity: true) }
    for node in taken { try put(node.key, node.hash) }
  }

  /// Ends the session without putting anything (the transaction does not commit): waits for
  /// the worker and hands the frontier back into `frontier`, covering every leaf added.
  func cancel(into frontier: inout MerkleFrontier) {
    guard isActive else { return }
    if fillCount > 0 { publish(next: false) }
    waitForWorker(into: &frontier)
    ready.removeAll(keepingCapacity: true)
  }

  /// Stops the thread (the log closes). No session may be running.
  func stop() {
    precondition(!isActive, "a Merkle hashing session is still running")
    guard let thread else { return }
    lock()
    stopping = true
    unsafe _ = pthread_cond_signal(work)
    unlock()
    _ = pthread_join(thread, nil)
    self.thread = nil
  }

  /// Publishes the slot being filled and, with `next`, takes the next one, waiting while the
  /// worker still has it.
  private func publish(next: Bool) {
    unsafe counts[fill] = fillCount
    lock()
    published += 1
    if workerWaits { unsafe _ = pthread_cond_signal(work) }
    let full = published - consumed >= Self.slotCount
    unlock()
    if next && full { help(until: published - Self.slotCount + 1) }
    fill = published % Self.slotCount
    fillUsed = 0
    fillCount = 0
  }

  /// Waits until the worker has hashed every published chunk and takes the frontier back.
  /// Leaves the mutex-guarded `ready` to the caller (the worker is idle).
  private func waitForWorker(into frontier: inout MerkleFrontier) {
    help(until: published)
    lock()
    swap(&self.frontier, &frontier)
    unlock()
    isActive = false
  }

  /// Waits until `target` chunks are folded, hashing on the writer's thread the published
  /// chunks the worker has not taken yet: the writer then waits for at most the chunk the
  /// worker is on, never for the worker to be scheduled (on a busy machine, a wake-up can take
  /// milliseconds). The writer hashes a chunk's leaves before it waits for the one before, so
  /// the two are hashed at once; it folds them in order.
  private func help(until target: Int) {
    lock()
    while consumed < target {
      guard claimed < published else {
        writerWaits = true
        unsafe _ = pthread_cond_wait(done, mutex)
        writerWaits = false
        continue
      }
      let chunk = claimed
      claimed += 1
      unlock()
      let slot = chunk % Self.slotCount
      forEachLeaf(slot) { helped.append($0) }
      lock()
      while consumed < chunk {
        writerWaits = true
        unsafe _ = pthread_cond_wait(done, mutex)
      }
      writerWaits = false
      unlock()
      // Every chunk before is folded and the worker takes none while this one is claimed.
      for leaf in helped {
        frontier.append(leaf, minLevel: EventLog.merkleStoredLevel) { level, index, hash in
          helpedNodes.append(
            Node(key: MerkleTree.postorderIndex(level: level, index: index), hash: hash))
        }
      }
      helped.removeAll(keepingCapacity: true)
      lock()
      consumed += 1
      ready.append(contentsOf: helpedNodes)
      helpedNodes.removeAll(keepingCapacity: true)
      // The worker may take the next chunk now.
      if workerWaits && claimed < published { unsafe _ = pthread_cond_signal(work) }
    }
    unlock()
  }

  @inline(__always)
  private func lock() { unsafe _ = pthread_mutex_lock(mutex) }
  @inline(__always)
  private func unlock() { unsafe _ = pthread_mutex_unlock(mutex) }

  // MARK: The worker's side

  private func startThread() -> Bool {
    #if canImport(Glibc)
      guard Self.isUseful else { return false }
      var handle = pthread_t()
      // The thread holds the worker until it returns (``stop()``).
      let context = unsafe Unmanaged.passRetained(self).toOpaque()
      let rc = unsafe pthread_create(
        &handle, nil,
        { context in
          let worker = unsafe Unmanaged<MerkleHashWorker>.fromOpaque(context.unsafelyUnwrapped)
            .takeRetainedValue()
          worker.run()
          return nil
        }, context)
      guard rc == 0 else {
        unsafe Unmanaged<MerkleHashWorker>.fromOpaque(context).release()
        return false
      }
      thread = handle
      return true
    #else
      return false
    #endif
  }

  /// The thread: hashes published chunks in order until stopped.
  private func run() {
    var nodes: [Node] = []
    nodes.reserveCapacity(64)
    lock()
    while true {
      // A chunk to take, and none taken by the writer still unfolded (chunks fold in order).
      while (claimed == published || claimed != consumed) && !stopping {
        workerWaits = true
        unsafe _ = pthread_cond_wait(work, mutex)
      }
      workerWaits = false
      if claimed == published || claimed != consumed {  // stopping, and nothing left
        unlock()
        return
      }
      let slot = claimed % Self.slotCount
      claimed += 1
      unlock()
      hash(slot, into: &nodes)
      lock()
      consumed += 1
      ready.append(contentsOf: nodes)
      nodes.removeAll(keepingCapacity: true)
      if writerWaits { unsafe _ = pthread_cond_signal(done) }
    }
  }

  /// Hashes the leaves of a chunk and folds them into the frontier.
  private func hash(_ slot: Int, into nodes: inout [Node]) {
    forEachLeaf(slot) { leaf in
      frontier.append(leaf, minLevel: EventLog.merkleStoredLevel) { level, index, hash in
        nodes.append(Node(key: MerkleTree.postorderIndex(level: level, index: index), hash: hash))
      }
    }
  }

  /// Calls `body` with the leaf hash of each entry of a chunk, in order.
  @inline(__always)
  private func forEachLeaf(_ slot: Int, _ body: (MerkleDigest) -> Void) {
    let base = unsafe bytes + slot * Self.chunkBytes
    let entries = unsafe ends + slot * Self.chunkEntries
    let count = unsafe counts[slot]
    var start = 0
    for i in 0..<count {
      let end = unsafe entries[i]
      let offset = Int(end & ~Self.digestFlag)
      body(
        end & Self.digestFlag != 0
          ? unsafe (base + start).loadUnaligned(as: MerkleDigest.self)
          : unsafe MerkleSHA256.digest(
            UnsafeRawBufferPointer(start: base + start, count: offset - start)))
      start = offset
    }
  }
}
