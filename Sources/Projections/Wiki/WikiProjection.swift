public import Log
import RevTree

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
/// | `wiki.pages` | wiki · title | `PageRow`: rev, `updated_by`, `updated_at`, Markdown length |
/// | `wiki.links` | wiki · from title | the page's link targets (varint count, strings), sorted |
/// | `wiki.backlinks` | wiki · to title · from title | empty |
/// | `wiki.membership` | wiki · position (8 bytes, big-endian) | `MembershipRow`: owner and members from then on |
/// | `wiki.trees` | document id | the document's revision tree (``RevisionTree`` encoding) |
/// | `wiki.revsLimits` | position (8 bytes, big-endian) | the revs_limit set there (8 bytes, big-endian) |
///
/// A `wikis` row also exists, without a document, while a wiki has pages but no live wiki
/// document; the queries do not list it. Links to pages that do not exist are kept, so a page
/// created later has its backlinks at once. A link whose `backlinks` key would pass 500 bytes
/// is dropped.
///
/// ## Why the projection keeps revision trees of its own
/// A projection must depend only on the log and its own databases, or replaying the log
/// (``DocumentStore/rebuild(_:)``, ``DocumentStore/verify(_:maxDifferences:)``, a projection
/// added to an existing store) would read `docs.byId` as it is *now*, not as it was at the
/// event, and record the final winner at the first event. So the projection merges each event
/// into its own copy of the document's tree exactly as ``DocumentProjection`` does, with the
/// revs_limit in force at that position. Only documents that ever had a live revision of the
/// right type are tracked; when one first appears, its earlier events are replayed from its
/// stream. Bodies of older winners are read from the log, which never changes.
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
public final class WikiProjection: Projection, DocumentEventProjection {
  public let name = "wiki"
  public let databaseNames = [
    "wikis", "pages", "links", "backlinks", "membership", "trees", "revsLimits",
  ]

  /// LMDB keys of the projection stay within this many bytes.
  static let maxKeyBytes = 500
  /// A wiki id leaves room for a 0x00 byte and a position in a `membership` key.
  static let maxWikiIDBytes = maxKeyBytes - 9

  public init() {}

  public func apply(_ event: RecordedEvent, to storage: ProjectionStorage, in txn: WriteTransaction)
    throws
  {
    guard DocumentEvent.Kind(eventType: event.type) != nil else { return }
    try apply(try DocumentEvent(decoding: event), facts: nil, of: event, to: storage, in: txn)
  }

  func apply(
    _ decoded: DocumentEvent?, facts: AppendFacts?, of event: RecordedEvent,
    to storage: ProjectionStorage, in txn: WriteTransaction
  ) throws {
    guard let e = decoded else { return }
    switch e.kind {
    case .edit, .replicated:
      try applyDocument(e, event: event, facts: facts, storage, txn)
    case .revsLimit:
      try txn.put(
        UInt64(e.revsLimit).bigEndianBytes, forKey: event.position.rawValue.bigEndianBytes,
        in: storage["revsLimits"])
    case .localPut, .localDelete:
      return
    }
  }

  // MARK: Documents

  /// What a document id can be, by its shape.
  enum Target {
    case wiki(String)
    case page(wiki: String, title: String)

