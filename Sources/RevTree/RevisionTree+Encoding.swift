import Formats
import JSON

// A compact, versioned binary form of a revision tree, for storage.
//
// Format version 1, all integers unsigned LEB128 varints:
//
//     version        1 byte, = 1
//     nodeCount      varint
//     nodes          nodeCount times, depth-first pre-order (roots in order, a node before its
//                    children, children by hash):
//       flags        1 byte: bits 0-1 status (0 missing, 1 available, 2 deleted),
//                    bit 2 text hash (else a 16-byte digest); other bits 0
//       childCount   varint
//       generation   varint, only for a root (a child's is its parent's + 1)
//       hash         16 raw bytes, or varint length (1...128) + bytes for a text hash
//       body         varint, only when status is not missing
//
// Example: 1-a ── 2-b with 2-b available at body 7 (a, b 16-byte digests) is
// 01 02 | 00 01 01 <16 bytes a> | 01 00 <16 bytes b> 07   = 39 bytes.
//
// Decoding validates everything (sorted siblings and roots, generation bounds, counts, no
// trailing bytes) and reports the byte offset of the first problem; it never traps.

/// Why stored bytes could not be decoded into a ``RevisionTree``.
public enum RevTreeDecodingError: Error, Equatable, Sendable, CustomStringConvertible {
  /// No bytes at all.
  case empty
  /// The first byte names a format this code does not know.
  case unsupportedVersion(UInt8)
  /// The input ended early.
  case truncated(offset: Int)
  /// A varint is longer than 10 bytes or overflows 64 bits.
  case malformedVarint(offset: Int)
  /// Flag bits that no version-1 writer sets.
  case invalidFlags(offset: Int)
  /// A text hash with an invalid length or byte.
  case invalidHash(offset: Int)
  /// A generation of 0 or above ``RevID/maxGeneration``.
  case generationOutOfRange(offset: Int)
  /// Children or roots out of order, or child counts that do not add up.
  case inconsistentStructure(offset: Int)
  /// Bytes after the last node.
  case trailingBytes(offset: Int)

  public var description: String {
    switch self {
    case .empty: "empty revision tree encoding"
    case .unsupportedVersion(let v): "unsupported revision tree format version \(v)"
    case .truncated(let o): "revision tree encoding truncated at byte \(o)"
    case .malformedVarint(let o): "malformed varint at byte \(o)"
    case .invalidFlags(let o): "invalid node flags at byte \(o)"
    case .invalidHash(let o): "invalid revision hash at byte \(o)"
    case .generationOutOfRange(let o): "generation out of range at byte \(o)"
    case .inconsistentStructure(let o): "inconsistent tree structure at byte \(o)"
    case .trailingBytes(let o): "trailing bytes at offset \(o)"
    }
  }
}

extension RevisionTree {
  /// The current encoding version.
  public static let encodingVersion: UInt8 = 1

  /// The tree in its binary storage form (see the format at the top of this file).
  ///
  /// ```swift
  /// let bytes = tree.encoded()
  /// let again = try RevisionTree(decoding: bytes)   // again == tree
  /// ```
  public func encoded() -> [UInt8] {
    unsafe nodes.withUnsafeBufferPointer { np in
      withByteSink { sink in
        // Every write below checks capacity; this only saves growing (about 20 bytes a node).
        sink.reserve(2 + count * 20)
        sink.append(RevisionTree.encodingVersion)
        sink.appendVarint(UInt64(count))
        var stack: [Int32] = roots.reversed()
        stack.reserveCapacity(max(16, roots.count))
        while let i = stack.popLast() {
          // Fields read in place: no copy of the node.
          let n = unsafe np.baseAddress! + Int(i)
          // Push the children reversed so the first child is visited next.
          let mark = stack.count
          var c = unsafe n.pointee.firstChild
          while c >= 0 {
            stack.append(c)
            c = unsafe np[Int(c)].nextSibling
          }
          let childCount = stack.count - mark
          if childCount > 1 { stack[mark...].reverse() }
          var flags: UInt8
          switch unsafe n.pointee.state {
          case .available: flags = 1
          case .deleted: flags = 2
          default: flags = 0
          }
          switch unsafe n.pointee.hash.storage {
          case .digest(let hi, let lo):
            sink.append(flags)
            sink.appendVarint(UInt64(childCount))
            if unsafe n.pointee.parent < 0 { unsafe sink.appendVarint(UInt64(n.pointee.pos)) }
            sink.append(bigEndian: hi)
            sink.append(bigEndian: lo)
          case .text(let t):
            sink.append(flags | 4)
            sink.appendVarint(UInt64(childCount))
            if unsafe n.pointee.parent < 0 { unsafe sink.appendVarint(UInt64(n.pointee.pos)) }
            sink.appendVarint(UInt64(t.count))
            unsafe t.withUnsafeBufferPointer { unsafe sink.append($0) }
          }
          if unsafe n.pointee.state != .missing { unsafe sink.appendVarint(n.pointee.body) }
        }
        return sink.array()
      }
    }
  }

