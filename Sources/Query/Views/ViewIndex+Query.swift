import Formats
public import JSON
public import Log
public import Projections
import Synchronization

/// A view query's answer, as CouchDB writes it: `total_rows`, `offset` and `update_seq` for a
/// map query, and its rows.
public struct ViewResult: Sendable {
  public var totalRows: Int?
  public var offset: Int?
  public var updateSeq: UInt64?
  public var rows: [JSONValue]

  /// `{"total_rows","offset","update_seq"?,"rows"}` (a reduce: `{"update_seq"?,"rows"}`).
  public var json: JSONValue {
    var o = JSONObject()
    if let totalRows { o["total_rows"] = .int(totalRows) }
    if let offset { o["offset"] = .int(offset) }
    if let updateSeq { o["update_seq"] = .int(updateSeq) }
    o["rows"] = .array(rows)
    return .object(o)
  }
}

extension ViewIndex {
  /// Answers `query` on view `viewName` from the index's current state in `txn` (a read
  /// transaction of its environment: see `IndexFollower.read`). `includes` keeps only rows of
  /// documents a restricted reader may read; `document` fetches a document for `include_docs`
  /// (id, revision or nil for the winner; nil when it is missing or deleted).
  public func query(
    _ query: ViewQuery, view viewName: String, txn: ReadTransaction, storage: ProjectionStorage,
    includes: (@Sendable (String) -> Bool)? = nil, reductions: ReductionCache? = nil,
    document: (_ id: String, _ rev: String?) throws -> JSONValue?
  ) throws -> ViewResult {
    guard let (number, view) = group.view(named: viewName) else {
      throw StoreError.notFound("missing_named_view")
    }
    let reader = ViewReader(
      txn: txn, storage: storage, view: number, includes: includes, language: group.language,
      realm: realm, reductions: reductions, definition: view)
    let reducing = view.reduce != nil && query.reduce != false
    if query.reduce == true && view.reduce == nil {
      throw ViewQuery.error("Reduce is invalid for map-only views.")
    }
    let level = try query.grouping()
    if reducing {
      if query.keys != nil && level != nil {
        throw ViewQuery.error("Multi-key fetches for reduce views must use `group=true`")
      }
      if query.includeDocs { throw ViewQuery.error("`include_docs` is invalid for reduce") }
      if query.conflicts != nil {
        throw ViewQuery.error("`conflicts` is invalid for reduce views.")
      }
    } else if level != 0 {
      throw ViewQuery.error("Invalid use of grouping on a map view.")
    }
    if query.keys != nil && (query.startKey != nil || query.endKey != nil) {
      throw ViewQuery.error("`keys` is incompatible with `key`, `start_key` and `end_key`")
    }
    try checkRange(query, view)
    if reducing {
      return ViewResult(rows: try reader.reduceRows(query, level: level))
    }
    var (rows, offset, total) = try reader.mapRows(query)
    if query.includeDocs {
      rows = try rows.map { row in
        guard case .object(var o) = row else { return row }
        var id = o["id"]?.stringValue ?? ""
        var rev: String? = nil
        // CouchDB's `docid_rev`: an object value's `_id` names another document, and its
        // `_rev` (with or without `_id`) the revision to include.
        if case .object(let value) = o["value"] {
          if let linked = value["_id"]?.stringValue { id = linked }
          rev = value["_rev"]?.stringValue
        }
        o["doc"] = try document(id, rev) ?? .null
        return .object(o)
      }
    }
    offset = min(total, offset)
    return ViewResult(totalRows: total, offset: offset, rows: rows)
  }

  /// CouchDB's refusal of a range that cannot match (`couch_mrview_util:check_range`).
  func checkRange(_ query: ViewQuery, _ view: DesignViews.View) throws {
    guard let start = query.startKey, let end = query.endKey, start != end else { return }
    var a: [UInt8] = []
    var b: [UInt8] = []
    view.encode(start, into: &a)
    view.encode(end, into: &b)
    ViewIndex.encodeDocID(query.startDocID ?? (query.descending ? "\u{10FFFF}" : ""), into: &a)
    ViewIndex.encodeDocID(query.endDocID ?? (query.descending ? "" : "\u{10FFFF}"), into: &b)
    if !query.descending && !a.lexicographicallyPrecedes(b) {
      throw ViewQuery.error(
        "No rows can match your key range, reverse your start_key and end_key or set descending=true"
      )
    }
    if query.descending && a.lexicographicallyPrecedes(b) {
      throw ViewQuery.error(
        "No rows can match your key range, reverse your start_key and end_key or set descending=false"
      )
    }
  }
}

