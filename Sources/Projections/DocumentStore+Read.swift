import Formats
public import JSON
public import Log
public import RevTree

/// Options of `GET /db/docid`.
public struct GetOptions: Sendable, Hashable {
  public var rev: String?
  /// `_revisions` (the revision's history, cut to revs_limit).
  public var revs = false
  /// `_revs_info` (each revision of the history and whether its body is available).
  public var revsInfo = false
  public var conflicts = false
  public var deletedConflicts = false
  /// With `rev` or `open_revs`: the leaves that descend from the named revisions instead.
  public var latest = false
  public var localSeq = false
  /// `attachments=true`: each attachment's data inline (base64 of the decoded bytes) instead
  /// of a stub.
  public var attachments = false
  /// `atts_since=[revs]`: data only for attachments newer than the nearest of these revisions
  /// in the revision's history (implies ``attachments``, as in CouchDB).
  public var attsSince: [String]? = nil
  /// `att_encoding_info=true`: `encoding` and `encoded_length` of gzip-stored attachments.
  public var attEncodingInfo = false
  /// With ``attachments``: `"follows": true` (and `length`) instead of the data, which a
  /// multipart answer sends in parts of its own.
  public var follows = false

  public init(
    rev: String? = nil, revs: Bool = false, revsInfo: Bool = false, conflicts: Bool = false,
    deletedConflicts: Bool = false, latest: Bool = false, localSeq: Bool = false,
    attachments: Bool = false, attsSince: [String]? = nil, attEncodingInfo: Bool = false
  ) {
    self.attachments = attachments
    self.attsSince = attsSince
    self.attEncodingInfo = attEncodingInfo
    self.rev = rev
    self.revs = revs
    self.revsInfo = revsInfo
    self.conflicts = conflicts
    self.deletedConflicts = deletedConflicts
    self.latest = latest
    self.localSeq = localSeq
  }
}

/// `open_revs`: every leaf, or the given revisions.
public enum OpenRevs: Sendable, Hashable {
  case all
  case revs([String])
}

/// Numbers of `GET /db`.
public struct DatabaseInfo: Sendable, Hashable {
  public let docCount: Int
  public let deletedDocCount: Int
  public let updateSeq: LogPosition
  public let revsLimit: Int
}

extension DocumentStore {
  /// Runs `body` on one consistent snapshot of the store.
  public func read<T>(_ body: (ReadTransaction) throws -> T) throws -> T {
    do {
      return try log.read(body)
    } catch {
      throw StoreError.from(error)
    }
  }

  /// A document's record (revision tree and update seq), or nil.
  public func record(_ id: String) throws -> DocumentRecord? {
    try read { try record(id, txn: $0) }
  }

  /// ``record(_:)`` in the caller's transaction (a read, or the write of
  /// ``writeDocuments(_:)``).
  public func record(_ id: String, txn: ReadTransaction) throws -> DocumentRecord? {
    try documents.record(id, storage: documentStorage, txn: txn)
  }

  /// Visits the stored document records in id order from the key `start` (``DocumentKey``;
  /// nil for the first or last), forward or backward, with each record's key and encoded
  /// record (``DocumentRecord/init(decoding:)``), until `body` returns false.
  public func scanRecords(
    from start: [UInt8]?, backward: Bool = false, txn: ReadTransaction,
    _ body: ([UInt8], [UInt8]) throws -> Bool
  ) throws {
    try txn.scan(
      documentStorage["byId"], from: start, direction: backward ? .backward : .forward, body)
  }

  public var info: DatabaseInfo {
    get throws {
      try read { txn in
        DatabaseInfo(
          docCount: try documents.docCount(storage: documentStorage, txn: txn),
          deletedDocCount: try documents.deletedCount(storage: documentStorage, txn: txn),
          updateSeq: try txn.lastPosition,
          revsLimit: try documents.revsLimit(storage: documentStorage, txn: txn))
      }
    }
  }

  public var revsLimit: Int {
    get throws { try read { try documents.revsLimit(storage: documentStorage, txn: $0) } }
  }

  // MARK: Documents

