public import JSON
public import Log
public import Projections

/// The views of a store's design documents, each an index kept behind the log
/// (``ViewIndex``): what `GET /{db}/_design/{ddoc}/_view/{view}` and its neighbours answer.
///
/// ```swift
/// let views = ViewQueries(store)
/// let result = try views.query(ddoc: "_design/pages", view: "by_title", query: ViewQuery())
/// ```
public struct ViewQueries: Sendable {
  public let store: DocumentStore

  public init(_ store: DocumentStore) {
    self.store = store
  }

  /// The views of design document `ddocID` (`_design/…`) as it stands.
  ///
  /// - Throws: `not_found` `missing` (or `deleted`) when there is no such design document.
  public func designViews(_ ddocID: String) throws -> DesignViews {
    try store.designViews(ddocID)
  }

  /// The index of `group`'s views, opened behind the log (built from the start the first
  /// time); an index of an earlier version of the same design document stops following the
  /// log (its files stay until ``viewCleanup()``).
  public func index(_ group: DesignViews) throws -> (index: ViewIndex, follower: IndexFollower) {
    try store.viewIndex(group)
  }

  /// Answers `query` on view `view` of design document `ddoc` (`_design/…`), as
  /// `GET /{db}/_design/{ddoc}/_view/{view}` does: the index is caught up first unless
  /// `update=false` (or `stale=ok`); `includes` keeps the rows of documents a restricted
  /// reader may read.
  public func query(
    ddoc: String, view: String, query: ViewQuery,
    includes: (@Sendable (String) -> Bool)? = nil
  ) throws -> ViewResult {
    try store.queryView(ddoc: ddoc, view: view, query: query, includes: includes)
  }

  /// `GET /{db}/_design/{ddoc}/_info`: the view group's name and `view_index` (signature,
  /// language, sizes, update seq, whether it is being built).
  public func info(ddoc: String) throws -> JSONValue {
    try store.viewInfo(ddoc: ddoc)
  }

  /// `POST /{db}/_compact/{ddoc}`: compacts the index of design document `ddoc`'s views
  /// (its file replaced by a compacted copy; the next query opens it again).
  public func compact(ddoc: String) throws {
    try store.compactViews(ddoc: ddoc)
  }

  /// Opens the view index of every design document that has views (not built or caught up
  /// here), so that `verify`, `rebuild` and `projectionNames` include them, as
  /// `wikilog verify` and `wikilog rebuild` do. Returns their names.
  @discardableResult
  public func openIndexes() throws -> [String] {
    try store.openViewIndexes()
  }

  /// `POST /{db}/_view_cleanup`: removes the index files of views no design document has
  /// any more (CouchDB keeps them until this). Returns the number removed.
  @discardableResult
  public func cleanup() throws -> Int {
    try store.viewCleanup()
  }
}

/// The full-text index of a store (a ``TextSearchProjection`` registered with its data
/// directory): BM25-ranked search per group (wiki), snippets, and the index's state.
///
/// ```swift
/// let search = TextSearch(store)
/// let result = try search.search(try SearchQuery("release notes"), groups: ["team"])
/// ```
public struct TextSearch: Sendable {
  public let store: DocumentStore

  public init(_ store: DocumentStore) {
    self.store = store
  }

  /// Whether the store keeps a full-text index (a ``TextSearchProjection``).
  public var isAvailable: Bool { store.hasTextSearch }

  /// Brings the full-text index up to the log's end (``IndexFollower``): what every search
  /// does first, unless it asks for the index as it stands (`update: false`).
  public func update() throws {
    try store.updateSearchIndex()
  }

  /// The log position the full-text index is up to; nil without one.
  public func checkpoint() throws -> LogPosition? {
    try store.searchCheckpoint()
  }

  /// The groups (wikis) the index holds.
  public func groups(update: Bool = true) throws -> [String] {
    try store.searchGroups(update: update)
  }

  /// Runs `query` over the documents of `groups`, ranked by BM25 (k1 1.2, b 0.75) with the
  /// statistics of those groups alone (documents, their mean length, each term's document
  /// frequency), so documents outside them neither appear nor change a score. Every clause
  /// must match: a word, any word with a prefix (each scored), or a phrase (its words at
  /// consecutive positions, scored as its words); each distinct word of the query scores once
  /// per document. Ties go by document id.
  ///
  /// Each word's rows are read segment by segment (``TextSearchProjection``), for each group
  /// asked for, in number order (a document is its group's index in `groups` and its number:
  /// one integer), dead documents left out; the clauses are intersected as sorted lists,
  /// lengths read per group and segment, and records (document ids) only for phrases and the
  /// page returned (and the hits tied with its last one).
  ///
  /// - Throws: 501 when the store has no full-text index.
  ///
  /// The index is first brought up to the log's end, so that the search sees every write
  /// acknowledged before it; `update: false` takes it as it stands (CouchDB's `update=false`).
  public func search(_ query: SearchQuery, groups: [String], update: Bool = true) throws
    -> SearchResult
  {
    try store.search(query, groups: groups, update: update)
  }

