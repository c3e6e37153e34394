import ArgumentParser
import Formats
import Foundation
import JSON
import Log
import Projections
import Query
import RevTree
import Wiki

enum Input {
  /// What a command reads from standard input at most (a document, a `_bulk_docs` body, a
  /// page), as `wikilog serve` limits a request's body: past it the command fails before
  /// parsing anything, instead of holding gigabytes.
  static let defaultLimit = 64 << 20

  /// The text of `argument`, or standard input when it is nil or `-`: at most `limit` bytes
  /// (nil: no limit), else a one-line error.
  static func read(_ argument: String? = nil, limit: Int? = defaultLimit) throws -> [UInt8] {
    if let argument, argument != "-" { return Array(argument.utf8) }
    guard let limit else { return Array(FileHandle.standardInput.readDataToEndOfFile()) }
    // Read straight into one array (appending `Data` chunk by chunk walked them byte by byte).
    do {
      return try FileSystem.readAll(STDIN_FILENO, limit: limit)
    } catch .tooLarge {
      throw CLIError(
        "standard input is larger than \(limit >> 20) MiB, the most a command reads; nothing was written"
      )
    } catch .failed(let reason) {
      throw CLIError("standard input could not be read: \(reason)")
    }
  }

  static var stdinIsTerminal: Bool { isatty(STDIN_FILENO) != 0 }

  /// A page's Markdown from standard input: valid UTF-8 (as JSON strings must be), else a
  /// one-line error (empty input is an empty page; the page's history keeps what it held).
  static func markdown() throws -> String {
    let bytes = try read()
    guard let text = String(validating: bytes, as: UTF8.self) else {
      throw CLIError("the Markdown on standard input is not valid UTF-8; nothing written")
    }
    return text
  }

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
///
/// Times are kept in whole microseconds, as the log stores them: a fraction's digits are read
/// exactly (beyond the sixth they are dropped), so the time `tail` or `history` printed for an
/// event names that event exactly. (A `Date` cannot hold every microsecond of today's times
/// exactly; Foundation's ISO-8601 formatter keeps milliseconds only.)
enum Time {
  /// Whole microseconds since 1970 of an ISO-8601 time or date, nil when `text` is neither.
  static func microseconds(parsing text: String) -> Int64? {
    ISO8601.parseMicroseconds(text)
  }

  /// Whether `text` is a time `microseconds(parsing:)` reads.
  static func isValid(_ text: String) -> Bool { microseconds(parsing: text) != nil }

  /// A `Date` for APIs that take one as an inclusive lower bound and round it up to a whole
  /// microsecond: half a microsecond below `micros`, so that it rounds to exactly `micros`.
  static func lowerBound(_ micros: Int64) -> Date {
    Date(timeIntervalSince1970: (Double(micros) - 0.5) / 1_000_000)
  }

  /// A `Date` for APIs that take one as an inclusive upper bound and round it down to a whole
  /// microsecond: half a microsecond above `micros`.
  static func upperBound(_ micros: Int64) -> Date {
    Date(timeIntervalSince1970: (Double(micros) + 0.5) / 1_000_000)
  }

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
  /// Microseconds since 1970: events committed at or after it.
  case time(Int64)

  init(_ text: String) throws {
    if text == "now" {
      self = .now
    } else if let n = UInt64(text) {
      self = .position(n)
    } else if let micros = Time.microseconds(parsing: text) {
      self = .time(micros)
    } else {
      throw ValidationError(
        "--since takes 0, now, a position or an ISO-8601 time like 2026-11-21T09:00:00Z; got '\(text)'"
      )
    }
  }

  /// The position after which events are shown.
  func position(in log: EventLog) throws -> UInt64 {
    switch self {
    case .position(let n): return n
    case .now: return try log.committedPosition.rawValue
    case .time(let micros):
      let first = try log.read { try $0.firstPosition(atOrAfterMicroseconds: micros) }
      guard let first else { return try log.committedPosition.rawValue }
      return first.rawValue - 1
    }
  }
}
