import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Logging
import Synchronization
import Testing

/// The lines a logger was given.
final class CapturedLines: Sendable {
  let lines = Mutex<[String]>([])

  var logger: Logger {
    var logger = Logger(label: "captured") { _ in Handler(captured: self) }
    logger.logLevel = .info
    return logger
  }

  struct Handler: LogHandler {
    let captured: CapturedLines
    var logLevel: Logger.Level = .info
    var metadata: Logger.Metadata = [:]
    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
      get { metadata[key] }
      set { metadata[key] = newValue }
    }
    func log(event: LogEvent) {
      captured.lines.withLock { $0.append("\(event.message)") }
    }
  }
}

@Suite struct RequestLogTests {
  @Test("UI requests are in the request log beside the API's, with their status")
  func uiRequestsAreLogged() async throws {
    let fixture = try UIFixture()
    let captured = CapturedLines()
    try await fixture.withServer(logger: captured.logger) { client in
      _ = try await client.execute(uri: "/_wiki/", method: .get)
      _ = try await client.execute(uri: "/_wiki/_signin", method: .get)
      _ = try await client.execute(uri: "/wiki", method: .get)
    }
    let lines = captured.lines.withLock { $0 }
    func logged(_ prefix: String) -> Bool { lines.contains { $0.hasPrefix(prefix) } }
    #expect(logged("GET /_wiki/ 3"), "\(lines)")  // a redirect to sign in
    #expect(logged("GET /_wiki/_signin 200"), "\(lines)")
    #expect(logged("GET /wiki 401"), "\(lines)")
  }
}
