import Foundation
import JSON
import Log
import Projections
import Query
import RevTree
import StoreTestSupport
import Testing
import Wiki

@Suite struct AsyncWriteQueueTests {
  /// A store whose log uses group commit, in a directory of its own.
  final class GroupStore {
    let path = NSTemporaryDirectory() + "wikilog-projtests-async-\(UUID().uuidString)"
    let store: DocumentStore

    init(projections: [any Projection] = []) throws {
      store = try DocumentStore(
        directory: path, options: EventLog.Options(durability: .groupCommit),
        projections: projections, validation: .touchWiki)
    }

    deinit {
      store.close()
      try? FileManager.default.removeItem(atPath: path)
    }
  }

  @Test("64 concurrent writers editing their own documents share group commits")
  func concurrentWriters() async throws {
    let g = try GroupStore(projections: [WikiProjection()])
    let s = g.store
    try s.put(
      #"{"_id":"w1","type":"wiki","title":"W","owner_id":"ann","members":[]}"#, actor: "ann")
    let revs = try await withThrowingTaskGroup(of: String.self) { group in
      for w in 0..<64 {
        group.addTask {
          var rev: String? = nil
          for i in 0..<5 {
            let doc = #"{"type":"page","wiki_id":"w1","markdown":"edit \#(i) by \#(w)"}"#
            rev = try await s.putAsync(doc, id: "w1:Page \(w)", rev: rev, actor: "writer\(w)").rev
          }
          return rev!
        }
      }
      return try await group.reduce(into: [String]()) { $0.append($1) }
    }
    #expect(revs.count == 64 && revs.allSatisfy { $0.hasPrefix("5-") })
    #expect(try s.log.committedPosition == 321)  // the wiki, then 64 × 5 edits
    let stats = s.log.statistics
    #expect(stats.groupedWrites == 320)
    #expect(stats.commits < 320, "concurrent writes share commits")
    #expect(try s.changes().results.count == 65)
    #expect(try s.info.docCount == 65)
    #expect(try s.verify("docs").isEmpty)
    #expect(try s.verify("wiki").isEmpty)
    #expect(try WikiQueries(s).pages(in: "w1").count == 64)
  }

  @Test("a conflicting write in a group fails alone with a conflict, and writes nothing")
  func conflictFailsAlone() async throws {
    let g = try GroupStore()
    let s = g.store
    let first = try await s.putAsync(#"{"_id":"shared","v":0}"#, actor: "alice")
    _ = try await s.putAsync(#"{"v":1}"#, id: "shared", rev: first.rev, actor: "alice")
    let before = try s.log.committedPosition
    let outcomes = await withTaskGroup(of: Result<DocumentWriteResult, StoreError>.self) { group in
      for w in 0..<16 {
        group.addTask {
          do {
            // Writer 3 names the superseded revision.
            return .success(
              try await w == 3
                ? s.putAsync(#"{"v":2}"#, id: "shared", rev: first.rev, actor: "bob")
                : s.putAsync(#"{"v":\#(w)}"#, id: "doc\(w)", actor: "bob"))
          } catch let error as StoreError {
            return .failure(error)
          } catch {
            return .failure(StoreError("unexpected", "\(error)", code: .internalError))
          }
        }
      }
      return await group.reduce(into: [Result<DocumentWriteResult, StoreError>]()) { $0.append($1) }
    }
    let failures = outcomes.compactMap { if case .failure(let e) = $0 { e } else { nil } }
    #expect(failures == [StoreError.conflict])
    #expect(try s.log.committedPosition == LogPosition(before.rawValue + 15))
    #expect(try s.get("shared")[path: "v"] == .number(JSONNumber(1)))
    #expect(try s.verify("docs").isEmpty)
  }

  @Test("bulkDocsAsync: local edits with per-document results, and replicated revisions")
  func bulk() async throws {
    let g = try GroupStore()
    let s = g.store
    let created = try await s.bulkDocsAsync(
      [json(#"{"_id":"a","n":1}"#), json(#"{"_id":"b","n":2}"#), json(#"[1]"#)], actor: "alice")
    #expect(created.map(\.ok) == [true, true, false])
    #expect(created[2].error?.error == "bad_request")
    let edited = try await s.bulkDocsAsync(
      [
        json(#"{"_id":"a","_rev":"\#(created[0].rev!)","n":3}"#),
        json(#"{"_id":"b","_rev":"1-00000000000000000000000000000000","n":4}"#),
      ], actor: "alice")
    #expect(edited[0].ok && edited[0].rev!.hasPrefix("2-"))
    #expect(edited[1].error == StoreError.conflict)

    let replicated = try await s.bulkDocsAsync(
      [
        json(
          #"{"_id":"r","_rev":"2-bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb","_revisions":{"start":2,"ids":["bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb","aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"]},"x":1}"#
        )
      ], newEdits: false, actor: "replicator", origin: "https://peer/db")
    #expect(replicated.isEmpty)
    #expect(try s.get("r")[path: "_rev"]?.string == "2-bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb")
    // The same revision again adds nothing and appends nothing.
    let position = try s.log.committedPosition
    _ = try await s.bulkDocsAsync(
      [json(#"{"_id":"r","_rev":"2-bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb","x":1}"#)], newEdits: false,
      actor: "replicator")
    #expect(try s.log.committedPosition == position)
    #expect(try s.verify("docs").isEmpty)
  }

  @Test("async writes on a synced log, mixed with synchronous ones; deleteAsync")
  func syncedLog() async throws {
    let t = try TestStore()
    let s = t.store!
    let a = try await s.putAsync(#"{"_id":"x","v":1}"#, actor: "alice")
    let b = try s.put(#"{"_id":"x","v":2}"#, rev: a.rev, actor: "alice")
    let c = try await s.deleteAsync("x", rev: b.rev!, actor: "alice")
    #expect(c.rev!.hasPrefix("3-"))
    #expect(throws: StoreError.notFound("deleted")) { _ = try s.get("x") }
    await #expect(throws: StoreError.conflict) {
      try await s.putAsync(#"{"_id":"x","v":3}"#, rev: a.rev, actor: "alice")
    }
    await #expect(throws: StoreError.self) {
      try await s.putAsync(#"{"_id":"x"}"#, id: "y", actor: "alice")
    }
    #expect(try s.log.committedPosition == 3)
  }
}
