import Formats
import JSON
public import Log
import Projections
import RevTree

/// A wiki as ``WikiProjection`` keeps it: the winning revision of its wiki document, and how
/// many pages it has.
///
/// ``lastUpdate`` is the log position of the last event that changed what the projection shows
/// of the wiki or of one of its pages (a losing conflict changes nothing, so it does not count).
///
/// ```swift
/// let w = try WikiQueries(store).wiki("6f1c...")!
/// print(w.title, w.owner ?? "-", w.members, w.pageCount, w.lastUpdate)
/// ```
public struct WikiSummary: Sendable, Hashable {
  /// The wiki document's id.
  public let id: String
  /// The wiki document's winning revision.
  public let rev: String
  /// `title` ("" when the document has none).
  public let title: String
  /// `owner_id`, nil when missing or not a string.
  public let owner: String?
  /// The string elements of `members`, without duplicates, sorted by their UTF-8 bytes.
  public let members: [String]
  /// The number of live pages (documents `<id>:<title>` of type `page`).
  public let pageCount: Int
  /// The position of the last change to the wiki or any of its pages.
  public let lastUpdate: LogPosition
  /// When that change was committed, in microseconds since 1970.
  public let lastUpdateMicroseconds: Int64
}

/// One live page of a wiki, from the winning revision of its document.
///
/// ```swift
/// for page in try queries.pages(in: wikiID) { print(page.title, page.rev, page.length) }
/// ```
public struct WikiPageInfo: Sendable, Hashable {
  /// The wiki the page belongs to: the part of its id before the first colon.
  public let wikiID: String
  /// The page title: the part of its id after the first colon.
  public let title: String
  /// The winning revision.
  public let rev: String
  /// `updated_by`, nil when missing or not a string.
  public let updatedBy: String?
  /// `updated_at` as written (TouchWiki writes ISO-8601), nil when missing or not a string.
  public let updatedAt: String?
  /// The length of `markdown` in UTF-8 bytes (0 when missing).
  public let length: Int

  /// The page document's id, `<wikiID>:<title>`.
  public var id: String { wikiID + ":" + title }
}

/// Who could edit a wiki from a position of the log on, until the next entry.
///
/// An entry is written whenever the owner or the member set of the wiki's winning revision
/// changes, including when the wiki document disappears (deleted, or no longer of type `wiki`):
/// that entry has no owner and no members.
///
/// ```swift
/// let history = try queries.membershipHistory(of: wikiID)
/// let atSeq = history.last { $0.position <= seq }   // the rules in force at `seq`
/// ```
public struct WikiMembership: Sendable, Hashable {
  /// The event from which this entry holds.
  public let position: LogPosition
  /// When that event was committed, in microseconds since 1970.
  public let timestampMicroseconds: Int64
  /// The owner from then on; nil when none (or the wiki did not exist).
  public let owner: String?
  /// The members from then on, without duplicates, sorted by their UTF-8 bytes.
  public let members: [String]

  /// Whether `user` could edit the wiki under this entry: owner or member.
  public func allows(_ user: String) -> Bool {
    WikiRow.isEditor(user, owner: owner, members: members)
  }
}

// MARK: - Stored rows

/// The fields of a wiki document the projection keeps.
struct WikiDocState: Equatable {
  var rev: String
  var title: String
  var owner: String?
  var members: [String]
}

/// The `wikis` row of one wiki id: its document (when one is live) and its page count.
///
/// ```
/// u8 format (1) · u8 flags (bit 0: document live, bit 1: owner present)
/// string rev · string title · string owner · varint member count · string member × count
/// varint page count · varint last update position · varint last update µs (bit pattern)
/// ```
struct WikiRow: Equatable {
  var doc: WikiDocState?
  var pageCount: Int
  var lastPosition: UInt64
  var lastMicroseconds: Int64

  static let empty = WikiRow(doc: nil, pageCount: 0, lastPosition: 0, lastMicroseconds: 0)
  static let format: UInt8 = 1

