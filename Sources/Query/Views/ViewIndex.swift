import Crypto
import Formats
import Foundation
public import JSON
public import Log
public import Projections
import Synchronization

/// The index of one design document's views (CouchDB's view group), kept behind the log in an
/// LMDB environment of its own (`<database>/views-<signature>/`) by an `IndexFollower`, like
/// every index behind the log: each document changed since its checkpoint is mapped, as its
/// winning revision stands, by the query server of the design document's language, a batch at
/// a time; a deleted winner drops the document's rows.
///
/// | database | key | value |
/// | --- | --- | --- |
/// | `rows` | view · collated key · collated doc id · emission | `[docid, key, value]` |
/// | `byDoc` | doc id | the document's row keys |
/// | `buckets` | view · first row key of the bucket | its bucket summary |
/// | `meta` | `rows:` view | the view's row count |
///
/// Keys are encoded by `Collation` (CouchDB's view collation, strings by ICU), so LMDB's
/// byte order is the view's order and a key range is a range scan. Ties between equal keys
/// are broken by the document id, collated the same way, then by the order of `emit` calls.
///
/// The rows of each view are cut into buckets of about 512 consecutive rows, each
/// with its count and, for `_sum` and `_stats`, the sum, minimum, maximum and sum of squares of
/// its values: what CouchDB keeps in the inner nodes of its B-tree. A reduce over a range reads
/// the buckets inside it and scans only the rows at its two ends; `offset` counts buckets the
/// same way.
public final class ViewIndex: IndexBehindLog {
  /// The design document's views this index is built from.
  public let group: DesignViews
  public var name: String { group.indexName }
  public let databaseNames = ["rows", "byDoc", "buckets", "meta", "reductions"]
  public var mapSize: Int { 64 << 20 }
  public var taskDesignDocument: String { group.id }
  /// Views catch up once writes pause (a quarter of a second), or every 10,000 commits: the
  /// writes keep the CPU, and a query catches the index up first anyway.
  public var quietPeriod: Duration? { .milliseconds(250) }

  /// A failure of the map functions (they do not compile, the query server timed out or
  /// ended), kept so that following the log does not run them again after every commit; a
  /// query clears it and tries again (``retryAfterFailure()``).
  let failure = Mutex<QueryServerError?>(nil)

  /// Rows per bucket, about; a bucket is split at twice this.
  static let bucketSize = 512
  /// Documents per `map_docs` command.
  static let mapBatch = 200
  /// Row keys longer than this are cut, with a digest of the whole key after the cut.
  static let maxKeyBytes = 480

  /// The index of `group`'s views, its functions run by `queryServers` (the store's data
  /// directory's: ``Projections/DirectoryState/queryServers``).
  public init(_ group: DesignViews, queryServers: QueryServerPool) {
    self.group = group
    self.realm = ViewRealm(key: UUID().uuidString, servers: queryServers)
  }

  /// The realm of wikilog's query server that runs this index's functions, map and reduce:
  /// its own (one per index, so per database and design document), never another's.
  let realm: ViewRealm

  /// The `reset` that starts the functions of `realm` (wikilog's query server keeps the realm
  /// under its key; another gets CouchDB's `["reset", {}]`).
  static func reset(realm: String, _ server: QueryServerProcess) -> JSONValue {
    server.command.mapsBatches
      ? .array([.string("reset"), .object(JSONObject()), .string(realm)])
      : .array([.string("reset"), .object(JSONObject())])
  }

  /// Forgets a failure of the map functions, so that the next catch-up runs them again.
  public func retryAfterFailure() {
    failure.withLock { $0 = nil }
  }

  /// The failure that stopped the index, if any.
  public var lastFailure: QueryServerError? { failure.withLock { $0 } }

  // MARK: Building

  public func update(
    _ docID: String, winner: JSONValue?, storage: ProjectionStorage, txn: WriteTransaction
  ) throws {
    try update(
      batch: [IndexedDocument(docID: docID, rev: "", winner: winner)], storage: storage,
      txn: txn)
  }

