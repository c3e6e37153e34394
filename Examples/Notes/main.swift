// notes: a small notes tool on wikilog's typed API (the DocC article "Embedding wikilog in an
// app" walks through it). Notes are saved in a local database and synced with a `wikilog serve`
// (or a CouchDB) when asked.
//
//   notes [--data DIR] add TITLE [--tag TAG]... [--body TEXT]
//   notes [--data DIR] list [--tag TAG]
//   notes [--data DIR] done ID | delete ID
//   notes [--data DIR] attach ID FILE [--type MIME]
//   notes [--data DIR] watch                  one line per change, live, from any process
//   notes [--data DIR] sync URL [--user U --password P] [--until-idle]
import Foundation
import TypedDocuments

struct Note: StoredDocument {
  static let documentType = "note"
  var id: String
  var revision: String?
  var title: String
  var body: String = ""
  var tags: [String] = []
  var done = false
  var created: Date
}

struct Failure: Error, CustomStringConvertible {
  let description: String
}

/// The command line, read a piece at a time.
final class Arguments {
  var arguments = Array(CommandLine.arguments.dropFirst())

  /// The value after `flag` (removed from the arguments), or nil.
  func option(_ flag: String) throws -> String? {
    guard let i = arguments.firstIndex(of: flag) else { return nil }
    guard i + 1 < arguments.count else { throw Failure(description: "\(flag) needs a value") }
    let value = arguments[i + 1]
    arguments.removeSubrange(i...(i + 1))
    return value
  }

  /// Every value given with `flag`.
  func options(_ flag: String) throws -> [String] {
    var values: [String] = []
    while let value = try option(flag) { values.append(value) }
    return values
  }

  func flag(_ name: String) -> Bool {
    guard let i = arguments.firstIndex(of: name) else { return false }
    arguments.remove(at: i)
    return true
  }
}

func line(_ note: Note) -> String {
  let tags = note.tags.isEmpty ? "" : " [" + note.tags.joined(separator: ", ") + "]"
  return "\(note.done ? "x" : "-") \(note.id) \(note.title)\(tags)"
}

func run() async throws {
  let args = Arguments()
  func option(_ flag: String) throws -> String? { try args.option(flag) }
  func options(_ flag: String) throws -> [String] { try args.options(flag) }
  func flag(_ name: String) -> Bool { args.flag(name) }
  var arguments: [String] {
    get { args.arguments }
    set { args.arguments = newValue }
  }
  let data =
    try option("--data") ?? ProcessInfo.processInfo.environment["NOTES_DATA"]
    ?? FileManager.default.homeDirectoryForCurrentUser.path + "/.local/share/wikilog-notes"
  guard !arguments.isEmpty else {
    throw Failure(
      description: "usage: notes [--data DIR] add|list|done|delete|attach|watch|sync ...")
  }
  let command = arguments.removeFirst()
  let db = try DocumentDatabase(path: data, name: "notes", actor: NSUserName())
  defer { db.close() }

  func note(_ id: String) throws -> Note {
    guard let note = try db.get(Note.self, id: id) else {
      throw Failure(description: "no note \(id)")
    }
    return note
  }

  switch command {
  case "add":
    let tags = try options("--tag")
    let body = try option("--body") ?? ""
    guard let title = arguments.first else { throw Failure(description: "add needs a title") }
    let created = Date()
    let id =
      "note-" + String(UInt64(created.timeIntervalSince1970 * 1000), radix: 36) + "-"
      + String(UInt32.random(in: 0...UInt32.max), radix: 36)
    let saved = try await db.save(
      Note(id: id, revision: nil, title: title, body: body, tags: tags, created: created))
    print("\(saved.id) \(saved.revision!)")
  case "list":
    let tag = try option("--tag")
    let notes = try db.find(
      Note.self, where: tag.map { .field("tags", contains: $0) } ?? .all,
      sort: [.ascending("created")])
    for note in notes { print(line(note)) }
  case "done":
    guard let id = arguments.first else { throw Failure(description: "done needs a note id") }
    // A concurrent edit (a sync that brought another revision) is merged, not lost.
    var finished = try note(id)
    finished.done = true
    let saved = try await db.save(finished) { current, _ in
      var merged = current
      merged.done = true
      return merged
    }
    print("\(saved.id) \(saved.revision!)")
  case "delete":
    guard let id = arguments.first else { throw Failure(description: "delete needs a note id") }
    try await db.delete(try note(id))
    print("deleted \(id)")
  case "attach":
    let type = try option("--type") ?? "application/octet-stream"
    guard arguments.count == 2 else {
      throw Failure(description: "attach needs a note id and a file")
    }
    let file = URL(fileURLWithPath: arguments[1])
    let saved = try await db.attach(
      contentsOf: file, named: file.lastPathComponent, contentType: type, to: try note(arguments[0])
    )
    print("\(saved.id) \(saved.revision!)")
  case "watch":
    // From the last change now: nothing committed after "watching" is missed.
    let changes = db.changes(of: Note.self, from: .after(db.lastSequence))
    print("watching")
    fflush(nil)
    for try await change in changes {
      let latency = Date().timeIntervalSince(change.time) * 1000
      print(
        "\(change.kind) \(change.id) \(change.revision) \(change.document?.title ?? "")"
          + " by \(change.actor) after \(String(format: "%.1f", latency)) ms")
      fflush(nil)
    }
  case "sync":
    let user = try option("--user")
    let password = try option("--password")
    let untilIdle = flag("--until-idle")
    guard let url = arguments.first else { throw Failure(description: "sync needs a database URL") }
    let session = try db.sync(
      with: url, credentials: user.map { .basic(user: $0, password: password ?? "") },
      options: .types([Note.self]))
    for await status in session.statuses {
      print("\(status.state) pushed=\(status.pushed) pulled=\(status.pulled)")
      fflush(nil)
      if case .error(let reason, _) = status.state, untilIdle {
        await session.stop()
        throw Failure(description: reason)
      }
      if untilIdle, status.state == .idle, status.pushPending ?? 0 == 0,
        status.pullPending ?? 0 == 0
      {
        await session.stop()
      }
    }
  default:
    throw Failure(description: "unknown command \(command)")
  }
}

do {
  try await run()
} catch {
  FileHandle.standardError.write(Data("notes: \(error)\n".utf8))
  exit(1)
}
