// libFuzzer target: the revision-tree decoder. Any bytes decode or throw; a decoded tree keeps
// its invariants and encodes to bytes that decode to the same tree.
import Foundation
import FuzzDriver
import RevTree

func check(_ original: RevisionTree) {
  var tree = original
  let violations = tree.invariantViolations()
  if !violations.isEmpty { fatalError("tree breaks invariants: \(violations)") }
  let again = try? RevisionTree(decoding: tree.encoded())
  if again != tree { fatalError("revision tree round trip changed the tree") }
  if let winner = tree.winner { _ = tree.revisions(of: winner.rev) }
  _ = tree.stem(revsLimit: 3)
  if !tree.invariantViolations().isEmpty { fatalError("stemmed tree breaks invariants") }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzRevTree(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
  let bytes = Array(UnsafeBufferPointer(start: data, count: size))
  if let tree = try? RevisionTree(decoding: bytes) { check(tree) }
  // The bytes as edits: paths merged into a tree, so that the encoder and the decoder also see
  // the trees that merges make (many roots, stems, tombstones, duplicate hashes).
  var tree = RevisionTree()
  var i = 0
  while i + 3 <= bytes.count {
    let start = Int(bytes[i] % 12) + 1
    let length = min(Int(bytes[i + 1] % 6) + 1, start)
    let flags = bytes[i + 2]
    i += 3
    var ids: [String] = []
    for k in 0..<length {
      let letter = i < bytes.count ? bytes[i] % 4 : UInt8(k)
      i += 1
      ids.append(String(repeating: "0", count: 31) + String(letter, radix: 16))
    }
    guard let path = try? RevisionPath(start: start, ids: ids) else { continue }
    _ = try? tree.merge(
      path, deleted: flags & 1 == 1, body: UInt64(i), revsLimit: Int(flags >> 4) + 1)
  }
  check(tree)
  return 0
}

runFuzzer(fuzzRevTree)