  public func update(batch: [IndexedDocument], storage: ProjectionStorage, txn: WriteTransaction)
    throws
  {
    if let failed = failure.withLock({ $0 }) { throw failed }
    var toMap: [Int] = []
    var docs: [JSONValue] = []
    for (i, document) in batch.enumerated() {
      guard case .object(var body) = document.winner else { continue }
      if document.docID.hasPrefix("_design/") && !group.includeDesign { continue }
      body.members.insert(.init(key: "_id", value: .string(document.docID)), at: 0)
      if !document.rev.isEmpty {
        body.members.insert(.init(key: "_rev", value: .string(document.rev)), at: 1)
      }
      // As CouchDB gives a map function the document: with its conflicts.
      if !document.conflicts.isEmpty {
        body["_conflicts"] = .array(document.conflicts.map { .string($0) })
      }
      toMap.append(i)
      docs.append(.object(body))
    }
    var mapped: [[[(key: JSONValue, value: JSONValue)]]] = []
    if !docs.isEmpty && !group.views.isEmpty {
      do {
        mapped = try map(docs)
      } catch {
        failure.withLock { $0 = error }
        throw error
      }
    }
    var rowsOf: [Int: [[(key: JSONValue, value: JSONValue)]]] = [:]
    for (n, i) in toMap.enumerated() where n < mapped.count { rowsOf[i] = mapped[n] }
    var tree = BucketWriter(index: self, storage: storage, txn: txn)
    for (i, document) in batch.enumerated() {
      try removeRows(of: document.docID, tree: &tree)
      if let rows = rowsOf[i] {
        try insertRows(rows, of: document.docID, tree: &tree)
      }
    }
    try tree.finish()
  }

  /// The rows each view's map function emits for each of `docs`.
  func map(_ docs: [JSONValue]) throws(QueryServerError) -> [[[(
    key: JSONValue, value: JSONValue
  )]]] {
    try realm.servers.with(language: group.language) {
      server throws(QueryServerError) in
      _ = try server.call(Self.reset(realm: realm.key, server))
      if let lib = group.lib { _ = try server.call(.array([.string("add_lib"), lib])) }
      for view in group.views {
        _ = try server.call(.array([.string("add_fun"), .string(view.map)]))
      }
      var out: [[[(key: JSONValue, value: JSONValue)]]] = []
      out.reserveCapacity(docs.count)
      if server.command.mapsBatches {
        var start = 0
        while start < docs.count {
          let chunk = Array(docs[start..<min(start + Self.mapBatch, docs.count)])
          let answer = try server.call(.array([.string("map_docs"), .array(chunk)]))
          guard case .array(let perDoc) = answer, perDoc.count == chunk.count else {
            throw .processFailed("the query server's answer to map_docs is not one per document")
          }
          for result in perDoc { out.append(try Self.emitted(result)) }
          start += chunk.count
        }
      } else {
        for doc in docs {
          out.append(try Self.emitted(try server.call(.array([.string("map_doc"), doc]))))
        }
      }
      return out
    }
  }

  /// `[[[k, v], …] per function]` as rows per view.
  static func emitted(_ answer: JSONValue) throws(QueryServerError) -> [[(
    key: JSONValue, value: JSONValue
  )]] {
    guard case .array(let perView) = answer else {
      throw .processFailed("the query server's map answer is not an array")
    }
    return perView.map { rows in
      (rows.arrayValue ?? []).compactMap { pair in
        guard case .array(let kv) = pair, kv.count == 2 else { return nil }
        return (kv[0], kv[1])
      }
    }
  }

  /// The key of a row in `rows`: the view's number, the collated key and document id, and the
  /// emission's number among the document's rows with that key.
  static func rowKey(
    view: Int, key: JSONValue, docID: String, emission: Int, raw: Bool = false
  ) -> [UInt8] {
    var out: [UInt8] = [UInt8(view)]
    DesignViews.View.encode(key, raw: raw, into: &out)
    encodeDocID(docID, into: &out)
    if out.count > maxKeyBytes {
      // Cut, with a digest of the whole: still unique, ordered by its first bytes.
      let digest = Array(SHA256.hash(data: out).prefix(12))
      out = Array(out.prefix(maxKeyBytes)) + digest
    }
    out.append(UInt8(truncatingIfNeeded: emission >> 8))
    out.append(UInt8(truncatingIfNeeded: emission))
    return out
  }

