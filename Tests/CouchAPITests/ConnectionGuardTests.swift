import CouchAPI
import CouchQuery
import CouchTestSupport
import Foundation
import Hummingbird
import HummingbirdCore
import HummingbirdTesting
import JSON
import NIOCore
import NIOPosix
import Replication
import Testing

/// The connection guard of `wikilog serve` (`HTTPServerBuilder.couchHTTP1`): requests the HTTP
/// parser refuses get CouchDB's `{"error","reason"}` body, stalled heads are cut off, and
/// connections beyond the limit are refused.
@Suite struct ConnectionGuardTests {
  /// Runs `body` with the port of a live server with `limits`. The server is run directly,
  /// not by HummingbirdTesting, whose client holds an idle connection open that a short
  /// header time-out would cut (its shutdown then fails).
  func withGuardedServer(
    _ limits: ConnectionLimits, name: String = #function,
    _ body: @Sendable (Int) async throws -> Void
  ) async throws {
    let dir = TestDirectory(name)
    let (ports, continuation) = AsyncStream.makeStream(of: Int.self)
    let app = buildApplication(
      dataDirectory: dir.data, options: .standard, server: .couchHTTP1(limits: limits),
      configuration: ApplicationConfiguration(address: .hostname("127.0.0.1", port: 0)),
      logger: quietLogger,
      onServerRunning: { port in
        if let port { continuation.yield(port) }
        continuation.finish()
      })
    try await withThrowingTaskGroup(of: Void.self) { group in
      group.addTask {
        // A server that fails before it runs ends the stream too (and its error is thrown
        // below).
        defer { continuation.finish() }
        try await app.runService()
      }
      var iterator = ports.makeAsyncIterator()
      guard let port = await iterator.next() else {
        try await group.next()
        Issue.record("the server stopped before it was running")
        return
      }
      try await body(port)
      group.cancelAll()
    }
  }

  /// Malformed requests by name (the names keep the test's output short), with words the
  /// reason must contain.
  static let malformed: [String: (request: String, words: String)] = [
    "header without colon": ("GET / HTTP/1.1\r\nHost x\r\n\r\n", "header line"),
    "length and chunked": (
      "POST /db HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
      "Content-Length"
    ),
    "bad length": ("GET / HTTP/1.1\r\nHost: x\r\nContent-Length: ten\r\n\r\n", "Content-Length"),
    "100 KB URL": (
      "GET /" + String(repeating: "a", count: 100_000) + " HTTP/1.1\r\n\r\n", "too large"
    ),
    "10,000 headers": (
      "GET / HTTP/1.1\r\n" + (0..<10_000).map { "X-\($0): 1\r\n" }.joined() + "\r\n",
      "too large or too many"
    ),
  ]

  /// Requests whose body stops short, then the client ends its side of the connection.
  static let truncated: [String: String] = [
    "Content-Length larger than the body": "PUT /db/doc HTTP/1.1\r\nHost: x\r\n"
      + "Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"v\":\"chunked\"}",
    "chunk larger than its data": "PUT /db/doc HTTP/1.1\r\nHost: x\r\n"
      + "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
      + "100\r\n{\"v\":\"chunked\"}",
    "no last chunk": "PUT /db/doc HTTP/1.1\r\nHost: x\r\n"
      + "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
      + "f\r\n{\"v\":\"chunked\"}\r\n",
    "_bulk_docs cut short": "POST /db/_bulk_docs HTTP/1.1\r\nHost: x\r\n"
      + "Content-Type: application/json\r\nContent-Length: 500\r\n\r\n"
      + "{\"docs\":[{\"_id\":\"doc\"}]}",
  ]

