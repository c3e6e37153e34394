import Foundation
import JSON
import Projections
import Testing

@testable import TypedDocuments

@Suite struct ConflictTests {
  @Test func aStaleSaveIsATypedConflictWithTheCurrentValue() async throws {
    try await withDatabase { db, _ in
      let original = try await db.save(Note(id: "c", title: "start", tags: ["x"]))
      var mine = original
      var theirs = original
      theirs.tags.append("theirs")
      theirs = try await db.save(theirs)
      mine.tags.append("mine")
      do {
        try await db.save(mine)
        Issue.record("a stale save was accepted")
      } catch let conflict as DocumentConflict<Note> {
        #expect(conflict.current == theirs)
        #expect(conflict.currentRevision == theirs.revision)
        #expect(conflict.attempted == mine)
        let merged = conflict.merged { current, mine in
          var m = current
          m.tags = Array(Set(current.tags + mine.tags)).sorted()
          return m
        }
        #expect(merged.revision == theirs.revision)
        let saved = try await db.save(merged)
        #expect(try db.get(Note.self, id: "c")?.tags == ["mine", "theirs", "x"])
        #expect(saved.revision?.hasPrefix("3-") == true)
      }
      // A new value for an id that exists is a conflict too.
      await #expect(throws: DocumentConflict<Note>.self) {
        try await db.save(Note(id: "c", title: "again"))
      }
    }
  }

  @Test func saveWithMergeRetries() async throws {
    try await withDatabase { db, _ in
      let base = try await db.save(Note(id: "m", title: "t"))
      // Many writers, each from the same stale revision, each adding a tag: none is lost.
      try await withThrowingTaskGroup(of: Void.self) { group in
        for i in 0..<16 {
          group.addTask {
            var edit = base
            edit.tags = ["t\(i)"]
            try await db.save(edit, attempts: 50) { current, mine in
              var m = current
              m.tags = Array(Set(current.tags + mine.tags)).sorted()
              return m
            }
          }
        }
        try await group.waitForAll()
      }
      #expect(try db.get(Note.self, id: "m")?.tags.count == 16)
    }
  }

  @Test func replicatedConflictsAreListedAndResolved() async throws {
    try await withDatabase { db, _ in
      let base = try await db.save(Note(id: "r", title: "base"))
      var local = base
      local.title = "local"
      local = try await db.save(local)
      // A revision another replica made from the same parent arrives by replication.
      let baseHash = String(base.revision!.dropFirst(2))
      _ = try db.store.bulkDocs(
        [
          try JSONValue(
            parsing: Array(
              #"""
              {"_id":"r","_rev":"2-ffffffffffffffffffffffffffffffff","type":"note","title":"remote",
               "tags":["remote"],"done":false,"_revisions":{"start":2,"ids":["ffffffffffffffffffffffffffffffff","\#(baseHash)"]}}
              """#.utf8))
        ], newEdits: false, actor: "replicator")
      let versions = try db.conflicts(of: Note.self, id: "r")
      #expect(versions.count == 2)
      #expect(Set(versions.map(\.title)) == ["local", "remote"])
      var merged = versions[0]
      merged.title = versions.map(\.title).sorted().joined(separator: "+")
      merged.tags = versions.flatMap(\.tags)
      let resolved = try await db.resolveConflicts(merged)
      #expect(try db.conflicts(of: Note.self, id: "r") == [resolved])
      #expect(resolved.title == "local+remote")
      #expect(try db.store.get("r", options: GetOptions(conflicts: true))["_conflicts"] == nil)
    }
  }
}

@Suite struct TypedQueryTests {
  @Test func findSortLimitAndIndexes() async throws {
    try await withDatabase { db, _ in
      for i in 0..<20 {
        try await db.save(
          Note(
            id: String(format: "n%02d", i), title: "note \(i)",
            tags: i % 2 == 0 ? ["even"] : ["odd"], done: i % 3 == 0,
            due: millis(1_800_000_000 + Double(19 - i) * 3600)))
      }
      try await db.save(Task_(id: "t1", name: "not a note"))
      #expect(try db.all(Note.self).count == 20)
      let even = try db.find(Note.self, where: .field("tags", contains: "even"))
      #expect(even.count == 10)
      // Sorted without an index (in memory), then with one: the same answer.
      let soonest = try db.find(
        Note.self, where: .field("done", equals: false), sort: [.ascending("due")], limit: 3)
      #expect(soonest.map(\.id) == ["n19", "n17", "n16"])
      try await db.createIndex(Note.self, on: ["due"])
      try await db.createIndex(Note.self, on: ["due"])
      let indexed = try db.find(
        Note.self, where: .field("due", greaterThan: millis(0)) && .field("done", equals: false),
        sort: [.ascending("due")], limit: 3)
      #expect(indexed.map(\.id) == ["n19", "n17", "n16"])
      let later = try db.find(
        Note.self, where: .field("due", atLeast: millis(1_800_000_000 + 18 * 3600)),
        sort: [.descending("due")])
      #expect(later.map(\.id) == ["n00", "n01"])
      let either = try db.find(
        Note.self,
        where: .field("title", equals: "note 3") || .field("title", matches: "^note 1[01]$"))
      #expect(either.map(\.id) == ["n03", "n10", "n11"])
      #expect(try db.find(Note.self, where: !.field("done", equals: false)).count == 7)
      #expect(try db.find(Note.self, where: .field("id", in: ["x"])).isEmpty)
    }
  }
}
