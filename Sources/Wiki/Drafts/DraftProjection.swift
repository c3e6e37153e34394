import Formats
public import Log
public import Projections

/// One user's open draft of one page, as ``Drafts`` returns it.
///
/// ```swift
/// let d = try Drafts(store).draft(of: "ann", page: "w1:Home")
/// print(d?.baseRev ?? "new page", d?.markdown ?? "")
/// ```
public struct Draft: Sendable, Hashable {
  /// The owner: the actor who saved it.
  public let user: String
  /// The page it edits, `<wikiId>:<Page Name>`.
  public let pageID: String
  /// The revision it was started from; nil for a new page.
  public let baseRev: String?
  /// The text so far.
  public let markdown: String
  /// The edit summary so far ("" when none): what publishing writes as `edit_summary`.
  public let summary: String
  /// When the draft was first saved (since it was last discarded or published), µs since 1970.
  public let createdMicroseconds: Int64
  /// When it was last saved, µs since 1970.
  public let updatedMicroseconds: Int64
  /// Whether the last save was an autosave.
  public let autosaved: Bool
  /// The position of the event of the last save.
  public let seq: LogPosition
  /// Where the base revision's body is in the log (0 for a new page).
  let basePosition: UInt64

  /// The wiki of the page: the part of its id before the first colon.
  public var wikiID: String { WikiID.of(pageID) }

  /// The page title: the part of its id after the first colon.
  public var title: String { WikiID.split(pageID)?.title ?? "" }
}

/// Keeps every open draft, by user and page, from the draft events of the log.
///
/// | database | key | value |
/// | --- | --- | --- |
/// | `drafts.byUser` | user · 0x00 · page id | the draft (see below) |
///
/// ```
/// u8 format (1) · u8 flags (bit 0: base present, bit 1: last save was an autosave)
/// string base rev · varint base position · varint created µs · varint updated µs
/// varint seq · the Markdown (the rest)
/// ```
///
/// Format 2 has `string summary` before the Markdown (a draft with an edit summary).
///
/// A save (or autosave) writes the row, keeping its creation time; a discard or a publish
/// removes it. The projection ignores every other event, so drafts never count as documents.
///
/// ```swift
/// let store = try DocumentStore(directory: path, projections: [WikiProjection(), DraftProjection()])
/// let drafts = try Drafts(store)
/// ```
public final class DraftProjection: AuditedProjection {
  public let name = "drafts"
  public let databaseNames = ["byUser"]

  public init() {}

  static let format: UInt8 = 1
  static let formatWithSummary: UInt8 = 2

  public func apply(_ event: RecordedEvent, to storage: ProjectionStorage, in txn: WriteTransaction)
    throws
  {
    guard DraftEvent.Kind(eventType: event.type) != nil else { return }
    let e = try DraftEvent(decoding: event)
    let key = Self.key(user: event.actor, page: e.pageID)
    guard Self.isValidKey(key) else { return }
    let db = storage["byUser"]
    switch e.kind {
    case .autosave, .save:
      var created = event.timestampMicroseconds
      if let old = try txn.get(key, in: db) {
        created = try Self.decode(old, user: event.actor, page: e.pageID).createdMicroseconds
      }
      var w = ByteWriter(capacity: 48 + e.summary.utf8.count + e.markdown.utf8.count)
      w.byte(e.summary.isEmpty ? Self.format : Self.formatWithSummary)
      w.byte((e.baseRev == nil ? 0 : 1) | (e.kind == .autosave ? 2 : 0))
      w.string(e.baseRev ?? "")
      w.varint(e.basePosition)
      w.varint(UInt64(bitPattern: created))
      w.varint(UInt64(bitPattern: event.timestampMicroseconds))
      w.varint(event.position.rawValue)
      if !e.summary.isEmpty { w.string(e.summary) }
      w.raw(e.markdown.utf8)
      try txn.put(w.bytes, forKey: key, in: db)
    case .discard, .publish:
      try txn.delete(key, in: db)
    }
  }

  /// A draft event is listed by an audit under its page, with the draft's base revision (for
  /// a publish, the revision it wrote).
  public func auditSubject(of event: RecordedEvent) throws -> (docID: String, rev: String)? {
    guard DraftEvent.Kind(eventType: event.type) != nil else { return nil }
    let e = try DraftEvent(decoding: event)
    return (e.pageID, e.kind == .publish ? e.publishedRev : e.baseRev ?? "")
  }

  static func key(user: String, page: String) -> [UInt8] {
    Array(user.utf8) + [0] + Array(page.utf8)
  }

  static func isValidKey(_ key: [UInt8]) -> Bool { key.count <= maxKeyBytes }

  /// LMDB keys stay within this many bytes.
  static let maxKeyBytes = 500

  static func decode(_ bytes: [UInt8], user: String, page: String) throws -> Draft {
    var r = ByteReader(bytes)
    do {
      let version = try r.byte()
      guard version == format || version == formatWithSummary else {
        throw ByteReader.Truncated()
      }
      let flags = try r.byte()
      let base = try r.string()
      let basePosition = try r.varint()
      let created = Int64(bitPattern: try r.varint())
      let updated = Int64(bitPattern: try r.varint())
      let seq = try r.varint()
      let summary = version == formatWithSummary ? try r.string() : ""
      return Draft(
        user: user, pageID: page, baseRev: flags & 1 != 0 ? base : nil,
        markdown: String(decoding: r.rest(), as: UTF8.self), summary: summary,
        createdMicroseconds: created, updatedMicroseconds: updated, autosaved: flags & 2 != 0,
        seq: LogPosition(seq), basePosition: basePosition)
    } catch {
      throw StoreError.internalError("the stored draft of '\(page)' by '\(user)' is corrupt")
    }
  }
}
