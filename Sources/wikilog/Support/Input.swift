import ArgumentParser
import Foundation
import Log
import Projections
import RevTree

enum Input {
  /// The text of `argument`, or standard input when it is nil or `-`.
  static func read(_ argument: String? = nil) -> [UInt8] {
    if let argument, argument != "-" { return Array(argument.utf8) }
    return Array(FileHandle.standardInput.readDataToEndOfFile())
  }

  static var stdinIsTerminal: Bool { isatty(STDIN_FILENO) != 0 }

  /// Parses JSON, or fails with a one-line error naming `what` was malformed.
  static func json(_ bytes: [UInt8], what: String) throws -> JSONValue {
    guard !bytes.allSatisfy({ $0 == 0x20 || $0 == 0x0A || $0 == 0x0D || $0 == 0x09 }) else {
      throw CLIError("expected JSON \(what), got nothing")
    }
    do {
      return try JSONValue(parsing: bytes)
    } catch {
      throw CLIError("malformed JSON \(what): \(error)")
    }
  }

  /// Parses a JSON object.
  static func object(_ bytes: [UInt8], what: String) throws -> JSONObject {
    guard let object = try json(bytes, what: what).objectValue else {
      throw CLIError("expected a JSON object \(what)")
    }
    return object
  }
}

/// Times on the command line: ISO-8601 with or without fractions, or a date.
enum Time {
  static func parse(_ text: String) -> Date? { ISO8601.parse(text) }

  static func microseconds(_ date: Date) -> Int64 {
    Int64((date.timeIntervalSince1970 * 1_000_000).rounded(.down))
  }

  /// The current time as TouchWiki writes it in documents: ISO-8601 UTC with milliseconds.
  static func now() -> String {
    ISO8601.format(microseconds: Time.microseconds(Date()), fractionDigits: 3)
  }
}

/// `--since`: 0 (everything), now, a position, or an ISO-8601 time.
enum Since: Equatable {
  case position(UInt64)
  case now
  case time(Date)

  init(_ text: String) throws {
    if text == "now" {
      self = .now
    } else if let n = UInt64(text) {
      self = .position(n)
    } else if let date = Time.parse(text) {
      self = .time(date)
    } else {
      throw ValidationError(
        "--since takes 0, now, a position or an ISO-8601 time like 2026-11-21T09:00:00Z; got '\(text)'"
      )
    }
  }

  /// The position after which events are shown.
  func position(in store: DocumentStore) throws -> UInt64 {
    switch self {
    case .position(let n): return n
    case .now: return try store.log.committedPosition.rawValue
    case .time(let date):
      guard let first = try store.log.firstPosition(atOrAfter: date) else {
        return try store.log.committedPosition.rawValue
      }
      return first.rawValue - 1
    }
  }
}
