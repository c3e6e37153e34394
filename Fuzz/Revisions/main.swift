// libFuzzer target: `_revisions` handling. A document body (as `_bulk_docs` with
// `new_edits: false` or a replicated PUT sends it) is split into its special fields; a valid
// `_revisions` merges into a revision tree, which keeps its invariants.
import Foundation
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

// SwiftPM links this module's entry point as `main`, in place of libFuzzer's own `main`:
// the top-level code hands the arguments and the target to libFuzzer's driver.
@_silgen_name("LLVMFuzzerRunDriver")
func runFuzzerDriver(
  _ argc: UnsafeMutablePointer<CInt>,
  _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>>,
  _ target: @convention(c) (UnsafePointer<UInt8>, Int) -> CInt
) -> CInt

var argc = CommandLine.argc
var argv = CommandLine.unsafeArgv
exit(runFuzzerDriver(&argc, &argv, { data, size in fuzzRevisions(data, size) }))