  /// A document as `GET /db/docid` returns it.
  ///
  /// - Throws: ``StoreError`` `not_found` with reason `missing` (no such document or revision)
  ///   or `deleted` (the winner is a tombstone and no `rev` was asked for).
  public func get(_ id: String, options: GetOptions = GetOptions()) throws -> JSONValue {
    try read { txn in
      guard let record = try documents.record(id, storage: documentStorage, txn: txn) else {
        throw StoreError.notFound("missing")
      }
      let tree = record.tree
      var revision: RevisionTree.Revision
      if let revString = options.rev {
        let rev: RevID
        do { rev = try RevID(revString) } catch {
          // One CouchDB reads but no tree holds is missing, as there.
          if DocumentInput.isCouchRevision(revString) { throw StoreError.notFound("missing") }
          throw StoreError.badRequest("Invalid rev format")
        }
        guard var found = tree.revision(rev) else { throw StoreError.notFound("missing") }
        if options.latest {
          // The leaf below `rev` that would win: live before deleted, then generation, then hash.
          let leaves = tree.leaves(descendingFrom: rev)
          if let best = leaves.max(by: {
            ($0.status == .available ? 1 : 0, $0.rev) < ($1.status == .available ? 1 : 0, $1.rev)
          }) {
            found = best
          }
        }
        guard found.status != .missing else { throw StoreError.notFound("missing") }
        revision = found
      } else {
        guard let winner = tree.winner else { throw StoreError.notFound("missing") }
        guard winner.status == .available else { throw StoreError.notFound("deleted") }
        revision = winner
      }
      return try documentJSON(record, revision, options: options, txn: txn)
    }
  }

  /// `GET /db/docid?open_revs=...`: `{"ok": doc}` for each revision found, `{"missing": rev}` for
  /// the others; with `latest`, each named revision is replaced by the leaves below it.
  public func openRevs(_ id: String, _ which: OpenRevs, options: GetOptions = GetOptions()) throws
    -> [JSONValue]
  {
    try read { txn in
      try openRevisions(id, which, options: options, txn: txn).map { revision in
        switch revision {
        case .missing(let rev):
          return .object(JSONObject([.init(key: "missing", value: .string(rev))]))
        case .found(let record, let target):
          do {
            return .object(
              JSONObject([
                .init(
                  key: "ok", value: try documentJSON(record, target, options: options, txn: txn))
              ]))
          } catch let error as StoreError where error.reason == "redacted" {
            return .object(
              JSONObject([.init(key: "missing", value: .string(target.rev.description))]))
          }
        }
      }
    }
  }

  /// ``openRevs(_:_:options:)`` in the caller's read transaction, each revision found written
  /// as the JSON bytes of ``documentJSON(_:_:options:txn:)`` with the stored body spliced in
  /// (not parsed and written again): what `_bulk_get` sends, at a fraction of the cost.
  public func openRevsJSON(
    _ id: String, _ which: OpenRevs, options: GetOptions, txn: ReadTransaction
  ) throws -> [OpenRevisionJSON] {
    try openRevisions(id, which, options: options, txn: txn).map { revision in
      switch revision {
      case .missing(let rev): return .missing(rev)
      case .found(let record, let target):
        do {
          return .ok(try documentJSONBytes(record, target, options: options, txn: txn))
        } catch let error as StoreError where error.reason == "redacted" {
          return .missing(target.rev.description)
        }
      }
    }
  }

  /// A revision `openRevsJSON` looked for: its document's JSON, or the revision not found.
  public enum OpenRevisionJSON {
    case ok([UInt8])
    case missing(String)
  }

  /// A revision found is rendered by the caller; one whose body was redacted (its event
  /// erased) is rendered missing there, so replication carries no erased body and reads each
  /// event once.
  enum OpenRevision {
    case found(DocumentRecord, RevisionTree.Revision)
    case missing(String)
  }

  /// The revisions `which` names, in order, each once (`latest` follows each to its leaves).
  func openRevisions(_ id: String, _ which: OpenRevs, options: GetOptions, txn: ReadTransaction)
    throws -> [OpenRevision]
  {
    let record = try documents.record(id, storage: documentStorage, txn: txn)
    switch which {
    case .all:
      guard let record else { return [] }
      return record.tree.leaves.map { .found(record, $0) }
    case .revs(let revs):
      var out: [OpenRevision] = []
      var seen = Set<RevID>()
      for revString in revs {
        let rev: RevID
        do { rev = try RevID(revString) } catch {
          // One CouchDB reads but no tree holds is missing, as there.
          guard DocumentInput.isCouchRevision(revString) else {
            throw StoreError.badRequest("Invalid rev format")
          }
          out.append(.missing(revString))
          continue
        }
        guard let record, let found = record.tree.revision(rev) else {
          out.append(.missing(revString))
          continue
        }
        let targets = options.latest ? record.tree.leaves(descendingFrom: rev) : [found]
        for target in targets where seen.insert(target.rev).inserted {
          out.append(
            target.status == .missing ? .missing(target.rev.description) : .found(record, target))
        }
      }
      return out
    }
  }