  /// Decodes the binary storage form.
  ///
  /// ```swift
  /// let tree = try RevisionTree(decoding: storedBytes)
  /// ```
  /// - Throws: ``RevTreeDecodingError`` with the offset of the first problem; never traps on
  ///   corrupt or truncated input.
  public init(decoding bytes: some Collection<UInt8>) throws(RevTreeDecodingError) {
    let r: Result<RevisionTree, RevTreeDecodingError>? = bytes.withContiguousStorageIfAvailable {
      unsafe RevisionTree.decode($0)
    }
    if let r {
      self = try r.get()
    } else {
      let copy = Array(bytes)
      self = unsafe try copy.withUnsafeBufferPointer { unsafe RevisionTree.decode($0) }.get()
    }
  }

  static func decode(_ b: UnsafeBufferPointer<UInt8>) -> Result<RevisionTree, RevTreeDecodingError>
  {
    var reader = unsafe ByteReader(b)
    do throws(RevTreeDecodingError) {
      return unsafe .success(try decode(&reader))
    } catch {
      return .failure(error)
    }
  }

  /// An open parent while decoding: its slot, children still to read, last child read.
  struct OpenParent {
    var parent: Int32
    var left: UInt64
    var last: Int32
  }

  static func decode(_ r: inout ByteReader) throws(RevTreeDecodingError) -> RevisionTree {
    var failure: RevTreeDecodingError? = nil
    // The stack of open parents starts on the machine stack.
    let tree = unsafe withUnsafeTemporaryAllocation(of: OpenParent.self, capacity: 32) { buffer in
      var stack = unsafe ParseStack(buffer)
      defer { stack.release() }
      do throws(RevTreeDecodingError) {
        return unsafe try decode(&r, &stack)
      } catch {
        failure = error
        return RevisionTree()
      }
    }
    if let failure { throw failure }
    return tree
  }

  static func decode(_ r: inout ByteReader, _ stack: inout ParseStack<OpenParent>)
    throws(RevTreeDecodingError) -> RevisionTree
  {
    guard unsafe r.remaining > 0 else { throw .empty }
    let version = unsafe try r.byte()
    guard version == encodingVersion else { throw .unsupportedVersion(version) }
    let countOffset = unsafe r.offset
    let total = unsafe try r.varint()
    // Each node takes at least 4 bytes: never reserve more than the input can hold.
    guard unsafe total <= UInt64(r.remaining / 4) else { throw .truncated(offset: countOffset) }
    var t = RevisionTree()
    t.nodes.reserveCapacity(Int(total))
    // Open parents: (index, children still to read, last child read).
    var leafCount = 0
    var lastRoot: Int32 = -1
    for _ in 0..<total {
      let at = unsafe r.offset
      let flags = unsafe try r.byte()
      guard flags & ~0x07 == 0, flags & 0x03 != 3 else { throw .invalidFlags(offset: at) }
      let children = unsafe try r.varint()
      let parent: Int32 = unsafe stack.count > 0 ? stack.base[stack.count - 1].parent : -1
      var pos: Int
      if parent >= 0 {
        pos = t.nodes[Int(parent)].pos + 1
        guard pos <= RevID.maxGeneration else { throw .generationOutOfRange(offset: at) }
      } else {
        let posAt = unsafe r.offset
        let p = unsafe try r.varint()
        guard p >= 1, p <= UInt64(RevID.maxGeneration) else {
          throw .generationOutOfRange(offset: posAt)
        }
        pos = Int(p)
      }
      let hashAt = unsafe r.offset
      let hash = unsafe try r.hash(text: flags & 4 != 0)
      let state: NodeState
      switch flags & 3 {
      case 1: state = .available
      case 2: state = .deleted
      default: state = .missing
      }
      let body: UInt64 = unsafe state == .missing ? 0 : try r.varint()
      let i = Int32(t.nodes.count)
      guard children <= total - UInt64(i) - 1 else { throw .inconsistentStructure(offset: at) }
      t.nodes.append(
        Node(
          hash: hash, pos: pos, parent: parent, firstChild: -1, nextSibling: -1, state: state,
          body: body))
      if parent >= 0 {
        let top = unsafe stack.base + (stack.count - 1)
        let last = unsafe top.pointee.last
        if last >= 0 {
          guard RevHash.compare(t.nodes[Int(last)].hash, hash) < 0 else {
            throw .inconsistentStructure(offset: hashAt)
          }
          t.nodes[Int(last)].nextSibling = i
        } else {
          t.nodes[Int(parent)].firstChild = i
        }
        unsafe top.pointee.last = i
        unsafe top.pointee.left -= 1
        if unsafe top.pointee.left == 0 { stack.count -= 1 }
      } else {
        if lastRoot >= 0 {
          let x = t.nodes[Int(lastRoot)]
          guard x.pos < pos || (x.pos == pos && RevHash.compare(x.hash, hash) < 0) else {
            throw .inconsistentStructure(offset: at)
          }
        }
        lastRoot = i
        t.roots.append(i)
      }
      if children > 0 {
        stack.push(OpenParent(parent: i, left: children, last: -1))
      } else {
        leafCount += 1
      }
    }
    guard stack.count == 0 else { throw unsafe .truncated(offset: r.offset) }
    guard unsafe r.remaining == 0 else { throw unsafe .trailingBytes(offset: r.offset) }
    t.leafCount = leafCount
    return t
  }
}

