// The per-user changes feed of the access issue's target: a user in 10 of 1,000 wikis reads
// their changes out of 1,000,000, through the user's view (WikiAccess: one index per access
// group, WikiAccessProjection), beside the whole database's feed read the same way.
//
//   AccessCompare DIR [--wikis N] [--pages N] [--runs N]
//
// Writes --wikis wikis (default 1,000) of --pages pages each (default 1,000: 1,000,000 page
// documents), all owned by "owner", with "alice" a member of every 100th wiki (10 of 1,000);
// then, --runs times (default 7), reads alice's whole feed (since 0) and the database's whole
// feed (since 0), and prints "<workload> <rows> <seconds> <rows_per_second>" lines for the
// median run, and the runs themselves in milliseconds.
import Foundation
import JSON
import Log
import Projections
import Wiki

let arguments = Array(CommandLine.arguments.dropFirst())
func option(_ name: String, _ defaultValue: Int) -> Int {
  guard let i = arguments.firstIndex(of: name), i + 1 < arguments.count,
    let n = Int(arguments[i + 1].replacingOccurrences(of: "_", with: ""))
  else { return defaultValue }
  return n
}
let base =
  arguments.first.flatMap { $0.hasPrefix("--") ? nil : $0 }
  ?? NSTemporaryDirectory() + "wikilog-accesscompare"
let wikiCount = option("--wikis", 1_000)
let pageCount = option("--pages", 1_000)
let runs = option("--runs", 7)

try? FileManager.default.removeItem(atPath: base)
try FileManager.default.createDirectory(atPath: base, withIntermediateDirectories: true)
var logOptions = EventLog.Options()
logOptions.durability = .unsynced
let data = DataDirectory.wiki(path: base, options: logOptions)
let store = try data.open("wiki", create: true)

let writeStart = Date()
func writeAll(_ store: DocumentStore) throws {
  var batch: [JSONValue] = []
  func flush() throws {
    guard !batch.isEmpty else { return }
    let results = try store.bulkDocs(batch, actor: "owner")
    if let failure = results.first(where: { $0.error != nil }) {
      fatalError("write failed: \(failure.error!)")
    }
    batch.removeAll(keepingCapacity: true)
  }
  for w in 0..<wikiCount {
    let members: [JSONValue] = w % 100 == 0 ? [.string("alice")] : [.string("bob")]
    batch.append(
      .object(
        JSONObject([
          "_id": .string("w\(w)"), "type": .string("wiki"), "title": .string("Wiki \(w)"),
          "owner_id": .string("owner"), "members": .array(members),
        ])))
  }
  try flush()
  for p in 0..<pageCount {
    for w in 0..<wikiCount {
      batch.append(
        .object(
          JSONObject([
            "_id": .string("w\(w):Page \(p)"), "type": .string("page"),
            "wiki_id": .string("w\(w)"), "markdown": .string("# Page \(p)\nSee [[Page \(p + 1)]]."),
          ])))
      if batch.count == 10_000 { try flush() }
    }
  }
  try flush()
}
try writeAll(store)
let info = try store.info
print(
  "# wrote \(info.docCount) documents in \(String(format: "%.1f", Date().timeIntervalSince(writeStart))) s"
)

let alice = UserContext(name: "alice")
func time(_ body: () throws -> Int) rethrows -> (rows: Int, seconds: Double) {
  let start = ContinuousClock.now
  let rows = try body()
  let elapsed = ContinuousClock.now - start
  return (
    rows, Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
  )
}
var userRuns: [(rows: Int, seconds: Double)] = []
var allRuns: [(rows: Int, seconds: Double)] = []
for _ in 0..<runs {
  userRuns.append(
    try time {
      let view = try WikiAccess().view(for: alice, isMember: false, in: store)
      return try view.changes(ChangesOptions()).results.count
    })
  allRuns.append(try time { try store.changes(ChangesOptions()).results.count })
}
func report(_ name: String, _ list: [(rows: Int, seconds: Double)]) {
  let sorted = list.sorted { $0.seconds < $1.seconds }
  let median = sorted[sorted.count / 2]
  print(
    "\(name) \(median.rows) \(String(format: "%.4f", median.seconds)) \(Int(Double(median.rows) / median.seconds))"
  )
  print(
    "# \(name) runs (ms): "
      + list.map { String(format: "%.1f", $0.seconds * 1000) }.joined(separator: " "))
}
report("user-feed", userRuns)
report("database-feed", allRuns)
data.closeAll()
try? FileManager.default.removeItem(atPath: base)
