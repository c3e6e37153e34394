/// The Merkle tree over the log (RFC 6962 hashing): one leaf per event, in position order.
///
/// Leaf `i` (0-based) is the event at position `i + 1`; its bytes are the position (8 bytes,
/// big-endian) followed by the record as stored (``EventRecord``: format, time, stream version,
/// back pointer, type, stream, actor, payload, CRC), hashed as SHA-256(0x00 || bytes). The tree
/// is kept in the append transaction itself, so it is never behind the events it covers:
///
/// - the writer keeps the right edge (``MerkleFrontier``) in memory and folds each new leaf
///   into it: one leaf hash and, on average, one node hash per event;
/// - each complete subtree of 16 leaves or more is stored in `log.merkle` under its post-order
///   number (``MerkleTree/postorderIndex(level:index:)``), written with `MDB_APPEND`: one put
///   per 8 events on average;
/// - each commit that appends stores the tree head (size and root) in `log.meta`.
///
/// Smaller subtrees are hashed again from the events when a proof needs them (at most 15
/// records per proof), so the tree costs about 6 bytes an event on disk, and every proof reads
/// O(log n) stored nodes.
///
/// A log made before the tree existed (or appended to by an older build) gets it at the next
/// writable open or write: the missing leaves are hashed from the events in one transaction.
extension EventLog {
  /// Complete subtrees of 2^storedLevel leaves and more are stored; smaller ones are hashed
  /// from the events when needed.
  static let merkleStoredLevel = 4
  static let merkleHeadKey = Array("merkle.head".utf8)

  /// The log's tree head: its size (the number of events it covers) and root hash.
  public struct TreeHead: Sendable, Hashable {
    public var size: UInt64
    public var root: MerkleTree.Hash

    public init(size: UInt64, root: MerkleTree.Hash) {
      self.size = size
      self.root = root
    }
  }

  /// An event and the proof that it is a leaf of a tree of `treeSize` leaves.
  public struct InclusionProof: Sendable, Hashable {
    public var position: LogPosition
    public var treeSize: UInt64
    /// The leaf's bytes: the position (8 bytes, big-endian) and the record as stored.
    public var leaf: [UInt8]
    /// The audit path, from the leaf up (RFC 6962's PATH).
    public var path: [MerkleTree.Hash]
    /// For an erased event: the hash of its original leaf, which the tree keeps (``leaf`` is
    /// then the erased record, which it does not cover); nil otherwise.
    public var erasedLeafHash: MerkleTree.Hash?
    /// For an erased event: the event that erased it.
    public var erasedBy: LogPosition?

    public init(
      position: LogPosition, treeSize: UInt64, leaf: [UInt8], path: [MerkleTree.Hash],
      erasedLeafHash: MerkleTree.Hash? = nil, erasedBy: LogPosition? = nil
    ) {
      self.position = position
      self.treeSize = treeSize
      self.leaf = leaf
      self.path = path
      self.erasedLeafHash = erasedLeafHash
      self.erasedBy = erasedBy
    }

    /// The root this proof yields; nil when it has the wrong shape.
    public var root: MerkleTree.Hash? {
      MerkleTree.rootFromInclusionProof(
        index: position.rawValue &- 1, size: treeSize,
        leafHash: erasedLeafHash ?? MerkleTree.leafHash(leaf), path: path)
    }
  }

  // MARK: Reading

  /// The tree head as of the last commit: the number of events and the tree's root over them.
  ///
  /// - Throws: ``LogError/corruptDatabase(path:reason:)`` when the log has no tree yet (a log
  ///   made before the tree existed, opened read-only: open it writable once to build it).
  public func treeHead() throws(LogError) -> TreeHead {
    try readLog { txn throws(LogError) in try self.treeHead(txn.raw) }
  }

  /// The root of the tree of the first `size` events, from the stored tree.
  public func treeRoot(size: UInt64) throws(LogError) -> MerkleTree.Hash {
    try readLog { txn throws(LogError) in
      let head = try self.treeHead(txn.raw)
      guard size <= head.size else {
        throw LogError.invalidArgument("the log has \(head.size) events, not \(size)")
      }
      return try perform { try MerkleTree.root(size: size) { try self.node(txn.raw, $0, $1) } }
    }
  }