  /// A document id as rows of equal keys are ordered by it: by its raw bytes, as CouchDB
  /// compares the ids of equal keys (`couch_ejson_compare`: keys collated, ids as binaries) —
  /// the string tag (`0x05`, which ``ViewReader/exactRange(_:)`` counts on), then its UTF-8,
  /// a zero byte written `00 FF`, ended by `00 00`, so that the order of the bytes is the order
  /// of the ids and what follows is apart.
  static func encodeDocID(_ docID: String, into out: inout [UInt8]) {
    out.append(0x05)
    for byte in docID.utf8 {
      out.append(byte)
      if byte == 0 { out.append(0xFF) }
    }
    out.append(0)
    out.append(0)
  }

  private func removeRows(of docID: String, tree: inout BucketWriter) throws {
    let id = Array(docID.utf8)
    guard let list = try tree.txn.get(id, in: tree.storage["byDoc"]) else { return }
    var at = 0
    while at + 2 <= list.count {
      let length = Int(list[at]) << 8 | Int(list[at + 1])
      let key = Array(list[(at + 2)..<(at + 2 + length)])
      at += 2 + length
      if let value = try tree.txn.get(key, in: tree.storage["rows"]) {
        try tree.txn.delete(key, in: tree.storage["rows"])
        try tree.removed(key: key, row: value)
      }
    }
    try tree.txn.delete(id, in: tree.storage["byDoc"])
  }

  private func insertRows(
    _ perView: [[(key: JSONValue, value: JSONValue)]], of docID: String, tree: inout BucketWriter
  ) throws {
    var list: [UInt8] = []
    for (view, rows) in perView.enumerated() where view < group.views.count {
      for (n, row) in rows.enumerated() {
        let key = Self.rowKey(
          view: view, key: row.key, docID: docID, emission: n, raw: group.views[view].raw)
        let value = JSONValue.array([.string(docID), row.key, row.value]).serialized()
        try tree.txn.put(value, forKey: key, in: tree.storage["rows"])
        try tree.added(key: key, row: value, value: row.value)
        list.append(UInt8(key.count >> 8))
        list.append(UInt8(key.count & 0xFF))
        list.append(contentsOf: key)
      }
    }
    if !list.isEmpty {
      try tree.txn.put(list, forKey: Array(docID.utf8), in: tree.storage["byDoc"])
    }
  }

  /// The rows, the documents' row lists and the counts compared one by one; the buckets,
  /// whose boundaries depend on the order rows came in, each checked against its own rows.
  public func compare(
    live: ProjectionStorage, rebuilt: ProjectionStorage, txn: ReadTransaction, maxDifferences: Int
  ) throws -> [String] {
    var differences = try compareRows(
      of: ["rows", "byDoc", "meta"], live: live, rebuilt: rebuilt, txn: txn,
      maxDifferences: maxDifferences)
    var buckets: [([UInt8], BucketSummary)] = []
    try txn.scan(live["buckets"]) { k, v in
      buckets.append((k, BucketSummary(v)))
      return true
    }
    for (key, summary) in buckets where differences.count < maxDifferences {
      let view = Int(key[0])
      let sums = view < group.views.count && (group.views[view].reduce?.keepsSums ?? false)
      let counted = try BucketWriter.recount(key, storage: live, txn: txn, sums: sums)
      let close = { (a: Double, b: Double) in a == b || abs(a - b) <= 1e-9 * max(abs(a), abs(b)) }
      if counted.count != summary.count || counted.others != summary.others
        || (sums && counted.count > 0
          && !(close(counted.sum, summary.sum) && counted.min == summary.min
            && counted.max == summary.max && close(counted.sumsqr, summary.sumsqr)))
      {
        differences.append(
          "\(name).buckets: \(ProjectionRunner.show(key)) does not sum up its rows")
      }
    }
    return differences
  }

