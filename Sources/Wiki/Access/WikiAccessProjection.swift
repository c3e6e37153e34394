import Formats
import JSON
public import Log
public import Projections
import RevTree

/// What ``WikiAccess`` needs to answer who may read and write each document, and to give each
/// user a changes feed that costs in proportion to what they can see.
///
/// Every document belongs to an *access group*: a page `<wikiId>:<Page Name>` to the wiki
/// `wikiId` (whether or not the wiki exists), a document without a colon that is or was ever a
/// wiki to that wiki, and every other document (design documents included) to the *other*
/// group, which the database's security object governs.
///
/// A wiki grants access to the names that **every** live leaf of its document grants: the
/// intersection, over the live leaves of type `wiki`, of `owner_id` plus `members` (a live
/// leaf of another type grants nobody); its owners are the names that are `owner_id` in every
/// such leaf. A conflict about membership therefore narrows access until it is resolved; a
/// deleted wiki grants nobody.
///
/// ## Databases
/// `G` is an access group as a key: `0x00` for the other group, `0x01 · varint length · wiki id`
/// for a wiki. Seqs are log positions, 8 bytes big-endian.
///
/// | database | key | value |
/// | --- | --- | --- |
/// | `access.wikis` | wiki id | varint count · names (members, the owners included) · varint count · owners |
/// | `access.docs` | document id (as ``DocumentKey`` keys it) | G (as bytes) · varint seq · deleted (0/1) |
/// | `access.bySeq` | G · seq | document id: one row per document at its last change, per group |
/// | `access.grants` | varint length · user name · wiki id | seq since which the user has had access without a break |
/// | `access.counts` | G | varint live · varint deleted |
/// | `access.history` | wiki id · 0x00 · seq | the `wikis` row from then on · varint commit time (µs): who could read and edit the wiki when |
public final class WikiAccessProjection: DocumentChangeProjection {
  public let name = "access"
  public let databaseNames = ["wikis", "docs", "bySeq", "grants", "counts", "history"]

  public init() {}

  /// Document edits come through ``apply(_:share:to:in:)``; nothing else concerns it.
  public func apply(_ event: RecordedEvent, to storage: ProjectionStorage, in txn: WriteTransaction)
    throws
  {
    try WikiProjection.refuseDocumentEdit(event, projection: name)
  }

  public func apply(
    _ change: DocumentChange, share: Void?, to storage: ProjectionStorage,
    in txn: WriteTransaction
  ) throws {
    let docID = change.docID
    let position = change.event.position.rawValue
    var group = AccessGroup.of(docID)
    if case .other = group, AccessGroup.canBeWiki(docID) {
      // Only this document's own changes write its row: at its first event it has none.
      let before =
        change.event.streamVersion == 1 ? nil : try WikiAccessRow.read(docID, storage, txn)
      let after = try Self.access(of: change, in: txn)
      if before != nil || after.isWiki {
        let row = WikiAccessRow(members: after.members, owners: after.owners)
        group = .wiki(docID)
        if row != before {
          try txn.put(row.encoded(), forKey: Array(docID.utf8), in: storage["wikis"])
          var entry = ByteWriter()
          entry.data(row.encoded())
          entry.varint(UInt64(bitPattern: change.event.timestampMicroseconds))
          try txn.put(
            entry.bytes, forKey: Array(docID.utf8) + [0] + position.bigEndianBytes,
            in: storage["history"])
          let old = Set(before?.members ?? [])
          let new = Set(row.members)
          for user in old.subtracting(new) {
            try txn.delete(AccessKeys.grant(user: user, wiki: docID), in: storage["grants"])
          }
          for user in new.subtracting(old) {
            try txn.put(
              position.bigEndianBytes, forKey: AccessKeys.grant(user: user, wiki: docID),
              in: storage["grants"])
          }
        }
      }
    }

    // The document's row of its group's feed moves to this change; the group's counts change
    // only when the document changes group or is deleted or recreated (not for an update).
    let deleted = change.tree.winner.map(\.isDeleted) ?? true
    let key = DocumentKey.key(docID)
    let groupKey = group.key
    var counted = false
    // A document's first event (its stream's first version) has no row to move.
    let old = change.event.streamVersion == 1 ? nil : try txn.get(key, in: storage["docs"])
    if let old {
      let entry = try DocEntry(decoding: old)
      try txn.delete(entry.group + entry.seq.bigEndianBytes, in: storage["bySeq"])
      if entry.group == groupKey && entry.deleted == deleted {
        counted = true
      } else {
        try Self.count(
          entry.group, live: entry.deleted ? 0 : -1, deleted: entry.deleted ? -1 : 0,
          storage, txn)
      }
    }
    try txn.put(
      DocEntry(group: groupKey, seq: position, deleted: deleted).encoded(), forKey: key,
      in: storage["docs"])
    try txn.put(Array(docID.utf8), forKey: groupKey + position.bigEndianBytes, in: storage["bySeq"])
    if !counted {
      try Self.count(groupKey, live: deleted ? 0 : 1, deleted: deleted ? 1 : 0, storage, txn)
    }
  }

  static func count(
    _ group: [UInt8], live: Int, deleted: Int, _ storage: ProjectionStorage,
    _ txn: WriteTransaction
  ) throws {
    var counts =
      try txn.get(group, in: storage["counts"]).map { try GroupCounts(decoding: $0) }
      ?? GroupCounts(live: 0, deleted: 0)
    counts.live += live
    counts.deleted += deleted
    if counts.live <= 0 && counts.deleted <= 0 {
      try txn.delete(group, in: storage["counts"])
    } else {
      try txn.put(counts.encoded(), forKey: group, in: storage["counts"])
    }
  }