  /// The event at `position` and its audit path in the tree of the first `treeSize` events (the
  /// whole log when nil).
  ///
  /// - Throws: ``LogError/invalidArgument(_:)`` when the position is not in that tree.
  public func inclusionProof(position: LogPosition, treeSize: UInt64? = nil) throws(LogError)
    -> InclusionProof
  {
    try readLog { txn throws(LogError) in
      let head = try self.treeHead(txn.raw)
      let size = treeSize ?? head.size
      guard size <= head.size else {
        throw LogError.invalidArgument("the log has \(head.size) events, not \(size)")
      }
      guard position.rawValue >= 1, position.rawValue <= size else {
        throw LogError.invalidArgument("position \(position) is not in a tree of \(size) events")
      }
      return try perform {
        guard let leaf = try txn.raw.record(dbs.events, at: position.rawValue) else {
          throw LogError.corruptDatabase(path: path, reason: "event \(position) is missing")
        }
        let pathHashes = try MerkleTree.inclusionPath(index: position.rawValue - 1, size: size) {
          try self.node(txn.raw, $0, $1)
        }
        var proof = InclusionProof(
          position: position, treeSize: size, leaf: position.rawValue.bigEndianBytes + leaf,
          path: pathHashes)
        if leaf.first == EventRecord.erasedFormat {
          proof.erasedLeafHash = try self.digest(txn.raw, 0, position.rawValue - 1).bytes
          proof.erasedBy = try txn.event(at: position)?.erasedBy
        }
        return proof
      }
    }
  }

  /// The proof that the tree of the first `newSize` events (the whole log when nil) extends the
  /// tree of the first `oldSize`: RFC 6962's consistency proof.
  public func consistencyProof(oldSize: UInt64, newSize: UInt64? = nil) throws(LogError)
    -> [MerkleTree.Hash]
  {
    try readLog { txn throws(LogError) in
      let head = try self.treeHead(txn.raw)
      let size = newSize ?? head.size
      guard size <= head.size, oldSize <= size else {
        throw LogError.invalidArgument(
          "no consistency proof from \(oldSize) to \(size) events in a log of \(head.size)")
      }
      return try perform {
        try MerkleTree.consistencyPath(oldSize: oldSize, newSize: size) {
          try self.node(txn.raw, $0, $1)
        }
      }
    }
  }

  // MARK: Internals

  /// Runs `body`, turning storage errors into ``LogError``s.
  func perform<T>(_ body: () throws -> T) throws(LogError) -> T {
    do { return try body() } catch { throw logError(error) }
  }

  func treeHead(_ raw: RawTransaction) throws(LogError) -> TreeHead {
    let stored = try perform { try raw.get(dbs.meta, Self.merkleHeadKey) }
    guard let stored else {
      let events = try perform { try raw.lastEvent(dbs.events)?.position ?? 0 }
      if events == 0 { return TreeHead(size: 0, root: MerkleTree.emptyRoot) }
      throw LogError.corruptDatabase(
        path: path,
        reason:
          "the log has no Merkle tree yet (made before it existed); open it writable once to build it"
      )
    }
    guard stored.count == 40, let size = UInt64(bigEndianBytes: stored) else {
      throw LogError.corruptDatabase(path: path, reason: "the stored tree head is malformed")
    }
    return TreeHead(size: size, root: Array(stored[8...]))
  }

  /// The hash of the complete subtree (`level`, `index`): stored from ``merkleStoredLevel`` up,
  /// hashed from the events below.
  func node(_ raw: RawTransaction, _ level: Int, _ index: UInt64) throws -> MerkleTree.Hash {
    try digest(raw, level, index).bytes
  }

  /// ``node(_:_:_:)`` as an inline digest.
  func digest(_ raw: RawTransaction, _ level: Int, _ index: UInt64) throws -> MerkleDigest {
    if level >= Self.merkleStoredLevel {
      let key = MerkleTree.postorderIndex(level: level, index: index)
      guard let hash = try raw.merkleNode(dbs.merkle, key: key) else {
        throw LogError.corruptDatabase(
          path: path, reason: "the Merkle tree lacks its node \(index) of level \(level)")
      }
      return hash
    }
    if level == 0 {
      guard let hash = try raw.leafHash(dbs.events, erased: dbs.erased, at: index + 1) else {
        throw LogError.corruptDatabase(path: path, reason: "event \(index + 1) is missing")
      }
      return hash
    }
    return MerkleSHA256.node(
      try digest(raw, level - 1, 2 * index), try digest(raw, level - 1, 2 * index + 1))
  }

