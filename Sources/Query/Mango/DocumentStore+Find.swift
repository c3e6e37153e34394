import Formats
import Foundation
public import JSON
public import Log
public import Projections
import RevTree

/// How a `_find` reads: the index (nil: `_all_docs`), its key range and direction.
public struct FindPlan: Sendable {
  /// The index chosen; nil for CouchDB's special `_all_docs` index (a scan by id).
  public let index: MangoIndex?
  /// Bytes of the first key to read (after the index prefix), nil from the start.
  let lower: [UInt8]?
  /// Bytes the last key may start with or precede (after the prefix), nil to the end.
  let upper: [UInt8]?
  /// Read backwards (a descending sort).
  public let descending: Bool
  /// The JSON bounds, for `_explain` (`start_key`, `end_key`).
  let startKey: JSONValue
  let endKey: JSONValue
  /// Why no index or the named one was not used, for the response's `warning`.
  public let warning: String?
  /// Whether the index covers the query (``MangoIndex/covers(_:)``): the results are made of
  /// its values, and no document is read.
  public var covering = false
}

/// What a query asks of an index, for the planner and `_explain`.
struct IndexNeeds {
  /// The conditions on fields the selector's top-level `$and` holds.
  let required: [([String], Selector.Condition)]
  /// ``Selector/requiredPaths``: the fields a match must have (nil: any).
  let requiredPaths: Set<[String]>?
  let sortPaths: [[String]]
  /// Fields the selector holds equal to one value.
  let constant: Set<[String]>

  init(_ query: FindQuery) {
    required = query.selector.requiredConditions
    requiredPaths = query.selector.requiredPaths
    sortPaths = query.sort.map { Selector.path($0.field) }
    constant = Set(
      required.compactMap { path, condition -> [String]? in
        if case .eq = condition { return path }
        return nil
      })
  }

  /// Why a JSON index on `paths` cannot serve the query, as `mango_idx_view:is_usable` says
  /// (`field_mismatch`, `sort_order_mismatch`); empty when it can. The sort's fields and
  /// `_id`/`_rev` need not be required by the selector (a sort already leaves out documents
  /// without its fields), and the sort is served when it is a prefix of the index's fields once
  /// the leading fields the selector holds equal are passed (`can_use_sort`).
  func reasons(_ paths: [[String]]) -> [String] {
    let exempt = Set(sortPaths + [["_id"], ["_rev"]])
    var out: [String] = []
    if !paths.allSatisfy({ requiredPaths?.contains($0) ?? true || exempt.contains($0) }) {
      out.append("field_mismatch")
    }
    if !servesSort(paths[...]) { out.append("sort_order_mismatch") }
    return out
  }

  /// Why `_all_docs` cannot serve the query, as `mango_idx_special:is_usable` says: with a
  /// sort, the selector must look `_id` up and the sort be `_id`'s.
  func specialReasons() -> [String] {
    guard !sortPaths.isEmpty else { return [] }
    var out: [String] = []
    if !required.contains(where: { $0.0 == ["_id"] && DocumentStore.isIndexable($0.1) }) {
      out.append("field_mismatch")
    }
    if sortPaths != [["_id"]] { out.append("sort_order_mismatch") }
    return out
  }

  func servesSort(_ columns: ArraySlice<[String]>) -> Bool {
    guard let sortFirst = sortPaths.first else { return true }
    guard let first = columns.first else { return false }
    if first == sortFirst { return columns.starts(with: sortPaths) }
    return constant.contains(first) && servesSort(columns.dropFirst())
  }
}

/// What `_find` answers.
public struct FindResult: Sendable {
  public var docs: [JSONValue]
  /// Where the next page starts (`"nil"` when nothing was returned).
  public var bookmark: String
  public var warning: String?
  public var stats: Stats?

  public struct Stats: Sendable, Hashable {
    public var keysExamined = 0
    public var docsExamined = 0
    public var resultsReturned = 0
    public var milliseconds = 0.0
  }