/// Reads the rows of one view of a ``ViewIndex`` in a read transaction.
struct ViewReader {
  let txn: ReadTransaction
  let storage: ProjectionStorage
  let view: Int
  let includes: (@Sendable (String) -> Bool)?
  let language: String
  /// The query server's realm for JavaScript reduces (``ViewIndex/realm``).
  let realm: ViewRealm
  /// JavaScript reductions of whole buckets worked out by this query, to keep.
  var reductions: ReductionCache? = nil
  /// The view read: its collation and reduce.
  let definition: DesignViews.View
  var reduce: DesignViews.Reduce? { definition.reduce }

  var viewStart: [UInt8] { [UInt8(view)] }
  var viewEnd: [UInt8] { [UInt8(view + 1)] }

  // MARK: Ranges

  /// The rows `query`'s key range covers, as `[lo, hi)` in `rows`.
  func range(_ query: ViewQuery) -> (lo: [UInt8], hi: [UInt8]) {
    func key(_ k: JSONValue, docID: String?, after: Bool) -> [UInt8] {
      var out = viewStart
      definition.encode(k, into: &out)
      if let docID { ViewIndex.encodeDocID(docID, into: &out) }
      if after { out.append(0xFF) }
      return out
    }
    if !query.descending {
      let lo = query.startKey.map { key($0, docID: query.startDocID, after: false) } ?? viewStart
      let hi =
        query.endKey.map { key($0, docID: query.endDocID, after: query.inclusiveEnd) } ?? viewEnd
      return (lo, hi)
    }
    let hi = query.startKey.map { key($0, docID: query.startDocID, after: true) } ?? viewEnd
    let lo =
      query.endKey.map { key($0, docID: query.endDocID, after: !query.inclusiveEnd) } ?? viewStart
    return (lo, hi)
  }

  /// The rows of exactly `key`.
  func exactRange(_ key: JSONValue) -> (lo: [UInt8], hi: [UInt8]) {
    var lo = viewStart
    definition.encode(key, into: &lo)
    // Every row's doc id part starts with the string tag (0x05).
    return (lo, lo + [0x06])
  }

  /// Calls `body` with each row in `[lo, hi)`, forward or backward, until it returns false;
  /// rows of documents the reader may not read are passed over.
  func scan(
    _ lo: [UInt8], _ hi: [UInt8], descending: Bool,
    _ body: (_ key: [UInt8], _ row: [UInt8]) throws -> Bool
  ) throws {
    guard lo.lexicographicallyPrecedes(hi) else { return }
    if !descending {
      try txn.scan(storage["rows"], from: lo) { k, v in
        guard k.lexicographicallyPrecedes(hi) else { return false }
        if let includes, !includes(Self.docID(v)) { return true }
        return try body(k, v)
      }
    } else {
      try txn.scan(storage["rows"], from: hi, direction: .backward) { k, v in
        if k == hi { return true }
        guard !k.lexicographicallyPrecedes(lo) else { return false }
        if let includes, !includes(Self.docID(v)) { return true }
        return try body(k, v)
      }
    }
  }

  /// The document id of a stored row (`[docid, key, value]`).
  static func docID(_ row: [UInt8]) -> String {
    // The row starts `["`; the id is the first string.
    (try? JSONValue(parsing: row))?.arrayValue?.first?.stringValue ?? ""
  }

  static func parts(_ row: [UInt8]) -> (id: String, key: JSONValue, value: JSONValue) {
    guard let items = (try? JSONValue(parsing: row))?.arrayValue, items.count == 3 else {
      return ("", .null, .null)
    }
    return (items[0].stringValue ?? "", items[1], items[2])
  }

  // MARK: Counting

  /// The buckets of the view, in order: key and row count.
  func buckets(from: [UInt8]? = nil) throws -> [(key: [UInt8], summary: BucketSummary)] {
    var out: [(key: [UInt8], summary: BucketSummary)] = []
    try txn.scan(storage["buckets"], from: from ?? viewStart) { k, v in
      guard k.first == UInt8(view) else { return false }
      out.append((k, BucketSummary(v)))
      return true
    }
    return out
  }

