import Formats
public import Log
public import Projections

/// What one draft operation records in the log.
///
/// Drafts are TouchWiki's unpublished edits of a page: typing changes nothing, an autosave or an
/// explicit save records the text, a discard or a publish closes the draft. Each of those is one
/// event of its own type, so drafts are auditable like every write, but no document event: the
/// document projection, the changes feed, replication and ``DocumentStore/history(of:)`` never
/// see them.
///
/// | type | when |
/// | --- | --- |
/// | `draft.autosave` | the editor saved the text by itself |
/// | `draft.save` | the user saved the draft |
/// | `draft.discard` | the user threw the draft away |
/// | `draft.publish` | the draft became a page revision, written in the same transaction |
///
/// The actor is the draft's owner; the stream is ``stream(user:page:)``. The payload:
///
/// ```
/// u8 format (1) · u8 kind · u8 flags (bit 0: base present, bit 1: merged)
/// string page id · string base rev · varint base position (0 when none)
/// string published rev ("" unless a publish) · the Markdown as UTF-8 (the rest)
/// ```
///
/// Format 2 is format 1 with `string summary` (the edit summary the user wrote, which a publish
/// writes as the page's `edit_summary`) before the Markdown; an event without a summary is
/// written in format 1, as before summaries existed.
///
/// The base position is the log position of the base revision's body, so the common ancestor
/// of a three-way merge stays readable even after the revision is stemmed out of the tree.
public struct DraftEvent: Sendable, Hashable {
  public enum Kind: UInt8, Sendable {
    case autosave = 1
    case save = 2
    case discard = 3
    case publish = 4

    /// The log event type.
    public var eventType: String {
      switch self {
      case .autosave: "draft.autosave"
      case .save: "draft.save"
      case .discard: "draft.discard"
      case .publish: "draft.publish"
      }
    }

    /// The kind of a log event type, nil for events that are not draft events.
    public init?(eventType: String) {
      switch eventType {
      case "draft.autosave": self = .autosave
      case "draft.save": self = .save
      case "draft.discard": self = .discard
      case "draft.publish": self = .publish
      default: return nil
      }
    }
  }

  public var kind: Kind
  /// The page the draft edits, `<wikiId>:<Page Name>`.
  public var pageID: String
  /// The revision the draft was started from; nil for a draft of a new page.
  public var baseRev: String?
  /// The log position of the base revision's body (0 when there is no base).
  public var basePosition: UInt64
  /// For a publish: the page revision it wrote.
  public var publishedRev: String
  /// For a publish: whether the text was three-way merged with changes made since the base.
  public var merged: Bool
  /// The draft's Markdown (for a publish: the text published).
  public var markdown: String
  /// The edit summary written with the draft ("" when none).
  public var summary: String

  public init(
    kind: Kind, pageID: String, baseRev: String? = nil, basePosition: UInt64 = 0,
    publishedRev: String = "", merged: Bool = false, markdown: String = "", summary: String = ""
  ) {
    self.kind = kind
    self.pageID = pageID
    self.baseRev = baseRev
    self.basePosition = basePosition
    self.publishedRev = publishedRev
    self.merged = merged
    self.markdown = markdown
    self.summary = summary
  }

  static let format: UInt8 = 1
  /// Format 1 with the summary before the Markdown.
  static let formatWithSummary: UInt8 = 2

  /// The stream of one user's draft events for one page. The user's length comes first, so two
  /// (user, page) pairs never share a stream.
  public static func stream(user: String, page: String) -> String {
    "_draft/\(user.utf8.count)/\(user)/\(page)"
  }

  public func encoded() -> [UInt8] {
    var w = ByteWriter(
      capacity: 32 + pageID.utf8.count + summary.utf8.count + markdown.utf8.count)
    w.byte(summary.isEmpty ? Self.format : Self.formatWithSummary)
    w.byte(kind.rawValue)
    w.byte((baseRev == nil ? 0 : 1) | (merged ? 2 : 0))
    w.string(pageID)
    w.string(baseRev ?? "")
    w.varint(basePosition)
    w.string(publishedRev)
    if !summary.isEmpty { w.string(summary) }
    w.raw(markdown.utf8)
    return w.bytes
  }

  /// Decodes a draft event.
  ///
  /// - Throws: ``StoreError`` (500) for an event that is not a well-formed draft event.
  public init(decoding event: RecordedEvent) throws(StoreError) {
    var r = ByteReader(event.payload)
    do {
      let format = try r.byte()
      guard Kind(eventType: event.type) != nil,
        format == Self.format || format == Self.formatWithSummary,
        let kind = Kind(rawValue: try r.byte())
      else { throw ByteReader.Truncated() }
      self.kind = kind
      let flags = try r.byte()
      pageID = try r.string()
      let base = try r.string()
      baseRev = flags & 1 != 0 ? base : nil
      basePosition = try r.varint()
      publishedRev = try r.string()
      merged = flags & 2 != 0
      summary = format == Self.formatWithSummary ? try r.string() : ""
      markdown = String(decoding: r.rest(), as: UTF8.self)
    } catch {
      throw StoreError.internalError("event \(event.position) is not a well-formed draft event")
    }
  }
}
