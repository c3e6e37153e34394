import Foundation
import Log

enum EventFormatter {
  /// `{"seq":1,"time":"2026-11-21T09:00:00.123456Z","type":...,"stream":...,"actor":...,"stream_version":1,"payload":"..."}`
  static func json(_ e: RecordedEvent, into out: inout OutputBuffer) {
    out.append(#"{"seq":"#)
    out.append(String(e.position.rawValue))
    out.append(#","time":""#)
    out.append(ISO8601.format(microseconds: e.timestampMicroseconds))
    out.append(#"","type":"#)
    quote(e.type, into: &out)
    out.append(#","stream":"#)
    quote(e.stream, into: &out)
    out.append(#","stream_version":"#)
    out.append(String(e.streamVersion))
    out.append(#","actor":"#)
    quote(e.actor, into: &out)
    if let text = String(validating: e.payload, as: UTF8.self) {
      out.append(#","payload":"#)
      quote(text, into: &out)
    } else {
      out.append(#","payload_base64":""#)
      out.append(Data(e.payload).base64EncodedString())
      out.append(UInt8(ascii: "\""))
    }
    out.append("}\n")
  }

  /// `2026-11-21T09:00:00.123456Z  #12  alice  page.saved  w1:Home  {"markdown":...`
  static func text(_ e: RecordedEvent, into out: inout OutputBuffer) {
    let summary = String(decoding: e.payload.prefix(80), as: UTF8.self).replacingOccurrences(
      of: "\n", with: "⏎")
    out.append(
      "\(ISO8601.format(microseconds: e.timestampMicroseconds))  #\(e.position)  \(e.actor.isEmpty ? "-" : e.actor)  \(e.type)  \(e.stream.isEmpty ? "-" : e.stream)  \(summary)\n"
    )
  }

  static func escape(_ s: String) -> String {
    var out = OutputBuffer()
    quote(s, into: &out)
    return String(decoding: out.bytes.dropFirst().dropLast(), as: UTF8.self)
  }

  static func quote(_ s: String, into out: inout OutputBuffer) {
    out.append(UInt8(ascii: "\""))
    var s = s
    s.withUTF8 { utf8 in
      // Copy runs that need no escaping in one go; most strings are one run.
      var runStart = 0
      for i in utf8.indices {
        let b = unsafe utf8[i]
        guard b < 0x20 || b == UInt8(ascii: "\"") || b == UInt8(ascii: "\\") else { continue }
        if runStart < i {
          unsafe out.bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[runStart..<i]))
        }
        runStart = i + 1
        switch b {
        case UInt8(ascii: "\""): out.append("\\\"")
        case UInt8(ascii: "\\"): out.append("\\\\")
        case 0x0A: out.append("\\n")
        case 0x0D: out.append("\\r")
        case 0x09: out.append("\\t")
        default:
          let hex = Array("0123456789abcdef".utf8)
          out.append("\\u00")
          out.append(hex[Int(b >> 4)])
          out.append(hex[Int(b & 0xF)])
        }
      }
      if runStart < utf8.count {
        unsafe out.bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[runStart...]))
      }
    }
    out.append(UInt8(ascii: "\""))
  }

}

/// ISO-8601 UTC times with microseconds, without a formatter per call.
enum ISO8601 {
  /// `2026-11-21T09:00:00.123456Z`, or with fewer digits of the fraction (3 gives JavaScript's
  /// `Date.toJSON` form that TouchWiki writes).
  static func format(microseconds: Int64, fractionDigits: Int = 6) -> String {
    let seconds =
      microseconds >= 0 ? microseconds / 1_000_000 : (microseconds - 999_999) / 1_000_000
    let micros = Int(microseconds - seconds * 1_000_000)
    var days = Int(seconds >= 0 ? seconds / 86_400 : (seconds - 86_399) / 86_400)
    let secOfDay = Int(seconds - Int64(days) * 86_400)
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    days += 719_468
    let era = (days >= 0 ? days : days - 146_096) / 146_097
    let doe = days - era * 146_097
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
    let mp = (5 * doy + 2) / 153
    let d = doy - (153 * mp + 2) / 5 + 1
    let m = mp < 10 ? mp + 3 : mp - 9
    let y = yoe + era * 400 + (m <= 2 ? 1 : 0)
    func pad(_ v: Int, _ width: Int) -> String {
      let s = String(v)
      return s.count >= width ? s : String(repeating: "0", count: width - s.count) + s
    }
    return
      "\(pad(y, 4))-\(pad(m, 2))-\(pad(d, 2))T\(pad(secOfDay / 3600, 2)):\(pad(secOfDay / 60 % 60, 2)):\(pad(secOfDay % 60, 2)).\(pad(micros, 6).prefix(fractionDigits))Z"
  }

  static func parse(_ text: String) -> Date? {
    let withFraction = ISO8601DateFormatter()
    withFraction.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
    if let d = withFraction.date(from: text) { return d }
    let plain = ISO8601DateFormatter()
    plain.formatOptions = [.withInternetDateTime]
    if let d = plain.date(from: text) { return d }
    let day = ISO8601DateFormatter()
    day.formatOptions = [.withFullDate]
    return day.date(from: text)
  }
}
