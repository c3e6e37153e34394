// The hash index of a revision tree: revision hash → node slot.
//
// An open-addressing table (linear probing, at most half full) of node slots. It stores no
// keys: a slot's key is the hash of the node it points to, so building the index for a decoded
// 1,000-revision tree is 1,000 cheap inserts rather than 1,000 dictionary insertions with
// SipHash. Hashes are mixed with a per-process random seed (wyhash's multiply-fold), so a peer
// that picks revision ids cannot aim them at one bucket.

extension RevisionTree {
  /// Node slots by revision hash. Operations take the tree's `nodes`, where the keys live.
  @usableFromInline
  struct NodeIndex: Sendable {
    /// Node slot numbers, -1 for an empty bucket; a power-of-two count.
    private var buckets: [Int32]
    /// Number of entries.
    private(set) var count = 0
    /// The process's seed, copied here so that hashing does not go through a lazy global.
    private let seed0: UInt64
    private let seed1: UInt64

    /// Random per process so that bucket positions cannot be predicted from outside.
    private static let seed: (UInt64, UInt64) = (
      UInt64.random(in: .min ... .max) | 1, UInt64.random(in: .min ... .max) | 1
    )

    /// An empty index with room for `capacity` entries before it grows.
    init(capacity: Int) {
      var n = 8
      while n < capacity * 2 { n *= 2 }
      buckets = [Int32](repeating: -1, count: n)
      (seed0, seed1) = NodeIndex.seed
    }

    /// The index of every live node, or `nil` if two live nodes share a hash.
    static func build(_ nodes: [Node], liveCount: Int) -> NodeIndex? {
      var index = NodeIndex(capacity: liveCount + 2)
      let (s0, s1) = (index.seed0, index.seed1)
      let unique = unsafe nodes.withUnsafeBufferPointer { np in
        unsafe index.buckets.withUnsafeMutableBufferPointer { bp in
          let mask = bp.count - 1
          for i in 0..<np.count where unsafe np[i].state != .dead {
            var b = unsafe Int(truncatingIfNeeded: hashValue(np[i].hash, s0, s1)) & mask
            while true {
              let s = unsafe bp[b]
              if s < 0 {
                unsafe bp[b] = Int32(truncatingIfNeeded: i)
                break
              }
              if unsafe np[Int(s)].hash == np[i].hash { return false }
              b = (b + 1) & mask
            }
          }
          return true
        }
      }
      guard unique else { return nil }
      index.count = liveCount
      return index
    }

    @inline(__always)
    static func hashValue(_ h: RevHash, _ s0: UInt64, _ s1: UInt64) -> UInt64 {
      switch h.storage {
      case .digest(let hi, let lo):
        let p = (hi ^ s0).multipliedFullWidth(by: lo ^ s1)
        return p.high ^ p.low
      case .text(let t):
        var v: UInt64 = 0xcbf2_9ce4_8422_2325
        for b in t { v = (v ^ UInt64(b)) &* 0x100_0000_01b3 }
        let p = (v ^ s0).multipliedFullWidth(by: UInt64(t.count) ^ s1)
        return p.high ^ p.low
      }
    }

    @inline(__always)
    func bucket(_ h: RevHash) -> Int {
      Int(truncatingIfNeeded: NodeIndex.hashValue(h, seed0, seed1)) & (buckets.count - 1)
    }

    /// The slot of the node whose hash is `h`.
    func find(_ h: RevHash, in nodes: [Node]) -> Int32? {
      let mask = buckets.count - 1
      var b = bucket(h)
      while true {
        let s = buckets[b]
        if s < 0 { return nil }
        if nodes[Int(s)].hash == h { return s }
        b = (b + 1) & mask
      }
    }

    /// Indexes node `slot` under its hash. Returns `false` (and changes nothing) if another
    /// node with that hash is indexed and `replace` is false; with `replace`, that entry now
    /// points to `slot`.
    @discardableResult
    mutating func insert(_ slot: Int32, in nodes: [Node], replace: Bool) -> Bool {
      if (count + 1) * 2 > buckets.count { grow(nodes) }
      let h = nodes[Int(slot)].hash
      let mask = buckets.count - 1
      var b = bucket(h)
      while true {
        let s = buckets[b]
        if s < 0 {
          buckets[b] = slot
          count += 1
          return true
        }
        if nodes[Int(s)].hash == h {
          if !replace { return false }
          buckets[b] = slot
          return true
        }
        b = (b + 1) & mask
      }
    }

    private mutating func grow(_ nodes: [Node]) {
      let old = buckets
      buckets = [Int32](repeating: -1, count: old.count * 2)
      let mask = buckets.count - 1
      for s in old where s >= 0 {
        var b = bucket(nodes[Int(s)].hash)
        while buckets[b] >= 0 { b = (b + 1) & mask }
        buckets[b] = s
      }
    }

    /// Removes the entry for hash `h`, if any.
    mutating func remove(_ h: RevHash, in nodes: [Node]) {
      let mask = buckets.count - 1
      var b = bucket(h)
      while true {
        let s = buckets[b]
        if s < 0 { return }
        if nodes[Int(s)].hash == h { break }
        b = (b + 1) & mask
      }
      count -= 1
      // Backward-shift deletion: move later entries of the run into the hole when their home
      // bucket is not between the hole and their position.
      var hole = b
      var k = b
      while true {
        k = (k + 1) & mask
        let s = buckets[k]
        if s < 0 { break }
        let home = bucket(nodes[Int(s)].hash)
        let stays = hole <= k ? (home > hole && home <= k) : (home > hole || home <= k)
        if !stays {
          buckets[hole] = s
          hole = k
        }
      }
      buckets[hole] = -1
    }

    /// Every indexed slot.
    var slots: [Int32] { buckets.filter { $0 >= 0 } }
  }
}
