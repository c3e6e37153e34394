import Foundation
import TestSupport
import Testing

/// The DocC catalogs' runnable examples (`Snippets/`, built by `swift build` as executables):
/// each runs to its end and prints what its comments say.
@Suite struct SnippetTests {
  /// Each snippet and a line its output must hold.
  static let expected: [(String, String)] = [
    ("FormatsExample", "2026-11-28T09:00:00.500Z"),
    ("JSONExample", #"{"title":"Home","tags":["a","b"],"views":4}"#),
    ("RevTreeExample", "3-d"),
    ("LogExample", "2 note.edited bob hello!"),
    ("LogFollowExample", "5 page.edited w1:Soup"),
    ("LogProofsExample", "true 8"),
    ("ProjectionsExample", "hello again"),
    ("QueryExample", #"["n1"]"#),
    ("WikiExample", #"["Stock"]"#),
    ("AuthExample", "false"),
    ("ReplicationExample", "3"),
    ("CouchAPIExample", "GET /notes/n1 200"),
    ("WikiMarkdownExample", "<h1>Soup</h1>"),
    ("WikiAppExample", "200 OK"),
    ("TypedDocumentsExample", #"3- ["food", "quick", "winter"]"#),
  ]

  @Test("every library's example runs and prints what it says", arguments: expected)
  func runs(_ name: String, _ line: String) throws {
    let child = try ChildProcess(ChildProcess.besideTests(name), [])
    #expect(child.waitForExit(timeout: 60), "\(name) did not end")
    #expect(child.process.terminationStatus == 0, "\(name): \(child.lines)")
    #expect(child.lines.contains { $0.contains(line) }, "\(name): \(child.lines)")
  }
}