  /// What the live leaves of a document without a colon grant, read from their bodies.
  static func access(of change: DocumentChange, in txn: WriteTransaction) throws
    -> (isWiki: Bool, members: [String], owners: [String])
  {
    let position = change.event.position.rawValue
    // The common case, a document with one leaf that is no wiki (a note, say): it grants
    // nobody, and no set is made for it.
    if !change.tree.hasBranches, let winner = change.tree.winner, winner.body == position,
      change.body?["type"]?.stringValue != "wiki"
    {
      return (false, [], [])
    }
    var isWiki = false
    var members: Set<String>?
    var owners: Set<String>?
    for leaf in change.tree.leaves where !leaf.isDeleted {
      guard let at = leaf.body else { continue }
      let body: JSONValue?
      if at == position {
        body = change.body
      } else {
        body = try? JSONValue(parsing: try DocumentChange.body(at: at, in: txn))
      }
      var grants: Set<String> = []
      var owner: Set<String> = []
      if let body, body["type"]?.stringValue == "wiki" {
        isWiki = true
        if let o = body["owner_id"]?.stringValue {
          grants.insert(o)
          owner.insert(o)
        }
        for m in body["members"]?.arrayValue ?? [] {
          if let name = m.stringValue { grants.insert(name) }
        }
      }
      members = members.map { $0.intersection(grants) } ?? grants
      owners = owners.map { $0.intersection(owner) } ?? owner
    }
    return (
      isWiki, sortedUniqueByBytes(Array(members ?? [])), sortedUniqueByBytes(Array(owners ?? []))
    )
  }
}

/// The access group of a document (see ``WikiAccessProjection``).
enum AccessGroup: Hashable, Sendable {
  case wiki(String)
  case other

  /// The group by the id's shape alone: a page's wiki, or `other` (which a document without a
  /// colon leaves when it is or was a wiki).
  static func of(_ docID: String) -> AccessGroup {
    if docID.hasPrefix("_design/") { return .other }
    if let (wiki, _) = WikiID.split(docID) { return .wiki(wiki) }
    return .other
  }

  /// Whether the document could be a wiki: no colon, not a design document, an id short
  /// enough for a wiki (``WikiProjection/maxWikiIDBytes``; TouchWiki validation refuses longer
  /// wiki ids).
  static func canBeWiki(_ docID: String) -> Bool {
    !docID.hasPrefix("_design/") && !docID.utf8.contains(UInt8(ascii: ":"))
      && docID.utf8.count <= WikiProjection.maxWikiIDBytes
  }

  /// `0x00` for `other`, `0x01 · varint length · wiki id` for a wiki; a wiki part too long to be
  /// a wiki's id (a page-shaped id no wiki can own) is `0x02 · MD5 of it`, so keys stay short.
  var key: [UInt8] {
    switch self {
    case .other: return [0]
    case .wiki(let id) where id.utf8.count > WikiProjection.maxWikiIDBytes:
      var md5 = MD5()
      md5.update(Array(id.utf8))
      return [2] + md5.finalize().bytes
    case .wiki(let id):
      var w = ByteWriter()
      w.byte(1)
      w.string(id)
      return w.bytes
    }
  }
}

enum AccessKeys {
  static func grant(user: String, wiki: String) -> [UInt8] {
    grantPrefix(user) + Array(wiki.utf8)
  }

  static func grantPrefix(_ user: String) -> [UInt8] {
    var w = ByteWriter()
    w.string(user)
    return w.bytes
  }
}

/// An `access.wikis` row.
struct WikiAccessRow: Equatable {
  /// Names with access (owners included), sorted by bytes.
  var members: [String]
  var owners: [String]

  func encoded() -> [UInt8] {
    var w = ByteWriter()
    w.strings(members)
    w.strings(owners)
    return w.bytes
  }

  init(members: [String], owners: [String]) {
    self.members = members
    self.owners = owners
  }

  init(decoding bytes: [UInt8]) throws {
    var r = ByteReader(bytes)
    do {
      members = try r.strings()
      owners = try r.strings()
    } catch {
      throw WikiRowError.corrupt("access")
    }
  }

  static func read(_ wiki: String, _ storage: ProjectionStorage, _ txn: ReadTransaction) throws
    -> WikiAccessRow?
  {
    try txn.get(Array(wiki.utf8), in: storage["wikis"]).map { try WikiAccessRow(decoding: $0) }
  }
}

/// An `access.docs` value.
struct DocEntry {
  var group: [UInt8]
  var seq: UInt64
  var deleted: Bool

  func encoded() -> [UInt8] {
    var w = ByteWriter()
    w.data(group)
    w.varint(seq)
    w.byte(deleted ? 1 : 0)
    return w.bytes
  }

  init(group: [UInt8], seq: UInt64, deleted: Bool) {
    self.group = group
    self.seq = seq
    self.deleted = deleted
  }

  init(decoding bytes: [UInt8]) throws {
    var r = ByteReader(bytes)
    do {
      group = Array(try r.data())
      seq = try r.varint()
      deleted = try r.byte() != 0
    } catch {
      throw WikiRowError.corrupt("access document")
    }
  }
}

/// An `access.counts` value.
struct GroupCounts {
  var live: Int
  var deleted: Int

  func encoded() -> [UInt8] {
    var w = ByteWriter()
    w.varint(max(0, live))
    w.varint(max(0, deleted))
    return w.bytes
  }

  init(live: Int, deleted: Int) {
    self.live = live
    self.deleted = deleted
  }

  init(decoding bytes: [UInt8]) throws {
    var r = ByteReader(bytes)
    do {
      live = try r.int()
      deleted = try r.int()
    } catch {
      throw WikiRowError.corrupt("access count")
    }
  }
}