  /// The bucket holding position `x` (the last bucket key at or before it).
  func bucket(of x: [UInt8]) throws -> [UInt8] {
    var found = viewStart
    try txn.scan(storage["buckets"], from: x, direction: .backward) { k, _ in
      if k.first == UInt8(view) { found = k }
      return false
    }
    return found
  }

  /// The rows before position `x` in the view.
  func rank(_ x: [UInt8]) throws -> Int {
    if let includes {
      var n = 0
      try txn.scan(storage["rows"], from: viewStart) { k, v in
        guard k.lexicographicallyPrecedes(x) else { return false }
        if includes(Self.docID(v)) { n += 1 }
        return true
      }
      return n
    }
    let b = try bucket(of: x)
    var n = 0
    try txn.scan(storage["buckets"], from: viewStart) { k, v in
      guard k.first == UInt8(view), k.lexicographicallyPrecedes(b) else { return false }
      n += Int(BucketSummary(v).count)
      return true
    }
    return n + (try txn.count(of: storage["rows"], from: b, before: x))
  }

  /// The rows of the view.
  func total() throws -> Int {
    if includes != nil { return try rank(viewEnd) }
    return Int(
      try txn.get(ViewIndex.countKey(view), in: storage["meta"]).flatMap {
        UInt64(bigEndianArray: $0)
      } ?? 0)
  }

  // MARK: Map queries

  func mapRows(_ query: ViewQuery) throws -> (rows: [JSONValue], offset: Int, total: Int) {
    let total = try total()
    var rows: [JSONValue] = []
    var skip = query.skip
    let limit = query.limit ?? .max
    func take(_ row: [UInt8]) -> Bool {
      if rows.count >= limit { return false }
      if skip > 0 {
        skip -= 1
        return true
      }
      let (id, key, value) = Self.parts(row)
      rows.append(
        .object(
          JSONObject([
            .init(key: "id", value: .string(id)), .init(key: "key", value: key),
            .init(key: "value", value: value),
          ])))
      return rows.count < limit
    }
    var offset = 0
    if let keys = query.keys {
      // As CouchDB (one shard): the keys are read in the order given (reversed when
      // descending), and the offset is the first row's, or with no row, where the last key
      // would be.
      let order = query.descending ? Array(keys.reversed()) : keys
      var firstRow: [UInt8]? = nil
      for key in order {
        let (lo, hi) = exactRange(key)
        if rows.count >= limit && firstRow != nil { break }
        try scan(lo, hi, descending: query.descending) { k, row in
          if firstRow == nil { firstRow = k }
          return take(row)
        }
      }
      if let firstRow {
        offset = query.descending ? total - (try rank(firstRow)) - 1 : try rank(firstRow)
      } else if let last = order.last {
        let (lo, hi) = exactRange(last)
        offset = query.descending ? total - (try rank(hi)) : try rank(lo)
      }
    } else {
      let (lo, hi) = range(query)
      offset = query.descending ? total - (try rank(hi)) : try rank(lo)
      if limit > 0 {
        try scan(lo, hi, descending: query.descending) { _, row in take(row) }
      }
    }
    return (rows, offset + query.skip, total)
  }

  // MARK: Reduce queries

  /// The reduced rows of `query`: one (key null) with no grouping, else one per group.
  func reduceRows(_ query: ViewQuery, level: Int?) throws -> [JSONValue] {
    var out: [JSONValue] = []
    do {
      try reduceRows(query, level: level, into: &out)
    } catch let error as StoreError where error.error == "reduce_overflow_error" {
      // As CouchDB's `fabric_view_row`: the rows so far, then the error as a row.
      out.append(
        .object(
          JSONObject([
            .init(key: "key", value: .null), .init(key: "error", value: .string(error.error)),
            .init(key: "reason", value: .string(error.reason)),
          ])))
    }
    return out
  }