  /// The body of the revision whose event is at `position`.
  public func body(at position: UInt64, txn: ReadTransaction) throws -> JSONObject {
    let bytes = try DocumentChange.body(at: position, in: txn)
    do {
      return try JSONValue(parsing: bytes).objectValue ?? JSONObject()
    } catch {
      throw StoreError.internalError("the body at position \(position) is not JSON")
    }
  }

  /// A revision as CouchDB renders it (`couch_doc:to_json_obj/2`): `_id`, `_rev`, the body,
  /// `_deleted`, then `_revisions`, `_revs_info`, `_conflicts`, `_deleted_conflicts`,
  /// `_local_seq` as asked, then `_attachments` (stubs, or data as ``GetOptions`` asks).
  public func documentJSON(
    _ record: DocumentRecord, _ revision: RevisionTree.Revision, options: GetOptions,
    txn: ReadTransaction
  ) throws -> JSONValue {
    let event = try revisionEvent(revision, txn: txn)
    var members = Self.identity(record, revision)
    if let event {
      do {
        members.append(
          contentsOf: (try JSONValue(parsing: event.body).objectValue ?? JSONObject()).members)
      } catch {
        throw StoreError.internalError("the body at position \(revision.body ?? 0) is not JSON")
      }
    }
    members += try specialMembers(
      record, revision, attachments: event?.attachments, options: options, txn: txn)
    return .object(JSONObject(members))
  }

  /// ``documentJSON(_:_:options:txn:)`` serialized, with the stored body's members copied as
  /// they are stored (the canonical serialization the store writes; a body that is not is
  /// parsed and written again).
  func documentJSONBytes(
    _ record: DocumentRecord, _ revision: RevisionTree.Revision, options: GetOptions,
    txn: ReadTransaction
  ) throws -> [UInt8] {
    let event = try revisionEvent(revision, txn: txn)
    let special = try specialMembers(
      record, revision, attachments: event?.attachments, options: options, txn: txn)
    return try Self.documentBytes(
      identity: Self.identity(record, revision), body: event?.body, special: special,
      position: revision.body)
  }

  /// A document's JSON bytes: `identity` members, then the stored `body`'s members copied as
  /// they are stored (the canonical serialization the store writes: `{}` or `{"` ... `}`, no
  /// white space; a body that is not is parsed and written again), then `special`.
  static func documentBytes(
    identity: [JSONObject.Member], body: [UInt8]?, special: [JSONObject.Member],
    position: UInt64? = nil
  ) throws -> [UInt8] {
    var out = JSONValue.object(JSONObject(identity)).serialized()
    out.removeLast()  // "}"
    func append(_ object: JSONObject) {
      guard !object.members.isEmpty else { return }
      let bytes = JSONValue.object(object).serialized()
      out.append(UInt8(ascii: ","))
      out.append(contentsOf: bytes[1..<bytes.count - 1])
    }
    if let body {
      if body.count >= 2, body.first == UInt8(ascii: "{"), body.last == UInt8(ascii: "}"),
        body.count == 2 || body[1] == UInt8(ascii: "\"")
      {
        if body.count > 2 {
          out.append(UInt8(ascii: ","))
          out.append(contentsOf: body[1..<body.count - 1])
        }
      } else {
        do {
          append(try JSONValue(parsing: body).objectValue ?? JSONObject())
        } catch {
          throw StoreError.internalError("the body at position \(position ?? 0) is not JSON")
        }
      }
    }
    append(JSONObject(special))
    out.append(UInt8(ascii: "}"))
    return out
  }

  /// The event holding a revision's body; nil for a revision without one.
  func revisionEvent(_ revision: RevisionTree.Revision, txn: ReadTransaction) throws
    -> DocumentEvent?
  {
    guard let position = revision.body else { return nil }
    guard let event = try txn.event(at: LogPosition(position)) else {
      throw StoreError.internalError("the body at \(position) is missing from the log")
    }
    // A redacted revision (``erase(_:_:actor:origin:reason:dryRun:)``) has no body to show.
    guard event.erasedBy == nil else { throw StoreError("not_found", "redacted", code: .notFound) }
    return try DocumentEvent(decoding: event)
  }