    init?(_ id: String) {
      let bytes = Array(id.utf8)
      guard !bytes.contains(0) else { return nil }
      // Split at the first colon byte: a colon followed by a combining mark is one Character,
      // which `String.firstIndex(of:)` would step over.
      if let colon = bytes.firstIndex(of: UInt8(ascii: ":")) {
        let wiki = String(decoding: bytes[..<colon], as: UTF8.self)
        let title = String(decoding: bytes[(colon + 1)...], as: UTF8.self)
        guard !wiki.isEmpty, !title.isEmpty, wiki.utf8.count <= WikiProjection.maxWikiIDBytes
        else { return nil }
        self = .page(wiki: wiki, title: title)
      } else {
        guard bytes.count <= WikiProjection.maxWikiIDBytes else { return nil }
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

  /// `facts` are the body and the merged tree when the write path has them at hand: the same
  /// body the event's bytes parse to, and the tree this projection's own copy becomes (both
  /// merge the document's events with the revs_limit in force at each), so neither is
  /// recomputed; replay (`facts` nil) computes both from the log.
  func applyDocument(
    _ e: DocumentEvent, event: RecordedEvent, facts: AppendFacts? = nil,
    _ storage: ProjectionStorage, _ txn: WriteTransaction
  ) throws {
    guard let target = Target(e.docID) else { return }
    let position = event.position.rawValue
    let treeKey = e.docID  // its UTF-8 bytes
    var tree: RevisionTree
    // The event's body, parsed at most once.
    var parsedBody: JSONValue?? = nil
    if let body = facts?.body { parsedBody = .some(body) }
    func eventBody() -> JSONValue? {
      if let parsedBody { return parsedBody }
      let json = try? JSONValue(parsing: e.body)
      parsedBody = .some(json)
      return json
    }
    // A document's first event (stream version 1) finds no tree: nothing wrote one before it.
    let stored = event.streamVersion == 1 ? nil : try txn.get(treeKey, in: storage["trees"])
    if stored == nil {
      // Untracked: no earlier live revision had this type, so none can win but this one.
      guard !e.deleted, eventBody()?["type"]?.stringValue == target.type else { return }
    }
    if let facts, stored != nil || event.streamVersion == 1 {
      // Tracked, so this projection's tree is the documents projection's before the event; or
      // the document's first event, merged into an empty tree by both.
      tree = facts.tree
    } else {
      if let stored {
        tree = try RevisionTree(decoding: stored)
      } else {
        tree = try replayedTree(e.docID, before: event, storage, txn)
      }
      let outcome = try DocumentProjection.merge(
        e, into: &tree, body: position, revsLimit: try revsLimit(at: position, storage, txn))
      guard outcome.updated else { return }
    }
    // (The winner does not depend on node order, so the decoded tree agrees with this one.)
    try txn.put(tree.encoded(), forKey: treeKey, in: storage["trees"])

    var winner: (rev: String, body: JSONValue)? = nil
    if let w = tree.winner, !w.isDeleted, let at = w.body {
      let json: JSONValue?
      if at == position {
        json = eventBody()
      } else {
        let bytes = try Self.body(at: at, txn)
        json = try? JSONValue(parsing: bytes)
      }
      if let json, json["type"]?.stringValue == target.type {
        winner = (w.rev.description, json)
      }
    }
    switch target {
    case .wiki(let id):
      try updateWiki(
        id, to: winner.map { Self.wikiState(rev: $0.rev, $0.body) }, event, storage, txn)
    case .page(let wiki, let title):
      let page = winner.map { Self.pageState(rev: $0.rev, $0.body) }
      try updatePage(wiki, title, to: page, event, storage, txn)
    }
  }

  /// The document's tree from its events before `event`, replayed from its stream.
  func replayedTree(
    _ id: String, before event: RecordedEvent, _ storage: ProjectionStorage, _ txn: WriteTransaction
  ) throws -> RevisionTree {
    var tree = RevisionTree()
    guard event.streamVersion > 1 else { return tree }
    try txn.forEachEvent(inStream: id, fromVersion: 1) { old in
      guard old.position < event.position else { return false }
      guard let kind = DocumentEvent.Kind(eventType: old.type), kind == .edit || kind == .replicated
      else { return true }
      _ = try DocumentProjection.merge(
        try DocumentEvent(decoding: old), into: &tree, body: old.position.rawValue,
        revsLimit: try revsLimit(at: old.position.rawValue, storage, txn))
      return true
    }
    return tree
  }

  /// The revs_limit in force for the event at `position`.
  func revsLimit(at position: UInt64, _ storage: ProjectionStorage, _ txn: ReadTransaction) throws
    -> Int
  {
    var limit = DocumentProjection.defaultRevsLimit
    try txn.scan(storage["revsLimits"], from: position.bigEndianBytes, direction: .backward) {
      _, value in
      if let n = UInt64(bigEndianArray: value) { limit = Int(n) }
      return false
    }
    return limit
  }

  static func body(at position: UInt64, _ txn: ReadTransaction) throws -> [UInt8] {
    guard let event = try txn.event(at: LogPosition(position)) else {
      throw StoreError(
        "internal_server_error", "the body at \(position) is missing from the log", status: 500)
    }
    return try DocumentEvent(decoding: event).body
  }

  /// The `type` of a JSON body, nil when it has none or does not parse.
  ///
  /// Stored bodies are written by ``JSONValue/serialized()``, which escapes only `"`, `\` and
  /// control characters, so a body with a `type` member holds the bytes `"type"`: bodies
  /// without them are answered without parsing.
  static func type(of body: [UInt8]) -> String? {
    guard contains(body, typeKey) else { return nil }
    return (try? JSONValue(parsing: body))?["type"]?.stringValue
  }

  static let typeKey = Array(#""type""#.utf8)

  static func contains(_ bytes: [UInt8], _ needle: [UInt8]) -> Bool {
    guard let first = needle.first, needle.count <= bytes.count else { return false }
    var i = 0
    let end = bytes.count - needle.count
    while i <= end {
      if bytes[i] == first {
        var k = 1
        while k < needle.count && bytes[i + k] == needle[k] { k += 1 }
        if k == needle.count { return true }
      }
      i += 1
    }
    return false
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
    _ wiki: String, _ title: String, to page: (row: PageRow, links: [String])?,
    _ event: RecordedEvent, _ storage: ProjectionStorage, _ txn: WriteTransaction
  ) throws {
    let key = Self.pageKey(wiki, title)
    // The key belongs to this one document id, so at its first event there is no row yet.
    let oldRow = event.streamVersion == 1 ? nil : try txn.get(key, in: storage["pages"])
    var oldLinks: [[UInt8]] = []
    // A `links` row exists only beside a `pages` row (a page that goes away drops its links).
    if oldRow != nil, let bytes = try txn.get(key, in: storage["links"]) {
      var r = ByteReader(bytes)
      let count = try r.int()
      guard count <= bytes.count else { throw ByteReader.Truncated() }
      oldLinks.reserveCapacity(count)
      for _ in 0..<count { oldLinks.append(Array(try r.data())) }
    }
    let newRow = page?.row.encoded()
    // Both lists are sorted by bytes and free of duplicates (the stored one was written from
    // such a list), so they are compared and diffed in one walk.
    let fixed = wiki.utf8.count + title.utf8.count + 2
    let newLinks = (page?.links ?? []).lazy.map { Array($0.utf8) }.filter {
      !$0.contains(0) && fixed + $0.count <= Self.maxKeyBytes
    }
    let added = Array(newLinks)
    let linksChanged = oldLinks != added
    guard oldRow != newRow || linksChanged else { return }

    if linksChanged {
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
      if added.isEmpty {
        try txn.delete(key, in: storage["links"])
      } else {
        var w = ByteWriter()
        w.varint(added.count)
        for target in added { w.data(target) }
        try txn.put(w.bytes, forKey: key, in: storage["links"])
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