  /// The number of rows of view `number`.
  static func countKey(_ number: Int) -> [UInt8] { Array("rows:".utf8) + [UInt8(number)] }
}

/// A bucket's summary of its rows: how many, and for `_sum` and `_stats` views, the sum,
/// minimum, maximum and sum of squares of the values that are numbers. Values that are not
/// numbers (arrays, objects: `_sum` adds them element by element) are counted in `others`:
/// a reduce scans a bucket that has any. A deletion that may have taken the minimum or the
/// maximum, or a fraction from the sum, marks the summary `stale`, and it is counted again
/// from its rows at the end of the transaction.
struct BucketSummary: Equatable {
  var count: UInt64 = 0
  var sum: Double = 0
  var min: Double = .infinity
  var max: Double = -.infinity
  var sumsqr: Double = 0
  var others: UInt32 = 0
  var stale = false
  /// Bumped whenever the bucket's rows change: a JavaScript reduction kept for the bucket
  /// (`reductions`) holds for this generation only.
  var generation: UInt64 = 0

  mutating func add(_ value: JSONValue, sums: Bool) {
    count += 1
    guard sums else { return }
    if case .number(let n) = value {
      let d = n.doubleValue
      sum += d
      sumsqr += d * d
      if d < min { min = d }
      if d > max { max = d }
    } else {
      others += 1
    }
  }

  mutating func remove(_ value: JSONValue, sums: Bool) {
    count -= Swift.min(count, 1)
    guard sums else { return }
    if case .number(let n) = value {
      let d = n.doubleValue
      if d <= min || d >= max || d != d.rounded() || abs(d) > 1e15 {
        stale = true
      } else {
        sum -= d
        sumsqr -= d * d
      }
    } else {
      others -= Swift.min(others, 1)
    }
  }

  var bytes: [UInt8] {
    var out = count.bigEndianBytes
    for d in [sum, min, max, sumsqr] { out += d.bitPattern.bigEndianBytes }
    out += UInt64(others).bigEndianBytes
    out += generation.bigEndianBytes
    return out
  }

  init() {}

  init(_ bytes: [UInt8]) {
    func word(_ i: Int) -> UInt64 {
      guard bytes.count >= (i + 1) * 8 else { return 0 }
      return UInt64(bigEndianArray: Array(bytes[(i * 8)..<((i + 1) * 8)])) ?? 0
    }
    count = word(0)
    sum = Double(bitPattern: word(1))
    min = Double(bitPattern: word(2))
    max = Double(bitPattern: word(3))
    sumsqr = Double(bitPattern: word(4))
    others = UInt32(truncatingIfNeeded: word(5))
    generation = word(6)
  }
}

/// Keeps the buckets of a view index while its rows change, in one write transaction.
struct BucketWriter {
  let index: ViewIndex
  let storage: ProjectionStorage
  let txn: WriteTransaction
  /// Summaries changed in this transaction, by bucket key (written by ``finish()``).
  var changed: [[UInt8]: BucketSummary] = [:]
  /// Row counts per view, changed in this transaction.
  var counts: [Int: Int64] = [:]

  init(index: ViewIndex, storage: ProjectionStorage, txn: WriteTransaction) {
    self.index = index
    self.storage = storage
    self.txn = txn
  }

  func sums(_ view: Int) -> Bool {
    view < index.group.views.count && (index.group.views[view].reduce?.keepsSums ?? false)
  }

  /// The key of the bucket holding row `key` (the last bucket key at or before it).
  func bucket(of key: [UInt8]) throws -> [UInt8] {
    var found: [UInt8]? = nil
    try txn.scan(storage["buckets"], from: key, direction: .backward) { k, _ in
      if k.first == key.first { found = k }
      return false
    }
    return found ?? [key[0]]
  }

  mutating func summary(_ bucket: [UInt8]) throws -> BucketSummary {
    if let s = changed[bucket] { return s }
    return try txn.get(bucket, in: storage["buckets"]).map(BucketSummary.init) ?? BucketSummary()
  }