  static func identity(_ record: DocumentRecord, _ revision: RevisionTree.Revision)
    -> [JSONObject.Member]
  {
    [
      .init(key: "_id", value: .string(record.docID)),
      .init(key: "_rev", value: .string(revision.rev.description)),
    ]
  }

  /// The members that follow the body, in `couch_doc:to_json_obj/2`'s order.
  func specialMembers(
    _ record: DocumentRecord, _ revision: RevisionTree.Revision,
    attachments: [StoredAttachment]?, options: GetOptions, txn: ReadTransaction
  ) throws -> [JSONObject.Member] {
    var members: [JSONObject.Member] = []
    if revision.status == .deleted { members.append(.init(key: "_deleted", value: .bool(true))) }
    let tree = record.tree
    if options.revs || options.revsInfo {
      let limit = try documents.revsLimit(storage: documentStorage, txn: txn)
      if options.revs, let path = tree.revisions(of: revision.rev, limit: limit) {
        members.append(.init(key: "_revisions", value: path.revisionsJSON))
      }
      if options.revsInfo, let info = tree.revsInfo(of: revision.rev, limit: limit) {
        members.append(
          .init(
            key: "_revs_info",
            value: .array(
              info.map {
                .object(
                  JSONObject([
                    .init(key: "rev", value: .string($0.rev.description)),
                    .init(key: "status", value: .string($0.status.rawValue)),
                  ]))
              })))
      }
    }
    if options.conflicts {
      let conflicts = tree.conflicts.filter { $0 != revision.rev }
      if !conflicts.isEmpty {
        members.append(
          .init(key: "_conflicts", value: .array(conflicts.map { .string($0.description) })))
      }
    }
    if options.deletedConflicts {
      let deleted = tree.deletedConflicts.filter { $0 != revision.rev }
      if !deleted.isEmpty {
        members.append(
          .init(key: "_deleted_conflicts", value: .array(deleted.map { .string($0.description) })))
      }
    }
    if options.localSeq {
      members.append(.init(key: "_local_seq", value: .number(JSONNumber(Int64(record.updateSeq)))))
    }
    if let attachments, !attachments.isEmpty {
      members.append(
        .init(
          key: "_attachments",
          value: try attachmentsJSON(
            attachments, of: revision.rev, tree: tree, options: options)))
    }
    return members
  }

  /// `_attachments` of revision `rev` as `couch_doc:to_json_attachments` writes it, with data
  /// where ``GetOptions/attachments`` (and ``GetOptions/attsSince``) ask for it.
  func attachmentsJSON(
    _ attachments: [StoredAttachment], of rev: RevID, tree: RevisionTree, options: GetOptions
  ) throws -> JSONValue {
    let withData = options.attachments || options.attsSince != nil
    // `couch_db:find_ancestor_rev_pos/2`: the generation of the newest revision of the
    // history that `atts_since` names; attachments no newer than it are stubs.
    var since = 0
    if let names = options.attsSince, let path = tree.revisions(of: rev) {
      var wanted = Set<RevID>()
      for name in names {
        do { wanted.insert(try RevID(name)) } catch {
          throw StoreError.badRequest("Invalid rev format")
        }
      }
      for (i, hash) in path.ids.enumerated() {
        if let r = try? RevID(generation: path.start - i, hash: hash), wanted.contains(r) {
          since = r.generation
          break
        }
      }
    }
    var members: [JSONObject.Member] = []
    members.reserveCapacity(attachments.count)
    // Data sent inline (base64 in the JSON) is held in memory: at most this much of it,
    // decoded, per document (a gzip-stored attachment can inflate a thousandfold).
    var budget = Self.maxInlineAttachmentBytes
    for a in attachments {
      let send = withData && a.revpos > since
      let data = send && !options.follows ? try attachmentData(a, limit: budget) : nil
      budget -= data?.count ?? 0
      members.append(
        .init(
          key: a.name,
          value: a.json(
            data: data, follows: send && options.follows, showEncoding: options.attEncodingInfo)))
    }
    return .object(JSONObject(members))
  }

  /// The most attachment data a JSON read (`attachments=true` without multipart) carries
  /// inline for one document, decoded: 64 MiB, the server's request limit.
  public static let maxInlineAttachmentBytes = 64 << 20

