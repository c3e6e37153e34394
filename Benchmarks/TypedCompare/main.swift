// Typed saves beside the JSON API, and a typed change's way to another process (the typed API
// issue's targets). Built only with WIKILOG_BENCHMARKS=1:
//
//   swift build -c release --scratch-path .build-bench --product TypedCompare
//   .build-bench/release/TypedCompare saves|updates [DOCS] [TASKS] [ROUNDS]
//   .build-bench/release/TypedCompare latency [CHANGES]
import Foundation
import JSON
import Projections
import TypedDocuments

struct Note: StoredDocument {
  static let documentType = "note"
  var id: String
  var revision: String?
  var title: String
  var body: String
  var tags: [String]
  var done: Bool
  var created: Date
  var sentAt: Double?
}

func note(_ i: Int) -> Note {
  Note(
    id: "note-\(i)", title: "Note number \(i)",
    body: String(repeating: "Some words of a note. ", count: 8), tags: ["home", "t\(i % 10)"],
    done: i % 3 == 0, created: Date(timeIntervalSince1970: 1_764_000_000 + Double(i)))
}

func temporary() -> String {
  FileManager.default.temporaryDirectory.appendingPathComponent("typed-bench-\(UUID())").path
}

/// Saves `count` notes from `tasks` concurrent tasks (with `updates`, a second revision of
/// each of `count` notes saved before the clock starts); documents per second.
func run(typed: Bool, count: Int, tasks: Int, updates: Bool = false) async throws -> Double {
  let dir = temporary()
  defer { try? FileManager.default.removeItem(atPath: dir) }
  let db = try DocumentDatabase(path: dir, name: "bench", actor: "bench")
  defer { db.close() }
  var revisions: [String?] = Array(repeating: nil, count: count)
  if updates {
    for i in 0..<count { revisions[i] = try await db.save(note(i)).revision }
  }
  // The same documents as JSON text, made before the clock starts (as a client sends them).
  let bodies: [[UInt8]] =
    typed
    ? []
    : try (0..<count).map { i in
      var body = try DocumentEncoder().encode(note(i)).objectValue!
      body["id"] = nil
      body["revision"] = nil
      body["_id"] = .string("note-\(i)")
      if let rev = revisions[i] { body["_rev"] = .string(rev) }
      body["type"] = .string("note")
      return Array(JSONValue.object(body).serialized())
    }
  let notes: [Note] =
    typed
    ? (0..<count).map { i in
      var n = note(i)
      n.revision = revisions[i]
      return n
    } : []
  let start = ContinuousClock.now
  try await withThrowingTaskGroup(of: Void.self) { group in
    for t in 0..<tasks {
      group.addTask {
        var i = t
        while i < count {
          if typed {
            try await db.save(notes[i])
          } else {
            try await db.store.putAsync(bodies[i], actor: "bench")
          }
          i += tasks
        }
      }
    }
    try await group.waitForAll()
  }
  let elapsed = ContinuousClock.now - start
  return Double(count)
    / (Double(elapsed.components.attoseconds) / 1e18 + Double(elapsed.components.seconds))
}

func median(_ values: [Double]) -> Double {
  let sorted = values.sorted()
  return sorted.count % 2 == 1
    ? sorted[sorted.count / 2] : (sorted[sorted.count / 2 - 1] + sorted[sorted.count / 2]) / 2
}

var arguments = Array(CommandLine.arguments.dropFirst())
let mode = arguments.isEmpty ? "saves" : arguments.removeFirst()
switch mode {
case "saves", "updates":
  let updates = mode == "updates"
  let count = arguments.first.flatMap { Int($0) } ?? 20_000
  let tasks = arguments.dropFirst().first.flatMap { Int($0) } ?? 64
  let rounds = arguments.dropFirst(2).first.flatMap { Int($0) } ?? 5
  var json: [Double] = []
  var typed: [Double] = []
  for round in 0..<rounds {
    // Alternated, the order flipped every round.
    if round % 2 == 0 {
      json.append(try await run(typed: false, count: count, tasks: tasks, updates: updates))
      typed.append(try await run(typed: true, count: count, tasks: tasks, updates: updates))
    } else {
      typed.append(try await run(typed: true, count: count, tasks: tasks, updates: updates))
      json.append(try await run(typed: false, count: count, tasks: tasks, updates: updates))
    }
    print(
      String(
        format: "round %d: JSON %.0f docs/s, typed %.0f docs/s", round + 1, json.last!, typed.last!)
    )
  }
  print(
    String(
      format:
        "%@, median of %d: JSON API %.0f docs/s, typed %.0f docs/s, typed/JSON %.2f (%d docs, %d tasks)",
      mode, rounds, median(json), median(typed), median(typed) / median(json), count, tasks))
case "latency":
  // This process follows the changes; a child (this program, mode "writer") saves a note every
  // 20 ms, stamping the time just before its save.
  let count = arguments.first.flatMap { Int($0) } ?? 200
  let dir = temporary()
  defer { try? FileManager.default.removeItem(atPath: dir) }
  let db = try DocumentDatabase(path: dir, name: "bench", actor: "watcher")
  defer { db.close() }
  let changes = db.changes(of: Note.self, from: .after(db.lastSequence))
  let writer = Process()
  writer.executableURL = URL(fileURLWithPath: CommandLine.arguments[0])
  writer.arguments = ["writer", dir, String(count)]
  try writer.run()
  var latencies: [Double] = []
  for try await change in changes {
    if let sent = change.document?.sentAt {
      latencies.append((Date().timeIntervalSince1970 - sent) * 1000)
    }
    if latencies.count == count { break }
  }
  writer.waitUntilExit()
  latencies.sort()
  print(
    String(
      format:
        "%d changes from another process: median %.2f ms, p90 %.2f ms, p99 %.2f ms, max %.2f ms",
      count, median(latencies), latencies[latencies.count * 9 / 10],
      latencies[min(latencies.count - 1, latencies.count * 99 / 100)], latencies.last!))
case "writer":
  let db = try DocumentDatabase(path: arguments[0], name: "bench", actor: "writer")
  defer { db.close() }
  for i in 0..<(Int(arguments[1]) ?? 200) {
    var n = note(i)
    n.sentAt = Date().timeIntervalSince1970
    try await db.save(n)
    try await Task.sleep(for: .milliseconds(20))
  }
default:
  print("usage: TypedCompare saves [DOCS] [TASKS] [ROUNDS] | latency [CHANGES]")
}
