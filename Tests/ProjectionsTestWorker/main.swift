// A child process for ProjectionsTests: writes documents until killed, printing what the store
// acknowledged.
//
//   ProjectionsTestWorker write DIR synced|group
//       opens a DocumentStore (wiki and draft projections) and writes without end: new
//       documents, updates, deletions, pages of the wiki "w", bulk writes and replicated
//       conflicts. synced: one writer, every write a synced commit. group: 8 concurrent
//       writers through the async API, sharing group commits. After each write returns (is
//       durable) it prints "ack ID REV N" for every revision written, N naming the body
//       {"n": N, "pad": ...} (see `fields(_:)`; some also carry an attachment "a-(N%3).bin" of
//       `attachmentData(N)`), "ack ID REV -" for a deletion, and
//       "ack ID REV ?" for a replicated revision (whose body may be an earlier copy's).
import Foundation
import JSON
import Log
import Projections
import RevTree
import Synchronization
import Wiki

let output = Mutex<Void>(())
func emit(_ line: String) {
  output.withLock { _ in
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
  }
}

func fail(_ message: String) -> Never {
  FileHandle.standardError.write(Data(("ProjectionsTestWorker: " + message + "\n").utf8))
  exit(1)
}

/// The fields of the n-th body: its number and a pattern derived from it.
func fields(_ n: Int) -> [JSONObject.Member] {
  [
    .init(key: "n", value: .number(JSONNumber(Int64(n)))),
    .init(key: "pad", value: .string(String(repeating: "x", count: 20 + n % 300))),
  ]
}

/// The n-th attachment's data: a few hundred bytes derived from n.
func attachmentData(_ n: Int) -> [UInt8] {
  (0..<(200 + n % 500)).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ n) }
}

func attachmentBase64(_ n: Int) -> String { Data(attachmentData(n)).base64EncodedString() }

/// One writer's plan: what it writes next, from its own counter and documents.
struct Plan {
  let writer: Int
  var step = 0
  /// This writer's documents and their current revs (absent when unknown or deleted).
  var revs: [String: String] = [:]

  init(writer: Int) { self.writer = writer }

  enum Write {
    case put(id: String, rev: String?, body: JSONObject, n: Int)
    case delete(id: String, rev: String)
    case bulk([(id: String, rev: String?, n: Int)])
    case replicated(id: String, revs: [String], n: Int)
  }

  mutating func next(counter: inout Int) -> Write {
    step += 1
    counter += 1
    let n = counter
    let id = "d\(writer)-\(step % 17)"
    switch step % 6 {
    case 0:
      if let rev = revs[id] { return .delete(id: id, rev: rev) }
      fallthrough
    case 1, 2:
      var body = JSONObject(fields(n))
      if step % 4 == 0 {
        // A page of the wiki "w", with links for the wiki projection.
        let page = "w:Page \(writer)-\(step % 9)"
        body["type"] = .string("page")
        body["wiki_id"] = .string("w")
        body["markdown"] = .string("see [[Page \(writer)-\((step + 1) % 9)]] \(n)")
        return .put(id: page, rev: revs[page], body: body, n: n)
      }
      if step % 4 == 1 {
        // With an attachment: its blob is written before the event, so a kill between the
        // two leaves at most an orphan blob, never an event without its blob.
        body["_attachments"] = .object(
          JSONObject([
            "a-\(n % 3).bin": .object(
              JSONObject([
                "content_type": .string(n % 2 == 0 ? "text/plain" : "application/octet-stream"),
                "data": .string(attachmentBase64(n)),
              ]))
          ]))
      }
      return .put(id: id, rev: revs[id], body: body, n: n)
    case 3, 4:
      let ids = (0..<3).map { "b\(writer)-\((step + $0) % 23)" }
      var docs: [(id: String, rev: String?, n: Int)] = []
      for (i, docID) in ids.enumerated() {
        counter += 1
        docs.append((docID, revs[docID], n + i + 1))
      }
      return .bulk(docs)
    default:
      let gen = 1 + step % 3
      let hashes = (0..<gen).map { String(format: "%032x", (writer * 1000 + step + $0) % 7) }
      return .replicated(id: "r\(writer)-\(step % 5)", revs: hashes, n: n)
    }
  }
}

func json(id: String, rev: String?, _ body: JSONObject) -> JSONValue {
  var o = body
  o.members.insert(.init(key: "_id", value: .string(id)), at: 0)
  if let rev { o.members.insert(.init(key: "_rev", value: .string(rev)), at: 1) }
  return .object(o)
}

func replicated(_ id: String, _ hashes: [String], _ n: Int) -> JSONValue {
  var o = JSONObject(fields(n))
  o.members.insert(
    contentsOf: [
      .init(key: "_id", value: .string(id)),
      .init(key: "_rev", value: .string("\(hashes.count)-\(hashes[0])")),
      .init(
        key: "_revisions",
        value: .object(
          JSONObject([
            "start": .number(JSONNumber(Int64(hashes.count))),
            "ids": .array(hashes.map { .string($0) }),
          ]))),
    ], at: 0)
  return .object(o)
}

