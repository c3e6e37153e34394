// Per-operation workloads for instruction counts under callgrind: each sets up its data, then
// runs the operation `count` times inside `measured(_:)`, which callgrind can collect alone:
//
//   valgrind --tool=callgrind --collect-atstart=no --toggle-collect='*measured*' \
//     LogCompare DIR 100000 ops-append-new
//
// and the instructions collected divided by the count are the cost of one operation. They run
// only when named (never as part of scripts/compare-log). The events look like the document
// store's: type "doc.edit", a document id as the stream, an actor, a 300-byte payload.
import Foundation
import Log

let operationNames = [
  "ops-append-new", "ops-append-update", "ops-append-update-cold", "ops-get", "ops-get-borrowed",
  "ops-get-utf8-array", "ops-get-string",
  "ops-put", "ops-delete", "ops-event-at", "ops-for-each", "ops-for-each-skipping",
]

/// The loop callgrind measures; never inlined, so that `--toggle-collect` finds it.
@inline(never)
func measured(_ body: () throws -> Void) rethrows {
  try body()
}

private let docPayload = [UInt8](repeating: 0x62, count: 300)

private func docID(_ i: Int) -> String { "w\(i % 100):Page number \(i)" }

private func key(_ i: Int) -> [UInt8] { Array("doc-\(i * 7919 % 1_000_003)".utf8) }

/// A permutation of 0..<n that visits keys and positions out of order, deterministically.
private func shuffled(_ n: Int) -> [Int] {
  var order = Array(0..<n)
  var state: UInt64 = 0x9E37_79B9_7F4A_7C15
  for i in stride(from: n - 1, to: 0, by: -1) {
    state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
    order.swapAt(i, Int((state >> 33) % UInt64(i + 1)))
  }
  return order
}

private func docEvents(_ n: Int, expected: ExpectedVersion) -> [NewEvent] {
  (0..<n).map {
    NewEvent(
      type: "doc.edit", stream: docID($0), actor: "alice", payload: docPayload,
      expectedVersion: expected)
  }
}

/// Appends `events` one `txn.append` each, 1000 per transaction.
private func appendSingly(_ log: EventLog, _ events: [NewEvent]) throws {
  var i = 0
  while i < events.count {
    let end = min(i + 1000, events.count)
    try log.write { txn in
      for j in i..<end { try txn.append(events[j]) }
    }
    i = end
  }
}

private func openLog(_ dir: String) throws -> EventLog {
  var options = EventLog.Options(durability: .unsynced)
  options.mapSize = 4 << 30
  return try EventLog(directory: dir, options: options)
}

func runOperation(_ name: String, directory: String, count n: Int) throws {
  let dir = directory + "/" + name
  try? FileManager.default.removeItem(atPath: dir)
  defer { try? FileManager.default.removeItem(atPath: dir) }
  var log = try openLog(dir)
  defer { log.close() }
  var sink = 0
  switch name {
  case "ops-append-new":
    let events = docEvents(n, expected: .noStream)
    try measured { try appendSingly(log, events) }
  case "ops-append-update", "ops-append-update-cold":
    try appendSingly(log, docEvents(n, expected: .noStream))
    if name == "ops-append-update-cold" {
      log.close()
      log = try openLog(dir)
    }
    let events = docEvents(n, expected: .exactly(1))
    try measured { try appendSingly(log, events) }
  case "ops-get", "ops-get-borrowed", "ops-get-utf8-array", "ops-get-string", "ops-put",
    "ops-delete":
    let db = try log.database(named: "docs")
    let keys = (0..<n).map(key)
    let value = [UInt8](repeating: 0x63, count: 200)
    try appendSingly(log, [])
    try log.write { txn in
      for k in keys { try txn.put(value, forKey: k, in: db) }
    }
    let order = shuffled(n)
    switch name {
    case "ops-get":
      try measured {
        try log.read { txn in
          for i in order { sink &+= try txn.get(keys[i], in: db)?.count ?? 0 }
        }
      }
    case "ops-get-borrowed":
      try measured {
        try log.read { txn in
          for i in order {
            sink &+= try txn.withValue(forKey: keys[i], in: db) { $0.count } ?? 0
          }
        }
      }
    case "ops-get-utf8-array", "ops-get-string":
      // A document store's lookups by document id: the key is the id's UTF-8.
      let ids = keys.map { String(decoding: $0, as: UTF8.self) }
      if name == "ops-get-string" {
        try measured {
          try log.read { txn in
            for i in order { sink &+= try txn.get(ids[i], in: db)?.count ?? 0 }
          }
        }
      } else {
        try measured {
          try log.read { txn in
            for i in order { sink &+= try txn.get(Array(ids[i].utf8), in: db)?.count ?? 0 }
          }
        }
      }
    case "ops-put":
      let newValue = [UInt8](repeating: 0x64, count: 200)
      try measured {
        for start in stride(from: 0, to: n, by: 1000) {
          try log.write { txn in
            for i in order[start..<min(start + 1000, n)] {
              try txn.put(newValue, forKey: keys[i], in: db)
            }
          }
        }
      }
    default:
      try measured {
        for start in stride(from: 0, to: n, by: 1000) {
          try log.write { txn in
            for i in order[start..<min(start + 1000, n)] {
              if try txn.delete(keys[i], in: db) { sink &+= 1 }
            }
          }
        }
      }
    }
  case "ops-event-at":
    try appendSingly(log, docEvents(n, expected: .any))
    let order = shuffled(n)
    try measured {
      try log.read { txn in
        for i in order {
          sink &+= try txn.event(at: LogPosition(UInt64(i + 1)))?.payload.count ?? 0
        }
      }
    }
  case "ops-for-each":
    try appendSingly(log, docEvents(n, expected: .any))
    try measured {
      try log.read { txn in
        try txn.forEachEvent(from: .start) { event in
          sink &+= event.payload.count
          return true
        }
      }
    }
  case "ops-for-each-skipping":
    // Nine events in ten are of a type the reader does not want.
    let events = (0..<n).map {
      NewEvent(
        type: $0 % 10 == 0 ? "doc.edit" : "draft.saved", stream: docID($0), actor: "alice",
        payload: docPayload)
    }
    try appendSingly(log, events)
    try measured {
      try log.read { txn in
        try txn.forEachEvent(from: .start, ofTypes: ["doc.edit"]) { event in
          sink &+= event.payload.count
          return true
        }
      }
    }
  default:
    fatalError("unknown operation \(name); known: \(operationNames.joined(separator: ", "))")
  }
  print(name, n, sink)
}
