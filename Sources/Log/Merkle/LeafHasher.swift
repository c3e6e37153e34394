import CLMDB
import Dispatch
import Synchronization

#if canImport(FoundationEssentials)
  import FoundationEssentials
#else
  import Foundation
#endif

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// Hashes the Merkle leaves of a large batch on a second core while the writer writes the
/// batch's records: SHA-256 of every record is most of what the tree costs an append, and the
/// writer's own work (reading and moving stream heads, putting records) need not wait for it.
///
/// One per log, made on the first large batch; its thread ends when the log closes or has had
/// no batch for ``idle``, and the next batch starts another. For each
/// batch the writer calls ``begin(events:bytes:frontier:minLevel:)``, then, as it writes each record
/// into its page, ``publish(_:position:record:)``, which copies the record into the hasher's
/// arena, then ``finish()``, or ``abandon()`` when the batch fails. The helper hashes each
/// record from the arena and folds it into a copy of the writer's frontier, keeping the
/// complete subtrees the log stores; `finish` hands back that frontier and those subtrees.
/// `finish` and `abandon` wait for the helper, so it never works past the batch.
///
/// The helper reads only the arena, never the batch's events: touching their arrays and
/// strings would bump reference counts the writer bumps too, and the cache lines holding them
/// would bounce between the cores.
///
/// Between batches the helper stays awake for ``linger`` (yielding its core at each poll), then
/// sleeps: waking a sleeping core costs tens of microseconds on a virtual machine, more than a
/// batch's first leaves take to hash, and back-to-back batches are what a bulk load makes.
/// Batches smaller than ``minimumBatch`` events, and every batch on a one-core machine, hash on
/// the writer's thread as single appends do.
@safe final class LeafHasher: @unchecked Sendable {
  /// The smallest batch handed to the helper: below it the handover costs more than it saves.
  static let minimumBatch = 64
  /// Whether the machine has a second core for the helper.
  static let available = ProcessInfo.processInfo.activeProcessorCount > 1
  /// How long the helper polls for the next batch before it sleeps, in nanoseconds.
  static let linger: UInt64 = 2_000_000
  /// How long the helper sleeps without a batch before its thread ends (the next batch starts
  /// another): a server with many databases keeps no idle thread per database.
  static let idle: DispatchTimeInterval = .seconds(1)

  // The batch: written by the writer, read by the helper once published.
  private var count = 0
  private var minLevel = 0
  /// The position of the batch's first event (the others follow it).
  private var first: UInt64 = 0
  /// The published records, one after another, each after its size (4 bytes).
  private var arena: UnsafeMutableRawPointer
  private var arenaCapacity = 0
  /// Where the next record goes in `arena` (the writer's).
  private var arenaUsed = 0
  /// Records copied into `arena` in this batch (the writer's).
  private var handedOver = 0
  // The result: written by the helper before it signals `done`, read by the writer after.
  private var frontier = MerkleFrontier()
  private var completed: [(level: Int, index: UInt64, hash: MerkleDigest)] = []

  /// Batches begun so far.
  private let batches = Atomic<Int>(0)
  /// Batches the helper is done with; `done` is signalled before this moves.
  private let finished = Atomic<Int>(0)
  /// Records published in the current batch; `abandoned` once the writer gives it up. Apart,
  /// on a cache line of its own: the helper polls it.
  private let published = Published()
  private static let abandoned = -1
  /// Records are published to the helper in runs of this many (and the rest at `finish`), so
  /// that the cache line of `published` moves between the cores once a run, not once a record.
  private static let run = 16
  /// Whether a helper thread is running (or about to).
  private let running = Atomic<Bool>(false)
  private let sleeping = Atomic<Bool>(false)
  private let stopped = Atomic<Bool>(false)
  private let wake = DispatchSemaphore(value: 0)
  /// The helper's thread comes from a serial queue of its own: such a queue may add a thread to
  /// the process's pool (it "overcommits"), while the global queues' threads are as many as
  /// the cores, and a helper asleep between batches must not hold one of those.
  private let queue = DispatchQueue(label: "wikilog.merkle-leaves", qos: .userInitiated)
  private let done = DispatchSemaphore(value: 0)