  /// CouchDB's body: `docs`, `bookmark`, then `warning` and `execution_stats` when present.
  public var json: JSONValue {
    var members: [JSONObject.Member] = [
      .init(key: "docs", value: .array(docs)), .init(key: "bookmark", value: .string(bookmark)),
    ]
    if let warning { members.append(.init(key: "warning", value: .string(warning))) }
    if let stats {
      members.append(
        .init(
          key: "execution_stats",
          value: .object(
            JSONObject([
              .init(
                key: "total_keys_examined", value: .number(JSONNumber(Int64(stats.keysExamined)))),
              .init(
                key: "total_docs_examined", value: .number(JSONNumber(Int64(stats.docsExamined)))),
              .init(key: "total_quorum_docs_examined", value: .number(0)),
              .init(
                key: "results_returned", value: .number(JSONNumber(Int64(stats.resultsReturned)))),
              .init(
                key: "execution_time_ms",
                value: .number(JSONNumber((stats.milliseconds * 1000).rounded() / 1000) ?? 0)),
            ]))))
    }
    return .object(JSONObject(members))
  }
}

extension DocumentStore {
  /// The Mango projection's databases, when the store has one.
  var mangoStorage: ProjectionStorage? { projections.storage(of: "mango") }

  func mangoIndexes() throws -> [MangoIndex] {
    try read { txn in try mangoIndexes(txn: txn) }
  }

  /// ``mangoIndexes()`` as transaction `txn` sees them.
  func mangoIndexes(txn: ReadTransaction) throws -> [MangoIndex] {
    guard let storage = mangoStorage, let projection = projection(MangoProjection.self)?.projection
    else { return [] }
    return try projection.definitions(storage: storage, txn: txn)
  }

  func mangoIndexSizes(ddoc: String) throws -> (active: Int, external: Int) {
    guard let storage = mangoStorage else { return (0, 0) }
    return try read { txn in
      let prefixes = try mangoIndexes(txn: txn).filter { $0.ddoc == ddoc }.map(\.prefix)
      var active = 0
      var external = 0
      for prefix in prefixes {
        try txn.scan(storage["entries"], from: prefix) { key, value in
          guard key.starts(with: prefix) else { return false }
          active += key.count + value.count
          let (id, values) = try MangoIndex.decodeRowValue(value)
          external += id.utf8.count + values.count
          return true
        }
        try txn.scan(storage["byDoc"], from: prefix) { key, value in
          guard key.starts(with: prefix) else { return false }
          active += key.count + value.count
          return true
        }
      }
      return (active, external)
    }
  }

  /// The special `_all_docs` index as `_index` and `_explain` list it.
  static let allDocsIndexListing = JSONValue.object(
    JSONObject([
      .init(key: "ddoc", value: .null), .init(key: "name", value: .string("_all_docs")),
      .init(key: "type", value: .string("special")),
      .init(
        key: "def",
        value: .object(
          JSONObject([
            .init(
              key: "fields",
              value: .array([.object(JSONObject([.init(key: "_id", value: .string("asc"))]))]))
          ]))),
    ]))

  func indexListing() throws -> JSONValue {
    let indexes = try mangoIndexes()
    let special = Self.allDocsIndexListing
    return .object(
      JSONObject([
        .init(key: "total_rows", value: .number(JSONNumber(Int64(indexes.count + 1)))),
        .init(key: "indexes", value: .array([special] + indexes.map(\.listing))),
      ]))
  }

  // MARK: Planning

  func plan(_ query: FindQuery) throws -> FindPlan {
    try plan(query, selectIndex(query, indexes: try mangoIndexes()))
  }

