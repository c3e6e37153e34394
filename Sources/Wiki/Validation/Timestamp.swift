import Formats
import Log

#if canImport(FoundationEssentials)
  public import FoundationEssentials
#else
  public import Foundation
#endif

/// ISO-8601 timestamps as TouchWiki writes them (`2024-05-01T10:00:00.123Z`): formatting the
/// current time, and checking a string's shape.
public enum Timestamp {
  /// `date` in UTC with milliseconds, like JavaScript's `Date.prototype.toJSON`.
  public static func iso8601(_ date: Date = Date()) -> String {
    let millis = Int64((date.timeIntervalSince1970 * 1000).rounded(.down))
    return ISO8601.format(microseconds: millis * 1000, fractionDigits: 3)
  }

  /// Whether `text` is an RFC 3339 / ISO-8601 date-time: `YYYY-MM-DDTHH:MM:SS`, an optional
  /// fraction of a second, and `Z` or a `±HH:MM` offset (`t`, `z` and a space for the `T` are
  /// accepted too, as RFC 3339 allows). Field ranges are checked, including the days of
  /// the month; a leap second (`:60`) is accepted.
  static func isISO8601(_ text: String) -> Bool {
    // A date-time with its seconds: a date alone, or hours and minutes alone, are not one.
    let b = Array(text.utf8)
    guard b.count >= 20, b[16] == UInt8(ascii: ":") else { return false }
    return ISO8601.parseMicroseconds(text) != nil
  }
}
