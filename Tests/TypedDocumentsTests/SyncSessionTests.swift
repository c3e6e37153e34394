import Foundation
import JSON
import Projections
import Replication
import TestSupport
import Testing

@testable import TypedDocuments

/// `wikilog serve` on `path`, on `port` (a free one when nil), serving; its base URL.
func serveWikilog(_ path: String, port: Int? = nil) throws -> (ChildProcess, String) {
  guard let port else { return try ChildProcess.serve(path) }
  let server = try ChildProcess(
    ChildProcess.besideTests("wikilog"),
    ["serve", "--db", path, "--port", String(port), "--log-level", "error"])
  guard server.waitFor(timeout: 30, { $0.contains { $0.contains("serving") } }) else {
    server.kill()
    throw CocoaError(.fileReadUnknown)
  }
  return (server, "http://127.0.0.1:\(port)")
}

/// A request to a served database, its status and JSON body.
func request(_ base: String, _ method: String, _ path: String, _ body: String? = nil) async throws
  -> (Int, JSONValue)
{
  let response = try await HTTPTransport(baseURL: base).send(
    method, path, body: body.map { Array($0.utf8) })
  return (response.status, (try? JSONValue(parsing: response.body)) ?? .null)
}

/// The notes of the served database `notes`: title by id.
func remoteTitles(_ base: String) async throws -> [String: String] {
  let (_, all) = try await request(base, "GET", "/notes/_all_docs?include_docs=true")
  var titles: [String: String] = [:]
  for row in all["rows"]?.arrayValue ?? [] {
    if let doc = row["doc"], doc["type"] == .string("note"), let id = doc["_id"]?.stringValue {
      titles[id] = doc["title"]?.stringValue ?? ""
    }
  }
  return titles
}

func localTitles(_ db: DocumentDatabase) throws -> [String: String] {
  Dictionary(uniqueKeysWithValues: try db.all(Note.self).map { ($0.id, $0.title) })
}

/// A `wikilog serve` on a directory of its own with the database `notes`; restarted on its
/// port by assigning `server`.
final class Served {
  let directory = TempDirectory()
  var server: ChildProcess
  let base: String
  let port: Int

  init() async throws {
    (server, base) = try serveWikilog(directory.path)
    port = Int(base.split(separator: ":").last!)!
    #expect(try await request(base, "PUT", "/notes").0 == 201)
  }
}

@Suite(.serialized) struct SyncSessionTests {
  @Test func twoWaySyncThroughANetworkLoss() async throws {
    let served = try await Served()
    defer { served.server.kill() }
    let (serverDir, base, port) = (served.directory, served.base, served.port)

    try await withDatabase(actor: "app") { db, _ in
      var options = SyncSession.Options.types([Note.self])
      options.retry = RetryPolicy(initialDelay: .milliseconds(100), maximumDelay: .seconds(1))
      let session = try db.sync(with: base + "/notes", options: options)
      for i in 0..<3 { try await db.save(Note(id: "local-\(i)", title: "L\(i)")) }
      for i in 0..<2 {
        let (status, _) = try await request(
          base, "PUT", "/notes/remote-\(i)",
          #"{"type":"note","title":"R\#(i)","tags":[],"done":false}"#)
        #expect(status == 201)
      }
      // Not a note: the type filter leaves it on the server.
      _ = try await request(base, "PUT", "/notes/other", #"{"type":"other"}"#)
      #expect(
        try await eventually {
          let remote = try await remoteTitles(base)
          let local = try localTitles(db)
          return remote.count == 5 && local.count == 5
        })
      #expect(try await eventually { session.status.state == .idle })
      #expect(session.status.pushed == 3)
      #expect(session.status.pulled == 2)
      #expect(try db.store.record("other") == nil)

      // The server goes away: the session says offline, with the next try; saving goes on.
      served.server.kill()
      #expect(
        try await eventually {
          if case .offline(let retryAt, _) = session.status.state { return retryAt != nil }
          return false
        })
      for i in 3..<5 { try await db.save(Note(id: "local-\(i)", title: "L\(i)")) }
      var edited = try #require(try db.get(Note.self, id: "remote-0"))
      edited.title = "R0 edited offline"
      try await db.save(edited)
      var deleted = try #require(try db.get(Note.self, id: "local-0"))
      deleted.title = "to be deleted"
      deleted = try await db.save(deleted)
      try await db.delete(deleted)

      // Back on its port: everything saved meanwhile arrives, and the server's new edits too.
      (served.server, _) = try serveWikilog(serverDir.path, port: port)
      _ = try await request(
        base, "PUT", "/notes/remote-2",
        #"{"type":"note","title":"R2 after","tags":[],"done":false}"#)
      #expect(
        try await eventually(30) {
          let remote = try await remoteTitles(base)
          let local = try localTitles(db)
          return remote["local-3"] == "L3" && remote["local-4"] == "L4"
            && remote["remote-0"] == "R0 edited offline" && remote["local-0"] == nil
            && local["remote-2"] == "R2 after"
        })
      #expect(try await eventually { session.status.state == .idle })
      let expected: [String: String] = [
        "local-1": "L1", "local-2": "L2", "local-3": "L3", "local-4": "L4",
        "remote-0": "R0 edited offline", "remote-1": "R1", "remote-2": "R2 after",
      ]
      #expect(try await remoteTitles(base) == expected)
      #expect(try localTitles(db) == expected)

      // Stopped, the statuses end with .stopped.
      var seen: [SyncSession.State] = []
      let watcher = Task {
        var states: [SyncSession.State] = []
        for await status in session.statuses { states.append(status.state) }
        return states
      }
      await session.stop()
      seen = await watcher.value
      #expect(seen.last == .stopped)

      // A new session (the app started again) resumes from the checkpoints: nothing is sent
      // or fetched twice.
      let again = try db.sync(with: base + "/notes", options: options)
      #expect(try await eventually { again.status.state == .idle })
      #expect(again.status.pushed == 0)
      #expect(again.status.pulled == 0)
      await again.stop()
    }
  }

