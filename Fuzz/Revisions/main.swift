// libFuzzer target: `_revisions` handling. A document body (as `_bulk_docs` with
// `new_edits: false` or a replicated PUT sends it) is split into its special fields; a valid
// `_revisions` merges into a revision tree, which keeps its invariants.
import Foundation
import FuzzDriver
import JSON
import Projections
import RevTree

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzRevisions(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
  let bytes = Array(UnsafeBufferPointer(start: data, count: size))
  guard let input = try? DocumentInput(json: bytes) else { return 0 }
  guard let path = input.revisions else { return 0 }
  var tree = RevisionTree()
  _ = try? tree.merge(path, deleted: input.deleted, body: 1, revsLimit: 1000)
  _ = try? tree.merge(path, deleted: !input.deleted, body: 2, revsLimit: 3)
  let violations = tree.invariantViolations()
  if !violations.isEmpty { fatalError("merged tree breaks invariants: \(violations)") }
  if let leaf = tree.winner { _ = tree.revisions(of: leaf.rev) }
  return 0
}

runFuzzer(fuzzRevisions)