  func reduceRows(_ query: ViewQuery, level: Int?, into out: inout [JSONValue]) throws {
    var skip = query.skip
    let limit = query.limit ?? .max
    func emit(_ key: JSONValue, _ value: JSONValue) -> Bool {
      if out.count >= limit { return false }
      if skip > 0 {
        skip -= 1
        return true
      }
      out.append(
        .object(JSONObject([.init(key: "key", value: key), .init(key: "value", value: value)])))
      return out.count < limit
    }
    if let keys = query.keys {
      for key in keys {
        let (lo, hi) = exactRange(key)
        var state = ReduceState(reduce ?? .count)
        try aggregate(lo, hi, into: &state)
        if state.rows > 0, !emit(key, try state.result(language: language, realm: realm)) { break }
      }
      return
    }
    let (lo, hi) = range(query)
    if level == 0 {
      var state = ReduceState(reduce ?? .count)
      try aggregate(lo, hi, into: &state)
      if state.rows > 0 { _ = emit(.null, try state.result(language: language, realm: realm)) }
      return
    }
    // Group by group, from one end of the range.
    var low = lo
    var high = hi
    while limit > out.count && low.lexicographicallyPrecedes(high) {
      var found: (key: [UInt8], row: [UInt8])? = nil
      try scan(low, high, descending: query.descending) { k, v in
        found = (k, v)
        return false
      }
      guard let found else { break }
      let key = Self.parts(found.row).key
      let (groupKey, gLo, gHi) = groupOf(key, level: level)
      let from = bytesMax(low, gLo)
      let to = bytesMin(high, gHi)
      var state = ReduceState(reduce ?? .count)
      try aggregate(from, to, into: &state)
      if state.rows > 0, !emit(groupKey, try state.result(language: language, realm: realm)) {
        break
      }
      if query.descending { high = gLo } else { low = gHi }
      // A key cut short (longer than the index keeps) could end a group at its own row.
      if !query.descending && !found.key.lexicographicallyPrecedes(low) { low = found.key + [0] }
    }
    return
  }

  /// The JavaScript reduction of a whole bucket: the one kept for its generation, or worked
  /// out now from its rows (and handed to ``reductions`` to keep).
  func bucketReduction(
    _ key: [UInt8], _ summary: BucketSummary, next: [UInt8], _ state: ReduceState
  ) throws -> JSONValue {
    if let kept = try txn.get(key, in: storage["reductions"]), kept.count > 8,
      UInt64(bigEndianArray: Array(kept.prefix(8))) == summary.generation,
      let value = try? JSONValue(parsing: kept.dropFirst(8))
    {
      return value
    }
    var rows = ReduceState(state.reduce)
    try scan(key, next, descending: false) { k, v in
      try rows.add(row: v, key: k)
      return true
    }
    let value = try rows.result(language: language, realm: realm)
    reductions?.keep(key, generation: summary.generation, value)
    return value
  }

  /// The group of `key` at `level` (nil: exact): its key, and its rows' range.
  func groupOf(_ key: JSONValue, level: Int?) -> (JSONValue, [UInt8], [UInt8]) {
    // A key exactly `level` long belongs to the group its longer siblings make (CouchDB
    // groups by the first `level` items), not to a group of its own.
    if let level, case .array(let items) = key, items.count >= level {
      var lo = viewStart
      lo.append(Collation.arrayTag(raw: definition.raw))
      for item in items.prefix(level) { definition.encode(item, into: &lo) }
      return (.array(Array(items.prefix(level))), lo, lo + [0xFF])
    }
    let (lo, hi) = exactRange(key)
    return (key, lo, hi)
  }

  /// Adds the rows in `[lo, hi)` to `state`: whole buckets from their summaries where they
  /// tell enough, the rest row by row.
  func aggregate(_ lo: [UInt8], _ hi: [UInt8], into state: inout ReduceState) throws {
    guard lo.lexicographicallyPrecedes(hi) else { return }
    let usesSummaries = includes == nil && (state.canUseSummaries || state.isFunction)
    guard usesSummaries else {
      try scan(lo, hi, descending: false) { k, v in
        try state.add(row: v, key: k)
        return true
      }
      return
    }
    let first = try bucket(of: lo)
    var list = try buckets(from: first)
    if list.first?.key != first { list.insert((first, BucketSummary()), at: 0) }
    for (i, b) in list.enumerated() {
      if !b.key.lexicographicallyPrecedes(hi) { break }
      let next = i + 1 < list.count ? list[i + 1].key : viewEnd
      let from = bytesMax(lo, b.key)
      let to = bytesMin(hi, next)
      guard from.lexicographicallyPrecedes(to) else { continue }
      if from == b.key && to == next && state.isFunction && b.summary.count > 0 {
        try state.add(reduction: try bucketReduction(b.key, b.summary, next: next, state))
        state.rows += Int(b.summary.count)
      } else if from == b.key && to == next && state.canUse(b.summary) {
        state.add(summary: b.summary)
      } else {
        try scan(from, to, descending: false) { k, v in
          try state.add(row: v, key: k)
          return true
        }
      }
    }
  }
}