  @Test(
    "a request whose body never fully arrived writes nothing", arguments: truncated.keys.sorted())
  func truncatedBodyWritesNothing(_ name: String) async throws {
    try await withGuardedServer(ConnectionLimits()) { port in
      func get(_ path: String) async throws -> (status: String, body: JSONValue?) {
        let answer = try await RawConnection.exchange(
          port: port, Array("GET \(path) HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".utf8))
        let parts = answer.components(separatedBy: "\r\n\r\n")
        return (
          String(parts[0].prefix(12)), try? JSONValue(parsing: parts.dropFirst().joined())
        )
      }
      let created = try await RawConnection.exchange(
        port: port, Array("PUT /db HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".utf8))
      #expect(created.hasPrefix("HTTP/1.1 201"), "\(created.prefix(200))")
      let before = try await get("/db")
      let seq = try #require(before.body?["update_seq"])
      let answer = try await RawConnection.exchange(
        port: port, Array(Self.truncated[name]!.utf8), halfClose: true)
      #expect(answer.hasPrefix("HTTP/1.1 400"), "\(answer.prefix(300))")
      #expect(answer.contains("ended in the middle"), "\(answer.prefix(300))")
      // Only one answer: the application's own never follows the guard's.
      #expect(answer.components(separatedBy: "HTTP/1.1 ").count == 2, "\(answer)")
      #expect(try await get("/db/doc").status == "HTTP/1.1 404")
      #expect(try await get("/db").body?["update_seq"] == seq)
      // The server goes on serving.
      let whole = try await RawConnection.exchange(
        port: port,
        Array(
          ("PUT /db/doc HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            + "Content-Length: 15\r\nConnection: close\r\n\r\n{\"v\":\"chunked\"}").utf8))
      #expect(whole.hasPrefix("HTTP/1.1 201"), "\(whole.prefix(300))")
    }
  }

  @Test(arguments: malformed.keys.sorted())
  func parserErrorsGetCouchDBBodies(_ name: String) async throws {
    let (request, words) = Self.malformed[name]!
    try await withGuardedServer(ConnectionLimits()) { port in
      let answer = try await RawConnection.exchange(port: port, Array(request.utf8))
      #expect(answer.hasPrefix("HTTP/1.1 400 Bad Request\r\n"), "\(answer.prefix(200))")
      #expect(answer.contains("Content-Type: application/json"))
      let body = answer.components(separatedBy: "\r\n\r\n").dropFirst().joined()
      let json = try JSONValue(parsing: body)
      #expect(json["error"]?.stringValue == "bad_request")
      #expect(json["reason"]?.stringValue?.contains(words) == true, "\(body)")
    }
  }

  @Test(arguments: ["get", "FOO", "Post"])
  func unknownMethodsAre405(method: String) async throws {
    try await withGuardedServer(ConnectionLimits()) { port in
      let answer = try await RawConnection.exchange(
        port: port, Array("\(method) / HTTP/1.1\r\nHost: x\r\n\r\n".utf8))
      #expect(answer.hasPrefix("HTTP/1.1 405 Method Not Allowed\r\n"), "\(answer.prefix(200))")
      #expect(answer.contains(#""error":"method_not_allowed""#))
    }
  }

  @Test func aStalledHeadIsCutOff() async throws {
    try await withGuardedServer(ConnectionLimits(headerTimeout: .seconds(2))) { port in
      let start = ContinuousClock.now
      let answer = try await RawConnection.exchange(
        port: port, Array("GET / HTTP/1.1\r\nHo".utf8), wait: .seconds(30))
      let elapsed = ContinuousClock.now - start
      #expect(answer.isEmpty)
      #expect(elapsed < .seconds(20), "closed after \(elapsed)")
      // A complete request on a fresh connection is still served.
      let served = try await RawConnection.exchange(
        port: port, Array("GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".utf8))
      #expect(served.hasPrefix("HTTP/1.1 200 OK"))
    }
  }

  @Test("Expect: 100-continue gets a 100 Continue before the answer")
  func expectContinue() async throws {
    try await withGuardedServer(ConnectionLimits()) { port in
      let created = try await RawConnection.exchange(
        port: port, Array("PUT /db HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".utf8))
      #expect(created.hasPrefix("HTTP/1.1 201"), "\(created.prefix(200))")
      let body = #"{"x":1}"#
      let answer = try await RawConnection.exchange(
        port: port,
        Array(
          ("PUT /db/d HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            + "Expect: 100-continue\r\nContent-Length: \(body.utf8.count)\r\n"
            + "Connection: close\r\n\r\n\(body)").utf8))
      #expect(
        answer.hasPrefix("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\n"),
        "\(answer.prefix(300))")
      // Without the header, no interim answer.
      let plain = try await RawConnection.exchange(
        port: port,
        Array(
          ("PUT /db/e HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            + "Content-Length: \(body.utf8.count)\r\nConnection: close\r\n\r\n\(body)").utf8))
      #expect(plain.hasPrefix("HTTP/1.1 201 Created\r\n"), "\(plain.prefix(300))")
    }
  }

  @Test func connectionsBeyondTheLimitAreRefused() async throws {
    try await withGuardedServer(ConnectionLimits(maxConnections: 2)) { port in
      let held = try await [RawConnection.open(port: port), RawConnection.open(port: port)]
      try await Task.sleep(for: .milliseconds(200))
      let answer = try await RawConnection.exchange(
        port: port, Array("GET / HTTP/1.1\r\nHost: x\r\n\r\n".utf8))
      #expect(answer.hasPrefix("HTTP/1.1 503"), "\(answer.prefix(200))")
      #expect(answer.contains(#""error":"service_unavailable""#))
      for channel in held { try await channel.close() }
      try await Task.sleep(for: .milliseconds(200))
      let served = try await RawConnection.exchange(
        port: port, Array("GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".utf8))
      #expect(served.hasPrefix("HTTP/1.1 200 OK"), "\(served.prefix(200))")
    }
  }
}

/// A TCP connection that sends raw bytes and collects whatever comes back until the server
/// closes it (or `wait` passes).
enum RawConnection {
  static func open(port: Int) async throws -> any Channel {
    try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
      .connect(host: "127.0.0.1", port: port).get()
  }

  /// Sends `bytes` on a new connection (then, with `halfClose`, ends the client's side, as a
  /// client that stops in the middle of a request does) and returns what came back until the
  /// server closed the connection, or `wait` passed.
  static func exchange(
    port: Int, _ bytes: [UInt8], halfClose: Bool = false, wait: Duration = .seconds(10)
  ) async throws -> String {
    let collector = Collector()
    let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
      .channelInitializer { channel in
        channel.eventLoop.makeCompletedFuture {
          try channel.pipeline.syncOperations.addHandler(collector)
        }
      }
      .connect(host: "127.0.0.1", port: port).get()
    // The server may have closed the connection already (a time-out): what came back counts.
    try? await channel.writeAndFlush(ByteBuffer(bytes: bytes))
    if halfClose { try? await channel.close(mode: .output) }
    let deadline = ContinuousClock.now + wait
    while channel.isActive, ContinuousClock.now < deadline {
      try await Task.sleep(for: .milliseconds(20))
    }
    try? await channel.close()
    return collector.text
  }

  final class Collector: ChannelInboundHandler, @unchecked Sendable {
    typealias InboundIn = ByteBuffer
    private let lock = NSLock()
    private var bytes: [UInt8] = []

    var text: String { lock.withLock { String(decoding: bytes, as: UTF8.self) } }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
      var buffer = unwrapInboundIn(data)
      let read = buffer.readBytes(length: buffer.readableBytes) ?? []
      lock.withLock { bytes += read }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
      context.close(promise: nil)
    }
  }
}
