public import JSON
public import Projections

/// The planner's choice of an index, in CouchDB's stages, and `_explain`'s account of it, as
/// CouchDB 3.4 gives it
/// (`mango_cursor:extract_candidate_indexes` and `extract_selector_hints`): every index but the
/// one chosen, with whether it could serve the query, why it was not chosen and its rank, and
/// which of the selector's fields an index could look up.
extension DocumentStore {
  /// An index as the planner sees it: the special `_all_docs` index or a JSON index.
  enum ExplainedIndex: Hashable {
    case special
    case json(MangoIndex)

    var listing: JSONValue {
      switch self {
      case .special: DocumentStore.allDocsIndexListing
      case .json(let index): index.listing
      }
    }

    /// CouchDB lists candidates in the reverse of Erlang's order of its index records: by
    /// design document, then name, `_all_docs` (whose design document is an atom) first.
    static func precedes(_ a: Self, _ b: Self) -> Bool {
      switch (a, b) {
      case (.special, .special), (.json, .special): false
      case (.special, .json): true
      case (.json(let x), .json(let y)):
        x.ddoc != y.ddoc
          ? x.ddoc.utf8.lexicographicallyPrecedes(y.ddoc.utf8)
          : x.name.utf8.lexicographicallyPrecedes(y.name.utf8)
      }
    }
  }

  /// The stages of CouchDB's choice of an index (`mango_idx:get_usable_indexes`, then
  /// `mango_cursor:create` and `choose_best_index`), which both the planner (``plan(_:)``) and
  /// `_explain`'s account of it read.
  struct IndexSelection {
    let needs: IndexNeeds
    /// `_all_docs`, then every JSON index.
    let all: [ExplainedIndex]
    /// Those without a partial filter, and those `use_index` names.
    let considered: [ExplainedIndex]
    /// Why each considered index cannot serve the query (empty when it can).
    let reasons: [ExplainedIndex: [String]]
    let usable: [ExplainedIndex]
    /// The usable ones `use_index` names.
    let named: [ExplainedIndex]
    /// `named`, or every usable one when it names none (the fallback).
    let filtered: [ExplainedIndex]
    /// The JSON indexes of `filtered` (`_all_docs` when there is none), best first.
    let ranked: [ExplainedIndex]
    /// The index chosen; nil when none can serve the query's sort.
    var winner: ExplainedIndex? { ranked.first }
  }

  func selectIndex(_ query: FindQuery, indexes: [MangoIndex]) -> IndexSelection {
    let needs = IndexNeeds(query)
    let all: [ExplainedIndex] = [.special] + indexes.map { .json($0) }
    func isNamed(_ c: ExplainedIndex) -> Bool {
      guard case .json(let index) = c, let ddoc = query.useIndexDDoc else { return false }
      return index.ddoc == ddoc && (query.useIndex.count < 2 || index.name == query.useIndex[1])
    }
    let considered = all.filter { c in
      if case .json(let index) = c, index.partialFilter != nil { return isNamed(c) }
      return true
    }
    var reasons: [ExplainedIndex: [String]] = [:]
    for c in considered {
      switch c {
      case .special: reasons[c] = needs.specialReasons()
      case .json(let index): reasons[c] = needs.reasons(index.paths)
      }
    }
    let usable = considered.filter { reasons[$0]!.isEmpty }
    let named = usable.filter(isNamed)
    let filtered = named.isEmpty ? usable : named
    let json = filtered.filter { $0 != .special }
    let ranked =
      json.isEmpty
      ? filtered
      : json.sorted { a, b in
        guard case .json(let x) = a, case .json(let y) = b else { return false }
        return better(x, y, needs.required)
      }
    return IndexSelection(
      needs: needs, all: all, considered: considered, reasons: reasons, usable: usable,
      named: named, filtered: filtered, ranked: ranked)
  }

