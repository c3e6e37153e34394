#if canImport(FoundationEssentials)
  public import FoundationEssentials
#else
  public import Foundation
#endif

/// ISO-8601 UTC times (`2026-11-21T09:00:00.123456Z`) from microseconds since 1970, without a
/// formatter: the one spelling of times the log, the wiki and the command line share.
///
/// ```swift
/// ISO8601.format(microseconds: 1_700_000_000_123_456)                         // ...20.123456Z
/// ISO8601.format(microseconds: 1_700_000_000_123_456, fractionDigits: 3)  // ...20.123Z
/// ```
public enum ISO8601 {
  /// The time `microseconds` after 1970-01-01T00:00:00Z with `fractionDigits` (0...6) digits
  /// of the second, truncated (3 gives JavaScript's `Date.prototype.toJSON` form).
  public static func format(microseconds: Int64, fractionDigits: Int = 6) -> String {
    let seconds =
      microseconds >= 0 ? microseconds / 1_000_000 : (microseconds - 999_999) / 1_000_000
    let micros = microseconds - seconds * 1_000_000
    let days = seconds >= 0 ? seconds / 86_400 : (seconds - 86_399) / 86_400
    let secondOfDay = seconds - days * 86_400
    let (y, m, d) = civil(fromDays: days)
    var text =
      "\(pad(y, 4))-\(pad(m, 2))-\(pad(d, 2))T\(pad(secondOfDay / 3600, 2)):"
      + "\(pad(secondOfDay / 60 % 60, 2)):\(pad(secondOfDay % 60, 2))"
    let digits = min(max(fractionDigits, 0), 6)
    if digits > 0 { text += "." + pad(micros, 6).prefix(digits) }
    return text + "Z"
  }

  /// Year, month, day of a count of days since 1970-01-01 (proleptic Gregorian; Howard
  /// Hinnant's `civil_from_days`).
  public static func civil(fromDays days: Int64) -> (year: Int64, month: Int64, day: Int64) {
    let z = days + 719_468
    let era = (z >= 0 ? z : z - 146_096) / 146_097
    let doe = z - era * 146_097
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
    let mp = (5 * doy + 2) / 153
    let d = doy - (153 * mp + 2) / 5 + 1
    let m = mp < 10 ? mp + 3 : mp - 9
    return (yoe + era * 400 + (m <= 2 ? 1 : 0), m, d)
  }

  static func pad(_ value: Int64, _ width: Int) -> String {
    let s = String(value)
    return s.count >= width ? s : String(repeating: "0", count: width - s.count) + s
  }

  /// `date` in UTC, with `fractionDigits` digits of the second (none by default:
  /// `2026-11-28T15:06:29Z`, as CouchDB's replicator and scheduler write times).
  public static func format(_ date: Date, fractionDigits: Int = 0) -> String {
    let micros = (date.timeIntervalSince1970 * 1_000_000).rounded(.down)
    return format(microseconds: Int64(micros), fractionDigits: fractionDigits)
  }

  /// The time `text` names: `YYYY-MM-DD`, or a date-time `YYYY-MM-DDTHH:MM[:SS[.fraction]]` with
  /// `Z` or a `±HH:MM` offset (`t`, `z` and a space for the `T` accepted, as RFC 3339 allows);
  /// nil for anything else, or a field out of range.
  public static func parse(_ text: some StringProtocol) -> Date? {
    parseMicroseconds(text).map { Date(timeIntervalSince1970: Double($0) / 1_000_000) }
  }

  /// ``parse(_:)`` as microseconds since 1970.
  public static func parseMicroseconds(_ text: some StringProtocol) -> Int64? {
    let b = Array(text.utf8)
    var i = 0
    func number(_ n: Int) -> Int64? {
      guard i + n <= b.count else { return nil }
      var v: Int64 = 0
      for k in i..<(i + n) {
        guard b[k] >= 0x30, b[k] <= 0x39 else { return nil }
        v = v * 10 + Int64(b[k] - 0x30)
      }
      i += n
      return v
    }
    func expect(_ c: UInt8) -> Bool {
      guard i < b.count, b[i] == c else { return false }
      i += 1
      return true
    }
    guard let year = number(4), expect(0x2D), let month = number(2), expect(0x2D),
      let day = number(2), (1...12).contains(month), day >= 1,
      day <= daysIn(month: month, year: year)
    else { return nil }
    let days = self.days(year: year, month: month, day: day)
    if i == b.count { return days * 86_400_000_000 }
    guard i < b.count, [0x54, 0x74, 0x20].contains(b[i]) else { return nil }
    i += 1
    guard let hour = number(2), hour < 24, expect(0x3A), let minute = number(2), minute < 60
    else { return nil }
    var second: Int64 = 0
    var micros: Int64 = 0
    if expect(0x3A) {
      guard let s = number(2), s <= 60 else { return nil }
      second = s
      if expect(0x2E) {
        var digits = 0
        while i < b.count, b[i] >= 0x30, b[i] <= 0x39 {
          if digits < 6 { micros = micros * 10 + Int64(b[i] - 0x30) }
          digits += 1
          i += 1
        }
        guard digits > 0 else { return nil }
        for _ in digits..<max(digits, 6) { micros *= 10 }
      }
    }
    var offset: Int64 = 0
    if expect(0x5A) || expect(0x7A) {
    } else if i < b.count, b[i] == 0x2B || b[i] == 0x2D {
      let sign: Int64 = b[i] == 0x2D ? -1 : 1
      i += 1
      guard let h = number(2), h < 24, expect(0x3A), let m = number(2), m < 60 else { return nil }
      offset = sign * (h * 60 + m) * 60
    } else {
      return nil
    }
    guard i == b.count else { return nil }
    let seconds = days * 86_400 + hour * 3600 + minute * 60 + second - offset
    return seconds * 1_000_000 + micros
  }

  /// Days from 1970-01-01 to the date (the inverse of ``civil(fromDays:)``).
  public static func days(year: Int64, month: Int64, day: Int64) -> Int64 {
    let y = month <= 2 ? year - 1 : year
    let era = (y >= 0 ? y : y - 399) / 400
    let yoe = y - era * 400
    let mp = month > 2 ? month - 3 : month + 9
    let doy = (153 * mp + 2) / 5 + day - 1
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
    return era * 146_097 + doe - 719_468
  }

  static func daysIn(month: Int64, year: Int64) -> Int64 {
    switch month {
    case 2: year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) ? 29 : 28
    case 4, 6, 9, 11: 30
    default: 31
    }
  }
}
