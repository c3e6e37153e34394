import Formats
import Foundation
import JSON
import Log
import Projections
import Query
import Wiki

enum EventFormatter {
  /// `{"seq":1,"time":"2026-11-21T09:00:00.123456Z","type":...,"stream":...,"actor":...,"stream_version":1,"payload":"..."}`
  /// (with `"erased_by"` for an erased event)
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
    if let by = e.erasedBy {
      out.append(#","erased_by":"#)
      out.append(String(by.rawValue))
    }
    if let text = String(validating: e.payload, as: UTF8.self) {
      out.append(#","payload":"#)
      quote(text, into: &out)
    } else {
      out.append(#","payload_base64":""#)
      out.append(Base64.encode(Array(e.payload)))
      out.append(UInt8(ascii: "\""))
    }
    out.append("}\n")
  }

  /// `2026-11-21T09:00:00.123456Z  #12  alice  doc.edit  w1:Home  2-9f1c...  {"markdown":...`
  static func text(_ e: RecordedEvent, into out: inout OutputBuffer) {
    out.append(
      "\(ISO8601.format(microseconds: e.timestampMicroseconds))  #\(e.position)  \(e.actor.isEmpty ? "-" : e.actor)  \(e.type)  \(e.stream.isEmpty ? "-" : e.stream)  \(payload(e))\n"
    )
  }

  /// The longest payload summary in a line of text, in characters.
  static let payloadLimit = 200

  /// An event's payload for people, on one line: what a document or draft event says (the
  /// revision, then the body as compact JSON or the draft's Markdown as a JSON string), a JSON
  /// payload as compact JSON, other text as a JSON string, and anything else as its size and
  /// first bytes in hex.
  static func payload(_ e: RecordedEvent) -> String {
    var text: String
    if let d = try? DocumentEvent(decoding: e) {
      switch d.kind {
      case .revsLimit:
        text = "revs_limit \(d.revsLimit)"
      case .purgedInfosLimit:
        text = "purged_infos_limit \(d.revsLimit)"
      case .purge, .redact:
        text =
          (d.kind == .purge ? "purged " : "redacted ") + String(decoding: d.body, as: UTF8.self)
      case .edit, .replicated, .localPut, .localDelete:
        text = d.rev.isEmpty ? "" : d.rev + "  "
        if !d.origin.isEmpty { text += "(from \(d.origin))  " }
        if d.deleted || d.kind == .localDelete {
          text += "deleted"
        } else {
          text += json(d.body) ?? quoted(d.body)
        }
      }
    } else if let d = try? DraftEvent(decoding: e) {
      text = "base " + (d.baseRev ?? "(new page)")
      switch d.kind {
      case .publish:
        text +=
          " → " + d.publishedRev + (d.merged ? " (merged)" : "") + "  "
          + escape(d.markdown, quoted: true)
      case .discard:
        break
      case .save, .autosave:
        text += "  " + escape(d.markdown, quoted: true)
      }
    } else if e.payload.isEmpty {
      text = "(no payload)"
    } else if let json = json(e.payload) {
      text = json
    } else if String(validating: e.payload, as: UTF8.self) != nil {
      text = quoted(e.payload)
    } else {
      let hex = e.payload.prefix(16).map { ($0 < 0x10 ? "0" : "") + String($0, radix: 16) }
      text = "(\(e.payload.count) bytes: \(hex.joined())\(e.payload.count > 16 ? "…" : ""))"
    }
    // An erased event says so, and by which event (its original payload is gone).
    if let by = e.erasedBy { text = "(erased by #\(by))  " + text }
    if text.count > payloadLimit { text = String(text.prefix(payloadLimit - 1)) + "…" }
    return text
  }

  /// `bytes` as compact JSON, nil when they are not JSON.
  static func json(_ bytes: [UInt8]) -> String? {
    guard let value = try? JSONValue(parsing: bytes) else { return nil }
    return String(decoding: value.serialized(), as: UTF8.self)
  }

  /// `bytes` as a JSON string (invalid UTF-8 replaced).
  static func quoted(_ bytes: [UInt8]) -> String {
    escape(String(decoding: bytes, as: UTF8.self), quoted: true)
  }

  /// `s` escaped as in a JSON string, with its quotes when `quoted`.
  static func escape(_ s: String, quoted: Bool = false) -> String {
    var out = OutputBuffer()
    quote(s, into: &out)
    if quoted { return String(decoding: out.bytes, as: UTF8.self) }
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
