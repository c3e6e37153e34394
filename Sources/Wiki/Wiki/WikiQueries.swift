public import Log
public import Projections

/// Reads the ``WikiProjection`` of a ``DocumentStore``.
///
/// Every query runs in a read transaction of its own, or in `txn` when one is given, so that
/// several answers come from one consistent snapshot. Titles and ids sort by their UTF-8 bytes
/// (so `"Zebra"` comes before `"apple"` and `"Ökologie"` after both).
///
/// ```swift
/// let store = try DocumentStore(directory: path, projections: [WikiProjection()])
/// let wiki = try WikiQueries(store)
/// for w in try wiki.wikis() {
///   print(w.title, w.pageCount)
///   for page in try wiki.pages(in: w.id) { print("  ", page.title) }
/// }
/// // One snapshot for several answers:
/// let (pages, history) = try store.read { txn in
///   (try wiki.pages(in: "w1", using: txn), try wiki.membershipHistory(of: "w1", using: txn))
/// }
/// ```
public struct WikiQueries: Sendable {
  let store: DocumentStore
  let storage: ProjectionStorage

  /// Queries the wiki projection registered with `store`.
  ///
  /// - Throws: ``StoreError`` `not_found` when `store` has no ``WikiProjection``.
  public init(_ store: DocumentStore) throws {
    guard let storage = store.projection(WikiProjection.self)?.storage
    else {
      throw StoreError.notFound("the store has no wiki projection")
    }
    self.store = store
    self.storage = storage
  }

  /// Every live wiki, by id.
  public func wikis(using txn: ReadTransaction? = nil) throws -> [WikiSummary] {
    try run(txn) { txn in
      var out: [WikiSummary] = []
      try txn.scan(storage["wikis"]) { key, value in
        if let summary = try WikiRow(decoding: value).summary(
          id: String(decoding: key, as: UTF8.self))
        {
          out.append(summary)
        }
        return true
      }
      return out
    }
  }

  /// The wiki `id`, nil when no live wiki document has that id.
  public func wiki(_ id: String, using txn: ReadTransaction? = nil) throws -> WikiSummary? {
    try run(txn) { txn in try row(id, txn)?.summary(id: id) }
  }

  /// The live pages of `wiki`, ordered by title.
  ///
  /// Pages are listed even while the wiki document itself is missing or deleted.
  public func pages(in wiki: String, using txn: ReadTransaction? = nil) throws -> [WikiPageInfo] {
    try run(txn) { txn in
      var out: [WikiPageInfo] = []
      guard Self.plain(wiki) else { return out }
      try scan(storage["pages"], prefix: Array(wiki.utf8) + [0], txn) { rest, value in
        out.append(
          try PageRow(decoding: value).info(
            wikiID: wiki, title: String(decoding: rest, as: UTF8.self)))
      }
      return out
    }
  }

  /// The page `title` of `wiki`, nil when it is not live.
  public func page(_ title: String, in wiki: String, using txn: ReadTransaction? = nil) throws
    -> WikiPageInfo?
  {
    try run(txn) { txn in
      guard Self.plain(wiki, title) else { return nil }
      return try txn.get(WikiProjection.pageKey(wiki, title), in: storage["pages"]).map {
        try PageRow(decoding: $0).info(wikiID: wiki, title: title)
      }
    }
  }

  /// The titles of the live pages of `wiki` that link to `title` ("what links here"), sorted.
  /// `title` need not exist.
  public func backlinks(to title: String, in wiki: String, using txn: ReadTransaction? = nil)
    throws -> [String]
  {
    try run(txn) { txn in
      var out: [String] = []
      guard Self.plain(wiki, title) else { return out }
      let prefix = Array(wiki.utf8) + [0] + Array(title.utf8) + [0]
      try scan(storage["backlinks"], prefix: prefix, txn) { rest, _ in
        out.append(String(decoding: rest, as: UTF8.self))
      }
      return out
    }
  }

  /// The distinct link targets of the page `title` of `wiki`, sorted; empty when the page is not
  /// live. Targets need not exist.
  public func links(from title: String, in wiki: String, using txn: ReadTransaction? = nil) throws
    -> [String]
  {
    try run(txn) { txn in
      let key = WikiProjection.pageKey(wiki, title)
      guard Self.plain(wiki, title), let row = try txn.get(key, in: storage["pages"]) else {
        return []
      }
      return try PageRow.links(in: row).map { String(decoding: $0, as: UTF8.self) }
    }
  }

  /// Every change of who could edit `wiki`, oldest first.
  public func membershipHistory(of wiki: String, using txn: ReadTransaction? = nil) throws
    -> [WikiMembership]
  {
    try run(txn) { txn in
      var out: [WikiMembership] = []
      guard Self.plain(wiki) else { return out }
      try scan(storage["membership"], prefix: Array(wiki.utf8) + [0], txn) { rest, value in
        let row = try MembershipRow(decoding: value)
        out.append(
          WikiMembership(
            position: LogPosition(UInt64(bigEndianBytes: rest) ?? 0),
            timestampMicroseconds: row.microseconds, owner: row.owner, members: row.members))
      }
      return out
    }
  }

  /// Whether `user` may edit `wiki` now: it is live and `user` is its owner or a member.
  public func canEdit(_ user: String, wiki: String, using txn: ReadTransaction? = nil) throws
    -> Bool
  {
    try run(txn) { txn in
      guard let doc = try row(wiki, txn)?.doc else { return false }
      return WikiRow.isEditor(user, owner: doc.owner, members: doc.members)
    }
  }

  // MARK: Helpers

  func run<T>(_ txn: ReadTransaction?, _ body: (ReadTransaction) throws -> T) throws -> T {
    if let txn { return try body(txn) }
    return try store.read(body)
  }

  /// Whether the key parts hold no 0x00 (the separator): any other id matches nothing.
  static func plain(_ parts: String...) -> Bool {
    parts.allSatisfy { !$0.isEmpty && !$0.utf8.contains(0) }
  }

  func row(_ id: String, _ txn: ReadTransaction) throws -> WikiRow? {
    guard Self.plain(id) else { return nil }
    return try txn.get(Array(id.utf8), in: storage["wikis"]).map { try WikiRow(decoding: $0) }
  }

  /// Calls `body` with the rest of each key that starts with `prefix`, and its value.
  func scan(
    _ db: Database, prefix: [UInt8], _ txn: ReadTransaction,
    _ body: (ArraySlice<UInt8>, [UInt8]) throws -> Void
  ) throws {
    try txn.scan(db, from: prefix) { key, value in
      guard key.starts(with: prefix) else { return false }
      try body(key[prefix.count...], value)
      return true
    }
  }
}