  /// The plan for `query` from its index selection (``selectIndex(_:indexes:)``).
  func plan(_ query: FindQuery, _ selection: IndexSelection) throws -> FindPlan {
    let required = selection.needs.required
    let descending = query.sort.first?.descending ?? false
    var warning: String?
    if let ddoc = query.useIndexDDoc, selection.named.isEmpty {
      guard query.allowFallback else {
        throw StoreError(
          "no_usable_index", "The index specified with \"use_index\" is not usable for the query.",
          code: .badRequest)
      }
      let label = query.useIndex.count < 2 ? ddoc : "\(ddoc), \(query.useIndex[1])"
      // CouchDB's two wordings (`mango_cursor:invalid_index_warning_int`).
      warning =
        query.useIndex.count < 2
        ? "\(label) was not used because it does not contain a valid index for this query."
        : "\(label) was not used because it is not a valid index for this query."
    }
    switch selection.winner {
    case .json(let index):
      let (lower, upper, start, end) = range(index, required)
      return FindPlan(
        index: index, lower: lower, upper: upper, descending: descending, startKey: start,
        endKey: end, warning: warning, covering: index.covers(query.requiredFields))
    case .special:
      if query.useIndexDDoc == nil && !query.allowFallback {
        throw StoreError(
          "no_usable_index", "No index exists for this selector and allow_fallback is false.",
          code: .badRequest)
      }
      let (lower, upper, start, end) = idRange(required)
      return FindPlan(
        index: nil, lower: lower, upper: upper, descending: descending, startKey: start,
        endKey: end,
        warning: warning ?? "No matching index found, create an index to optimize query time.")
    case nil:
      throw StoreError(
        "no_usable_index", "No global index exists for this sort, try indexing by the sort fields.",
        code: .badRequest)
    }
  }

  /// Whether `a` ranks before `b` among usable indexes, as `mango_cursor_view:choose_best_index`
  /// ranks them: the longer prefix of leading fields the selector can look up
  /// (``prefixLength(_:_:)``), then fewer fields, then the design document and name.
  func better(
    _ a: MangoIndex, _ b: MangoIndex, _ required: [([String], Selector.Condition)]
  ) -> Bool {
    let (pa, pb) = (prefixLength(a.paths, required), prefixLength(b.paths, required))
    if pa != pb { return pa > pb }
    if a.fields.count != b.fields.count { return a.fields.count < b.fields.count }
    return (a.ddoc, a.name) < (b.ddoc, b.name)
  }

  /// How many leading fields of an index (`paths`) the selector holds a condition an index can
  /// look up on (`$eq`, `$gt`, `$gte`, `$lt`, `$lte`, `$beginsWith`, `$exists`): the composite
  /// prefix of `mango_cursor_view:composite_prefix` over `mango_idx_view:indexable_fields`.
  func prefixLength(_ paths: [[String]], _ required: [([String], Selector.Condition)]) -> Int {
    var n = 0
    for path in paths {
      guard required.contains(where: { $0.0 == path && Self.isIndexable($0.1) }) else { break }
      n += 1
    }
    return n
  }

  static func isIndexable(_ c: Selector.Condition) -> Bool {
    switch c {
    case .eq, .gt, .gte, .lt, .lte, .beginsWith, .exists: true
    default: false
    }
  }

  /// The key range of `index` the conditions allow: the equal leading fields, then the bounds
  /// of the next field. Bounds are inclusive; the selector, applied to every document read,
  /// drops what an exclusive bound leaves out.
  func range(_ index: MangoIndex, _ required: [([String], Selector.Condition)]) -> (
    [UInt8]?, [UInt8]?, JSONValue, JSONValue
  ) {
    var fixed: [UInt8] = []
    var startJSON: [JSONValue] = []
    var endJSON: [JSONValue] = []
    var lower: [UInt8]?
    var upper: [UInt8]?
    for path in index.paths {
      let conditions = required.filter { $0.0 == path }.map(\.1)
      if let eq = conditions.lazy.compactMap({ c -> JSONValue? in
        if case .eq(let v) = c { return v }
        return nil
      }).first {
        Collation.encode(eq, into: &fixed)
        startJSON.append(eq)
        endJSON.append(eq)
        continue
      }
      var low: JSONValue?
      var high: JSONValue?
      var prefixBound: String?
      for c in conditions {
        switch c {
        case .gt(let v), .gte(let v):
          if low.map({ Collation.compare(v, $0) > 0 }) ?? true { low = v }
        case .lt(let v), .lte(let v):
          if high.map({ Collation.compare(v, $0) < 0 }) ?? true { high = v }
        case .beginsWith(let s):
          prefixBound = s
        default: break
        }
      }
      if let prefixBound, low == nil, high == nil {
        let p = Collation.foldedPrefix(prefixBound)
        lower = fixed + p
        upper = fixed + p
        startJSON.append(.string(prefixBound))
        // U+FFFF sorts last in CouchDB's collation, so its range ends there.
        endJSON.append(.string(prefixBound + "\u{FFFF}"))
      } else {
        if let low {
          lower = fixed + Collation.encode(low)
          startJSON.append(low)
        }
        if let high {
          upper = fixed + Collation.encode(high)
          endJSON.append(high)
        }
      }
      break
    }
    if lower == nil && !fixed.isEmpty { lower = fixed }
    if upper == nil && !fixed.isEmpty { upper = fixed }
    return (
      lower.map(MangoIndex.truncated), upper.map(MangoIndex.truncated),
      .array(startJSON),
      // CouchDB's end key always closes with its maximum, which `_explain` writes "<MAX>"
      // (`mango_idx_view:end_key`, `maybe_replace_max_json`).
      .array(endJSON + [.string("<MAX>")])
    )
  }

