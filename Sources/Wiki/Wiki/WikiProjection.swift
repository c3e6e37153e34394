public import JSON
public import Log
public import Projections
public import RevTree

/// TouchWiki's wikis, pages, links and membership, kept from the winning revision of every
/// wiki and page document.
///
/// A *wiki* is a document of type `"wiki"` whose id has no colon; a *page* is a document of type
/// `"page"` whose id is `<wikiId>:<Page Name>` — the wiki is the part before the first colon, the
/// title the rest (the `wiki_id` field is not consulted). Only the winning revision counts: a
/// replicated revision that loses a conflict changes nothing, and a wiki or page whose winner is
/// deleted (or is no longer of its type) disappears. Ids holding a NUL byte, pages with an empty
/// wiki or title, and wiki ids longer than 491 UTF-8 bytes are ignored.
///
/// ## Databases
/// Keys are UTF-8; `·` is a 0x00 byte, which no key part contains, so prefixes never collide.
///
/// | database | key | value |
/// | --- | --- | --- |
/// | `wiki.wikis` | wiki id | `WikiRow`: the live wiki document's title, owner, members and rev, page count, last update |
/// | `wiki.pages` | wiki · title | `PageRow`: rev, `updated_by`, `updated_at`, Markdown length, and the page's link targets, sorted |
/// | `wiki.backlinks` | wiki · to title · from title | empty |
/// | `wiki.membership` | wiki · position (8 bytes, big-endian) | `MembershipRow`: owner and members from then on |
///
/// A `wikis` row also exists, without a document, while a wiki has pages but no live wiki
/// document; the queries do not list it. Links to pages that do not exist are kept, so a page
/// created later has its backlinks at once. A link whose `backlinks` key would pass 500 bytes
/// is dropped.
///
/// ## The winner comes from the documents projection
/// What the projection keeps depends on the winning revision after each event, which is the
/// documents projection's business: every document edit reaches this projection with
/// ``AppendFacts`` (the document's tree after the event, and whether its winner changed), and
/// an edit that leaves the winner as it was changes nothing here. The store applies the two
/// together — in the append transaction and in ``DocumentStore/rebuildAll()`` — and when it
/// replays this projection alone (``DocumentStore/rebuild(_:)``, ``DocumentStore/verify(_:maxDifferences:)``,
/// or catching up after being added to an existing store) it replays the documents projection
/// alongside into scratch databases, so the trees are those of each event's moment, never
/// `docs.byId` as it is now. Bodies of older winners are read from the log, which never
/// changes. (Earlier versions kept a copy of every tree in `wiki.trees`, and the revs_limit
/// history in `wiki.revsLimits`, for this; opening a store removes them.)
///
/// ```swift
/// let store = try DocumentStore(directory: path, projections: [WikiProjection()])
/// try store.put(#"{"_id":"w1","type":"wiki","title":"Recipes","owner_id":"ann","members":["bob"]}"#, actor: "ann")
/// try store.put(#"{"_id":"w1:Home","type":"page","markdown":"See [[Soup]]"}"#, actor: "ann")
/// let wiki = try WikiQueries(store)
/// try wiki.pages(in: "w1").map(\.title)          // ["Home"]
/// try wiki.backlinks(to: "Soup", in: "w1")      // ["Home"]
/// try wiki.canEdit("bob", wiki: "w1")           // true
/// ```
public final class WikiProjection: DocumentChangeProjection, RetiredLayouts {
  public let name = "wiki"
  public let databaseNames = ["wikis", "pages", "backlinks", "membership"]

  /// Databases that earlier layouts of the projection kept (`wiki.links`: each page's link
  /// targets, which are in its `pages` row now): a store that has one is refused.
  public var retiredDatabaseNames: [String] { ["wiki.trees", "wiki.revsLimits", "wiki.links"] }

  /// LMDB keys of the projection stay within this many bytes.
  static let maxKeyBytes = 500
  /// A wiki id leaves room for a 0x00 byte and a position in a `membership` key.
  static let maxWikiIDBytes = maxKeyBytes - 9

  public init() {}