/// A bounds-checked cursor over bytes.
@unsafe struct ByteReader {
  let b: UnsafeBufferPointer<UInt8>
  var offset = 0

  init(_ b: UnsafeBufferPointer<UInt8>) {
    unsafe self.b = unsafe b
  }

  var remaining: Int { unsafe b.count - offset }

  @inline(__always)
  mutating func byte() throws(RevTreeDecodingError) -> UInt8 {
    guard unsafe offset < b.count else { throw unsafe .truncated(offset: offset) }
    defer { unsafe offset += 1 }
    return unsafe b[offset]
  }

  @inline(__always)
  mutating func varint() throws(RevTreeDecodingError) -> UInt64 {
    let start = unsafe offset
    var at = unsafe offset
    let value = unsafe Varint.read(b, at: &at)
    unsafe offset = at
    guard let value else {
      // Stopped at the end: cut short; else a varint past 64 bits.
      throw unsafe at == b.count ? .truncated(offset: at) : .malformedVarint(offset: start)
    }
    return value
  }

  @inline(__always)
  mutating func uint64BigEndian() throws(RevTreeDecodingError) -> UInt64 {
    guard unsafe remaining >= 8 else { throw unsafe .truncated(offset: b.count) }
    let v = unsafe UnsafeRawPointer(b.baseAddress! + offset).loadUnaligned(as: UInt64.self)
    unsafe offset += 8
    return UInt64(bigEndian: v)
  }

  /// A node's hash: 16 raw bytes, or (`text`) a varint length and a text signature that is not
  /// 32 hex digits.
  mutating func hash(text: Bool) throws(RevTreeDecodingError) -> RevHash {
    let at = unsafe offset
    guard text else {
      let hi = unsafe try uint64BigEndian()
      let lo = unsafe try uint64BigEndian()
      return RevHash(high: hi, low: lo)
    }
    let length = unsafe try varint()
    guard length >= 1, length <= UInt64(RevHash.maxTextLength) else {
      throw .invalidHash(offset: at)
    }
    let bytes = unsafe try bytes(Int(length))
    guard let hash = unsafe try? RevHash.parse(bytes), !hash.isDigest else {
      throw .invalidHash(offset: at)
    }
    return hash
  }

  mutating func bytes(_ n: Int) throws(RevTreeDecodingError) -> UnsafeBufferPointer<UInt8> {
    guard unsafe remaining >= n else { throw unsafe .truncated(offset: b.count) }
    defer { unsafe offset += n }
    return unsafe UnsafeBufferPointer(rebasing: b[offset..<(offset + n)])
  }
}

extension RevisionTree {
  /// The winning revision of the tree encoded in `bytes` (what ``encoded()`` writes), whether
  /// the document is deleted, and how many leaves the tree has, read where the bytes lie without building the tree: what
  /// decoding them and asking ``winner`` gives, at no allocation for digest revisions. The
  /// changes feed reads one per row.
  ///
  /// ```swift
  /// let bytes = tree.encoded()
  /// RevisionTree.winner(encoded: bytes.span)?.rev == tree.winner?.rev   // true
  /// ```
  /// - Returns: nil when the bytes are not a tree this reader takes in one pass: cut short,
  ///   malformed, empty, two leaves with the same revision and status (the tree breaks that tie
  ///   along their ancestries), or branches open more than 64 deep. Decode the tree then; it
  ///   gives the winner or says what is wrong.
  public static func winner(encoded bytes: Span<UInt8>) -> (rev: RevID, deleted: Bool, leaves: Int)?
  {
    unsafe bytes.withUnsafeBufferPointer { unsafe winner(encodedBuffer: $0) }
  }

