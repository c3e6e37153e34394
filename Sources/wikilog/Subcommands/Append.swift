import ArgumentParser
import Foundation
import Log

struct Append: ParsableCommand {
  static let configuration = CommandConfiguration(
    abstract: "Append one event; its payload is read from standard input.",
    discussion: """
      Prints the recorded event as JSON.

      Example:
        echo '{"markdown":"# Home"}' | wikilog append --type page.saved --stream 'w1:Home' --actor alice --expect 0
      """)

  @OptionGroup var global: GlobalOptions
  @Option(help: "The event type.") var type: String
  @Option(help: "The stream (a document id, say).") var stream: String = ""
  @Option(help: "Who made the change.") var actor: String = ""
  @Option(help: "Expected stream version: a number, 'none' or 'exists'.") var expect: String?
  @Option(help: "A retried append with the same key is not duplicated.") var idempotencyKey: String?

  func run() throws {
    let expected: ExpectedVersion
    switch expect {
    case nil: expected = .any
    case "none": expected = .noStream
    case "exists": expected = .streamExists
    case let text?:
      guard let v = UInt64(text) else {
        throw ValidationError("--expect takes a number, 'none' or 'exists'")
      }
      expected = .exactly(v)
    }
    let payload = Array(FileHandle.standardInput.readDataToEndOfFile())
    let log = try global.open()
    defer { log.close() }
    do {
      let recorded = try log.append(
        [
          NewEvent(
            type: type, stream: stream, actor: actor, payload: payload, expectedVersion: expected)
        ],
        idempotencyKey: idempotencyKey)
      var out = OutputBuffer()
      EventFormatter.json(recorded[0], into: &out)
      out.flush()
    } catch {
      throw CLIError("\(error)")
    }
  }
}
