import Formats
public import JSON
public import Log
public import Projections
import RevTree

/// TouchWiki's access rules, as its Sync Gateway companion enforced them, as a
/// ``DocumentAccess`` (kept by ``WikiAccessProjection``):
///
/// - a wiki document and its pages (`<wikiId>:*`) can be read and edited by the wiki's
///   `owner_id` and `members`; to anyone else they do not exist;
/// - only an owner may change a wiki's `owner_id`, `members`, `title` or `type`, or delete it;
///   a new wiki's `owner_id` must be the user creating it;
/// - when conflicting revisions of a wiki document disagree on membership, access is what
///   every live leaf grants, until the conflict is resolved;
/// - every other document follows the database's security object.
///
/// Server administrators may do everything; the server does not ask.
///
/// ```swift
/// let data = DataDirectory.wiki(path: dir)          // registers WikiAccess
/// let store = try data.open("wiki")
/// let view = try WikiAccess().view(for: UserContext(name: "bob"), isMember: false, in: store)
/// try view.changes(ChangesOptions())                // bob's wikis and pages only
/// ```
public struct WikiAccess: DocumentAccess {
  public init() {}

  /// The refusal of a write to a wiki the user may not write, the same whether or not the wiki
  /// exists, so that it tells nothing.
  static func refusal(_ wiki: String) -> StoreError {
    StoreError.forbidden(
      "You may not write to the wiki '\(wiki)': you are not its owner or a member.")
  }

  func storage(_ store: DocumentStore) throws -> ProjectionStorage {
    guard let storage = store.storage(of: "access") else {
      throw StoreError.internalError("the database has no access projection")
    }
    return storage
  }

  /// The group of `docID` as the projection keeps it now.
  func group(of docID: String, _ storage: ProjectionStorage, _ txn: ReadTransaction) throws
    -> AccessGroup
  {
    let group = AccessGroup.of(docID)
    if case .other = group, AccessGroup.canBeWiki(docID),
      try txn.get(Array(docID.utf8), in: storage["wikis"]) != nil
    {
      return .wiki(docID)
    }
    return group
  }

  public func rights(
    of user: UserContext, to docID: String, in store: DocumentStore, txn: ReadTransaction
  ) throws -> DocumentRights? {
    let storage = try storage(store)
    guard case .wiki(let wiki) = try group(of: docID, storage, txn) else { return nil }
    if user.isAdmin { return .owner }
    guard let name = user.name, let row = try WikiAccessRow.read(wiki, storage, txn) else {
      return DocumentRights.none
    }
    if row.owners.contains(name) { return .owner }
    return row.members.contains(name) ? .member : DocumentRights.none
  }