/// A reduce under way over a range of rows.
struct ReduceState {
  let reduce: DesignViews.Reduce
  var rows = 0
  var sum: JSONValue? = nil
  /// The first value `_sum` could not add (its result is then the inline error).
  var sumFailure: JSONValue? = nil
  var numericSum = 0.0
  var hasNumericSum = false
  var stats = (sum: 0.0, count: 0.0, min: Double.infinity, max: -Double.infinity, sumsqr: 0.0)
  var distinct = Set<[UInt8]>()
  /// For a JavaScript reduce: the rows not yet reduced, and the reductions of earlier chunks.
  var pending: [JSONValue] = []
  var reductions: [JSONValue] = []

  init(_ reduce: DesignViews.Reduce) {
    self.reduce = reduce
  }

  static let sumError =
    "The _sum function requires that map values be numbers, arrays of numbers, or objects. Objects cannot be mixed with other data structures. Objects can be arbitrarily nested, provided that the values for all fields are themselves numbers, arrays of numbers, or objects."
  static let statsError =
    "Builtin _stats function requires map values to be numbers or objects with keys sum, count, min, max, sumsqr"

  var isFunction: Bool {
    if case .function = reduce { return true }
    return false
  }

  /// Adds the reduction of rows reduced already (a bucket's).
  mutating func add(reduction: JSONValue) throws {
    reductions.append(reduction)
  }

  var canUseSummaries: Bool {
    switch reduce {
    case .count, .sum, .stats: true
    default: false
    }
  }

  func canUse(_ s: BucketSummary) -> Bool {
    switch reduce {
    case .count: true
    case .sum, .stats: s.others == 0
    default: false
    }
  }

  mutating func add(summary s: BucketSummary) {
    rows += Int(s.count)
    guard s.count > 0 else { return }
    switch reduce {
    case .sum:
      numericSum += s.sum
      hasNumericSum = true
    case .stats:
      stats.sum += s.sum
      stats.count += Double(s.count)
      stats.min = Swift.min(stats.min, s.min)
      stats.max = Swift.max(stats.max, s.max)
      stats.sumsqr += s.sumsqr
    default: break
    }
  }

  mutating func add(row: [UInt8], key rowKey: [UInt8]) throws {
    rows += 1
    switch reduce {
    case .count: return
    case .approxCountDistinct:
      // The collated key: the row key without its doc id and emission.
      let parts = ViewReader.parts(row)
      distinct.insert(Collation.encode(parts.key))
    case .sum:
      // After a value `_sum` cannot add, the group's result is CouchDB's inline error.
      guard sumFailure == nil else { return }
      let value = ViewReader.parts(row).value
      if case .number(let n) = value {
        numericSum += n.doubleValue
        hasNumericSum = true
      } else {
        do {
          sum = try Self.sumValues(sum, value)
        } catch let error as StoreError where error.error == "builtin_reduce_error" {
          sumFailure = value
        }
      }
    case .stats:
      let value = ViewReader.parts(row).value
      switch value {
      case .number(let n):
        let d = n.doubleValue
        stats.sum += d
        stats.count += 1
        stats.min = Swift.min(stats.min, d)
        stats.max = Swift.max(stats.max, d)
        stats.sumsqr += d * d
      case .object(let o):
        guard let s = o["sum"]?.numberValue?.doubleValue,
          let c = o["count"]?.numberValue?.doubleValue,
          let mn = o["min"]?.numberValue?.doubleValue, let mx = o["max"]?.numberValue?.doubleValue,
          let sq = o["sumsqr"]?.numberValue?.doubleValue
        else { throw StoreError("builtin_reduce_error", Self.statsError, code: .badRequest) }
        stats.sum += s
        stats.count += c
        stats.min = Swift.min(stats.min, mn)
        stats.max = Swift.max(stats.max, mx)
        stats.sumsqr += sq
      default:
        throw StoreError("builtin_reduce_error", Self.statsError, code: .badRequest)
      }
    case .function:
      let (id, key, value) = ViewReader.parts(row)
      pending.append(.array([.array([key, .string(id)]), value]))
    }
  }