  /// A snippet of `text` around the first matched word: about `words` words, with each
  /// matched word (or a word a matched prefix found) between `<mark>` and `</mark>`, the rest
  /// HTML-escaped, `…` where text was cut.
  public static func snippet(_ text: String, matched: Set<String>, words: Int = 24) -> String {
    DocumentStore.snippet(text, matched: matched, words: words)
  }

  /// What the full-text index takes of document `docID`'s winning revision (its group, title
  /// and text), for a result's title and snippet; nil when it is not searched.
  public func searchable(_ docID: String) throws -> TextSearchSchema.Searchable? {
    try store.searchable(docID)
  }

  /// A search's answer as `GET /db/_search` gives it: `total_rows` and per hit its `id`,
  /// `wiki` (the group), `title`, `score` and `snippet` (HTML, matched words in `<mark>`).
  public func json(_ result: SearchResult) throws -> JSONValue {
    try store.searchJSON(result)
  }
}

/// Mango on a store: `_find`, its plan and `_explain`, the JSON indexes of its design
/// documents (kept inline by its ``MangoProjection``) and `grep` over field values.
///
/// ```swift
/// let mango = MangoQueries(store)
/// let result = try mango.find(try FindQuery(body))  // a `_find` body
/// ```
public struct MangoQueries: Sendable {
  public let store: DocumentStore

  public init(_ store: DocumentStore) {
    self.store = store
  }

  /// The JSON indexes defined in the store's design documents (none without a
  /// ``MangoProjection``).
  public func indexes() throws -> [MangoIndex] {
    try store.mangoIndexes()
  }

  /// How much the indexes of design document `ddoc` hold: `active`, the bytes of their rows as
  /// stored (keys and values of `mango.entries` and `mango.byDoc`), and `external`, the bytes
  /// of the document ids and field values they index. Read by a scan of their rows.
  public func indexSizes(ddoc: String) throws -> (active: Int, external: Int) {
    try store.mangoIndexSizes(ddoc: ddoc)
  }

  /// `GET /db/_index`: the special `_all_docs` index, then the JSON indexes.
  public func indexListing() throws -> JSONValue {
    try store.indexListing()
  }

  /// Chooses how to answer `query`, as CouchDB's planner does: an index every one of whose
  /// fields the selector requires or the sort names (so the documents it leaves out cannot
  /// match, or are left out by the sort as CouchDB leaves them out) and that serves the sort
  /// (its fields start with the sort's once the leading ones the selector holds equal are
  /// passed); `use_index` first when it qualifies; otherwise the one whose leading
  /// fields the selector bounds most, then the one with the fewest fields. Indexes with a
  /// `partial_filter_selector` are used only when named. With none, `_all_docs` (with the
  /// warning).
  ///
  /// - Throws: 400 `no_usable_index` when a sort needs an index that does not exist, or when
  ///   `allow_fallback` is false and the named index cannot serve the query.
  public func plan(_ query: FindQuery) throws -> FindPlan {
    try store.plan(query)
  }

  /// Runs a `_find`: plans it, reads the index range (or `_all_docs`), applies the selector to
  /// each winning revision, skips and limits, and projects `fields`.
  ///
  /// - Parameter visible: the documents the caller may read (an ``AccessView``'s filter); the
  ///   others are passed over before they are read or counted.
  public func find(_ query: FindQuery, visible: DocumentFilter? = nil) throws -> FindResult {
    try store.find(query, visible: visible)
  }

  /// `POST /db/_explain`: the index the query would use and how.
  public func explain(_ query: FindQuery, databaseName: String) throws -> JSONValue {
    try store.explain(query, databaseName: databaseName)
  }

  /// The design document that adds `index` to `existing` (the current winner's body, nil when
  /// there is none), and whether the index was already there (`exists`).
  ///
  /// - Throws: 400 `invalid_ddoc_lang` when `existing` is not a `"language": "query"` design
  ///   document (a JavaScript one, say), as CouchDB's `mango_util:check_lang` refuses it.
  public static func designDocument(adding index: MangoIndex, to existing: JSONValue?)
    throws(StoreError) -> (body: JSONValue, exists: Bool)
  {
    try DocumentStore.designDocument(adding: index, to: existing)
  }

  /// What dropping the index `name` (every index, for nil) does to the design document `doc`
  /// (its current winner): nil when it is not a query design document with such an index; else
  /// its revision and new body, nil when no view is left (the design document is deleted).
  public static func designDocument(removing name: String?, from doc: JSONValue) -> (
    rev: String, body: JSONValue?
  )? {
    DocumentStore.designDocument(removing: name, from: doc)
  }

  /// Searches field values with a regular expression: the winning revision of every live
  /// document, or with `history` every revision in the log (local edits and replicated
  /// ones, deletions left out), oldest first.
  ///
  /// - Parameters:
  ///   - field: a dotted path (``Selector/path(_:)``); nil searches every leaf value.
  ///   - type: only documents whose `type` field is this.
  ///   - visible: only the documents this filter passes.
  ///   - body: gets each match; returns false to stop.
  public func grep(
    _ pattern: RegexPattern, field: String? = nil, type: String? = nil,
    history: Bool = false, visible: DocumentFilter? = nil, _ body: (GrepMatch) throws -> Bool
  ) throws {
    try store.grep(pattern, field: field, type: type, history: history, visible: visible, body)
  }
}