  /// The projection takes each edit as a ``DocumentChange`` from the documents projection, so
  /// it is applied by a ``DocumentStore`` and not on its own: this entry throws for document
  /// edits and ignores every other event.
  public func apply(_ event: RecordedEvent, to storage: ProjectionStorage, in txn: WriteTransaction)
    throws
  {
    try Self.refuseDocumentEdit(event, projection: name)
  }

  /// What a ``DocumentChangeProjection`` of this module does with an event handed to it
  /// outside a ``DocumentStore``: a document edit needs the tree the documents projection
  /// merged, so it throws; every other event is not its business.
  static func refuseDocumentEdit(_ event: RecordedEvent, projection: String) throws {
    guard let kind = DocumentEvent.Kind(eventType: event.type),
      kind == .edit || kind == .replicated
    else { return }
    throw StoreError.internalError(
      "the \(projection) projection takes each edit's revision tree from the documents "
        + "projection; apply it through a DocumentStore")
  }

  /// Works out the projection's share of a revision ahead of the writer (``Prepared``).
  public func prepare(_ docID: String, rev: RevID, body: JSONValue?) -> Prepared? {
    Self.prepare(docID, rev: rev, body: body)
  }

  public func apply(
    _ change: DocumentChange, share: Prepared?, to storage: ProjectionStorage,
    in txn: WriteTransaction
  ) throws {
    // A revision that loses a conflict leaves the rows as they were.
    guard change.winnerChanged else { return }
    try applyDocument(change, share: share, storage, txn)
  }

  // MARK: Documents

  /// What a document id can be, by its shape.
  enum Target: Sendable {
    case wiki(String)
    case page(wiki: String, title: String)

    init?(_ id: String) {
      // Longer ids are ordinary documents here (TouchWiki validation refuses them as wikis
      // and pages): a page's `pages` key is as long as its id.
      guard !id.utf8.contains(0), id.utf8.count <= WikiProjection.maxKeyBytes else { return nil }
      if let (wiki, title) = WikiID.split(id) {
        guard !wiki.isEmpty, !title.isEmpty, wiki.utf8.count <= WikiProjection.maxWikiIDBytes
        else { return nil }
        self = .page(wiki: wiki, title: title)
      } else {
        guard id.utf8.count <= WikiProjection.maxWikiIDBytes else { return nil }
        self = .wiki(id)
      }
    }

    var type: String {
      switch self {
      case .wiki: "wiki"
      case .page: "page"
      }
    }
  }

  /// What one revision of a wiki or page document makes of the projection's row when it is the
  /// winner: everything that needs only the revision's id and body, not the store.
  ///
  /// The write path works it out on its helper thread, and ``DocumentStore/rebuildAll()`` on
  /// its decoder thread, for the revision each event adds (``prepare(_:rev:body:)``); the writer
  /// then uses it when that revision wins (the `share` of ``apply(_:share:to:in:)``), and
  /// otherwise works out the winner's itself.
  public struct Prepared: Sendable {
    let target: Target
    /// The row's new content, or nil when the revision is deleted, does not parse or is not of
    /// the target's type (so the row goes away).
    let state: State?

    enum State: Sendable {
      case wiki(WikiDocState)
      case page(PageUpdate)
    }
  }

  /// A page's `pages` row (which holds its links) and its link targets (sorted, distinct,
  /// those that fit a key).
  struct PageUpdate: Sendable {
    let row: [UInt8]
    let links: [[UInt8]]
  }

  /// ``Prepared`` for the revision an event adds (`rev` in its canonical text, as the tree
  /// gives it): nil when the document id is neither a wiki's nor a page's. `body` is the
  /// revision's body, parsed; nil for a deleted revision (or one whose body does not parse).
  static func prepare(_ docID: String, rev: RevID, body: JSONValue?) -> Prepared? {
    guard let target = Target(docID) else { return nil }
    return prepare(target, rev: rev, body: body)
  }

  static func prepare(_ target: Target, rev: RevID, body: JSONValue?) -> Prepared {
    guard let body, body["type"]?.stringValue == target.type else {
      // Most documents end here (a note, say): the revision's text is not made for them.
      return Prepared(target: target, state: nil)
    }
    switch target {
    case .wiki:
      return Prepared(target: target, state: .wiki(wikiState(rev: rev.description, body)))
    case .page(let wiki, let title):
      return Prepared(
        target: target, state: .page(pageUpdate(wiki, title, rev: rev.description, body)))
    }
  }

