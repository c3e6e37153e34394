import Foundation
import JSON
import Log
import Projections
import Query
import StoreTestSupport
import Synchronization
import TestSupport
import Testing
import Wiki

@Suite struct DataDirectoryTests {
  let path = NSTemporaryDirectory() + "wikilog-datadir-\(UUID().uuidString)"

  @Test func createListOpenAndDelete() throws {
    defer { try? FileManager.default.removeItem(atPath: path) }
    let data = DataDirectory(path: path)
    #expect(data.databaseNames().isEmpty)
    #expect(throws: StoreError.self) { try data.open("wiki") }

    let wiki = try data.create("wiki")
    try data.create("team/notes")
    #expect(data.databaseNames() == ["team/notes", "wiki"])
    #expect(try data.open("wiki") === wiki)

    let error = #expect(throws: StoreError.self) { try data.create("wiki") }
    #expect(error?.code == .alreadyExists)
    #expect(error?.error == "file_exists")

    _ = try wiki.put(#"{"_id":"a","n":1}"#, actor: "t")
    try data.delete("team/notes")
    #expect(data.databaseNames() == ["wiki"])
    #expect(throws: StoreError.self) { try data.delete("team/notes") }
    data.closeAll()

    let again = DataDirectory(path: path)
    #expect(try again.open("wiki").info.docCount == 1)
  }

  @Test(arguments: [
    "", "Wiki", "1abc", "a b", "a%2Fb", "_users", String(repeating: "a", count: 239),
  ])
  func illegalNames(_ name: String) throws {
    defer { try? FileManager.default.removeItem(atPath: path) }
    let data = DataDirectory(path: path)
    let error = #expect(throws: StoreError.self) { try data.create(name) }
    #expect(error?.error == "illegal_database_name")
    #expect(error?.code == .badRequest)
  }
}

@Suite struct DataDirectoryConcurrencyTests {
  @Test("of concurrent creations of one database exactly one succeeds; the others are file_exists")
  func concurrentCreate() async throws {
    let path = NSTemporaryDirectory() + "wikilog-create-race-\(UUID().uuidString)"
    defer { try? FileManager.default.removeItem(atPath: path) }
    let data = DataDirectory(path: path)
    defer { data.closeAll() }
    for round in 0..<5 {
      let name = "db\(round)"
      let outcomes = await withTaskGroup(of: String.self) { group in
        for _ in 0..<8 {
          group.addTask {
            do {
              _ = try data.create(name)
              return "created"
            } catch let error as StoreError {
              return error.error
            } catch {
              return "\(error)"
            }
          }
        }
        var all: [String] = []
        for await outcome in group { all.append(outcome) }
        return all
      }
      #expect(outcomes.filter { $0 == "created" }.count == 1, "\(outcomes)")
      #expect(outcomes.filter { $0 == "file_exists" }.count == 7, "\(outcomes)")
    }
  }

  @Test("a delete during concurrent writes: nothing written after it, the database stays gone")
  func deleteWhileWriting() async throws {
    let path = NSTemporaryDirectory() + "wikilog-delete-race-\(UUID().uuidString)"
    defer { try? FileManager.default.removeItem(atPath: path) }
    var options = Log.EventLog.Options()
    options.durability = .groupCommit
    let data = DataDirectory(path: path, options: options)
    defer { data.closeAll() }
    try data.create("db")
    let deleted = Box(false)
    let lateAcks = Box(0)
    let attemptsAfter = Box(0)
    let acksBefore = Box(0)
    try await withThrowingTaskGroup(of: Void.self) { group in
      for writer in 0..<8 {
        group.addTask {
          var afterwards = 0
          for i in 0..<100_000 where afterwards < 50 {
            let wasDeleted = deleted.withLock { $0 }
            if wasDeleted {
              afterwards += 1
              attemptsAfter.withLock { $0 += 1 }
            }
            // As the server does: open (never create) for each request, then write.
            guard let store = try? data.open("db") else { continue }
            let acked =
              (try? await store.putAsync(#"{"n":\#(i)}"#, id: "w\(writer)-\(i)", actor: "t"))
              != nil
            if acked && wasDeleted { lateAcks.withLock { $0 += 1 } }
            if acked && !wasDeleted { acksBefore.withLock { $0 += 1 } }
          }
        }
      }
      group.addTask {
        // Deleted while the writers are at work: once they have written some.
        _ = try await eventually(60) { acksBefore.withLock { $0 } >= 20 }
        try data.delete("db")
        deleted.withLock { $0 = true }
      }
      try await group.waitForAll()
    }
    #expect(acksBefore.withLock { $0 } > 0)
    #expect(attemptsAfter.withLock { $0 } == 8 * 50)
    #expect(lateAcks.withLock { $0 } == 0)
    #expect(!data.exists("db"))
    #expect(data.databaseNames().isEmpty)
    #expect(throws: StoreError.self) { try data.open("db") }
    // Nothing of the old database is left behind.
    let entries = try FileManager.default.contentsOfDirectory(atPath: path)
    #expect(entries.allSatisfy { !$0.hasPrefix(".deleted-") && $0 != "db" }, "\(entries)")
  }
}

/// A value shared by concurrent tasks.
final class Box<T: Sendable>: Sendable {
  let value: Mutex<T>
  init(_ value: T) { self.value = Mutex(value) }
  func withLock<R>(_ body: (inout T) -> R) -> R { value.withLock { body(&$0) } }
}