  init() {
    unsafe arena = .allocate(byteCount: 1, alignment: 16)
    arenaCapacity = 1
  }

  deinit {
    unsafe arena.deallocate()
  }

  /// The most bytes the arena holds: a batch whose records could take more hashes on the
  /// writer's thread, so that one huge batch does not leave a huge arena behind.
  static let maximumArena = 16 << 20

  /// The arena bytes the records of `events` can take; nil when more than ``maximumArena``.
  static func arenaBytes(for events: [NewEvent]) -> Int? {
    var bytes = 0
    // The fields are read where they lie: passing `events[i]` along would copy the event,
    // retaining and releasing its strings and payload.
    for i in events.indices {
      bytes +=
        4
        + EventRecord.sizeBound(
          typeCount: events[i].type.utf8.count, streamCount: events[i].stream.utf8.count,
          actorCount: events[i].actor.utf8.count, payloadCount: events[i].payload.count)
      if bytes > maximumArena { return nil }
    }
    return bytes
  }

  /// Starts the helper on a batch of `events` (whose records take at most `bytes`, from
  /// ``arenaBytes(for:)``), whose leaves follow `frontier`; complete subtrees of 2^`minLevel`
  /// leaves or more are kept.
  func begin(events: [NewEvent], bytes: Int, frontier: MerkleFrontier, minLevel: Int) {
    precondition(!stopped.load(ordering: .relaxed), "a stopped leaf hasher takes no batch")
    if arenaCapacity < bytes {
      unsafe arena.deallocate()
      unsafe arena = .allocate(byteCount: bytes, alignment: 16)
      arenaCapacity = bytes
    }
    arenaUsed = 0
    handedOver = 0
    count = events.count
    first = frontier.size + 1
    self.frontier = frontier
    self.minLevel = minLevel
    completed.removeAll(keepingCapacity: true)
    published.count.store(0, ordering: .relaxed)
    let batch = batches.add(1, ordering: .sequentiallyConsistent).newValue
    if running.compareExchange(expected: false, desired: true, ordering: .sequentiallyConsistent)
      .exchanged
    {
      // The closure keeps the instance alive while the thread runs.
      queue.async { [self] in run(seen: batch - 1) }
    } else if sleeping.load(ordering: .sequentiallyConsistent) {
      wake.signal()
    }
  }

  /// Hands the helper the record of the batch's `index`th event, at `position`, as written to
  /// its page (copied: the page is the writer's). Records are published in order, each once.
  @inline(__always)
  func publish(_ index: Int, position: UInt64, record: UnsafeRawBufferPointer) {
    assert(position == first + UInt64(index), "records are published in position order")
    let offset = arenaUsed
    precondition(offset + 4 + record.count <= arenaCapacity, "a record is larger than its bound")
    unsafe (arena + offset).storeBytes(of: UInt32(record.count), as: UInt32.self)
    unsafe (arena + offset + 4).copyMemory(
      from: record.baseAddress.unsafelyUnwrapped, byteCount: record.count)
    arenaUsed = offset + 4 + record.count
    handedOver = index + 1
    if (index + 1) % Self.run == 0 { published.count.store(index + 1, ordering: .releasing) }
  }

  /// Waits for the helper to hash every leaf of the batch (every record must be published);
  /// returns the frontier after the batch and the complete subtrees it made, lowest first, in
  /// order.
  func finish() -> (
    frontier: MerkleFrontier, completed: [(level: Int, index: UInt64, hash: MerkleDigest)]
  ) {
    precondition(handedOver == count, "every record of the batch must be handed over")
    published.count.store(count, ordering: .releasing)
    waitForHelper()
    return (frontier, completed)
  }

  /// Stops the helper's work on the batch (it failed) and waits for it.
  func abandon() {
    published.count.store(Self.abandoned, ordering: .releasing)
    waitForHelper()
  }