  /// The id range of `_all_docs` the `_id` conditions allow.
  func idRange(_ required: [([String], Selector.Condition)]) -> (
    [UInt8]?, [UInt8]?, JSONValue, JSONValue
  ) {
    var low: String?
    var high: String?
    // The end key `_explain` shows: `high`, or the prefix and U+FFFF for `$beginsWith`.
    var shownHigh: String?
    for (path, c) in required where path == ["_id"] {
      switch c {
      case .eq(.string(let s)):
        low = s
        high = s
        shownHigh = s
      case .gt(.string(let s)), .gte(.string(let s)):
        if low.map({ $0.utf8.lexicographicallyPrecedes(s.utf8) }) ?? true { low = s }
      case .lt(.string(let s)), .lte(.string(let s)):
        if high.map({ s.utf8.lexicographicallyPrecedes($0.utf8) }) ?? true {
          high = s
          shownHigh = s
        }
      case .beginsWith(let s):
        low = s
        high = s
        shownHigh = s + "\u{FFFF}"
      default: break
      }
    }
    return (
      low.map { Array($0.utf8) }, high.map { Array($0.utf8) }, low.map { .string($0) } ?? .null,
      shownHigh.map { .string($0) } ?? .string("<MAX>")
    )
  }

  // MARK: Running

