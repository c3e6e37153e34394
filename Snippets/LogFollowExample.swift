// Reading the log by stream and backwards, a conditional append, a row written in the
// transaction that appends, and a subscription that catches up and then follows.
import Foundation
import Log

let dir = FileManager.default.temporaryDirectory.appendingPathComponent("follow-\(UUID())").path
defer { try? FileManager.default.removeItem(atPath: dir) }
let log = try EventLog(directory: dir)
defer { log.close() }

try log.append([
  NewEvent(type: "page.created", stream: "w1:Home", actor: "ann", expectedVersion: .noStream),
  NewEvent(type: "page.edited", stream: "w1:Home", actor: "bob", expectedVersion: .exactly(1)),
  NewEvent(type: "page.created", stream: "w1:Soup", actor: "ann"),
])
print(try log.read(stream: "w1:Home").map(\.type))  // ["page.created", "page.edited"]
let newest = try log.read(from: log.committedPosition, direction: .backward, limit: 1)
print(newest[0].position, newest[0].stream)  // 3 w1:Soup

// A stale expected version writes nothing.
do {
  try log.append([
    NewEvent(type: "page.edited", stream: "w1:Home", actor: "cat", expectedVersion: .exactly(1))
  ])
} catch {
  guard case .wrongExpectedVersion(let stream, _, let actual) = error else { throw error }
  print("refused:", stream, "is at version", actual)  // refused: w1:Home is at version 2
}

// A caller-owned database, written in the transaction that appends.
let titles = try log.database(named: "titles")
try log.write { txn in
  let event = try txn.append(NewEvent(type: "page.created", stream: "w1:Stock", actor: "ann"))
  try txn.put(Array("\(event.position)".utf8), forKey: "w1:Stock", in: titles)
}
let row = try log.read { txn in try txn.get("w1:Stock", in: titles) }
print(String(decoding: row ?? [], as: UTF8.self))  // 4

// Everything after position 2, then live appends: once caught up, a new event arrives.
func follow(_ log: EventLog) async throws {
  for try await item in log.subscribe(after: LogPosition(2)) {
    switch item {
    case .event(let event):
      print(event.position, event.type, event.stream)  // 3 page.created w1:Soup, then 4, 5
      if event.position == LogPosition(5) { return }
    case .caughtUp(let position):
      print("caught up at", position)  // caught up at 4
      try await log.append([NewEvent(type: "page.edited", stream: "w1:Soup", actor: "bob")])
    }
  }
}
try await follow(log)