  static func winner(encodedBuffer b: UnsafeBufferPointer<UInt8>) -> (
    rev: RevID, deleted: Bool, leaves: Int
  )? {
    var r = unsafe ByteReader(b)
    // Open parents: (generation, children still to read).
    return unsafe withUnsafeTemporaryAllocation(of: (Int, UInt64).self, capacity: 64) {
      stack -> (rev: RevID, deleted: Bool, leaves: Int)? in
      var depth = 0
      var leaves = 0
      var best: (pos: Int, hash: RevHash, available: Bool)? = nil
      var tied = false
      do throws(RevTreeDecodingError) {
        guard unsafe try r.byte() == encodingVersion else { return nil }
        let total = unsafe try r.varint()
        guard unsafe total > 0, total <= UInt64(r.remaining / 4) else { return nil }
        for _ in 0..<total {
          let flags = unsafe try r.byte()
          guard flags & ~0x07 == 0, flags & 0x03 != 3 else { return nil }
          let children = unsafe try r.varint()
          let pos: Int
          if depth > 0 {
            pos = unsafe stack[depth - 1].0 + 1
            guard pos <= RevID.maxGeneration else { return nil }
          } else {
            let p = unsafe try r.varint()
            guard p >= 1, p <= UInt64(RevID.maxGeneration) else { return nil }
            pos = Int(p)
          }
          let hash = unsafe try r.hash(text: flags & 4 != 0)
          if flags & 3 != 0 { _ = unsafe try r.varint() }  // the body's position
          if depth > 0 {
            unsafe stack[depth - 1].1 -= 1
            if unsafe stack[depth - 1].1 == 0 { depth -= 1 }
          }
          if children > 0 {
            guard depth < 64, children < total else { return nil }
            unsafe stack[depth] = (pos, children)
            depth += 1
          } else {
            // A leaf: live before deleted or missing, then generation, then hash, descending.
            leaves += 1
            let available = flags & 3 == 1
            if let b = best {
              let c = RevHash.compare(hash, b.hash)
              if available == b.available && pos == b.pos && c == 0 {
                tied = true
              } else if available != b.available ? available : pos != b.pos ? pos > b.pos : c > 0 {
                best = (pos, hash, available)
                tied = false
              }
            } else {
              best = (pos, hash, available)
            }
          }
        }
        guard unsafe r.remaining == 0, depth == 0 else { return nil }
      } catch {
        return nil
      }
      guard let best, !tied else { return nil }
      return (RevID(unchecked: best.pos, hash: best.hash), !best.available, leaves)
    }
  }
}

extension RevID {
  /// Appends `N-sig` as UTF-8 to `out`, without making a string: one append of a stack
  /// buffer for a digest revision.
  package func appendText(to out: inout [UInt8]) {
    guard case .digest(let hi, let lo) = hash.storage else {
      out.append(contentsOf: String(generation).utf8)
      out.append(UInt8(ascii: "-"))
      hash.appendText(to: &out)
      return
    }
    // Up to 20 digits, the dash and 32 hex digits: 53 of 56 bytes, written from the end.
    var text: (UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0, 0, 0, 0)
    unsafe withUnsafeMutableBytes(of: &text) { buffer in
      let digits: StaticString = "0123456789abcdef"
      let d = unsafe digits.utf8Start
      for i in 0..<16 {
        unsafe buffer[24 + i] = unsafe d[Int((hi >> UInt64(60 - 4 * i)) & 0xF)]
        unsafe buffer[40 + i] = unsafe d[Int((lo >> UInt64(60 - 4 * i)) & 0xF)]
      }
      unsafe buffer[23] = UInt8(ascii: "-")
      var start = 23
      var v = UInt64(generation)
      repeat {
        start -= 1
        unsafe buffer[start] = UInt8(ascii: "0") + UInt8(v % 10)
        v /= 10
      } while v > 0 && start > 0
      unsafe out.append(contentsOf: UnsafeRawBufferPointer(rebasing: buffer[start...]))
    }
  }
}
