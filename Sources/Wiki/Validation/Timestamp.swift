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
    let b = Array(text.utf8)
    var i = 0
    func digits(_ n: Int) -> Int? {
      guard i + n <= b.count else { return nil }
      var v = 0
      for k in i..<(i + n) {
        guard b[k] >= 0x30, b[k] <= 0x39 else { return nil }
        v = v * 10 + Int(b[k] - 0x30)
      }
      i += n
      return v
    }
    func expect(_ chars: String) -> Bool {
      guard i < b.count, chars.utf8.contains(b[i]) else { return false }
      i += 1
      return true
    }
    guard let year = digits(4), expect("-"), let month = digits(2), expect("-"),
      let day = digits(2), expect("Tt "), let hour = digits(2), expect(":"),
      let minute = digits(2), expect(":"), let second = digits(2)
    else { return false }
    guard (1...12).contains(month), hour < 24, minute < 60, second <= 60 else { return false }
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
    let monthDays = [31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]
    guard day >= 1, day <= monthDays[month - 1] else { return false }
    if i < b.count, b[i] == UInt8(ascii: ".") {
      i += 1
      let start = i
      while i < b.count, b[i] >= 0x30, b[i] <= 0x39 { i += 1 }
      guard i > start else { return false }
    }
    if i < b.count, b[i] == UInt8(ascii: "Z") || b[i] == UInt8(ascii: "z") {
      i += 1
    } else {
      guard expect("+-"), let h = digits(2), expect(":"), let m = digits(2), h < 24, m < 60
      else { return false }
    }
    return i == b.count
  }
}