  public func checkWrite(
    _ write: AccessWrite, by user: UserContext, isMember: Bool, in store: DocumentStore,
    txn: ReadTransaction, batch: inout AccessBatch
  ) throws(StoreError) {
    if user.isAdmin { return }
    let docID = write.docID
    do {
      let storage = try storage(store)
      var group = try group(of: docID, storage, txn)
      if case .other = group, AccessGroup.canBeWiki(docID) {
        // A new wiki. A document that exists (or existed) and never was a wiki stays in the
        // other group, whatever the body says: writing it takes the security object's
        // membership, so that nobody turns a document they may not read into their own wiki.
        if batch.groups[docID] != nil { group = .wiki(docID) }
        if write.body?["type"]?.stringValue == "wiki",
          try store.record(docID, txn: txn) == nil
        {
          group = .wiki(docID)
        }
      }
      guard case .wiki(let wiki) = group else {
        if !isMember {
          throw StoreError.forbidden("You are not allowed to write to this database.")
        }
        return
      }
      let known: (members: Set<String>, owners: Set<String>)?
      if let pending = batch.groups[wiki] {
        known = pending
      } else if let row = try WikiAccessRow.read(wiki, storage, txn) {
        known = (Set(row.members), Set(row.owners))
      } else {
        known = nil
      }
      let name = user.name
      guard let known else {
        // No such wiki yet: only its creation, by its owner.
        guard docID == wiki, let name, let body = write.body,
          body["type"]?.stringValue == "wiki", body["owner_id"]?.stringValue == name
        else {
          if docID == wiki, let name, write.body?["type"]?.stringValue == "wiki" {
            throw StoreError.forbidden(
              "A new wiki's owner_id must be the user creating it ('\(name)').")
          }
          throw Self.refusal(wiki)
        }
        // Pages of this id that arrived before their wiki (replicated) are nobody's yet; the
        // wiki's creator would get them, so only an administrator may create it.
        if let bytes = try txn.get(AccessGroup.wiki(wiki).key, in: storage["counts"]),
          case let counts = try GroupCounts(decoding: bytes), counts.live + counts.deleted > 0
        {
          throw StoreError.forbidden(
            "Pages of the wiki '\(wiki)' exist already; only an administrator may create it.")
        }
        batch.groups[wiki] = Self.grants(of: body)
        return
      }
      guard let name, known.members.contains(name) || known.owners.contains(name) else {
        throw Self.refusal(wiki)
      }
      guard docID == wiki else { return }
      // The wiki document: what only an owner may change.
      let isOwner = known.owners.contains(name)
      guard let body = write.body else {
        if !isOwner { throw StoreError.forbidden("Only the wiki's owner may delete it.") }
        batch.groups[wiki] = ([], [])
        return
      }
      // Compared with every live leaf, not only the winner: a member who extends a losing
      // leaf must not undo what an owner wrote in it (a narrower membership, say).
      let leaves = try store.openRevs(docID, .all).compactMap { result -> JSONObject? in
        guard let doc = result["ok"]?.objectValue, doc["_deleted"] != .bool(true) else {
          return nil
        }
        return doc
      }
      let fields = ["owner_id", "members", "title", "type"]
      let changed = fields.filter { field in
        let differs = { (current: JSONObject?) in
          field == "members"
            ? Self.names(body[field]) != Self.names(current?[field])
            : body[field] != current?[field]
        }
        return leaves.isEmpty ? differs(nil) : leaves.contains { differs($0) }
      }
      if !changed.isEmpty && !isOwner {
        throw StoreError.forbidden(
          "Only the wiki's owner may change its \(changed.joined(separator: ", ")).")
      }
      if !changed.isEmpty { batch.groups[wiki] = Self.grants(of: body) }
    } catch let error as StoreError {
      throw error
    } catch {
      throw StoreError.internalError("\(error)")
    }
  }

  /// A replicated page refused because its writer may not write its wiki (the wiki is not
  /// there yet, or does not let them in) is held in its wiki's group
  /// (``HeldRevisionsProjection``): the refusal reads the same whether or not the wiki exists.
  public func heldGroup(of docID: String) -> String? {
    guard case .wiki(let wiki) = AccessGroup.of(docID), AccessGroup.canBeWiki(wiki) else {
      return nil
    }
    return wiki
  }

  /// A write of a wiki document admits its writer's pages held for that wiki.
  public func releasedGroup(by docID: String) -> String? {
    AccessGroup.canBeWiki(docID) ? docID : nil
  }

  /// Who could read and edit wiki `id` when: an entry for every change of its access, oldest
  /// first (an entry with no members: nobody but administrators, such as after its deletion
  /// or while its leaves disagree entirely).
  public func history(of id: String, in store: DocumentStore) throws -> [WikiAccessEntry] {
    let storage = try storage(store)
    let prefix = Array(id.utf8) + [0]
    return try store.read { txn in
      var out: [WikiAccessEntry] = []
      try txn.scan(storage["history"], from: prefix) { key, value in
        guard key.starts(with: prefix), key.count == prefix.count + 8,
          let seq = UInt64(bigEndianArray: Array(key[prefix.count...]))
        else { return false }
        var r = ByteReader(value)
        let row: WikiAccessRow
        let micros: UInt64
        do {
          row = try WikiAccessRow(decoding: Array(try r.data()))
          micros = try r.varint()
        } catch {
          throw WikiRowError.corrupt("access history")
        }
        out.append(
          WikiAccessEntry(
            position: LogPosition(seq), timestampMicroseconds: Int64(bitPattern: micros),
            members: row.members, owners: row.owners))
        return true
      }
      return out
    }
  }