  /// Loads the writer's frontier from the stored head, and hashes into the tree the events it
  /// does not cover yet (a log made before the tree, or appended to by an older build).
  func loadTree(_ raw: RawTransaction, lastPosition: UInt64) throws {
    var size: UInt64 = 0
    if let stored = try raw.get(dbs.meta, Self.merkleHeadKey) {
      guard stored.count == 40, let s = UInt64(bigEndianBytes: stored) else {
        throw LogError.corruptDatabase(path: path, reason: "the stored tree head is malformed")
      }
      size = s
    }
    guard size <= lastPosition else {
      throw LogError.corruptDatabase(
        path: path,
        reason:
          "the Merkle tree covers \(size) events but the log has \(lastPosition): events were removed"
      )
    }
    writer.frontier = try MerkleFrontier.load(size: size) { try digest(raw, $0, $1) }
    writer.merkleDirty = false
    guard size < lastPosition else { return }
    try raw.forEachLeafHash(dbs.events, erased: dbs.erased, from: size + 1) { position, hash in
      guard position == writer.frontier.size + 1 else {
        throw LogError.corruptDatabase(
          path: path, reason: "position \(writer.frontier.size + 1) is missing")
      }
      try addLeaf(hash, raw)
      return true
    }
  }

  /// Folds one leaf into the writer's frontier and stores the complete subtrees it makes.
  @inline(__always)
  func addLeaf(_ hash: MerkleDigest?, _ raw: RawTransaction) throws {
    guard let hash else { return }
    writer.merkleDirty = true
    let merkle = dbs.merkle
    try writer.frontier.append(hash, minLevel: Self.merkleStoredLevel) {
      level, index, h throws(LMDBError) in
      try raw.putMerkleNode(merkle, key: MerkleTree.postorderIndex(level: level, index: index), h)
    }
  }

  /// The helper that hashes the leaves of `events`, a batch about to be appended after the
  /// writer's frontier, started on them; nil when the log keeps no tree, the batch is small or
  /// huge, or the machine has one core.
  func leafHasher(for events: [NewEvent]) -> LeafHasher? {
    // The frontier is behind the next position only after a batch failed part-way in this
    // transaction (which then cannot commit): hashing goes on here then.
    guard options.merkleTree, events.count >= LeafHasher.minimumBatch, LeafHasher.available,
      writer.frontier.size + 1 == writer.nextPosition,
      let bytes = LeafHasher.arenaBytes(for: events)
    else { return nil }
    let hasher = writer.leafHasher ?? LeafHasher()
    writer.leafHasher = hasher
    hasher.begin(
      events: events, bytes: bytes, frontier: writer.frontier, minLevel: Self.merkleStoredLevel)
    return hasher
  }

  /// Takes the frontier a ``LeafHasher`` folded a batch's leaves into, and stores the complete
  /// subtrees it made.
  func addLeaves(
    _ batch: (
      frontier: MerkleFrontier, completed: [(level: Int, index: UInt64, hash: MerkleDigest)]
    ),
    _ raw: RawTransaction
  ) throws {
    writer.merkleDirty = true
    writer.frontier = batch.frontier
    for node in batch.completed {
      try raw.putMerkleNode(
        dbs.merkle, key: MerkleTree.postorderIndex(level: node.level, index: node.index), node.hash)
    }
  }

  /// Stores the tree head the writer's frontier gives.
  func storeTreeHead(_ raw: RawTransaction) throws(LMDBError) {
    try raw.put(
      dbs.meta, Self.merkleHeadKey, writer.frontier.size.bigEndianBytes + writer.frontier.root.bytes
    )
  }
}

extension EventLog {
  /// The event a Merkle leaf holds (``InclusionProof/leaf``), its checksum checked; nil when
  /// the bytes are not a well-formed leaf. Needs no log: for verifiers.
  public static func event(fromLeaf leaf: [UInt8]) -> RecordedEvent? {
    EventRecord.decode(leaf: leaf)
  }