  /// Brings the document's wiki or page row in line with its winner after the change:
  /// `change.tree` is the document's tree then; `share` what the change's revision makes of
  /// the row, when worked out ahead.
  func applyDocument(
    _ change: DocumentChange, share: Prepared?, _ storage: ProjectionStorage,
    _ txn: WriteTransaction
  ) throws {
    let event = change.event
    let position = event.position.rawValue
    guard let target = share?.target ?? Target(change.docID) else { return }
    let prepared: Prepared
    if let w = change.tree.winner, !w.isDeleted, let at = w.body {
      if at == position, let ready = share {
        prepared = ready
      } else {
        // The event's own revision, or an older one whose body is in the log.
        prepared = Self.prepare(
          target, rev: w.rev, body: try change.winnerBody(in: txn))
      }
    } else {
      prepared = Prepared(target: target, state: nil)
    }
    switch prepared.target {
    case .wiki(let id):
      guard case .wiki(let doc)? = prepared.state else {
        // A document's first event that is not a wiki: no row of the projection names it as
        // one yet (only its own events set a row's wiki document), so there is nothing to
        // change. A document that is no wiki costs the projection nothing.
        if event.streamVersion == 1 { return }
        return try updateWiki(id, to: nil, event, storage, txn)
      }
      try updateWiki(id, to: doc, event, storage, txn)
    case .page(let wiki, let title):
      guard case .page(let page)? = prepared.state else {
        return try updatePage(wiki, title, to: nil, event, storage, txn)
      }
      try updatePage(wiki, title, to: page, event, storage, txn)
    }
  }

  static func wikiState(rev: String, _ body: JSONValue) -> WikiDocState {
    WikiDocState(
      rev: rev, title: body["title"]?.stringValue ?? "", owner: body["owner_id"]?.stringValue,
      members: sortedUniqueByBytes(body["members"]?.arrayValue?.compactMap(\.stringValue) ?? []))
  }

  static func pageState(rev: String, _ body: JSONValue) -> (row: PageRow, links: [String]) {
    let markdown = body["markdown"]?.stringValue ?? ""
    return (
      PageRow(
        rev: rev, updatedBy: body["updated_by"]?.stringValue,
        updatedAt: body["updated_at"]?.stringValue, length: markdown.utf8.count),
      WikiLinks.targets(in: markdown)
    )
  }

  /// The rows a page revision gives: its `pages` row, and the targets of its links whose
  /// `backlinks` key fits (no 0x00 byte, within ``maxKeyBytes``), sorted by bytes.
  static func pageUpdate(_ wiki: String, _ title: String, rev: String, _ body: JSONValue)
    -> PageUpdate
  {
    let (row, links) = pageState(rev: rev, body)
    let fixed = wiki.utf8.count + title.utf8.count + 2
    var targets: [[UInt8]] = []
    targets.reserveCapacity(links.count)
    for link in links {
      let bytes = Array(link.utf8)
      if !bytes.contains(0) && fixed + bytes.count <= maxKeyBytes { targets.append(bytes) }
    }
    return PageUpdate(row: row.encoded(links: targets), links: targets)
  }

  // MARK: Keys

  static func pageKey(_ wiki: String, _ title: String) -> [UInt8] {
    var key: [UInt8] = []
    key.reserveCapacity(wiki.utf8.count + title.utf8.count + 1)
    key.append(contentsOf: wiki.utf8)
    key.append(0)
    key.append(contentsOf: title.utf8)
    return key
  }

  static func backlinkKey(_ wiki: String, to: String, from: String) -> [UInt8] {
    backlinkKey(wiki, to: Array(to.utf8), from: from)
  }

  static func backlinkKey(_ wiki: String, to: [UInt8], from: String) -> [UInt8] {
    var key: [UInt8] = []
    key.reserveCapacity(wiki.utf8.count + to.count + from.utf8.count + 2)
    key.append(contentsOf: wiki.utf8)
    key.append(0)
    key.append(contentsOf: to)
    key.append(0)
    key.append(contentsOf: from.utf8)
    return key
  }

