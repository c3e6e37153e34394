import Foundation
import JSON
import Projections
import TestSupport
import Testing

@testable import TypedDocuments

/// Collects a stream's changes as they come, for a test to wait on.
final class Collected<D: StoredDocument>: @unchecked Sendable {
  private let lock = NSLock()
  private var items: [TypedChange<D>] = []
  var changes: [TypedChange<D>] { lock.withLock { items } }
  func add(_ change: TypedChange<D>) { lock.withLock { items.append(change) } }

  /// Follows `stream` in a task until cancelled.
  func follow(_ stream: TypedChanges<D>) -> Task<Void, any Error> {
    Task {
      for try await change in stream { add(change) }
    }
  }
}

@Suite struct ChangeStreamTests {
  @Test func changesOfOneTypeWithActorAndTime() async throws {
    try await withDatabase(actor: "ann") { db, _ in
      let before = try await db.save(Note(id: "old", title: "before the stream"))
      let collected = Collected<Note>()
      let follower = collected.follow(db.changes(of: Note.self, from: .after(db.lastSequence)))
      defer { follower.cancel() }
      let start = Date()
      var note = try await db.save(Note(id: "n", title: "one"))
      try await db.save(Task_(id: "t", name: "other type"))
      note.title = "two"
      note = try await db.save(note)
      try await db.delete(note)
      // A deletion by another client carries no type: the stream finds it from the revision
      // before.
      try db.store.delete("old", rev: before.revision!, actor: "bob")
      #expect(try await eventually { collected.changes.count >= 4 })
      let changes = collected.changes
      #expect(changes.map(\.kind) == [.created, .updated, .deleted, .deleted])
      #expect(changes.map(\.id) == ["n", "n", "n", "old"])
      #expect(changes[1].document?.title == "two")
      #expect(changes[2].document == nil)
      #expect(changes.map(\.actor) == ["ann", "ann", "ann", "bob"])
      #expect(changes.allSatisfy { $0.time >= start.addingTimeInterval(-1) && $0.time <= Date() })
      // Sequences increase; a stream from the beginning sees the earlier note too.
      #expect(zip(changes, changes.dropFirst()).allSatisfy { $0.sequence < $1.sequence })
      var all: [TypedChange<Note>] = []
      for try await change in db.changes(of: Note.self, from: .beginning) {
        all.append(change)
        if all.count == 5 { break }
      }
      #expect(all.map(\.id) == ["old", "n", "n", "n", "old"])
      var resumed: [String] = []
      for try await change in db.changes(of: Note.self, from: .after(changes[1].sequence)) {
        resumed.append(change.revision)
        if resumed.count == 2 { break }
      }
      #expect(resumed == [changes[2].revision, changes[3].revision])
    }
  }

  @Test func aChangeReachesAnotherProcess() async throws {
    let dir = TempDirectory()
    let notes = ChildProcess.besideTests("notes")
    // Create the database first, so that both processes open the same one.
    do {
      let db = try DocumentDatabase(path: dir.path, name: "notes")
      db.close()
    }
    // Another process watches; this one writes.
    let watcher = try ChildProcess(notes, ["--data", dir.path, "watch"])
    defer { watcher.kill() }
    #expect(watcher.waitFor(timeout: 20) { $0.contains("watching") })
    let db = try DocumentDatabase(path: dir.path, name: "notes", actor: "writer")
    defer { db.close() }
    try await db.save(NotesNote(id: "x1", title: "from the test", created: Date()))
    #expect(watcher.waitFor(timeout: 20) { $0.contains { $0.hasPrefix("created x1 1-") } })
    let line = try #require(watcher.lines.first { $0.hasPrefix("created x1") })
    #expect(line.contains("from the test by writer"))

    // This process watches; another writes.
    let collected = Collected<NotesNote>()
    let follower = collected.follow(db.changes(of: NotesNote.self, from: .after(db.lastSequence)))
    defer { follower.cancel() }
    let adder = try ChildProcess(notes, ["--data", dir.path, "add", "from the child"])
    #expect(adder.waitForExit(timeout: 30))
    #expect(
      try await eventually { collected.changes.contains { $0.document?.title == "from the child" } }
    )
    let change = try #require(collected.changes.first { $0.document?.title == "from the child" })
    #expect(change.kind == .created)
    #expect(change.actor == NSUserName())
  }
}

/// The notes example's type, as another app would declare it.
struct NotesNote: StoredDocument {
  static let documentType = "note"
  var id: String
  var revision: String?
  var title: String
  var body = ""
  var tags: [String] = []
  var done = false
  var created: Date
}