  func encoded() -> [UInt8] {
    var w = ByteWriter()
    w.byte(Self.format)
    w.byte((doc == nil ? 0 : 1) | (doc?.owner == nil ? 0 : 2))
    w.string(doc?.rev ?? "")
    w.string(doc?.title ?? "")
    w.string(doc?.owner ?? "")
    w.strings(doc?.members ?? [])
    w.varint(pageCount)
    w.varint(lastPosition)
    w.varint(UInt64(bitPattern: lastMicroseconds))
    return w.bytes
  }

  init(doc: WikiDocState?, pageCount: Int, lastPosition: UInt64, lastMicroseconds: Int64) {
    self.doc = doc
    self.pageCount = pageCount
    self.lastPosition = lastPosition
    self.lastMicroseconds = lastMicroseconds
  }

  init(decoding bytes: [UInt8]) throws {
    var r = ByteReader(bytes)
    guard try r.byte() == Self.format else { throw WikiRowError.corrupt("wiki") }
    let flags = try r.byte()
    let rev = try r.string()
    let title = try r.string()
    let owner = try r.string()
    let members = try r.strings()
    doc =
      flags & 1 != 0
      ? WikiDocState(rev: rev, title: title, owner: flags & 2 != 0 ? owner : nil, members: members)
      : nil
    pageCount = try r.int()
    lastPosition = try r.varint()
    lastMicroseconds = Int64(bitPattern: try r.varint())
  }

  /// `bytes` (an encoded row, or nil for ``empty``) with the page count moved by `delta` and
  /// the last update set, re-encoded without decoding the document part (the page path's
  /// per-write update). Also returns whether the row then holds a document or any page.
  static func updatingSummary(
    _ bytes: [UInt8]?, pageCountDelta delta: Int, position: UInt64, microseconds: Int64
  ) throws -> (bytes: [UInt8], keep: Bool) {
    guard let bytes else {
      var row = WikiRow.empty
      row.pageCount = delta
      row.lastPosition = position
      row.lastMicroseconds = microseconds
      return (row.encoded(), delta != 0)
    }
    var r = ByteReader(bytes)
    guard try r.byte() == Self.format else { throw WikiRowError.corrupt("wiki") }
    let hasDoc = try r.byte() & 1 != 0
    for _ in 0..<3 { _ = try r.data() }  // rev, title, owner
    let members = try r.int()
    guard members <= bytes.count else { throw WikiRowError.corrupt("wiki") }
    for _ in 0..<members { _ = try r.data() }
    let tail = r.offset
    let pageCount = try r.int() + delta
    var w = ByteWriter(capacity: tail + 16)
    w.raw(bytes[..<tail])
    w.varint(pageCount)
    w.varint(position)
    w.varint(UInt64(bitPattern: microseconds))
    return (w.bytes, hasDoc || pageCount != 0)
  }

  func summary(id: String) -> WikiSummary? {
    guard let doc else { return nil }
    return WikiSummary(
      id: id, rev: doc.rev, title: doc.title, owner: doc.owner, members: doc.members,
      pageCount: pageCount, lastUpdate: LogPosition(lastPosition),
      lastUpdateMicroseconds: lastMicroseconds)
  }

  static func isEditor(_ user: String, owner: String?, members: [String]) -> Bool {
    let u = Array(user.utf8)
    return owner.map { Array($0.utf8) == u } == true || members.contains { Array($0.utf8) == u }
  }
}

/// The `pages` row of one live page, with the targets of its links.
///
/// ```
/// u8 format (2) · u8 flags (bit 0: updated_by present, bit 1: updated_at present)
/// string rev · string updated_by · string updated_at · varint length
/// varint count · count × bytes: the link targets, sorted by bytes, distinct
/// ```
struct PageRow: Equatable {
  var rev: String
  var updatedBy: String?
  var updatedAt: String?
  var length: Int

  static let format: UInt8 = 2

  /// The row, followed by `links` (sorted, distinct).
  func encoded(links: [[UInt8]]) -> [UInt8] {
    var w = ByteWriter()
    w.byte(Self.format)
    w.byte((updatedBy == nil ? 0 : 1) | (updatedAt == nil ? 0 : 2))
    w.string(rev)
    w.string(updatedBy ?? "")
    w.string(updatedAt ?? "")
    w.varint(length)
    w.varint(links.count)
    for target in links { w.data(target) }
    return w.bytes
  }

