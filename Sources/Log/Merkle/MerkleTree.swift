import Crypto

/// RFC 6962 / RFC 9162 Merkle tree hashing and proofs, independent of any storage.
///
/// A tree of `n` leaves `D[0..<n]` has the root MTH(D[n]):
/// ```
/// MTH({})       = SHA-256()
/// MTH({d0})     = SHA-256(0x00 || d0)                     (a leaf)
/// MTH(D[n])     = SHA-256(0x01 || MTH(D[0:k]) || MTH(D[k:n]))
///                 where k is the largest power of two smaller than n
/// ```
/// For the 8-leaf test tree of RFC 6962's reference implementation, the root is
/// `5dc9da79...4604328`; leaf 5's (0-based) inclusion proof is its sibling leaf, then the node
/// over leaves 6–7, then the node over leaves 0–3.
///
/// Proof generation works on any tree whose complete subtrees can be read
/// (``inclusionPath(index:size:node:)`` takes `node(level, index)`: the hash of the perfect
/// subtree of 2^level leaves starting at leaf `index << level`); verification needs only hashes.
public enum MerkleTree {
  /// A SHA-256 hash, 32 bytes.
  public typealias Hash = [UInt8]

  /// The root of the empty tree: SHA-256 of nothing.
  public static let emptyRoot: Hash = Array(SHA256.hash(data: [UInt8]()))

  /// The hash of a leaf: SHA-256(0x00 || bytes).
  public static func leafHash(_ bytes: some Sequence<UInt8>) -> Hash {
    var hasher = SHA256()
    hasher.update(data: [0])
    hasher.update(data: Array(bytes))
    return Array(hasher.finalize())
  }

  /// The hash of an interior node: SHA-256(0x01 || left || right). Hashes of another size than
  /// 32 bytes are hashed as given (they never verify).
  public static func nodeHash(_ left: Hash, _ right: Hash) -> Hash {
    if let l = MerkleDigest(left), let r = MerkleDigest(right) {
      return MerkleSHA256.node(l, r).bytes
    }
    var hasher = SHA256()
    hasher.update(data: [1])
    hasher.update(data: left)
    hasher.update(data: right)
    return Array(hasher.finalize())
  }

  /// The largest power of two smaller than `n` (n > 1).
  @inline(__always)
  static func split(_ n: UInt64) -> UInt64 {
    UInt64(1) << (63 - UInt64((n - 1).leadingZeroBitCount))
  }

  // MARK: Roots and proofs from complete subtrees

  /// The root of the leaves `start..<end`, where `start` is a multiple of the largest power of
  /// two not larger than `end - start` (as every range in RFC 6962's recursion is): O(log n)
  /// complete subtrees.
  public static func rangeRoot(
    _ start: UInt64, _ end: UInt64, node: (_ level: Int, _ index: UInt64) throws -> Hash
  ) rethrows -> Hash {
    let n = end - start
    if n == 0 { return emptyRoot }
    if n & (n - 1) == 0 {
      let level = n.trailingZeroBitCount
      return try node(level, start >> UInt64(level))
    }
    let k = split(n)
    return nodeHash(
      try rangeRoot(start, start + k, node: node), try rangeRoot(start + k, end, node: node))
  }

  /// The root of a tree of `size` leaves: MTH(D[size]).
  public static func root(size: UInt64, node: (_ level: Int, _ index: UInt64) throws -> Hash)
    rethrows -> Hash
  {
    try rangeRoot(0, size, node: node)
  }

  /// The audit path of leaf `index` in the tree of `size` leaves: RFC 6962's PATH(m, D[n]), the
  /// sibling hashes from the leaf up.
  public static func inclusionPath(
    index: UInt64, size: UInt64, node: (_ level: Int, _ index: UInt64) throws -> Hash
  ) rethrows -> [Hash] {
    precondition(index < size, "the leaf must be in the tree")
    var path: [Hash] = []
    try inclusionPath(index, 0, size, node: node, into: &path)
    return path
  }