  /// `_explain`'s `index_candidates`: every index but the winner, tagged as
  /// `mango_cursor:extract_candidate_indexes` tags it.
  func explainCandidates(_ query: FindQuery, _ selection: IndexSelection) -> JSONValue {
    let needs = selection.needs
    let (all, considered, usable) = (selection.all, selection.considered, selection.usable)
    let (filtered, sorted, winner) = (selection.filtered, selection.ranked, selection.winner)
    let global = all.filter { c in
      if case .json(let index) = c { return index.partialFilter == nil }
      return true
    }
    let ofType = sorted

    func subtract(_ a: [ExplainedIndex], _ b: [ExplainedIndex]) -> [ExplainedIndex] {
      a.filter { !b.contains($0) }
    }
    let partials = subtract(all, global)
    let notUsable = subtract(considered, usable)
    let excluded = subtract(usable, filtered)
    let unfavored = subtract(filtered, ofType)
    let unfavoredRank = max(1, sorted.count)
    let excludedRank = unfavoredRank + (unfavored.isEmpty ? 0 : 1)
    let notUsableRank = excludedRank + (excluded.isEmpty ? 0 : 1)
    let partialRank = notUsableRank + (notUsable.isEmpty ? 0 : 1)

    // Each stage adds to an index's tags: usable is and-ed, reasons appended, ranks summed.
    struct Tags {
      var usable = true
      var reasons: [String] = []
      var ranking = 0
    }
    var tags: [ExplainedIndex: Tags] = [:]
    func tag(_ set: [ExplainedIndex], usable: Bool, reason: String?, ranking: Int) {
      for c in set {
        var t = tags[c] ?? Tags()
        t.usable = t.usable && usable
        if let reason { t.reasons.append(reason) }
        t.ranking += ranking
        tags[c] = t
      }
    }
    tag(partials, usable: false, reason: "is_partial", ranking: partialRank)
    tag(notUsable, usable: false, reason: nil, ranking: notUsableRank)
    tag(excluded, usable: true, reason: "excluded_by_user", ranking: excludedRank)
    tag(unfavored, usable: true, reason: "unfavored_type", ranking: unfavoredRank)
    for c in notUsable { tags[c]!.reasons += selection.reasons[c]! }
    let winnerWidth: Int
    switch winner {
    case .json(let index): winnerWidth = index.fields.count
    case .special: winnerWidth = 1
    case nil: winnerWidth = 0
    }
    let fieldRanges = Set(needs.required.filter { Self.isIndexable($0.1) }.map(\.0)).count
    // `_all_docs` is the type only alone, so the runners-up are JSON indexes.
    for (n, c) in sorted.enumerated() where n > 0 {
      guard case .json(let index) = c else { continue }
      let width = index.fields.count
      let prefix = prefixLength(index.paths, needs.required)
      let reason =
        fieldRanges - prefix > 0
        ? "less_overlap" : width > winnerWidth ? "too_many_fields" : "alphabetically_comes_after"
      tag([c], usable: true, reason: reason, ranking: n)
    }

    let candidates = all.filter { $0 != winner }.sorted { ExplainedIndex.precedes($1, $0) }
      .compactMap { c -> JSONValue? in
        guard let t = tags[c], let reason = t.reasons.first else { return nil }
        let covering: JSONValue
        switch c {
        case .special: covering = .null
        case .json(let index):
          // CouchDB judges the runners-up by the query's `fields` alone.
          covering = .bool(index.covers(query.fields))
        }
        return .object(
          JSONObject([
            .init(key: "index", value: c.listing),
            .init(
              key: "analysis",
              value: .object(
                JSONObject([
                  .init(key: "usable", value: .bool(t.usable)),
                  .init(
                    key: "reasons",
                    value: .array([
                      .object(JSONObject([.init(key: "name", value: .string(reason))]))
                    ])
                  ),
                  .init(key: "ranking", value: .number(JSONNumber(Int64(t.ranking)))),
                  .init(key: "covering", value: covering),
                ]))),
          ]))
      }
    return .array(candidates)
  }

  /// `selector_hints`: which fields of the selector (as CouchDB normalizes it) a JSON index
  /// could look up (`mango_idx_view:indexable_fields`), and which not.
  static func selectorHints(_ selector: Selector) -> JSONValue {
    let indexableOps: Set<String> = ["$lt", "$lte", "$eq", "$gt", "$gte", "$beginsWith", "$exists"]
    func indexable(_ v: JSONValue) -> [String] {
      guard let members = v.objectValue?.members, members.count == 1 else { return [] }
      let (key, value) = (members[0].key, members[0].value)
      if key == "$and", let items = value.arrayValue { return items.flatMap(indexable) }
      if key.hasPrefix("$") { return [] }
      guard let cond = value.objectValue?.members, cond.count == 1,
        indexableOps.contains(cond[0].key)
      else { return [] }
      return [key]
    }
    let normalized = selector.normalizedJSON
    let yes = Set(indexable(normalized))
    let no = Set(selector.fields).subtracting(yes)
    return .array([
      .object(
        JSONObject([
          .init(key: "type", value: .string("json")),
          .init(key: "indexable_fields", value: .array(yes.sorted().map { .string($0) })),
          .init(key: "unindexable_fields", value: .array(no.sorted().map { .string($0) })),
        ]))
    ])
  }
}