  init(rev: String, updatedBy: String?, updatedAt: String?, length: Int) {
    self.rev = rev
    self.updatedBy = updatedBy
    self.updatedAt = updatedAt
    self.length = length
  }

  init(decoding bytes: [UInt8]) throws {
    var r = ByteReader(bytes)
    let format = try r.byte()
    guard format == Self.format else {
      throw WikiRowError.corrupt("page")
    }
    let flags = try r.byte()
    rev = try r.string()
    let by = try r.string()
    let at = try r.string()
    updatedBy = flags & 1 != 0 ? by : nil
    updatedAt = flags & 2 != 0 ? at : nil
    length = try r.int()
  }

  /// The link targets a row holds. Every page edit reads its old row's links, so the fields
  /// before them are stepped over rather than decoded.
  static func links(in bytes: [UInt8]) throws -> [[UInt8]] {
    var r = ByteReader(bytes)
    guard try r.byte() == format else { throw WikiRowError.corrupt("page") }
    _ = try r.byte()
    for _ in 0..<3 { _ = try r.data() }  // rev, updated_by, updated_at
    _ = try r.int()
    let count = try r.int()
    guard count <= bytes.count else { throw ByteReader.Truncated() }
    var links: [[UInt8]] = []
    links.reserveCapacity(count)
    for _ in 0..<count { links.append(Array(try r.data())) }
    return links
  }

  func info(wikiID: String, title: String) -> WikiPageInfo {
    WikiPageInfo(
      wikiID: wikiID, title: title, rev: rev, updatedBy: updatedBy, updatedAt: updatedAt,
      length: length)
  }
}

/// A `membership` row (its position is in the key).
///
/// ```
/// u8 format (1) · u8 flags (bit 0: owner present) · string owner · varint µs (bit pattern)
/// varint member count · string member × count
/// ```
struct MembershipRow: Equatable {
  var owner: String?
  var members: [String]
  var microseconds: Int64

  static let format: UInt8 = 1

  func encoded() -> [UInt8] {
    var w = ByteWriter()
    w.byte(Self.format)
    w.byte(owner == nil ? 0 : 1)
    w.string(owner ?? "")
    w.varint(UInt64(bitPattern: microseconds))
    w.strings(members)
    return w.bytes
  }

  init(owner: String?, members: [String], microseconds: Int64) {
    self.owner = owner
    self.members = members
    self.microseconds = microseconds
  }

  init(decoding bytes: [UInt8]) throws {
    var r = ByteReader(bytes)
    guard try r.byte() == Self.format else { throw WikiRowError.corrupt("membership") }
    let flags = try r.byte()
    let owner = try r.string()
    self.owner = flags & 1 != 0 ? owner : nil
    microseconds = Int64(bitPattern: try r.varint())
    members = try r.strings()
  }

  /// Same owner and members, byte for byte.
  func sameAccess(owner: String?, members: [String]) -> Bool {
    owner.map { Array($0.utf8) } == self.owner.map { Array($0.utf8) }
      && members.map { Array($0.utf8) } == self.members.map { Array($0.utf8) }
  }
}

enum WikiRowError: Error, CustomStringConvertible {
  case corrupt(String)

  var description: String {
    switch self {
    case .corrupt(let what): "a stored \(what) row of the wiki projection is corrupt"
    }
  }
}

extension ByteWriter {
  mutating func strings(_ list: [String]) {
    varint(list.count)
    for s in list { string(s) }
  }
}

extension ByteReader {
  mutating func strings() throws(Truncated) -> [String] {
    let count = try int()
    guard count <= bytes.count - offset else { throw Truncated() }
    var list: [String] = []
    list.reserveCapacity(count)
    for _ in 0..<count { list.append(try string()) }
    return list
  }
}

/// Sorts strings by their UTF-8 bytes and drops byte-identical duplicates.
func sortedUniqueByBytes(_ list: [String]) -> [String] {
  let sorted = list.map { Array($0.utf8) }.sorted { $0.lexicographicallyPrecedes($1) }
  var out: [String] = []
  var previous: [UInt8]? = nil
  for s in sorted where s != previous {
    out.append(String(decoding: s, as: UTF8.self))
    previous = s
  }
  return out
}
