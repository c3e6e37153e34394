import Foundation
import JSON
import RevTree
import TestSupport
import Testing

/// The 150 scenarios of ../shared/revtree/vectors.json, computed with CouchDB's own code.
@Suite struct CouchDBVectorTests {
  static let vectorsURL = sharedFile("revtree/vectors.json")

  static func loadScenarios() throws -> [JSONValue] {
    let data = try Data(contentsOf: vectorsURL)
    let file = try JSONValue(parsing: [UInt8](data))
    #expect(file["format"]?.stringValue == "revtree-vectors-v1")
    return try #require(file["scenarios"]?.arrayValue)
  }

  @Test("the vector file is present and holds 150 scenarios")
  func vectorFilePresent() throws {
    let scenarios = try Self.loadScenarios()
    #expect(scenarios.count == 150)
  }

  @Test("every field of every CouchDB scenario matches")
  func everyScenarioMatches() throws {
    let scenarios = try Self.loadScenarios()
    var failures = 0
    for s in scenarios {
      let problems = try Self.run(s)
      failures += problems.isEmpty ? 0 : 1
      for p in problems { Issue.record("\(s["id"]?.stringValue ?? "?"): \(p)") }
    }
    #expect(failures == 0, "\(failures) of \(scenarios.count) scenarios differ")
  }

  static func revs(_ v: JSONValue?) -> [String] {
    (v?.arrayValue ?? []).compactMap(\.stringValue)
  }

  static func pathJSON(_ p: RevisionPath?) -> String {
    guard let p else { return "nil" }
    return "\(p.start):" + p.ids.map(\.description).joined(separator: ",")
  }

  static func expectedPath(_ v: JSONValue?) -> String {
    guard let v, let start = v["start"]?.numberValue?.int64Value else { return "nil" }
    return "\(start):" + revs(v["ids"]).joined(separator: ",")
  }

  /// Runs one scenario and lists every mismatch.
  static func run(_ s: JSONValue) throws -> [String] {
    var problems: [String] = []
    func check<T: Equatable>(_ what: String, _ got: T, _ want: T) {
      if got != want { problems.append("\(what): got \(got), want \(want)") }
    }
    let limit = Int(try #require(s["revs_limit"]?.numberValue?.int64Value))
    let expected = try #require(s["expected"])
    let perInsert = try #require(expected["per_insert"]?.arrayValue)
    var tree = RevisionTree()
    for (k, insert) in (s["inserts"]?.arrayValue ?? []).enumerated() {
      let start = Int(try #require(insert["start"]?.numberValue?.int64Value))
      let path = try RevisionPath(start: start, ids: revs(insert["ids"]))
      let deleted = insert["deleted"]?.boolValue ?? false
      let o = try tree.merge(path, deleted: deleted, body: UInt64(k + 1), revsLimit: limit)
      let violations = tree.invariantViolations()
      if !violations.isEmpty { problems.append("insert \(k): invariants \(violations)") }
      let want = perInsert[k]
      check("insert \(k) merge_result", o.result.rawValue, want["merge_result"]?.stringValue ?? "")
      check("insert \(k) updated", o.updated, want["updated"]?.boolValue ?? false)
      check(
        "insert \(k) vdu_would_accept", o.createdLeaf, want["vdu_would_accept"]?.boolValue ?? false)
      // The storage form round-trips after every write.
      let decoded = try RevisionTree(decoding: tree.encoded())
      if decoded != tree { problems.append("insert \(k): encoding round trip differs") }
      if !encodedWinnerAgrees(tree) { problems.append("insert \(k): winner read from encoding") }
    }
    check("winner", tree.winner?.rev.description ?? "", expected["winner"]?.stringValue ?? "")
    check(
      "winner_deleted", tree.winner?.isDeleted ?? false,
      expected["winner_deleted"]?.boolValue ?? false)
    check("doc_deleted", tree.isDeleted, expected["doc_deleted"]?.boolValue ?? false)
    let leaves = tree.leaves
    check(
      "leaves", leaves.map(\.rev.description),
      (expected["leaves"]?.arrayValue ?? []).compactMap { $0["rev"]?.stringValue })
    check(
      "leaves deleted", leaves.map(\.isDeleted),
      (expected["leaves"]?.arrayValue ?? []).compactMap { $0["deleted"]?.boolValue })
    check("conflicts", tree.conflicts.map(\.description), revs(expected["conflicts"]))
    check(
      "deleted_conflicts", tree.deletedConflicts.map(\.description),
      revs(expected["deleted_conflicts"]))
    let wantRevisions = try #require(expected["revisions"]?.objectValue)
    check("revisions keys", Set(leaves.map(\.rev.description)), Set(wantRevisions.keys))
    for m in wantRevisions {
      let leaf = try RevID(m.key)
      check(
        "revisions of \(m.key)", pathJSON(tree.revisions(of: leaf, limit: limit)),
        expectedPath(m.value))
    }
    let wantStored = try #require(expected["stored_paths"]?.objectValue)
    for m in wantStored {
      let leaf = try RevID(m.key)
      check("stored_paths of \(m.key)", pathJSON(tree.storedPath(of: leaf)), expectedPath(m.value))
    }
    let probes = try revs(s["probes"]).map { try RevID($0) }
    let diff = tree.revsDiff(probes)
    check(
      "revs_diff missing", diff.missing.map(\.description), revs(expected["revs_diff"]?["missing"]))
    check(
      "revs_diff possible_ancestors", diff.possibleAncestors.map(\.description),
      revs(expected["revs_diff"]?["possible_ancestors"]))
    // Tree structure: depth-first, with levels and statuses.
    var want: [String] = []
    var stack: [(JSONValue, Int)] = (expected["tree"]?.arrayValue ?? []).reversed().compactMap {
      guard let n = $0["node"] else { return nil }
      return (n, 0)
    }
    while let (n, level) = stack.popLast() {
      let parts = n.arrayValue ?? []
      guard parts.count == 3 else { continue }
      want.append(
        String(repeating: " ", count: level) + (parts[0].stringValue ?? "") + ":"
          + (parts[1].stringValue ?? ""))
      for c in (parts[2].arrayValue ?? []).reversed() { stack.append((c, level + 1)) }
    }
    for (k, t) in (expected["tree"]?.arrayValue ?? []).enumerated() {
      let pos = t["pos"]?.numberValue?.int64Value ?? 0
      if k < tree.rootRevisions.count {
        check("root \(k) pos", Int64(tree.rootRevisions[k].rev.generation), pos)
      }
    }
    check("tree", tree.shape, want)
    return problems
  }
}