  static func membershipKey(_ wiki: String, _ position: UInt64) -> [UInt8] {
    Array(wiki.utf8) + [0] + position.bigEndianBytes
  }

  // MARK: Updates

  func updateWiki(
    _ id: String, to doc: WikiDocState?, _ event: RecordedEvent, _ storage: ProjectionStorage,
    _ txn: WriteTransaction
  ) throws {
    let key = Array(id.utf8)
    let before = try txn.get(key, in: storage["wikis"]).map { try WikiRow(decoding: $0) } ?? .empty
    var row = before
    row.doc = doc
    guard row.encoded() != before.encoded() else { return }
    row.lastPosition = event.position.rawValue
    row.lastMicroseconds = event.timestampMicroseconds
    try store(row, key: key, storage, txn)

    let owner = doc?.owner
    let members = doc?.members ?? []
    var last: MembershipRow? = nil
    let prefix = key + [0]
    try txn.scan(
      storage["membership"], from: prefix + UInt64.max.bigEndianBytes, direction: .backward
    ) { k, v in
      if k.starts(with: prefix) { last = try MembershipRow(decoding: v) }
      return false
    }
    let changed =
      last.map { !$0.sameAccess(owner: owner, members: members) }
      ?? (owner != nil || !members.isEmpty)
    if changed {
      try txn.put(
        MembershipRow(owner: owner, members: members, microseconds: event.timestampMicroseconds)
          .encoded(), forKey: Self.membershipKey(id, event.position.rawValue),
        in: storage["membership"])
    }
  }

  func updatePage(
    _ wiki: String, _ title: String, to page: PageUpdate?, _ event: RecordedEvent,
    _ storage: ProjectionStorage, _ txn: WriteTransaction
  ) throws {
    let key = Self.pageKey(wiki, title)
    // The key belongs to this one document id, so at its first event there is no row yet.
    let oldRow = event.streamVersion == 1 ? nil : try txn.get(key, in: storage["pages"])
    let newRow = page?.row
    // The row holds the links, so an unchanged row has unchanged links.
    guard oldRow != newRow else { return }
    // Both lists are sorted by bytes and free of duplicates (the stored one was written from
    // such a list), so they are compared and diffed in one walk.
    let oldLinks = try oldRow.map { try PageRow.links(in: $0) } ?? []
    let added = page?.links ?? []
    if oldLinks != added {
      var a = 0
      var b = 0
      while a < oldLinks.count || b < added.count {
        if b == added.count
          || (a < oldLinks.count && oldLinks[a].lexicographicallyPrecedes(added[b]))
        {
          try txn.delete(
            Self.backlinkKey(wiki, to: oldLinks[a], from: title), in: storage["backlinks"])
          a += 1
        } else if a == oldLinks.count || added[b].lexicographicallyPrecedes(oldLinks[a]) {
          try txn.put(
            [], forKey: Self.backlinkKey(wiki, to: added[b], from: title), in: storage["backlinks"])
          b += 1
        } else {
          a += 1
          b += 1
        }
      }
    }
    if let newRow {
      try txn.put(newRow, forKey: key, in: storage["pages"])
    } else {
      try txn.delete(key, in: storage["pages"])
    }

    let wikiKey = Array(wiki.utf8)
    let summary = try WikiRow.updatingSummary(
      try txn.get(wikiKey, in: storage["wikis"]),
      pageCountDelta: (newRow == nil ? 0 : 1) - (oldRow == nil ? 0 : 1),
      position: event.position.rawValue, microseconds: event.timestampMicroseconds)
    if summary.keep {
      try txn.put(summary.bytes, forKey: wikiKey, in: storage["wikis"])
    } else {
      try txn.delete(wikiKey, in: storage["wikis"])
    }
  }

  /// Writes a `wikis` row, or removes it when it holds neither a document nor pages.
  func store(_ row: WikiRow, key: [UInt8], _ storage: ProjectionStorage, _ txn: WriteTransaction)
    throws
  {
    if row.doc == nil && row.pageCount == 0 {
      try txn.delete(key, in: storage["wikis"])
    } else {
      try txn.put(row.encoded(), forKey: key, in: storage["wikis"])
    }
  }
}