  func find(_ query: FindQuery, visible: DocumentFilter? = nil) throws -> FindResult {
    let clock = ContinuousClock.now
    let plan = try plan(query)
    var stats = FindResult.Stats()
    var docs: [JSONValue] = []
    var lastKey: [UInt8]?
    var after: [UInt8]?
    if let bookmark = query.bookmark {
      guard let decoded = Self.decodeBookmark(bookmark, index: plan.index) else {
        throw StoreError(
          "invalid_bookmark", "Invalid bookmark value: \"\(bookmark)\"", code: .badRequest)
      }
      after = decoded
    }
    var skipped = 0
    try read { txn in
      /// Applies the selector to a document that matched the range, then skip and limit.
      func take(_ full: JSONValue, key: [UInt8]) -> Bool {
        guard query.selector.matches(full) else { return true }
        if skipped < query.skip {
          skipped += 1
          return true
        }
        guard docs.count < query.limit else { return false }
        docs.append(Self.project(full, query.fields))
        lastKey = key
        return docs.count < query.limit
      }
      /// A row of the index (with its serialized values, when the index covers the query) or
      /// of `_all_docs`.
      func consider(
        _ docID: String, key: [UInt8], covered: (MangoIndex, ArraySlice<UInt8>)? = nil
      ) throws -> Bool {
        if let visible, !visible.includes(docID) { return true }
        stats.keysExamined += 1
        // The index covers the query: its values are the document (no document is read).
        if let (index, values) = covered {
          return take(
            index.coveredDocument(docID, values: try JSONValue(parsing: values)), key: key)
        }
        guard let record = try record(docID, txn: txn),
          let winner = record.tree.winner, winner.status == .available, let at = winner.body
        else { return true }
        _ = at
        stats.docsExamined += 1
        // Design documents are examined but never results, as in CouchDB (`_all_docs` reads
        // them; its views leave them out).
        if docID.hasPrefix("_design/") { return true }
        let full = try documentJSON(
          record, winner, options: GetOptions(conflicts: query.conflicts), txn: txn)
        return take(full, key: key)
      }
      guard query.limit > 0, !query.selector.matchesNothingInFind else { return }
      if let index = plan.index {
        guard let storage = mangoStorage else { return }
        try scanIndex(index, plan, after: after, storage: storage, txn: txn) { key, id, values in
          try consider(id, key: key, covered: plan.covering ? (index, values) : nil)
        }
      } else {
        try scanAllDocs(plan, after: after, txn: txn) { key, id in
          try consider(id, key: key)
        }
      }
    }
    stats.resultsReturned = docs.count
    let elapsed = ContinuousClock.now - clock
    stats.milliseconds =
      Double(elapsed.components.seconds) * 1000 + Double(elapsed.components.attoseconds) / 1e15
    let bookmark =
      lastKey.map { Self.encodeBookmark($0, index: plan.index) } ?? query.bookmark ?? "nil"
    return FindResult(
      docs: docs, bookmark: bookmark, warning: plan.warning,
      stats: query.executionStats ? stats : nil)
  }

  /// Reads `index`'s rows in the plan's range and direction, after `after` (a bookmark's
  /// key) when given; `body` gets each row key (past the prefix), document id and the
  /// serialized field values.
  func scanIndex(
    _ index: MangoIndex, _ plan: FindPlan, after: [UInt8]?, storage: ProjectionStorage,
    txn: ReadTransaction, _ body: ([UInt8], String, ArraySlice<UInt8>) throws -> Bool
  ) throws {
    let prefix = index.prefix
    let start: [UInt8]
    if let after {
      start = prefix + after
    } else if plan.descending {
      start = prefix + (plan.upper ?? []) + [UInt8](repeating: 0xFF, count: 150)
    } else {
      start = prefix + (plan.lower ?? [])
    }
    try txn.scan(
      storage["entries"], from: start, direction: plan.descending ? .backward : .forward
    ) { key, value in
      guard key.starts(with: prefix) else { return false }
      let rest = Array(key[prefix.count...])
      if let after, rest == after { return true }
      let (id, values) = try MangoIndex.decodeRowValue(value)
      let fieldPart = Array(rest.prefix(rest.count - MangoIndex.docKey(id).count))
      if plan.descending {
        if let lower = plan.lower, fieldPart.lexicographicallyPrecedes(lower) { return false }
      } else if let upper = plan.upper, !fieldPart.starts(with: upper),
        upper.lexicographicallyPrecedes(fieldPart)
      {
        return false
      }
      return try body(rest, id, values)
    }
  }

  /// Reads `docs.byId` in the plan's id range and direction, after `after` (a `byId` key) when
  /// given; `body` gets each row's key and document id. Ids longer than
  /// ``DocumentKey/inlineBytes`` are keyed by their first bytes and a hash, so those rows are
  /// compared by their whole ids, and the ones sharing a bound's first bytes are all read.
  func scanAllDocs(
    _ plan: FindPlan, after: [UInt8]?, txn: ReadTransaction,
    _ body: ([UInt8], String) throws -> Bool
  ) throws {
    let start =
      after
      ?? (plan.descending
        ? plan.upper.map { DocumentKey.scanStart($0 + [0xFF], descending: true) }
        : plan.lower.map { DocumentKey.scanStart($0, descending: false) })
    try scanRecords(from: start, backward: plan.descending, txn: txn) { key, value in
      if let after, key == after { return true }
      let hashed = DocumentKey.isHashed(key)
      let id = hashed ? Array(try DocumentRecord(decoding: value).docID.utf8) : key
      func aboveUpper() -> Bool {
        guard let upper = plan.upper else { return false }
        return !id.starts(with: upper) && upper.lexicographicallyPrecedes(id)
      }
      func belowLower() -> Bool {
        guard let lower = plan.lower else { return false }
        return id.lexicographicallyPrecedes(lower)
      }
      if plan.descending {
        if belowLower() {
          return plan.lower.map { DocumentKey.sharesInlinePart(key, with: $0) } == true
        }
        if hashed && aboveUpper() { return true }
      } else {
        if aboveUpper() {
          return plan.upper.map { DocumentKey.sharesInlinePart(key, with: $0) } == true
        }
        if hashed && belowLower() { return true }
      }
      return try body(key, String(decoding: id, as: UTF8.self))
    }
  }

