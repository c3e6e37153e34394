// Revision trees as CouchDB keeps them: merge, winner, conflicts.
import RevTree

var tree = RevisionTree()
try tree.merge(
  RevisionPath(start: 3, ids: ["c", "b", "a"]), deleted: false, body: 10, revsLimit: 1000)
try tree.merge(
  RevisionPath(start: 3, ids: ["d", "b", "a"]), deleted: false, body: 11, revsLimit: 1000)
print(tree.winner!.rev)  // 3-d: the higher id wins at equal generation
print(tree.conflicts)  // [3-c]
let again = try RevisionTree(decoding: tree.encoded())
print(again.winner == tree.winner)  // true