  /// `_sum` of two values (numbers, arrays of numbers element by element, objects by key).
  static func sumValues(_ a: JSONValue?, _ b: JSONValue) throws -> JSONValue {
    guard let a else {
      switch b {
      case .number, .array, .object: return try sumValues(.number(0), b, first: true)
      default: throw StoreError("builtin_reduce_error", sumError, code: .badRequest)
      }
    }
    return try sumValues(a, b, first: false)
  }

  static func sumValues(_ a: JSONValue, _ b: JSONValue, first: Bool) throws -> JSONValue {
    func number(_ d: Double) -> JSONValue { .number(JSONNumber(d) ?? 0) }
    switch (a, b) {
    case (.number(let x), .number(let y)): return number(x.doubleValue + y.doubleValue)
    case (.number(let x), .array(let ys)) where first || x.doubleValue == 0:
      return try sumValues(.array([]), .array(ys), first: false)
    case (.number, .array(let ys)), (.array(let ys), .number):
      let n = a.numberValue ?? b.numberValue ?? 0
      return try sumValues(.array(ys), .array([.number(n)]), first: false)
    case (.array(let xs), .array(let ys)):
      var out: [JSONValue] = []
      for i in 0..<max(xs.count, ys.count) {
        let x = i < xs.count ? xs[i] : nil
        let y = i < ys.count ? ys[i] : nil
        switch (x, y) {
        case (.number(let p)?, .number(let q)?): out.append(number(p.doubleValue + q.doubleValue))
        case (.number?, nil): out.append(x!)
        case (nil, .number?): out.append(y!)
        default: throw StoreError("builtin_reduce_error", sumError, code: .badRequest)
        }
      }
      return .array(out)
    case (.number(let x), .object) where first || x.doubleValue == 0:
      return try sumValues(.object(JSONObject()), b, first: false)
    case (.object(var xs), .object(let ys)):
      for m in ys.members {
        if let existing = xs[m.key] {
          xs[m.key] = try sumValues(existing, m.value, first: false)
        } else {
          switch m.value {
          case .number, .array, .object: xs[m.key] = m.value
          default: throw StoreError("builtin_reduce_error", sumError, code: .badRequest)
          }
        }
      }
      return .object(xs)
    default:
      throw StoreError("builtin_reduce_error", sumError, code: .badRequest)
    }
  }

  /// The reduction of everything added.
  mutating func result(language: String, realm: ViewRealm) throws -> JSONValue {
    func number(_ d: Double) -> JSONValue { .number(JSONNumber(d) ?? 0) }
    switch reduce {
    case .count: return .int(rows)
    case .approxCountDistinct: return .int(distinct.count)
    case .sum:
      // CouchDB answers a group it cannot sum with the error as its value (200, the other
      // groups summed): `{"error":"builtin_reduce_error","reason":…,"caused_by":value}`.
      func failed(_ cause: JSONValue) -> JSONValue {
        .object(
          JSONObject([
            "error": .string("builtin_reduce_error"), "reason": .string(Self.sumError),
            "caused_by": cause,
          ]))
      }
      if let sumFailure { return failed(sumFailure) }
      if let sum {
        guard hasNumericSum else { return sum }
        do {
          return try Self.sumValues(sum, number(numericSum), first: false)
        } catch let error as StoreError where error.error == "builtin_reduce_error" {
          return failed(number(numericSum))
        }
      }
      return number(numericSum)
    case .stats:
      return .object(
        JSONObject([
          .init(key: "sum", value: number(stats.sum)),
          .init(key: "count", value: number(stats.count)),
          .init(key: "min", value: number(stats.count > 0 ? stats.min : 0)),
          .init(key: "max", value: number(stats.count > 0 ? stats.max : 0)),
          .init(key: "sumsqr", value: number(stats.sumsqr)),
        ]))
    case .function(let source):
      var all = reductions
      if !pending.isEmpty || all.isEmpty {
        all.append(
          try JavaScriptReduce.reduce(
            source, rows: pending, language: language, realm: realm))
      }
      if all.count == 1 { return all[0] }
      return try JavaScriptReduce.rereduce(
        source, values: all, language: language, realm: realm)
    }
  }
}