  /// A bookmark: the index it belongs to and the last key read, base64url.
  static func encodeBookmark(_ key: [UInt8], index: MangoIndex?) -> String {
    let tag = Array((index.map { "\($0.ddoc)\u{0}\($0.name)" } ?? "_all_docs").utf8)
    let bytes =
      [UInt8(truncatingIfNeeded: tag.count >> 8), UInt8(truncatingIfNeeded: tag.count)] + tag + key
    return Base64.encode(Array(bytes))
      .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
      .replacingOccurrences(of: "=", with: "")
  }

  static func decodeBookmark(_ text: String, index: MangoIndex?) -> [UInt8]? {
    var s = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
    while s.count % 4 != 0 { s += "=" }
    guard let data = Base64.decode(s), data.count >= 2 else { return nil }
    let bytes = [UInt8](data)
    let n = Int(bytes[0]) << 8 | Int(bytes[1])
    let tag = Array((index.map { "\($0.ddoc)\u{0}\($0.name)" } ?? "_all_docs").utf8)
    guard bytes.count >= 2 + n, Array(bytes[2..<(2 + n)]) == tag else { return nil }
    return Array(bytes[(2 + n)...])
  }

  /// The document with only `fields` (dotted paths), nested as in the document; all of it
  /// when `fields` is nil.
  static func project(_ doc: JSONValue, _ fields: [String]?) -> JSONValue {
    guard let fields else { return doc }
    var out = JSONValue.object(JSONObject())
    for field in fields {
      let path = Selector.path(field)
      guard let value = Selector.value(at: path, in: doc) else { continue }
      out = insert(value, at: path[...], into: out)
    }
    return out
  }

  static func insert(_ value: JSONValue, at path: ArraySlice<String>, into target: JSONValue)
    -> JSONValue
  {
    guard let key = path.first else { return value }
    var object = target.objectValue ?? JSONObject()
    object[key] = insert(value, at: path.dropFirst(), into: object[key] ?? .object(JSONObject()))
    return .object(object)
  }

  // MARK: _explain