  /// The data of attachment `a`, decoded (gunzipped when stored gzip); with `limit`, a
  /// `413 too_large` error once the decoded data would pass it (before it is all in memory).
  public func attachmentData(_ a: StoredAttachment, limit: Int? = nil) throws -> [UInt8] {
    func tooLarge() -> StoreError {
      StoreError.tooLarge(
        "the attachments to send inline come to more than \(Self.maxInlineAttachmentBytes >> 20) MiB; read them as multipart (Accept: multipart/related) or one at a time"
      )
    }
    if let limit, a.encoding != "gzip", a.storedLength > limit { throw tooLarge() }
    let stored = try blobs.read(a.md5)
    guard a.encoding == "gzip" else { return stored }
    guard let data = Gunzip.decode(stored, limit: limit) else {
      throw StoreError.internalError("attachment blob \(BlobStore.hex(a.md5)) is not gzip")
    }
    guard case .complete(let bytes) = data else { throw tooLarge() }
    return bytes
  }

  /// `_revs_diff`: for each document, the given revisions the store does not have, and the
  /// leaves that could be their ancestors. Documents with nothing missing are left out.
  public func revsDiff(_ request: [(id: String, revs: [String])]) throws -> [(
    id: String, diff: RevsDiff
  )] {
    var parsed: [(id: String, revs: [RevID])] = []
    parsed.reserveCapacity(request.count)
    for (id, revStrings) in request {
      var revs: [RevID] = []
      for s in revStrings {
        do { revs.append(try RevID(s)) } catch {
          throw StoreError.badRequest("Invalid rev format: \(s)")
        }
      }
      parsed.append((id, revs))
    }
    return try revsDiff(revisions: parsed)
  }

  /// ``revsDiff(_:)`` of revisions already parsed.
  public func revsDiff(revisions request: [(id: String, revs: [RevID])]) throws -> [(
    id: String, diff: RevsDiff
  )] {
    try read { txn in
      var out: [(id: String, diff: RevsDiff)] = []
      for (id, revs) in request {
        let tree =
          try documents.record(id, storage: documentStorage, txn: txn)?.tree ?? RevisionTree()
        let diff = tree.revsDiff(revs)
        if !diff.missing.isEmpty { out.append((id, diff)) }
      }
      return out
    }
  }

  // MARK: _local documents

  func localDocument(_ id: String, txn: ReadTransaction) throws -> (rev: String, body: [UInt8])? {
    guard let bytes = try txn.get(DocumentKey.key(id), in: documentStorage["local"]) else {
      return nil
    }
    var r = ByteReader(bytes)
    do {
      let rev = try r.string()
      return (rev, Array(r.rest()))
    } catch {
      throw StoreError.internalError("the _local document '\(id)' is corrupt")
    }
  }

  /// A `_local` document (`id` without the `_local/` prefix).
  public func getLocal(_ id: String) throws -> JSONValue {
    try read { txn in
      guard let (rev, body) = try localDocument(id, txn: txn) else {
        throw StoreError.notFound("missing")
      }
      let object: JSONObject
      do { object = try JSONValue(parsing: body).objectValue ?? JSONObject() } catch {
        object = JSONObject()
      }
      return .object(
        JSONObject(
          [
            .init(key: "_id", value: .string("_local/" + id)),
            .init(key: "_rev", value: .string(rev)),
          ]
            + object.members))
    }
  }
}

extension DocumentStore {
  /// The `_local` documents whose ids (without the `_local/` prefix) begin with `prefix`, in id
  /// order, with their `0-N` revisions and bodies as stored (as CouchDB's `_local_docs` lists
  /// them, read in one snapshot).
  public func localDocuments(prefix: String = "") throws -> [(
    id: String, rev: String, body: JSONObject
  )] {
    // `_local` ids are at most ``DocumentKey/inlineBytes`` long: their keys are their bytes.
    let start = Array(prefix.utf8)
    return try read { txn in
      var out: [(id: String, rev: String, body: JSONObject)] = []
      try txn.scan(documentStorage["local"], from: start) { key, _ in
        guard key.starts(with: start) else { return false }
        let id = String(decoding: key, as: UTF8.self)
        if let (rev, body) = try localDocument(id, txn: txn) {
          let object = (try? JSONValue(parsing: body).objectValue) ?? JSONObject()
          out.append((id, rev, object))
        }
        return true
      }
      return out
    }
  }
}