  /// Recomputes the tree from the events and compares it with the stored one and, when given,
  /// with `head` (a head published earlier). Returns the problems found, in plain words, the
  /// first position where the log disagrees first.
  ///
  /// Stored subtrees cover 16 events or more, so a disagreement with the stored tree is placed
  /// to within its subtree's events; one with the events the stored subtrees do not cover yet
  /// (the last 15 at most) shows in the stored root.
  ///
  /// `walk` feeds the leaves: it calls `addLeaf` with each event's position and leaf hash, in
  /// order, until that returns false (a position is missing: the tree cannot be recomputed
  /// past it). ``verify(maxProblems:head:)`` does it in its own pass over the records.
  func verifyTree(
    _ txn: ReadTransaction, head: TreeHead?, maxProblems: Int,
    walk: (_ addLeaf: (_ position: UInt64, _ hash: MerkleDigest) throws -> Bool) throws -> Void
  ) throws -> (problems: [String], recomputed: TreeHead) {
    var problems: [String] = []
    func problem(_ text: String) {
      if problems.count < maxProblems { problems.append(text) }
    }
    let raw = txn.raw
    let storedHead: TreeHead?
    if try raw.get(dbs.meta, Self.merkleHeadKey) == nil {
      storedHead = nil
    } else {
      storedHead = try treeHead(raw)
    }
    let level = Self.merkleStoredLevel
    var frontier = MerkleFrontier()
    var firstMismatch: (first: UInt64, last: UInt64)?
    var headRoot: MerkleTree.Hash? = head?.size == 0 ? MerkleTree.emptyRoot : nil
    let merkle = dbs.merkle
    let checkNodes = storedHead != nil
    try walk { position, hash in
      guard position == frontier.size + 1 else {
        problem("position \(frontier.size + 1) is missing: the tree cannot be recomputed past it")
        return false
      }
      try frontier.append(hash, minLevel: checkNodes ? level : 64) { l, index, h in
        let key = MerkleTree.postorderIndex(level: l, index: index)
        let stored = try raw.merkleNode(merkle, key: key)
        guard stored != h else { return }
        let first = (index << UInt64(l)) + 1
        let last = (index + 1) << UInt64(l)
        // The smallest subtree that holds the first changed event ends first.
        if let known = firstMismatch,
          known.last < last || (known.last == last && known.first > first)
        {
          return
        }
        firstMismatch = (first, last)
      }
      if let head, frontier.size == head.size { headRoot = frontier.root.bytes }
      return true
    }
    if let (first, last) = firstMismatch {
      problem(
        "the log disagrees with its Merkle tree from position \(first): the tree's hash of events \(first)–\(last) does not match them (an event there was rewritten, removed, reordered or inserted)"
      )
    }
    if let storedHead {
      if storedHead.size != frontier.size {
        problem("the tree covers \(storedHead.size) events; the log has \(frontier.size)")
      } else if storedHead.root != frontier.root.bytes && firstMismatch == nil {
        let covered = (frontier.size >> UInt64(level)) << UInt64(level)
        problem(
          "the log disagrees with its Merkle tree after position \(covered): the stored root does not match events \(covered + 1)–\(frontier.size)"
        )
      }
      var expectedNodes: UInt64 = 0
      for l in level..<64 { expectedNodes += frontier.size >> UInt64(l) }
      let storedNodes = try raw.count(dbs.merkle)
      if UInt64(storedNodes) != expectedNodes {
        problem(
          "the tree has \(storedNodes) stored subtrees; \(frontier.size) events call for \(expectedNodes)"
        )
      }
    }
    if let head {
      if head.size > frontier.size {
        problem(
          "the head covers \(head.size) events but the log has \(frontier.size): events were removed"
        )
      } else if headRoot != head.root {
        let located =
          firstMismatch.map {
            " (its tree first disagrees with the events at \($0.first)–\($0.last))"
          }
          ?? " (the stored tree agrees with the events: the tree was rebuilt over changed events)"
        problem(
          "the log does not match the head: its first \(head.size) events give another root\(located)"
        )
      }
    }
    return (problems, TreeHead(size: frontier.size, root: frontier.root.bytes))
  }
}