  /// Waits for the helper to be done with the current batch: polling first, since it is
  /// usually a few records from the end and a sleeping writer takes long to wake, then on `done`.
  private func waitForHelper() {
    let batch = batches.load(ordering: .relaxed)
    let deadline = Self.now() + Self.linger
    while finished.load(ordering: .acquiring) != batch, Self.now() < deadline {
      wikilog_spin_pause()
    }
    done.wait()
  }

  /// Whether a helper thread is running now.
  var isRunning: Bool { running.load(ordering: .sequentiallyConsistent) }

  /// Ends the helper's thread (the log is closing); no batch may be running.
  func stop() {
    stopped.store(true, ordering: .sequentiallyConsistent)
    wake.signal()
  }

  private static func now() -> UInt64 { DispatchTime.now().uptimeNanoseconds }

  /// The helper's thread: batches after the `seen`th, until the log closes or it has been idle
  /// for ``idle``.
  private func run(seen start: Int) {
    var seen = start
    while true {
      var deadline = Self.now() + Self.linger
      while batches.load(ordering: .acquiring) == seen {
        if stopped.load(ordering: .acquiring) {
          running.store(false, ordering: .sequentiallyConsistent)
          return
        }
        if Self.now() < deadline {
          sched_yield()
          continue
        }
        sleeping.store(true, ordering: .sequentiallyConsistent)
        var idle = false
        if batches.load(ordering: .sequentiallyConsistent) == seen
          && !stopped.load(ordering: .sequentiallyConsistent)
        {
          idle = wake.wait(timeout: .now() + Self.idle) == .timedOut
        }
        sleeping.store(false, ordering: .sequentiallyConsistent)
        if idle && batches.load(ordering: .sequentiallyConsistent) == seen {
          running.store(false, ordering: .sequentiallyConsistent)
          // A batch begun meanwhile saw this thread running, or starts another: whichever
          // sets `running` first serves it.
          if batches.load(ordering: .sequentiallyConsistent) == seen { return }
          if !running.compareExchange(
            expected: false, desired: true, ordering: .sequentiallyConsistent
          ).exchanged {
            return
          }
        }
        deadline = Self.now() + Self.linger
      }
      seen += 1
      hashBatch()
      done.signal()
      finished.store(seen, ordering: .releasing)
    }
  }

  private func hashBatch() {
    // The batch's fields are read once, and the frontier and subtrees kept in locals until the
    // end: the writer writes fields of this object as it publishes, and a field the helper
    // wrote or read on the same cache line would bounce between the cores at every record.
    let count = count
    let first = first
    let arena = unsafe arena
    var offset = 0
    let minLevel = minLevel
    // Moved out rather than copied, so that appending does not copy their buffers.
    var frontier = self.frontier
    var completed = self.completed
    self.frontier = MerkleFrontier()
    self.completed = []
    defer {
      self.frontier = frontier
      self.completed = completed
    }
    var next = 0
    var idlePolls = 0
    while next < count {
      let ready = published.count.load(ordering: .acquiring)
      if ready == Self.abandoned { return }
      if ready == next {
        // Mostly a pause, the writer being a few records ahead; when it stalls (a page spill,
        // a fault, its core taken away), the core is given up now and then.
        idlePolls += 1
        if idlePolls % 1024 == 0 { sched_yield() } else { wikilog_spin_pause() }
        continue
      }
      idlePolls = 0
      while next < ready {
        let size = Int(unsafe arena.loadUnaligned(fromByteOffset: offset, as: UInt32.self))
        let leaf = unsafe MerkleSHA256.leaf(
          position: first + UInt64(next),
          record: UnsafeRawBufferPointer(start: arena + offset + 4, count: size))
        offset += 4 + size
        frontier.append(leaf, minLevel: minLevel) { level, index, hash in
          completed.append((level, index, hash))
        }
        next += 1
      }
    }
  }
}

/// An atomic count with a cache line to itself (64 bytes on either side).
private final class Published: Sendable {
  private let before: (UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64) = (
    0, 0, 0, 0, 0, 0, 0, 0
  )
  let count = Atomic<Int>(0)
  private let after: (UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64) = (
    0, 0, 0, 0, 0, 0, 0, 0
  )
}
