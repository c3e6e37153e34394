/// ISO-8601 UTC times (`2026-11-21T09:00:00.123456Z`) from microseconds since 1970, without a
/// formatter: the one spelling of times the log, the wiki and the command line share.
///
/// ```swift
/// ISO8601Time.format(microseconds: 1_700_000_000_123_456)                     // ...20.123456Z
/// ISO8601Time.format(microseconds: 1_700_000_000_123_456, fractionDigits: 3)  // ...20.123Z
/// ```
public enum ISO8601Time {
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
}