  private static func inclusionPath(
    _ m: UInt64, _ start: UInt64, _ end: UInt64,
    node: (_ level: Int, _ index: UInt64) throws -> Hash, into path: inout [Hash]
  ) rethrows {
    let n = end - start
    if n <= 1 { return }
    let k = split(n)
    if m < k {
      try inclusionPath(m, start, start + k, node: node, into: &path)
      path.append(try rangeRoot(start + k, end, node: node))
    } else {
      try inclusionPath(m - k, start + k, end, node: node, into: &path)
      path.append(try rangeRoot(start, start + k, node: node))
    }
  }

  /// The proof that the tree of `newSize` leaves extends the tree of its first `oldSize`
  /// leaves: RFC 6962's PROOF(m, D[n]); empty when `oldSize` is 0 or equals `newSize`.
  public static func consistencyPath(
    oldSize: UInt64, newSize: UInt64, node: (_ level: Int, _ index: UInt64) throws -> Hash
  ) rethrows -> [Hash] {
    precondition(oldSize <= newSize, "the old tree cannot be larger than the new one")
    guard oldSize > 0, oldSize < newSize else { return [] }
    var path: [Hash] = []
    try subproof(oldSize, 0, newSize, true, node: node, into: &path)
    return path
  }

  private static func subproof(
    _ m: UInt64, _ start: UInt64, _ end: UInt64, _ complete: Bool,
    node: (_ level: Int, _ index: UInt64) throws -> Hash, into path: inout [Hash]
  ) rethrows {
    let n = end - start
    if m == n {
      if !complete { path.append(try rangeRoot(start, end, node: node)) }
      return
    }
    let k = split(n)
    if m <= k {
      try subproof(m, start, start + k, complete, node: node, into: &path)
      path.append(try rangeRoot(start + k, end, node: node))
    } else {
      try subproof(m - k, start + k, end, false, node: node, into: &path)
      path.append(try rangeRoot(start, start + k, node: node))
    }
  }

  // MARK: Verification (RFC 9162, 2.1.3.2 and 2.1.4.2)

  /// The root that an inclusion proof yields for leaf `index` of a tree of `size` leaves, or
  /// nil when the proof has the wrong shape (too long or too short for the tree).
  public static func rootFromInclusionProof(
    index: UInt64, size: UInt64, leafHash: Hash, path: [Hash]
  ) -> Hash? {
    guard index < size, leafHash.count == 32 else { return nil }
    var fn = index
    var sn = size - 1
    var r = leafHash
    for p in path {
      guard sn != 0, p.count == 32 else { return nil }
      if fn & 1 == 1 || fn == sn {
        r = nodeHash(p, r)
        if fn & 1 == 0 {
          while fn & 1 == 0 && fn != 0 {
            fn >>= 1
            sn >>= 1
          }
        }
      } else {
        r = nodeHash(r, p)
      }
      fn >>= 1
      sn >>= 1
    }
    return sn == 0 ? r : nil
  }

  /// Whether `path` proves that the leaf with hash `leafHash` is leaf `index` of the tree of
  /// `size` leaves whose root is `root`.
  public static func verifyInclusion(
    index: UInt64, size: UInt64, leafHash: Hash, path: [Hash], root: Hash
  ) -> Bool {
    rootFromInclusionProof(index: index, size: size, leafHash: leafHash, path: path) == root
  }

  /// Whether `path` proves that the tree of `newSize` leaves with root `newRoot` extends the
  /// tree of `oldSize` leaves with root `oldRoot` (its first `oldSize` leaves are that tree's).
  public static func verifyConsistency(
    oldSize: UInt64, newSize: UInt64, oldRoot: Hash, newRoot: Hash, path: [Hash]
  ) -> Bool {
    guard oldSize <= newSize else { return false }
    if oldSize == newSize { return path.isEmpty && oldRoot == newRoot }
    if oldSize == 0 { return path.isEmpty }
    guard !path.isEmpty, path.allSatisfy({ $0.count == 32 }) else { return false }
    var proof = path
    if oldSize & (oldSize - 1) == 0 { proof.insert(oldRoot, at: 0) }
    var fn = oldSize - 1
    var sn = newSize - 1
    while fn & 1 == 1 {
      fn >>= 1
      sn >>= 1
    }
    var fr = proof[0]
    var sr = proof[0]
    for c in proof.dropFirst() {
      guard sn != 0 else { return false }
      if fn & 1 == 1 || fn == sn {
        fr = nodeHash(c, fr)
        sr = nodeHash(c, sr)
        if fn & 1 == 0 {
          while fn & 1 == 0 && fn != 0 {
            fn >>= 1
            sn >>= 1
          }
        }
      } else {
        sr = nodeHash(sr, c)
      }
      fn >>= 1
      sn >>= 1
    }
    return sn == 0 && fr == oldRoot && sr == newRoot
  }