  static func names(_ value: JSONValue?) -> Set<String> {
    Set(value?.arrayValue?.compactMap(\.stringValue) ?? [])
  }

  static func grants(of body: JSONObject) -> (members: Set<String>, owners: Set<String>) {
    guard body["type"]?.stringValue == "wiki" else { return ([], []) }
    var members = names(body["members"])
    var owners: Set<String> = []
    if let owner = body["owner_id"]?.stringValue {
      members.insert(owner)
      owners.insert(owner)
    }
    return (members, owners)
  }

  public func view(for user: UserContext, isMember: Bool, in store: DocumentStore) throws
    -> any AccessView
  {
    let storage = try storage(store)
    return try store.read { txn in
      var groups: [(key: [UInt8], since: UInt64)] = []
      var wikis: Set<String> = []
      if let name = user.name {
        let prefix = AccessKeys.grantPrefix(name)
        try txn.scan(storage["grants"], from: prefix) { key, value in
          guard key.starts(with: prefix) else { return false }
          let wiki = String(decoding: key[prefix.count...], as: UTF8.self)
          wikis.insert(wiki)
          groups.append((AccessGroup.wiki(wiki).key, UInt64(bigEndianArray: value) ?? 0))
          return true
        }
      }
      var allWikis: Set<String> = []
      if isMember {
        groups.append((AccessGroup.other.key, 0))
        try txn.scan(storage["wikis"], from: nil) { key, _ in
          allWikis.insert(String(decoding: key, as: UTF8.self))
          return true
        }
      }
      var live = 0
      var deleted = 0
      var updateSeq: UInt64 = 0
      for (key, since) in groups {
        if let bytes = try txn.get(key, in: storage["counts"]) {
          let counts = try GroupCounts(decoding: bytes)
          live += counts.live
          deleted += counts.deleted
        }
        var last: UInt64 = 0
        try txn.scan(storage["bySeq"], from: key + UInt64.max.bigEndianBytes, direction: .backward)
        { k, _ in
          if k.starts(with: key), k.count == key.count + 8 {
            last = UInt64(bigEndianArray: Array(k[key.count...])) ?? 0
          }
          return false
        }
        if last > 0 { updateSeq = max(updateSeq, max(last, since)) }
      }
      return WikiAccessView(
        store: store, storage: storage, groups: groups, wikis: wikis, isMember: isMember,
        allWikis: allWikis, docCount: live, deletedDocCount: deleted,
        updateSeq: LogPosition(updateSeq))
    }
  }
}

/// Who could read and edit a wiki from a position of the log on (``WikiAccess/history(of:in:)``).
public struct WikiAccessEntry: Sendable, Hashable {
  public let position: LogPosition
  /// When that event was committed, in microseconds since 1970.
  public let timestampMicroseconds: Int64
  /// The names that could read and edit it (owners included), sorted by bytes.
  public let members: [String]
  /// The names that could also change its access or delete it.
  public let owners: [String]
}

/// One user's view under ``WikiAccess``.
final class WikiAccessView: AccessView {
  let store: DocumentStore
  let storage: ProjectionStorage
  /// The user's access groups as keys, each with the seq since which the user has had it.
  let groups: [(key: [UInt8], since: UInt64)]
  let wikis: Set<String>
  let isMember: Bool
  /// Every wiki id, when `isMember` (to tell the other group's documents apart).
  let allWikis: Set<String>
  let docCount: Int
  let deletedDocCount: Int
  let updateSeq: LogPosition

  init(
    store: DocumentStore, storage: ProjectionStorage, groups: [(key: [UInt8], since: UInt64)],
    wikis: Set<String>, isMember: Bool, allWikis: Set<String>, docCount: Int,
    deletedDocCount: Int, updateSeq: LogPosition
  ) {
    self.store = store
    self.storage = storage
    self.groups = groups
    self.wikis = wikis
    self.isMember = isMember
    self.allWikis = allWikis
    self.docCount = docCount
    self.deletedDocCount = deletedDocCount
    self.updateSeq = updateSeq
  }

