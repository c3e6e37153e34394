import JSON
public import Log
import RevTree

extension ChangeRow {
  /// Appends the row as compact JSON to `out`: the bytes `json.serialize(into:)` writes,
  /// without building the ``json`` value first (the changes feed writes one row per document,
  /// so this is its hot path).
  ///
  /// ```swift
  /// var out: [UInt8] = []
  /// for row in try store.changes().results {
  ///   row.serializeJSON(into: &out)
  ///   out.append(0x0A)                      // NDJSON
  /// }
  /// ```
  public func serializeJSON(into out: inout [UInt8], seqTag: [UInt8]? = nil) {
    out.append(contentsOf: #"{"seq":"#.utf8)
    Self.appendSeq(seq.rawValue, tag: seqTag, to: &out)
    out.append(contentsOf: #","id":"#.utf8)
    JSONValue.string(id).serialize(into: &out)
    out.append(contentsOf: #","changes":["#.utf8)
    for (i, rev) in changes.enumerated() {
      if i > 0 { out.append(UInt8(ascii: ",")) }
      out.append(contentsOf: #"{"rev":"#.utf8)
      JSONValue.string(rev).serialize(into: &out)
      out.append(UInt8(ascii: "}"))
    }
    out.append(UInt8(ascii: "]"))
    if deleted { out.append(contentsOf: #","deleted":true"#.utf8) }
    if let doc {
      out.append(contentsOf: #","doc":"#.utf8)
      doc.serialize(into: &out)
    }
    if let actor {
      out.append(contentsOf: #","actor":"#.utf8)
      JSONValue.string(actor).serialize(into: &out)
    }
    if let origin, !origin.isEmpty {
      out.append(contentsOf: #","origin":"#.utf8)
      JSONValue.string(origin).serialize(into: &out)
    }
    out.append(UInt8(ascii: "}"))
  }

  /// `seq` as a number, or with `tag` as the string `"N-TAG"`.
  static func appendSeq(_ seq: UInt64, tag: [UInt8]?, to out: inout [UInt8]) {
    guard let tag else { return appendDecimal(seq, to: &out) }
    out.append(UInt8(ascii: "\""))
    appendDecimal(seq, to: &out)
    out.append(UInt8(ascii: "-"))
    out.append(contentsOf: tag)
    out.append(UInt8(ascii: "\""))
  }

  static func appendDecimal(_ value: UInt64, to out: inout [UInt8]) {
    guard value > 0 else {
      out.append(UInt8(ascii: "0"))
      return
    }
    var digits: (UInt64, UInt64, UInt64) = (0, 0, 0)  // 24 bytes: room for 20 digits
    var count = 0
    var v = value
    unsafe withUnsafeMutableBytes(of: &digits) { buffer in
      while v > 0 {
        unsafe buffer[23 - count] = UInt8(ascii: "0") + UInt8(v % 10)
        v /= 10
        count += 1
      }
      unsafe out.append(contentsOf: UnsafeRawBufferPointer(rebasing: buffer[(24 - count)...]))
    }
  }
}

extension RevID {
  /// `N-hash`, as ``description`` writes it, without going through string interpolation.
  var text: String {
    var s = String(generation)
    s.append("-")
    s.append(hash.description)
    return s
  }
}

/// What ``DocumentStore/writeChangesJSON(_:into:separator:countPending:)`` wrote.
public struct ChangesWritten: Sendable, Hashable {
  /// Rows written.
  public var rows: Int
  /// As ``ChangesResult/lastSeq``.
  public var lastSeq: LogPosition
  /// As ``ChangesResult/pending``; 0 unless counted.
  public var pending: Int
}

extension DocumentStore {
  /// The changes feed of ``changes(_:)``, its rows written straight into `out` as the compact
  /// JSON ``ChangeRow/serializeJSON(into:)`` writes, `separator` between two rows: each row
  /// is made from the document's stored record where it lies in the database's map, its
  /// winner read from the encoded tree (`RevisionTree.winner(encoded:)`) without
  /// decoding it. The same bytes as serializing ``changes(_:)``'s rows, several times faster;
  /// `_changes` and `wikilog tail` use it.
  ///
  /// ```swift
  /// var out: [UInt8] = []
  /// if let written = try store.writeChangesJSON(options, into: &out, separator: Array("\n".utf8)) {
  ///   print(written.rows, written.lastSeq)
  /// }
  /// ```
  /// - Returns: nil, writing nothing, for feeds that need more than the records: documents
  ///   (`includeDocs`), selectors, document filters or the history mode; read those with
  ///   ``changes(_:)``.
  ///
  /// With `seqTag` (``DocumentStore/sequenceTag``), each row's `seq` is the string `"N-TAG"`
  /// the HTTP API answers; without it the number.
  public func writeChangesJSON(
    _ options: ChangesOptions, into out: inout [UInt8], separator: [UInt8],
    countPending: Bool = true, seqTag: String? = nil
  ) throws -> ChangesWritten? {
    let tag = seqTag.map { Array($0.utf8) }
    guard !options.history, !options.includeDocs, options.selector == nil,
      options.documentFilter == nil
    else { return nil }
    return try read { txn in
      var options = options
      options.since = min(options.since, try txn.lastPosition)
      let byId = documentStorage["byId"]
      let byIDs = options.docIDs != nil || options.filter != nil
      var key: [UInt8] = []
      key.reserveCapacity(DocumentKey.hashedBytes)
      var rows = 0
      let (lastSeq, pending) = try scanFeed(options, txn: txn, countPending: countPending) {
        seq, docKey in
        key.removeAll(keepingCapacity: true)
        unsafe docKey.withUnsafeBufferPointer { unsafe key.append(contentsOf: $0) }
        if byIDs {
          guard let id = try docID(byIdKey: key, txn: txn) else { return false }
          if let ids = options.docIDs, !ids.contains(id) { return false }
          if let filter = options.filter, !filter.includes(id) { return false }
        }
        let start = out.count
        if rows > 0 { out.append(contentsOf: separator) }
        let wrote =
          try txn.withValue(forKey: key, in: byId) { record in
            try Self.appendChangeRow(
              seq: seq, record: record, style: options.style, seqTag: tag, to: &out)
          } ?? false
        guard wrote else {
          out.removeSubrange(start...)
          return false
        }
        rows += 1
        return true
      }
      return ChangesWritten(rows: rows, lastSeq: lastSeq, pending: pending)
    }
  }

  /// Appends the feed row of the stored document record `record` (`docs.byId`'s value) whose
  /// latest change is `seq`; false when the record holds no revision.
  static func appendChangeRow(
    seq: UInt64, record: Span<UInt8>, style: ChangesOptions.Style, seqTag: [UInt8]? = nil,
    to out: inout [UInt8]
  ) throws -> Bool {
    // u8 format · varint id length · id · varint update seq · tree (DocumentRecord).
    var at = 1
    func varint() -> UInt64? {
      var result: UInt64 = 0
      var shift: UInt64 = 0
      while at < record.count {
        let byte = record[at]
        at += 1
        if shift == 63 && byte > 1 { return nil }
        result |= UInt64(byte & 0x7F) << shift
        if byte < 0x80 { return result }
        shift += 7
      }
      return nil
    }
    if record.count > 0, record[0] == DocumentRecord.format,
      let idLength = varint(), idLength <= UInt64(record.count - at)
    {
      let id = record.extracting(at..<(at + Int(idLength)))
      at += Int(idLength)
      // With one leaf, `all_docs` lists the winner alone too.
      if varint() != nil,
        let (rev, deleted, leaves) = RevisionTree.winner(encoded: record.extracting(at...)),
        style == .mainOnly || leaves == 1
      {
        out.append(contentsOf: #"{"seq":"#.utf8)
        ChangeRow.appendSeq(seq, tag: seqTag, to: &out)
        out.append(contentsOf: #","id":"#.utf8)
        Self.appendQuoted(id, to: &out)
        out.append(contentsOf: #","changes":[{"rev":""#.utf8)
        rev.appendText(to: &out)
        out.append(contentsOf: deleted ? #""}],"deleted":true}"#.utf8 : #""}]}"#.utf8)
        return true
      }
    }
    // Every leaf of a tree with several (`all_docs`), and trees the one-pass reader leaves to
    // the decoder.
    let decoded = try DocumentRecord(decoding: copy(record))
    guard let winner = decoded.tree.winner else { return false }
    ChangeRow(
      seq: LogPosition(seq), id: decoded.docID, tree: decoded.tree, winner: winner, style: style,
      doc: nil
    ).serializeJSON(into: &out, seqTag: seqTag)
    return true
  }

  /// `bytes` as a JSON string: quoted, escaped only when a byte needs it.
  static func appendQuoted(_ bytes: Span<UInt8>, to out: inout [UInt8]) {
    for i in 0..<bytes.count where bytes[i] < 0x20 || bytes[i] == 0x22 || bytes[i] == 0x5C {
      JSONValue.string(String(decoding: copy(bytes), as: UTF8.self)).serialize(into: &out)
      return
    }
    out.append(UInt8(ascii: "\""))
    unsafe bytes.withUnsafeBufferPointer { unsafe out.append(contentsOf: $0) }
    out.append(UInt8(ascii: "\""))
  }

  /// The bytes of a span, as an array.
  static func copy(_ bytes: Span<UInt8>) -> [UInt8] {
    unsafe bytes.withUnsafeBufferPointer { unsafe Array($0) }
  }
}