  @Test func aWikiFilterBringsOneWiki() async throws {
    let serverDir = TempDirectory()
    let (server, base) = try serveWikilog(serverDir.path)
    defer { server.kill() }
    #expect(try await request(base, "PUT", "/wiki").0 == 201)
    for (id, body) in [
      ("w1", #"{"type":"wiki","title":"One","owner_id":"ann","members":[]}"#),
      ("w1:Home", #"{"type":"page","wiki_id":"w1","title":"Home","markdown":"hi"}"#),
      ("w1x", #"{"type":"wiki","title":"Other","owner_id":"ann","members":[]}"#),
      ("w1x:Home", #"{"type":"page","wiki_id":"w1x","title":"Home","markdown":"no"}"#),
      ("w.1", #"{"type":"wiki","title":"Dot","owner_id":"ann","members":[]}"#),
    ] {
      let (status, answer) = try await request(base, "PUT", "/wiki/\(id)", body)
      #expect(status == 201, "\(id): \(answer)")
    }
    try await withDatabase { db, _ in
      var options = SyncSession.Options()
      options.wiki = "w1"
      options.push = false
      let session = try db.sync(with: base + "/wiki", options: options)
      #expect(try await eventually { session.status.state == .idle })
      #expect(session.status.pulled == 2)
      #expect(try db.store.record("w1") != nil && db.store.record("w1:Home") != nil)
      #expect(try db.store.record("w1x") == nil && db.store.record("w.1") == nil)
      await session.stop()
    }
  }

  @Test func retryNowDoesNotWaitForTheBackoff() async throws {
    let served = try await Served()
    defer { served.server.kill() }
    let (serverDir, base, port) = (served.directory, served.base, served.port)
    try await withDatabase { db, _ in
      var options = SyncSession.Options()
      // A backoff far longer than the test may take.
      options.retry = RetryPolicy(initialDelay: .seconds(600), maximumDelay: .seconds(600))
      let session = try db.sync(with: base + "/notes", options: options)
      #expect(try await eventually { session.status.state == .idle })
      served.server.kill()
      #expect(
        try await eventually {
          if case .offline = session.status.state { return true }
          return false
        })
      try await db.save(Note(id: "woke", title: "saved while asleep"))
      (served.server, _) = try serveWikilog(serverDir.path, port: port)
      // What an app does when it wakes or the network is back.
      session.retryNow()
      #expect(try await eventually { try await remoteTitles(base)["woke"] == "saved while asleep" })
      await session.stop()
    }
  }

  @Test func refusedCredentialsAreAnErrorState() async throws {
    let serverDir = TempDirectory()
    // A server with an administrator: no admin party.
    let setup = SpawnedProcess()
    setup.executableURL = URL(fileURLWithPath: ChildProcess.besideTests("wikilog"))
    setup.arguments = [
      "--db", serverDir.path, "user", "add", "admin", "--admin", "--password-stdin",
    ]
    let input = Pipe()
    setup.standardInput = input
    try ChildProcess.launch(setup)
    input.fileHandleForWriting.write(Data("secret\n".utf8))
    try input.fileHandleForWriting.close()
    setup.waitUntilExit()
    #expect(setup.terminationStatus == 0)
    let (server, base) = try serveWikilog(serverDir.path)
    defer { server.kill() }
    try await withDatabase { db, _ in
      let session = try db.sync(
        with: base + "/notes", credentials: .basic(user: "admin", password: "wrong"))
      #expect(
        try await eventually {
          if case .error(let reason, _) = session.status.state { return reason.contains("401") }
          return false
        })
      await session.stop()
      let good = try db.sync(
        with: base + "/notes", credentials: .basic(user: "admin", password: "secret"),
        options: {
          var o = SyncSession.Options()
          o.createRemote = true
          return o
        }())
      try await db.save(Note(id: "n", title: "signed in"))
      #expect(
        try await eventually {
          let (_, doc) = try await HTTPTransport(
            baseURL: base, credentials: .basic(user: "admin", password: "secret")
          ).send("GET", "/notes/n", body: nil).json()
          return doc["title"] == .string("signed in")
        })
      await good.stop()
    }
    #expect(throws: StoreError.self) {
      let dir = TempDirectory()
      let db = try DocumentDatabase(path: dir.path)
      defer { db.close() }
      _ = try db.sync(with: "ftp://nowhere/x")
    }
  }
}

extension CouchTransportResponse {
  func json() -> (Int, JSONValue) { (status, (try? JSONValue(parsing: body)) ?? .null) }
}
