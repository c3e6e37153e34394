import Crypto
import Formats

/// An Atom feed (RFC 4287) as text: a `feed` with its `id`, `title`, `updated`, `link
/// rel="self"` and `link rel="alternate"`, and its entries, each with an `id`, `title`,
/// `updated`, `author/name`, `link rel="alternate"` and `content type="html"` (HTML escaped as
/// XML text). Ids are `urn:uuid:` URIs made from what they name, so they never change.
///
/// ```swift
/// var feed = AtomFeed(id: AtomFeed.urn("wiki/w1"), title: "Recent changes in W1", ...)
/// feed.entries.append(AtomFeed.Entry(id: AtomFeed.urn("w1:Home@1-abc"), ...))
/// let xml = feed.xml
/// ```
struct AtomFeed: Sendable {
  struct Entry: Sendable {
    var id: String
    var title: String
    var updatedMicroseconds: Int64
    var author: String
    var link: String
    /// HTML, escaped when written.
    var contentHTML: String
  }

  var id: String
  var title: String
  var updatedMicroseconds: Int64
  /// The feed's own address.
  var selfLink: String
  /// The page the feed follows.
  var alternateLink: String
  var entries: [Entry] = []

  /// The content type of an Atom document.
  static let contentType = "application/atom+xml; charset=utf-8"

  var xml: String {
    var out = #"<?xml version="1.0" encoding="utf-8"?>"# + "\n"
    out += #"<feed xmlns="http://www.w3.org/2005/Atom">"# + "\n"
    out += "  <id>\(Self.escape(id))</id>\n"
    out += "  <title>\(Self.escape(title))</title>\n"
    out += "  <updated>\(Self.date(updatedMicroseconds))</updated>\n"
    out +=
      "  <link rel=\"self\" type=\"application/atom+xml\" href=\"\(Self.escape(selfLink))\"/>\n"
    out += "  <link rel=\"alternate\" type=\"text/html\" href=\"\(Self.escape(alternateLink))\"/>\n"
    out += "  <generator>wikilog</generator>\n"
    for entry in entries {
      out += "  <entry>\n"
      out += "    <id>\(Self.escape(entry.id))</id>\n"
      out += "    <title>\(Self.escape(entry.title))</title>\n"
      out += "    <updated>\(Self.date(entry.updatedMicroseconds))</updated>\n"
      out +=
        "    <author><name>\(Self.escape(entry.author.isEmpty ? "unknown" : entry.author))</name></author>\n"
      out +=
        "    <link rel=\"alternate\" type=\"text/html\" href=\"\(Self.escape(entry.link))\"/>\n"
      out += "    <content type=\"html\">\(Self.escape(entry.contentHTML))</content>\n"
      out += "  </entry>\n"
    }
    out += "</feed>\n"
    return out
  }

  /// A date as RFC 3339 (`2026-12-02T16:20:05Z`).
  static func date(_ micros: Int64) -> String {
    ISO8601.format(microseconds: micros, fractionDigits: 0)
  }

  /// `name` as a stable `urn:uuid:` (RFC 4122's layout, version 8: the first 16 bytes of the
  /// SHA-256 of `name`).
  static func urn(_ name: String) -> String {
    var bytes = Array(SHA256.hash(data: Array(("wikilog-atom:" + name).utf8)).prefix(16))
    bytes[6] = (bytes[6] & 0x0f) | 0x80
    bytes[8] = (bytes[8] & 0x3f) | 0x80
    let hex = Hex.encode(bytes)
    let h = Array(hex)
    func part(_ a: Int, _ b: Int) -> String { String(h[a..<b]) }
    return "urn:uuid:" + part(0, 8) + "-" + part(8, 12) + "-" + part(12, 16) + "-"
      + part(16, 20) + "-" + part(20, 32)
  }

  /// `text` as XML character data or an attribute value; characters XML 1.0 forbids (control
  /// characters but tab, newline and return) are dropped.
  static func escape(_ text: String) -> String {
    var out = ""
    out.reserveCapacity(text.utf8.count)
    for scalar in text.unicodeScalars {
      switch scalar {
      case "&": out += "&amp;"
      case "<": out += "&lt;"
      case ">": out += "&gt;"
      case "\"": out += "&quot;"
      case "'": out += "&apos;"
      case "\t", "\n", "\r": out.unicodeScalars.append(scalar)
      default:
        let v = scalar.value
        if v < 0x20 || v == 0xFFFE || v == 0xFFFF { continue }
        out.unicodeScalars.append(scalar)
      }
    }
    return out
  }
}