  func includes(_ docID: String) -> Bool {
    Self.includes(docID, wikis: wikis, isMember: isMember, allWikis: allWikis)
  }

  static func includes(
    _ docID: String, wikis: Set<String>, isMember: Bool, allWikis: Set<String>
  ) -> Bool {
    switch AccessGroup.of(docID) {
    case .wiki(let wiki): return wikis.contains(wiki)
    case .other:
      if AccessGroup.canBeWiki(docID) && (wikis.contains(docID) || allWikis.contains(docID)) {
        return wikis.contains(docID)
      }
      return isMember
    }
  }

  var filter: DocumentFilter {
    let wikis = self.wikis
    let isMember = self.isMember
    let allWikis = self.allWikis
    return DocumentFilter(
      name: "_access", parameters: [:], wakeKeys: [], keys: { _ in [] },
      includes: { Self.includes($0, wikis: wikis, isMember: isMember, allWikis: allWikis) })
  }

  func changes(_ options: ChangesOptions) throws -> ChangesResult {
    try store.read { txn in
      let last = try txn.lastPosition.rawValue
      // A since past the end of the log is the end.
      let since = min(options.since.rawValue, last)
      if options.history {
        var o = options
        // The user's documents, and of those what the request's own filter passes.
        let access = filter
        if let requested = options.filter {
          o.filter = DocumentFilter(
            name: requested.name, parameters: requested.parameters,
            wakeKeys: requested.wakeKeys, keys: { requested.keys(of: $0) },
            includes: { access.includes($0) && requested.includes($0) })
        } else {
          o.filter = access
        }
        var result = try store.changes(o)
        // The positions of other users' events are not theirs to see.
        result.readThrough = result.lastSeq
        result.lastSeq = result.results.last?.seq ?? options.since
        result.pending = 0
        return result
      }
      // Every row the user may see after `since` (before it, descending), at its effective
      // seq: its own, or the seq the user gained its group at, whichever is later.
      var entries: [(eff: UInt64, seq: UInt64, id: String)] = []
      for (key, granted) in groups {
        let backfill = options.descending ? false : granted > since
        let from = backfill || options.descending ? 0 : since + 1
        try txn.scan(storage["bySeq"], from: key + from.bigEndianBytes) { k, value in
          guard k.starts(with: key), k.count == key.count + 8,
            let seq = UInt64(bigEndianArray: Array(k[key.count...]))
          else { return false }
          let eff = max(seq, granted)
          let wanted = options.descending ? (since == 0 || eff < since) : eff > since
          if wanted { entries.append((eff, seq, String(decoding: value, as: UTF8.self))) }
          return true
        }
      }
      entries.sort { a, b in
        options.descending
          ? (a.eff, a.seq) > (b.eff, b.seq) : (a.eff, a.seq) < (b.eff, b.seq)
      }
      let limit = options.limit ?? .max
      var rows: [ChangeRow] = []
      var used = 0
      var lastSeq = options.descending ? updateSeq.rawValue : since
      if limit > 0 {
        while used < entries.count {
          let e = entries[used]
          // Rows that share a seq are never split across pages.
          if rows.count >= limit, e.eff != entries[used - 1].eff { break }
          used += 1
          lastSeq = e.eff
          if let row = try store.changeRow(
            docID: e.id, seq: e.eff, options: options, txn: txn)
          {
            rows.append(row)
          }
        }
      }
      let complete = used == entries.count
      if complete && !options.descending && limit > 0 {
        lastSeq = max(lastSeq, min(updateSeq.rawValue, last))
      }
      return ChangesResult(
        results: rows, lastSeq: LogPosition(lastSeq),
        pending: options.descending ? 0 : entries.count - used,
        readThrough: complete && !options.descending ? LogPosition(last) : nil)
    }
  }
}