  mutating func added(key: [UInt8], row: [UInt8], value: JSONValue) throws {
    let view = Int(key[0])
    counts[view, default: 0] += 1
    let b = try bucket(of: key)
    var s = try summary(b)
    s.add(value, sums: sums(view))
    changed[b] = s
    if s.count > UInt64(2 * ViewIndex.bucketSize) { try split(b) }
  }

  mutating func removed(key: [UInt8], row: [UInt8]) throws {
    let view = Int(key[0])
    counts[view, default: 0] -= 1
    let b = try bucket(of: key)
    var s = try summary(b)
    let value = (try? JSONValue(parsing: row))?.arrayValue?.last ?? .null
    s.remove(value, sums: sums(view))
    changed[b] = s
  }

  /// Splits bucket `b` in two halves, each summarised from its rows.
  private mutating func split(_ b: [UInt8]) throws {
    try flush(b)
    var rows = 0
    var middle: [UInt8]? = nil
    try txn.scan(storage["rows"], from: b) { k, _ in
      guard k.first == b.first else { return false }
      rows += 1
      if rows == ViewIndex.bucketSize + 1 {
        middle = k
        return false
      }
      return true
    }
    guard let middle else { return }
    try txn.put(BucketSummary().bytes, forKey: middle, in: storage["buckets"])
    let generation = try summary(b).generation
    var left = try recount(b)
    left.generation = generation
    changed[b] = left
    changed[middle] = try recount(middle)
  }

  /// Writes bucket `b`'s changed summary now (a split scans the rows and buckets).
  private mutating func flush(_ b: [UInt8]) throws {
    if let s = changed[b] { try txn.put(s.bytes, forKey: b, in: storage["buckets"]) }
  }

  /// Bucket `b`'s summary counted from its rows.
  func recount(_ b: [UInt8]) throws -> BucketSummary {
    try BucketWriter.recount(b, storage: storage, txn: txn, sums: sums(Int(b[0])))
  }

  /// Bucket `b`'s summary counted from its rows in `txn`.
  static func recount(
    _ b: [UInt8], storage: ProjectionStorage, txn: ReadTransaction, sums keepSums: Bool
  ) throws -> BucketSummary {
    var next: [UInt8]? = nil
    try txn.scan(storage["buckets"], from: b + [0]) { k, _ in
      if k.first == b.first { next = k }
      return false
    }
    var s = BucketSummary()
    try txn.scan(storage["rows"], from: b) { k, v in
      guard k.first == b.first else { return false }
      if let next, !k.lexicographicallyPrecedes(next) { return false }
      let value = keepSums ? (try? JSONValue(parsing: v))?.arrayValue?.last ?? .null : .null
      s.add(value, sums: keepSums)
      return true
    }
    return s
  }

  /// Writes the changed summaries (counting again the stale ones, dropping empty buckets but
  /// each view's first) and the row counts.
  mutating func finish() throws {
    for (b, summary) in changed {
      var s = summary
      if s.stale {
        s = try recount(b)
        s.generation = summary.generation
      }
      s.generation += 1
      // A JavaScript reduction kept for the bucket's old rows no longer holds.
      try txn.delete(b, in: storage["reductions"])
      if s.count == 0 && b.count > 1 {
        try txn.delete(b, in: storage["buckets"])
      } else {
        try txn.put(s.bytes, forKey: b, in: storage["buckets"])
      }
    }
    changed = [:]
    for (view, delta) in counts where delta != 0 {
      let key = ViewIndex.countKey(view)
      let now = try txn.get(key, in: storage["meta"]).flatMap { UInt64(bigEndianArray: $0) } ?? 0
      let next = UInt64(max(0, Int64(now) + delta))
      try txn.put(next.bigEndianBytes, forKey: key, in: storage["meta"])
    }
    counts = [:]
  }
}

/// Where a view index's functions run: its realm's key and the query servers of its data
/// directory.
struct ViewRealm: Sendable {
  let key: String
  let servers: QueryServerPool
}
