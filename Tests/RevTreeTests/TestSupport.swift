import JSON
import RevTree
import TestSupport

/// A short readable text hash for hand-written cases, ordered by its bytes like CouchDB's keys.
func h(_ s: String) -> RevHash {
  try! RevHash(s)
}

/// `N-s`.
func rev(_ generation: Int, _ s: String) -> RevID {
  try! RevID(generation: generation, hash: h(s))
}

/// A path given root first as short names, starting at `generation` (CouchDB's eunit style
/// `{1, {"1", "foo", [{"1a", "bar", []}]}}`).
func path(from generation: Int, _ names: String...) -> RevisionPath {
  try! RevisionPath(start: generation + names.count - 1, ids: names.reversed().map(h))
}

extension RevisionTree {
  /// Merges and checks invariants, returning the outcome.
  @discardableResult
  mutating func add(
    _ p: RevisionPath, deleted: Bool = false, body: UInt64 = 1, limit: Int = 1000
  ) -> MergeOutcome {
    let o = try! merge(p, deleted: deleted, body: body, revsLimit: limit)
    checkInvariants()
    return o
  }

  /// Every node as (level, rev) in depth-first order.
  var shape: [String] {
    var out: [String] = []
    forEachRevision { r, level in
      out.append(String(repeating: " ", count: level) + r.rev.description + ":" + r.status.rawValue)
    }
    return out
  }

  /// The set of revisions held.
  var revisionSet: Set<RevID> {
    var s = Set<RevID>()
    forEachRevision { r, _ in s.insert(r.rev) }
    return s
  }
}

/// Whether the winner read from `tree`'s encoding in one pass is the decoded tree's winner, or
/// nil for a tie (two leaves with the same revision and status), which the one-pass reader
/// leaves to the decoder.
func encodedWinnerAgrees(_ tree: RevisionTree) -> Bool {
  let bytes = tree.encoded()
  let read = RevisionTree.winner(encoded: bytes.span)
  guard let winner = tree.winner else { return read == nil }
  let sameKey = tree.leaves.filter {
    $0.rev == winner.rev && ($0.status == .available) == (winner.status == .available)
  }
  if sameKey.count > 1 { return read == nil }
  return read?.rev == winner.rev && read?.deleted == (winner.status != .available)
    && read?.leaves == tree.leaves.count
}
