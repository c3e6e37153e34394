import Foundation
import TestSupport
import Testing

/// A client with Nagle's algorithm on that sends a request's head and body in two writes
/// (Erlang's ibrowse, which CouchDB's replicator uses) holds the body until the head is
/// acknowledged. Were the server's kernel to delay that ACK (40 ms on Linux), every such
/// request would take 40 ms; `wikilog serve` acknowledges at once instead. (The server runs as
/// a process of its own: in the test process, other suites' servers share its event loops, and
/// a read they hold up past 40 ms lets the delayed ACK go first.)
@Suite struct SplitBodyTests {
  @Test("a body sent apart from its head by a client with Nagle on is not held 40 ms")
  func splitBodyIsAcknowledgedAtOnce() throws {
    let cli = try CLI()
    let (server, base) = try ChildProcess.serve(cli.path)
    defer { server.kill() }
    #expect(try curl(["-X", "PUT", base + "/db"]).status == 201)
    let port = try #require(base.split(separator: ":").last.flatMap { Int($0) })
    // The fastest of 40 requests: a delayed ACK holds every one at least 40 ms (Linux's
    // TCP_DELACK_MIN), however idle the machine; a loaded one slows some requests, not all.
    // The first ten leave the quick-ACK mode a new connection starts in.
    let times = try NagleClient.requestTimes(port: port, count: 50).dropFirst(10)
    #expect(times.min()! < .milliseconds(20), "\(times)")
  }
}