  // MARK: Storage layout

  /// Where the complete subtree (`level`, `index`) comes in the order the nodes are completed
  /// as leaves are appended (post-order): leaf j's nodes come after the 2j − popcount(j) nodes
  /// of the leaves before it, lowest level first. Increasing with every append, so stored
  /// nodes are written with `MDB_APPEND`.
  @inline(__always)
  public static func postorderIndex(level: Int, index: UInt64) -> UInt64 {
    let last = ((index + 1) << UInt64(level)) - 1
    return 2 * last - UInt64(last.nonzeroBitCount) + UInt64(level)
  }
}

/// A SHA-256 hash held inline: 32 bytes in memory order, no heap allocation. The writer's
/// frontier, the stored nodes and `verify` work with these; ``MerkleTree/Hash`` (an array) is
/// for proofs and the public API.
struct MerkleDigest: Hashable, Sendable, BitwiseCopyable {
  var w0: UInt64 = 0
  var w1: UInt64 = 0
  var w2: UInt64 = 0
  var w3: UInt64 = 0
}

/// The right edge of a tree as leaves are appended: the roots of its complete subtrees, one per
/// set bit of its size, largest first. Appending a leaf merges the equal-sized subtrees at the
/// end, as a binary counter carries: O(1) hashes on average, O(log n) at most.
struct MerkleFrontier: Sendable, Hashable {
  var size: UInt64 = 0
  /// At most 64 hashes; the capacity is reserved once, so appends do not allocate.
  var hashes: [MerkleDigest] = []

  init() { hashes.reserveCapacity(64) }

  /// Appends a leaf hash; calls `completed` with every complete subtree of 2^`minLevel` leaves
  /// or more that it makes (the leaf itself when `minLevel` is 0), lowest first.
  @inline(__always)
  mutating func append(
    _ leaf: MerkleDigest, minLevel: Int = 0,
    completed: (_ level: Int, _ index: UInt64, _ hash: MerkleDigest) throws -> Void
  ) rethrows {
    var h = leaf
    var level = 0
    let index = size
    if minLevel == 0 { try completed(0, index, h) }
    while (size >> UInt64(level)) & 1 == 1 {
      h = MerkleSHA256.node(hashes.removeLast(), h)
      level += 1
      if level >= minLevel { try completed(level, index >> UInt64(level), h) }
    }
    hashes.append(h)
    size += 1
  }

  /// Appends a leaf hash, keeping no subtree.
  @inline(__always)
  mutating func append(_ leaf: MerkleDigest) {
    append(leaf, minLevel: 64) { _, _, _ in }
  }

  /// The root of the tree so far.
  var root: MerkleDigest {
    guard var r = hashes.last else { return MerkleDigest(MerkleTree.emptyRoot)! }
    for h in hashes.dropLast().reversed() { r = MerkleSHA256.node(h, r) }
    return r
  }

  /// The frontier of a tree of `size` leaves from its complete subtrees.
  static func load(size: UInt64, node: (_ level: Int, _ index: UInt64) throws -> MerkleDigest)
    rethrows -> MerkleFrontier
  {
    var frontier = MerkleFrontier()
    frontier.size = size
    var start: UInt64 = 0
    for level in stride(from: 63, through: 0, by: -1) where (size >> UInt64(level)) & 1 == 1 {
      frontier.hashes.append(try node(level, start >> UInt64(level)))
      start += UInt64(1) << UInt64(level)
    }
    return frontier
  }
}
