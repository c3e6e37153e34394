import ArgumentParser
import Foundation
import Log

struct Demo: ParsableCommand {
  static let configuration = CommandConfiguration(
    abstract: "Create a demo log (a small wiki's edits) if the log is empty.",
    discussion:
      "Example:\n  wikilog demo --db /tmp/demo && wikilog tail --db /tmp/demo --format text")

  @OptionGroup var global: GlobalOptions

  func run() throws {
    let log = try global.open()
    defer { log.close() }
    if try log.committedPosition > .start {
      FileHandle.standardError.write(
        Data("wikilog: \(log.path) already has events; left as it is\n".utf8))
      return
    }
    let wiki = "demo-wiki"
    func json(_ object: [String: Any]) -> [UInt8] {
      Array((try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])) ?? Data())
    }
    var events = [
      NewEvent(
        type: "wiki.created", stream: wiki, actor: "alice",
        payload: json(["title": "Demo Wiki", "owner_id": "alice", "members": ["bob"]]),
        expectedVersion: .noStream),
      NewEvent(
        type: "page.saved", stream: "\(wiki):Home", actor: "alice",
        payload: json(["markdown": "# Home\nSee [[Getting Started]] and [[Ideas]]."])),
      NewEvent(
        type: "page.saved", stream: "\(wiki):Getting Started", actor: "bob",
        payload: json(["markdown": "# Getting Started\nBack to [[Home]]."])),
      NewEvent(
        type: "page.saved", stream: "\(wiki):Ideas", actor: "alice",
        payload: json(["markdown": "# Ideas\n- an event log\n"])),
    ]
    events.append(
      NewEvent(
        type: "page.saved", stream: "\(wiki):Ideas", actor: "bob",
        payload: json(["markdown": "# Ideas\n- an event log\n- replication\n"]),
        expectedVersion: .exactly(1)))
    let recorded = try log.append(events, idempotencyKey: "wikilog-demo-seed")
    print("created \(recorded.count) demo events in \(log.path)")
  }
}
