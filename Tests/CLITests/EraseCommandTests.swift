import Foundation
import TestSupport
import Testing

/// `wikilog purge` and `wikilog redact`.
@Suite struct EraseCommandTests {
  /// Whether some file under `path` holds `needle`.
  static func anyFileHolds(_ needle: String, under path: String) -> Bool {
    let fm = FileManager.default
    guard let walker = fm.enumerator(atPath: path) else { return false }
    while let name = walker.nextObject() as? String {
      if let data = fm.contents(atPath: path + "/" + name), data.range(of: Data(needle.utf8)) != nil
      {
        return true
      }
    }
    return false
  }

  @Test("redact an old revision, then purge the document: dry runs first, nothing left behind")
  func redactThenPurge() throws {
    let cli = try CLI()
    let rev1 = try cli.put(#"{"_id":"x","pw":"CLI-SECRET-ONE"}"#)
    let rev2 = try cli.put(#"{"_id":"x","_rev":"\#(rev1)","pw":"CLI-SECRET-TWO"}"#)
    let rev3 = try cli.put(#"{"_id":"x","_rev":"\#(rev2)","pw":"none"}"#)
    let events = try cli.eventCount()

    let plan = try cli.ok(["redact", "x", rev1, rev2, "--reason", "pasted", "--dry-run"])
    #expect(plan.stdout.contains("would redact x: \(rev1) \(rev2)"))
    #expect(try cli.eventCount() == events)
    #expect(Self.anyFileHolds("CLI-SECRET-ONE", under: cli.path))

    let done = try cli.ok(["redact", "x", rev1, rev2, "--reason", "pasted"])
    #expect(done.stdout.contains("redacted x: \(rev1) \(rev2)"))
    #expect(!Self.anyFileHolds("CLI-SECRET-ONE", under: cli.path))
    #expect(!Self.anyFileHolds("CLI-SECRET-TWO", under: cli.path))
    try cli.fails(["get", "x", "--rev", rev1], "redacted")
    // The raw log says which events were erased, and by which.
    let tail = try cli.ok(["log", "tail"]).stdout
    #expect(tail.contains(#""erased_by":"#))
    #expect(!tail.contains("CLI-SECRET-ONE"))
    #expect(try cli.ok(["get", "x"]).object()["pw"] as? String == "none")
    try cli.fails(["redact", "x", rev3, "--reason", "r"], "current revision")
    #expect(
      try cli.ok(["redact", "x", rev1, "--reason", "again"]).stdout.contains("nothing to redact"))

    #expect(try cli.ok(["purge", "x", "1-abc"]).stdout.contains("nothing to purge"))
    try cli.fails(["purge", "x", "bogus"], "Invalid rev format")
    let purged = try cli.ok(["purge", "x", rev3, "--reason", "gone"])
    #expect(purged.stdout.contains("purged x: \(rev3)"))
    try cli.fails(["get", "x"], "not_found")
    #expect(try cli.ok(["verify"]).status == 0)
    let audit = try cli.ok(["audit", "--json"]).array().compactMap { $0 as? [String: Any] }
    let types = audit.compactMap { $0["type"] as? String }
    #expect(types.contains("doc.redact") && types.last == "doc.purge")
    #expect((audit.last?["rev"] as? String) == rev3)
  }

  @Test("proofs taken before a redaction still check; a proof of the erased event says so")
  func proofsSurvive() throws {
    let cli = try CLI()
    let key = try cli.ok(["log", "key"]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    let rev1 = try cli.put(#"{"_id":"p","text":"PROOF-SECRET"}"#)
    try cli.put(#"{"_id":"p","_rev":"\#(rev1)","text":"fine"}"#)
    let position = try cli.eventCount() - 1
    let head = try cli.ok(["log", "head", "--json"]).stdout
    let headFile = cli.path + "/head.json"
    try head.write(toFile: headFile, atomically: true, encoding: .utf8)
    let before = try cli.ok(["log", "prove", String(position), "--head", headFile, "--json"])
    let beforeFile = cli.path + "/before.json"
    try before.stdout.write(toFile: beforeFile, atomically: true, encoding: .utf8)
    let other = try cli.ok(["log", "prove", "1", "--head", headFile, "--json"]).stdout

    try cli.ok(["redact", "p", rev1, "--reason", "proofs"])
    #expect(try cli.ok(["log", "check", headFile, beforeFile, "--key", key]).status == 0)
    try cli.ok(["log", "check", headFile, "-", "--key", key], stdin: other)
    let after = try cli.ok(["log", "prove", String(position), "--head", headFile, "--json"])
    #expect(try after.object()["erased_by"] as? Int == position + 2)
    #expect(!after.stdout.contains("PROOF-SECRET") && !before.stdout.isEmpty)
    let checked = try cli.ok(["log", "check", headFile, "-", "--key", key], stdin: after.stdout)
    #expect(checked.stdout.contains("erased by event \(position + 2)"))
    #expect(try cli.ok(["verify", "--head", headFile]).status == 0)
  }

  @Test("a purge killed at any moment leaves the old state or the new, and a log that verifies")
  func killedPurge() throws {
    for trial in 0..<6 {
      let cli = try CLI()
      var docs = ""
      for i in 0..<2000 { docs += #"{"_id":"d\#(i)","text":"filler \#(i)"},"# }
      try cli.ok(["bulk-docs"], stdin: #"{"docs":[\#(docs){"_id":"x","pw":"KILL-SECRET"}]}"#)
      let rev = try #require(try cli.ok(["get", "x"]).object()["_rev"] as? String)
      let child = try startBackground(cli, ["purge", "x", rev])
      // A different moment each trial: from at once to after the purge is done.
      usleep(useconds_t(trial * 15_000))
      child.kill()
      let after = try cli.run(["get", "x"])
      if after.status == 0 {
        #expect(try after.object()["pw"] as? String == "KILL-SECRET")
      } else {
        #expect(after.stderr.contains("not_found"))
      }
      #expect(try cli.ok(["verify"]).status == 0, "trial \(trial)")
      #expect(try cli.ok(["get", "d1999"]).object()["text"] as? String == "filler 1999")
    }
  }
}