/// Runs one write, synchronously or through the async API; prints its acks and remembers revs.
func perform(_ write: Plan.Write, on store: DocumentStore, plan: inout Plan, async: Bool)
  async throws
{
  switch write {
  case .put(let id, let rev, let body, let n):
    let doc = json(id: id, rev: rev, body).serialized()
    do {
      let r =
        async
        ? try await store.putAsync(doc, actor: "worker") : try store.put(doc, actor: "worker")
      plan.revs[id] = r.rev
      emit("ack \(id) \(r.rev!) \(n)")
    } catch let error as StoreError where error.code == .conflict {
      plan.revs[id] = (try? store.get(id))?["_rev"]?.stringValue
    }
  case .delete(let id, let rev):
    do {
      let r =
        async
        ? try await store.deleteAsync(id, rev: rev, actor: "worker")
        : try store.delete(id, rev: rev, actor: "worker")
      plan.revs[id] = nil
      emit("ack \(id) \(r.rev!) -")
    } catch let error as StoreError where error.code == .conflict {
      plan.revs[id] = (try? store.get(id))?["_rev"]?.stringValue
    }
  case .bulk(let docs):
    let values = docs.map { json(id: $0.id, rev: $0.rev, JSONObject(fields($0.n))) }
    let results =
      async
      ? try await store.bulkDocsAsync(values, actor: "worker")
      : try store.bulkDocs(values, actor: "worker")
    for (doc, result) in zip(docs, results) {
      if let rev = result.rev, result.ok {
        plan.revs[doc.id] = rev
        emit("ack \(doc.id) \(rev) \(doc.n)")
      } else {
        plan.revs[doc.id] = (try? store.get(doc.id))?["_rev"]?.stringValue
      }
    }
  case .replicated(let id, let hashes, let n):
    let doc = replicated(id, hashes, n)
    let failures =
      async
      ? try await store.bulkDocsAsync([doc], newEdits: false, actor: "peer", origin: "http://peer")
      : try store.bulkDocs([doc], newEdits: false, actor: "peer", origin: "http://peer")
    guard failures.isEmpty else { fail("replicated write failed: \(failures)") }
    // A revision the store had already is not written again; either way it is there now.
    _ = n
    emit("ack \(id) \(hashes.count)-\(hashes[0]) ?")
  }
}

/// Writes until killed.
func run(_ store: DocumentStore, group: Bool, start: Int) async {
  if group {
    await withTaskGroup(of: Void.self) { tasks in
      for writer in 0..<8 {
        tasks.addTask {
          var plan = Plan(writer: writer)
          var counter = start + writer * 100_000_000
          while true {
            do {
              try await perform(plan.next(counter: &counter), on: store, plan: &plan, async: true)
            } catch {
              fail("write failed: \(error)")
            }
          }
        }
      }
    }
  } else {
    var plan = Plan(writer: 0)
    var counter = start
    while true {
      do {
        try await perform(plan.next(counter: &counter), on: store, plan: &plan, async: false)
      } catch {
        fail("write failed: \(error)")
      }
    }
  }
}

let args = CommandLine.arguments
if args.count >= 4, args[1] == "grow" {
  // ProjectionsTestWorker grow DIR KIB: writes documents of 10 KB to the store in DIR (its map
  // starting at 1 MiB, so that it grows) until its data file is KIB kibibytes, then prints
  // "grown" and exits.
  var options = EventLog.Options()
  options.mapSize = 1 << 20
  let file = args[2] + "/data.mdb"
  let limit = (Int(args[3]) ?? 4096) * 1024
  do {
    let store = try DocumentStore(directory: args[2], options: options)
    var n = 0
    func size() -> Int {
      ((try? FileManager.default.attributesOfItem(atPath: file))?[.size] as? NSNumber)?.intValue
        ?? 0
    }
    while size() < limit {
      n += 1
      try store.put(
        #"{"pad":"\#(String(repeating: "g", count: 10_000))"}"#, id: "g-\(n)", actor: "worker")
    }
    store.close()
    emit("grown \(n)")
    exit(0)
  } catch {
    fail("grow failed: \(error)")
  }
}
guard args.count >= 4, args[1] == "write" else {
  fail("usage: ProjectionsTestWorker write DIR synced|group, or grow DIR KIB")
}
var options = EventLog.Options()
options.mapSize = 1 << 20  // small, so that kills also land during map growth
options.durability = args[3] == "group" ? .groupCommit : .synced
do {
  let store = try DocumentStore(
    directory: args[2], options: options, projections: [WikiProjection(), DraftProjection()],
    validation: .touchWiki)
  if (try? store.get("w")) == nil {
    try store.put(
      #"{"_id":"w","type":"wiki","title":"Crash","owner_id":"worker","members":[]}"#,
      actor: "worker")
  }
  // Body numbers continue across runs in the same directory.
  let start = Int(try store.info.updateSeq.rawValue) * 1000
  await run(store, group: args[3] == "group", start: start)
} catch {
  fail("\(error)")
}
