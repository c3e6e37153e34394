public import JSON

/// `_explain`'s account of the planner's choice, as CouchDB 3.4 gives it
/// (`mango_cursor:extract_candidate_indexes` and `extract_selector_hints`): every index but the
/// one chosen, with whether it could serve the query, why it was not chosen and its rank, and
/// which of the selector's fields an index could look up.
extension DocumentStore {
  /// An index as the analysis sees it: the special `_all_docs` index or a JSON index.
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

  /// What `_explain` says of the indexes: the one `_find` would use (nil: none can serve the
  /// query's sort) and `index_candidates`, the others.
  func explainCandidates(_ query: FindQuery, indexes: [MangoIndex]) -> (
    winner: ExplainedIndex?, candidates: JSONValue
  ) {
    let needs = IndexNeeds(query)
    let all: [ExplainedIndex] = [.special] + indexes.map { .json($0) }
    func named(_ c: ExplainedIndex) -> Bool {
      guard case .json(let index) = c, let ddoc = query.useIndexDDoc else { return false }
      return index.ddoc == ddoc && (query.useIndex.count < 2 || index.name == query.useIndex[1])
    }
    func partial(_ c: ExplainedIndex) -> Bool {
      if case .json(let index) = c { return index.partialFilter != nil }
      return false
    }
    // The stages of `mango_idx:get_usable_indexes` and `mango_cursor:create`.
    let global = all.filter { !partial($0) }
    let considered = all.filter { !partial($0) || named($0) }
    var reasons: [ExplainedIndex: [String]] = [:]
    for c in considered {
      switch c {
      case .special: reasons[c] = needs.specialReasons()
      case .json(let index): reasons[c] = needs.reasons(index.paths)
      }
    }
    let usable = considered.filter { reasons[$0]!.isEmpty }
    let chosenByName = usable.filter(named)
    let filtered = chosenByName.isEmpty ? usable : chosenByName
    let jsonFiltered = filtered.filter { $0 != .special }
    let ofType = jsonFiltered.isEmpty ? filtered : jsonFiltered
    // `choose_best_index`: the JSON indexes of that type in the planner's order (`_all_docs`
    // alone when it is the type).
    var sorted = ofType
    sorted.sort { a, b in
      guard case .json(let x) = a, case .json(let y) = b else { return false }
      return better(x, y, needs.required)
    }
    let winner = sorted.first

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
    for c in notUsable { tags[c]!.reasons += reasons[c]! }
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
          covering = .bool(
            query.fields.map { Set($0).isSubset(of: Set(["_id"] + index.fields)) } ?? false)
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
    return (winner, .array(candidates))
  }

  /// `selector_hints`: which fields of the selector (as CouchDB normalizes it) a JSON index
  /// could look up (`mango_idx_view:indexable_fields`), and which not.
  static func selectorHints(_ selector: Selector) -> JSONValue {
    func allFields(_ v: JSONValue) -> [String] {
      guard let members = v.objectValue?.members, members.count == 1 else { return [] }
      let (key, value) = (members[0].key, members[0].value)
      if key.hasPrefix("$"), let items = value.arrayValue { return items.flatMap(allFields) }
      return [key]
    }
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
    let no = Set(allFields(normalized)).subtracting(yes)
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
