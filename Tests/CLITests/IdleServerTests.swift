import Foundation
import TestSupport
import Testing

/// `wikilog serve` left alone: once its feeds have ended, nothing in it keeps working.
@Suite struct IdleServerTests {
  /// The CPU time `pid` has used so far, in seconds (`utime` + `stime` of /proc/PID/stat).
  static func cpuSeconds(_ pid: Int32) throws -> Double {
    let stat = try String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8)
    // The command name, in parentheses, may hold spaces: count fields after its end.
    let fields = stat[stat.range(of: ")")!.upperBound...].split(separator: " ")
    let ticks = Double(fields[11])! + Double(fields[12])!
    return ticks / Double(sysconf(Int32(_SC_CLK_TCK)))
  }

  /// The `wikilog` group of the server's statistics.
  static func feedStats(_ base: String) throws -> (waiting: Int, following: Int)? {
    let r = try curl([base + "/_node/_local/_stats/wikilog"])
    guard r.status == 200,
      let object = try JSONSerialization.jsonObject(with: Data(r.body.utf8)) as? [String: Any],
      let waiting = (object["waiting_feeds"] as? [String: Any])?["value"] as? Int,
      let following = (object["feed_followers"] as? [String: Any])?["value"] as? Int
    else { return nil }
    return (waiting, following)
  }

  @Test(
    "an idle server, after feeds of every kind were opened and closed, uses under 1% of a core",
    .timeLimit(.minutes(3)))
  func idleAfterFeeds() async throws {
    let cli = try CLI()
    try cli.put(#"{"_id":"a"}"#)
    let (server, base) = try ChildProcess.serve(cli.path)
    defer { server.kill() }
    // Each kind of feed: ended by the server at its timeout, and left by its client (curl's
    // -m) while a heartbeat or a longer timeout keeps it open.
    let feeds = [
      ("feed=continuous&timeout=500", 10), ("feed=longpoll&timeout=500", 10),
      ("feed=eventsource&timeout=500", 10), ("feed=continuous&heartbeat=200", 1),
      ("feed=eventsource&heartbeat=200", 1), ("feed=longpoll&heartbeat=200&timeout=2000", 1),
      ("feed=longpoll&timeout=2000", 1), ("feed=continuous&since=now&timeout=2000", 1),
    ]
    var clients: [SpawnedProcess] = []
    for (query, seconds) in feeds {
      let process = SpawnedProcess()
      process.executableURL = URL(fileURLWithPath: "/usr/bin/curl")
      process.arguments = ["-s", "-N", "-m", "\(seconds)", base + "/wiki/_changes?" + query]
      process.standardOutput = FileHandle.nullDevice
      try process.run()
      clients.append(process)
    }
    // A write while they wait wakes them.
    #expect(try await eventually(60) { (try Self.feedStats(base)?.waiting ?? 0) > 0 })
    _ = try curl(["-X", "PUT", base + "/wiki/b", "-d", "{}"])
    for client in clients { client.waitUntilExit() }
    // Every feed ended, on the server too: no waiter, no task following a log.
    #expect(
      try await eventually(60) {
        guard let stats = try Self.feedStats(base) else { return false }
        return stats.waiting == 0 && stats.following == 0
      })
    let pid = server.process.processIdentifier
    let before = try Self.cpuSeconds(pid)
    let start = Date()
    try await Task.sleep(for: .seconds(20))
    let used = try Self.cpuSeconds(pid) - before
    let share = used / Date().timeIntervalSince(start)
    #expect(share < 0.01, "\(used) s of CPU in 20 s")
  }
}