  func explain(_ query: FindQuery, databaseName: String) throws -> JSONValue {
    let selection = selectIndex(query, indexes: try mangoIndexes())
    let candidates = explainCandidates(query, selection)
    // No index serves the sort: `_find` refuses the query, `_explain` says so with a null index
    // (unless `allow_fallback` is false, which makes it an error too).
    let plan: FindPlan? =
      selection.winner == nil && query.allowFallback ? nil : try plan(query, selection)
    let indexJSON: JSONValue =
      plan.map { $0.index?.listing ?? Self.allDocsIndexListing } ?? .null
    let fields: JSONValue =
      // All fields are `[]` in `_explain`, in `fields` and in `opts` (`mango_cursor:explain`).
      .array((query.fields ?? []).map { .string($0) })
    let sort = JSONValue.object(
      JSONObject(
        query.sort.map { .init(key: $0.field, value: .string($0.descending ? "desc" : "asc")) }))
    let n = { (i: Int) in JSONValue.number(JSONNumber(Int64(i))) }
    let opts = JSONValue.object(
      JSONObject([
        .init(key: "use_index", value: .array(query.useIndex.map { .string($0) })),
        .init(key: "bookmark", value: .string(query.bookmark ?? "nil")),
        .init(key: "limit", value: n(query.limit)), .init(key: "skip", value: n(query.skip)),
        .init(key: "sort", value: sort), .init(key: "fields", value: fields),
        .init(key: "partition", value: .string("")), .init(key: "r", value: n(query.r)),
        .init(key: "conflicts", value: .bool(query.conflicts)),
        .init(key: "stale", value: .bool(false)), .init(key: "update", value: .bool(query.update)),
        .init(key: "stable", value: .bool(query.stable)),
        .init(key: "execution_stats", value: .bool(query.executionStats)),
        .init(key: "allow_fallback", value: .bool(query.allowFallback)),
      ]))
    var members: [JSONObject.Member] = [
      .init(key: "dbname", value: .string(databaseName)), .init(key: "index", value: indexJSON),
      .init(key: "partitioned", value: .bool(false)),
      .init(key: "selector", value: query.selector.normalizedJSON), .init(key: "opts", value: opts),
      .init(key: "limit", value: n(query.limit)), .init(key: "skip", value: n(query.skip)),
      .init(key: "fields", value: fields), .init(key: "index_candidates", value: candidates),
      .init(key: "selector_hints", value: Self.selectorHints(query.selector)),
    ]
    guard let plan else { return .object(JSONObject(members)) }
    let mrargs = JSONValue.object(
      JSONObject([
        .init(key: "include_docs", value: .bool(!plan.covering)),
        .init(key: "view_type", value: .string("map")), .init(key: "reduce", value: .bool(false)),
        .init(key: "partition", value: .null),
        .init(key: "start_key", value: plan.descending ? plan.endKey : plan.startKey),
        .init(key: "end_key", value: plan.descending ? plan.startKey : plan.endKey),
        .init(key: "direction", value: .string(plan.descending ? "rev" : "fwd")),
        .init(key: "stable", value: .bool(query.stable)),
        .init(key: "update", value: .bool(query.update)),
        .init(key: "conflicts", value: .string("undefined")),
      ]))
    members += [
      .init(key: "mrargs", value: mrargs), .init(key: "covering", value: .bool(plan.covering)),
    ]
    if let warning = plan.warning { members.append(.init(key: "warning", value: .string(warning))) }
    return .object(JSONObject(members))
  }

  // MARK: Creating and dropping indexes

  static func designDocument(adding index: MangoIndex, to existing: JSONValue?)
    throws(StoreError) -> (body: JSONValue, exists: Bool)
  {
    if let existing, existing["language"] != .string("query") {
      // CouchDB prints the Erlang term it found: `false` when there is no language.
      let found =
        existing["language"].map { value in
          let v =
            value.stringValue.map { "<<\"\($0)\">>" }
            ?? String(decoding: value.serialized(), as: UTF8.self)
          return "{<<\"language\">>,\(v)}"
        } ?? "false"
      throw StoreError(
        "invalid_ddoc_lang", "Existing design doc has an invalid language: \(found)",
        code: .badRequest)
    }
    if let existing,
      MangoIndex.indexes(inDesignDocument: index.ddoc, body: existing).contains(index)
    {
      return (existing, true)
    }
    var object = existing?.objectValue ?? JSONObject()
    var views = object["views"]?.objectValue ?? JSONObject()
    object["_id"] = .string(index.ddoc)
    object["language"] = .string("query")
    views[index.name] = index.view
    object["views"] = .object(views)
    return (.object(object), false)
  }

  static func designDocument(removing name: String?, from doc: JSONValue) -> (
    rev: String, body: JSONValue?
  )? {
    guard doc["language"]?.stringValue == "query", var object = doc.objectValue,
      var views = object["views"]?.objectValue, let rev = doc["_rev"]?.stringValue
    else { return nil }
    let before = views.members.count
    views.members.removeAll { name == nil || $0.key == name }
    guard views.members.count < before else { return nil }
    if views.members.isEmpty { return (rev, nil) }
    object["views"] = .object(views)
    return (rev, .object(object))
  }
}
