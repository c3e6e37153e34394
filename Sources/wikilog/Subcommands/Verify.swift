import ArgumentParser
import Foundation
import Log

struct Verify: ParsableCommand {
  static let configuration = CommandConfiguration(
    abstract: "Check the log: dense positions, checksums, ordered times, stream index.",
    discussion:
      "Exits non-zero when a problem is found.\n\nExample:\n  wikilog verify --db /var/lib/wikilog")

  @OptionGroup var global: GlobalOptions

  func run() throws {
    let log = try global.open(readOnly: true)
    defer { log.close() }
    let report = try log.verify()
    print(report)
    if !report.isValid { throw ExitCode.failure }
  }
}

struct Stats: ParsableCommand {
  static let configuration = CommandConfiguration(
    abstract: "Show the log's size and positions.",
    discussion: "Example:\n  wikilog stats --json")

  @OptionGroup var global: GlobalOptions
  @Flag(help: "Print JSON.") var json = false

  func run() throws {
    let log = try global.open(readOnly: true)
    defer { log.close() }
    let committed = try log.committedPosition
    let size =
      (try? FileManager.default.attributesOfItem(atPath: log.path + "/data.mdb")[.size] as? Int)
      ?? 0
    if json {
      print(
        #"{"path":"\#(EventFormatter.escape(log.path))","events":\#(committed),"committed_position":\#(committed),"durable_position":\#(log.durablePosition),"size_bytes":\#(size)}"#
      )
    } else {
      print("path               \(log.path)")
      print("events             \(committed)")
      print("committed position \(committed)")
      print("durable position   \(log.durablePosition)")
      print("size on disk       \(size) bytes")
    }
  }
}