/// JavaScript reduces, run by the query server: rows reduced a chunk at a time, the chunks'
/// reductions then rereduced, as CouchDB reduces the leaves and then the inner nodes of its
/// B-tree.
enum JavaScriptReduce {
  static let chunk = 500

  static func reduce(
    _ source: String, rows: [JSONValue], language: String, realm: ViewRealm
  ) throws -> JSONValue {
    do {
      return try realm.servers.with(language: language) {
        server throws(QueryServerError) -> JSONValue in
        // In the realm of this design document's views in this database: nothing of another's.
        _ = try server.call(ViewIndex.reset(realm: realm.key, server))
        var reductions: [JSONValue] = []
        var start = 0
        repeat {
          let part = Array(rows[start..<min(start + chunk, rows.count)])
          let command = JSONValue.array([
            .string("reduce"), .array([.string(source)]), .array(part),
          ])
          reductions.append(try checked(try server.call(command), command, source))
          start += chunk
        } while start < rows.count
        if reductions.count == 1 { return reductions[0] }
        let command = JSONValue.array(
          [.string("rereduce"), .array([.string(source)]), .array(reductions)])
        return try checked(try server.call(command), command, source)
      }
    } catch {
      let (name, reason) = error.couchError
      throw StoreError(name, reason, code: .internalError)
    }
  }

  static func rereduce(
    _ source: String, values: [JSONValue], language: String, realm: ViewRealm
  ) throws -> JSONValue {
    do {
      return try realm.servers.with(language: language) {
        server throws(QueryServerError) -> JSONValue in
        _ = try server.call(ViewIndex.reset(realm: realm.key, server))
        let command = JSONValue.array(
          [.string("rereduce"), .array([.string(source)]), .array(values)])
        return try checked(try server.call(command), command, source)
      }
    } catch {
      let (name, reason) = error.couchError
      throw StoreError(name, reason, code: .internalError)
    }
  }

  /// The first result of a reduce answer, refused as CouchDB's query server refuses a reduce
  /// that does not shrink (its `reduce_limit`, on by default): output beyond 4096 bytes and
  /// more than half the size of its input (the command less the function's source) is
  /// `reduce_overflow_error`, which the view answers as a row of its own.
  static func checked(_ answer: JSONValue, _ command: JSONValue, _ source: String)
    throws(QueryServerError) -> JSONValue
  {
    let result = try first(answer)
    if case .array(let items) = answer, items.count == 2 {
      let output = items[1].serialized().count
      if output > 4096 {
        let input = command.serialized().count - source.utf8.count
        if output * 2 > input {
          throw .failed(
            error: "reduce_overflow_error",
            reason:
              "Reduce output must shrink more rapidly: input size: \(input) output size: \(output)"
          )
        }
      }
    }
    return result
  }

  static func first(_ answer: JSONValue) throws(QueryServerError) -> JSONValue {
    guard case .array(let items) = answer, items.count == 2, items[0] == .bool(true),
      case .array(let results) = items[1], let first = results.first
    else {
      throw .processFailed("the query server's reduce answer is not [true, [result]]")
    }
    return first
  }
}

func bytesMax(_ a: [UInt8], _ b: [UInt8]) -> [UInt8] { a.lexicographicallyPrecedes(b) ? b : a }
func bytesMin(_ a: [UInt8], _ b: [UInt8]) -> [UInt8] { a.lexicographicallyPrecedes(b) ? a : b }

/// JavaScript reductions of whole buckets a query worked out, kept afterwards in the index's
/// `reductions` database (generation, then the JSON) after the query.
public final class ReductionCache: Sendable {
  private let found = Mutex<[(key: [UInt8], generation: UInt64, value: JSONValue)]>([])

  public init() {}

  func keep(_ key: [UInt8], generation: UInt64, _ value: JSONValue) {
    found.withLock { $0.append((key, generation, value)) }
  }

  var isEmpty: Bool { found.withLock { $0.isEmpty } }

  /// Writes the reductions whose bucket is still of the generation they were worked out for.
  func write(into storage: ProjectionStorage, txn: WriteTransaction) throws {
    for entry in found.withLock({ $0 }) {
      guard let bytes = try txn.get(entry.key, in: storage["buckets"]),
        BucketSummary(bytes).generation == entry.generation
      else { continue }
      try txn.put(
        entry.generation.bigEndianBytes + entry.value.serialized(), forKey: entry.key,
        in: storage["reductions"])
    }
  }
}
