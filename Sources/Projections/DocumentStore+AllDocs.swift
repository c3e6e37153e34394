public import JSON
public import Log
import RevTree

/// Options of `_all_docs`.
public struct AllDocsOptions: Sendable, Hashable {
  public var startKey: String?
  public var endKey: String?
  public var inclusiveEnd = true
  /// Look these ids up, in this order, instead of a range (deleted ones included, as CouchDB does).
  public var keys: [String]?
  public var limit: Int?
  public var skip = 0
  public var descending = false
  public var includeDocs = false
  public var conflicts = false
  /// With `includeDocs`: attachments' data inline, `encoding` of gzip-stored ones.
  public var attachments = false
  public var attEncodingInfo = false
  /// Also answer the database's update seq, read in the same snapshot as the rows
  /// (`update_seq=true`).
  public var updateSeq = false
  /// Only the documents this filter passes exist (a user's view under a ``DocumentAccess``):
  /// rows, `keys` lookups (`not_found` otherwise), `skip` and `offset` count only them.
  /// `total_rows` and `update_seq` are then the caller's to set from the view.
  public var visible: DocumentFilter?

  public init() {}
}

/// `_all_docs`'s answer.
public struct AllDocsResult: Sendable, Hashable {
  public var totalRows: Int
  public var offset: Int
  public var rows: [JSONValue]
  /// The update seq the rows were read at, when ``AllDocsOptions/updateSeq`` asked for it.
  public var updateSeq: LogPosition?

  public init(totalRows: Int, offset: Int, rows: [JSONValue], updateSeq: LogPosition? = nil) {
    self.totalRows = totalRows
    self.offset = offset
    self.rows = rows
    self.updateSeq = updateSeq
  }

  /// `{"total_rows","offset","update_seq"?,"rows"}`, in CouchDB's order.
  public var json: JSONValue {
    var members: [JSONObject.Member] = [
      .init(key: "total_rows", value: .number(JSONNumber(Int64(totalRows)))),
      .init(key: "offset", value: .number(JSONNumber(Int64(offset)))),
    ]
    if let updateSeq {
      members.append(
        .init(key: "update_seq", value: .number(JSONNumber(Int64(clamping: updateSeq.rawValue)))))
    }
    members.append(.init(key: "rows", value: .array(rows)))
    return .object(JSONObject(members))
  }
}

extension DocumentStore {
  /// `_all_docs`: live documents by id (UTF-8 byte order, like CouchDB's raw id order).
  /// `limit: 0` answers no rows (but the counts), as CouchDB does.
  public func allDocs(_ options: AllDocsOptions = AllDocsOptions()) throws -> AllDocsResult {
    try read { txn in
      let total = try documents.docCount(storage: documentStorage, txn: txn)
      let updateSeq = options.updateSeq ? try txn.lastPosition : nil
      var rows: [JSONValue] = []
      let limit = options.limit ?? .max
      func row(_ record: DocumentRecord, key: String, includeDeleted: Bool) throws -> JSONValue? {
        guard let winner = record.tree.winner else { return nil }
        let deleted = winner.status != .available
        if deleted && !includeDeleted { return nil }
        var value: [JSONObject.Member] = [.init(key: "rev", value: .string(winner.rev.description))]
        if deleted { value.append(.init(key: "deleted", value: .bool(true))) }
        var members: [JSONObject.Member] = [
          .init(key: "id", value: .string(record.docID)), .init(key: "key", value: .string(key)),
          .init(key: "value", value: .object(JSONObject(value))),
        ]
        if options.includeDocs {
          members.append(
            .init(
              key: "doc",
              value: deleted
                ? .null
                : try documentJSON(
                  record, winner,
                  options: GetOptions(
                    conflicts: options.conflicts, attachments: options.attachments,
                    attEncodingInfo: options.attEncodingInfo), txn: txn)))
        }
        return .object(JSONObject(members))
      }

      if let keys = options.keys {
        var skipped = 0
        for key in (options.descending ? keys.reversed() : keys) {
          guard rows.count < limit else { break }
          let r: JSONValue
          if options.visible?.includes(key) ?? true,
            let record = try documents.record(key, storage: documentStorage, txn: txn),
            let found = try row(record, key: key, includeDeleted: true)
          {
            r = found
          } else {
            r = .object(
              JSONObject([
                .init(key: "key", value: .string(key)),
                .init(key: "error", value: .string("not_found")),
              ]))
          }
          if skipped < options.skip {
            skipped += 1
            continue
          }
          rows.append(r)
        }
        return AllDocsResult(totalRows: total, offset: 0, rows: rows, updateSeq: updateSeq)
      }

      // Keys are ids, except for ids past ``DocumentKey/inlineBytes``, which sort by their
      // first bytes and then by hash: those rows are compared by their whole ids.
      let start = options.startKey.map {
        DocumentKey.scanStart($0, descending: options.descending)
      }
      let startID = options.startKey.map { Array($0.utf8) }
      let end = options.endKey.map { Array($0.utf8) }
      var skipped = 0
      var offset = 0
      // The first row the limit left out (with `limit: 0`, where the offset is counted from).
      var firstLeftOut: String?
      try txn.scan(
        documentStorage["byId"], from: start, direction: options.descending ? .backward : .forward
      ) { key, value in
        let record = try DocumentRecord(decoding: value)
        let hashed = DocumentKey.isHashed(key)
        let id = hashed ? Array(record.docID.utf8) : key
        if hashed, let startID {
          let before =
            options.descending
            ? startID.lexicographicallyPrecedes(id) : id.lexicographicallyPrecedes(startID)
          if before { return true }
        }
        if let end {
          let past =
            options.descending
            ? id.lexicographicallyPrecedes(end) : end.lexicographicallyPrecedes(id)
          if past || (!options.inclusiveEnd && id == end) {
            // Long ids sharing the end's first bytes come in hash order: read them all.
            return DocumentKey.sharesInlinePart(key, with: end)
          }
        }
        if let visible = options.visible, !visible.includes(record.docID) { return true }
        guard let r = try row(record, key: record.docID, includeDeleted: false) else { return true }
        if skipped < options.skip {
          skipped += 1
          return true
        }
        guard rows.count < limit else {
          firstLeftOut = record.docID
          return false
        }
        rows.append(r)
        return rows.count < limit
      }
      // CouchDB's offset: live documents before the first row in this direction. Without a
      // start key that is what was skipped; with one it takes a count (O(n); no rank in LMDB).
      let first = rows.first?.objectValue?["id"]?.stringValue ?? firstLeftOut
      if start == nil {
        offset = first == nil ? total : skipped
      } else if let first {
        let firstKey = DocumentKey.key(first)
        try txn.scan(
          documentStorage["byId"], from: nil, direction: options.descending ? .backward : .forward
        ) { key, value in
          if key == firstKey { return false }
          let record = try DocumentRecord(decoding: value)
          if record.isLive && options.visible?.includes(record.docID) ?? true { offset += 1 }
          return true
        }
      } else {
        offset = total
      }
      return AllDocsResult(totalRows: total, offset: offset, rows: rows, updateSeq: updateSeq)
    }
  }
}
