public import JSON
public import Log
public import Projections
import RevTree

extension StoreError {
  /// A draft that cannot be published (`conflict`), carrying the texts.
  public static func draftConflict(_ conflict: DraftConflict) -> StoreError {
    var error = StoreError(
      "conflict",
      "The draft of '\(conflict.pageID)' overlaps changes made since its base revision.",
      code: .conflict)
    error.detail = conflict
    return error
  }

  /// The texts of a draft that could not be published, when this error is that refusal.
  public var draftConflict: DraftConflict? { detail as? DraftConflict }
}

/// Why a draft could not be published: its edits overlap changes made to the page since its
/// base revision. Carried by the 409 ``StoreError`` as ``StoreError/draftConflict``.
///
/// ```swift
/// do {
///   try drafts.publish(user: "ann", page: "w1:Home")
/// } catch let error as StoreError {
///   if let c = error.draftConflict { show(c.base, c.draft, c.current, c.markedText) }
/// }
/// ```
public struct DraftConflict: Sendable, Hashable {
  public let pageID: String
  /// The draft's base revision (nil for a draft of a new page).
  public let baseRev: String?
  /// The common ancestor: the base revision's Markdown ("" for a new page).
  public let base: String
  /// The draft's Markdown.
  public let draft: String
  /// The page's winning revision now.
  public let currentRev: String
  /// Its Markdown ("" when it is deleted).
  public let current: String
  /// Whether the page was deleted since the base.
  public let currentDeleted: Bool
  /// The merge with diff3 conflict markers (`<<<<<<< draft`, `||||||| base`, `=======`,
  /// `>>>>>>> current`); nil when the page was deleted.
  public let markedText: String?

  /// The details as JSON members for an HTTP body: `page`, `base_rev`, `base`, `draft`,
  /// `current_rev`, `current`, `current_deleted`, `marked`.
  public var json: JSONValue {
    var members: [JSONObject.Member] = [
      .init(key: "page", value: .string(pageID)),
      .init(key: "base_rev", value: baseRev.map { .string($0) } ?? .null),
      .init(key: "base", value: .string(base)),
      .init(key: "draft", value: .string(draft)),
      .init(key: "current_rev", value: .string(currentRev)),
      .init(key: "current", value: .string(current)),
      .init(key: "current_deleted", value: .bool(currentDeleted)),
    ]
    if let markedText { members.append(.init(key: "marked", value: .string(markedText))) }
    return .object(JSONObject(members))
  }
}

/// What publishing a draft wrote.
public struct DraftPublishResult: Sendable, Hashable {
  /// The page id.
  public let id: String
  /// The new page revision.
  public let rev: String
  /// The revision it was written on: the draft's base, or the winner it was merged with; nil
  /// when the page was created.
  public let parentRev: String?
  /// Whether the draft was three-way merged with changes made since its base.
  public let merged: Bool
  /// The Markdown of the new revision.
  public let markdown: String
}

/// TouchWiki's drafts in a ``DocumentStore``: each user's unpublished edits of pages, saved and
/// autosaved as log events, kept by a ``DraftProjection`` and published as normal page
/// revisions.
///
/// A draft belongs to the user who saves it, one per user and page: every call names the user,
/// and sees only that user's drafts. Drafts are per database, never replicated, and absent from
/// the documents, the changes feed and page history; the audit trail lists their events.
///
/// Publishing writes one page revision (a `doc.edit` event, like a local edit) and closes the
/// draft with a `draft.publish` event, both in one transaction:
/// - a draft whose base revision is still a leaf is written on it;
/// - otherwise (someone edited the page since) the draft is three-way merged with the winning
///   revision against the base (``ThreeWayMerge``) and, when the edits do not overlap, the merge
///   is written on the winner; when they do, nothing is written and the 409 ``StoreError``
///   carries a ``DraftConflict``; the draft stays open;
/// - a draft of a new page creates it (or, if someone created it meanwhile, merges with it
///   against the empty text).
///
/// The new revision keeps the fields of the revision it is written on and sets `markdown`,
/// `updated_at` (now, ISO-8601) and `updated_by` (the user); a created page gets `type`,
/// `wiki_id`, `markdown`, `created_at`, `updated_at` and `updated_by`. The draft's summary
/// becomes `edit_summary` with `edit_summary_on` (``EditSummary``); without one, a summary the
/// parent had is removed. It is validated like any local edit.
///
/// ```swift
/// let store = try DocumentStore(directory: path, projections: [WikiProjection(), DraftProjection()])
/// let drafts = try Drafts(store)
/// let home = try store.get("w1:Home")
/// try drafts.save(user: "ann", page: "w1:Home", baseRev: home["_rev"]?.stringValue, markdown: "# Home\n", autosave: true)
/// let published = try drafts.publish(user: "ann", page: "w1:Home")
/// ```
public struct Drafts: Sendable {
  let store: DocumentStore
  let storage: ProjectionStorage

  /// The drafts of `store`.
  ///
  /// - Throws: ``StoreError`` `not_found` when `store` has no ``DraftProjection``.
  public init(_ store: DocumentStore) throws {
    guard let storage = store.projection(DraftProjection.self)?.storage
    else {
      throw StoreError.notFound("the store has no draft projection")
    }
    self.store = store
    self.storage = storage
  }

  // MARK: Reading

  /// Every open draft of `user`, by page id (UTF-8 byte order).
  public func drafts(of user: String, using txn: ReadTransaction? = nil) throws -> [Draft] {
    guard Self.plain(user) else { return [] }
    return try run(txn) { txn in
      var out: [Draft] = []
      let prefix = Array(user.utf8) + [0]
      try txn.scan(storage["byUser"], from: prefix) { key, value in
        guard key.starts(with: prefix) else { return false }
        let page = String(decoding: key[prefix.count...], as: UTF8.self)
        out.append(try DraftProjection.decode(value, user: user, page: page))
        return true
      }
      return out
    }
  }

  /// `user`'s draft of `page`, nil when there is none.
  public func draft(of user: String, page: String, using txn: ReadTransaction? = nil) throws
    -> Draft?
  {
    guard Self.plain(user), Self.plain(page) else { return nil }
    let key = DraftProjection.key(user: user, page: page)
    guard DraftProjection.isValidKey(key) else { return nil }
    return try run(txn) { txn in
      try txn.get(key, in: storage["byUser"]).map {
        try DraftProjection.decode($0, user: user, page: page)
      }
    }
  }

  // MARK: Writing

  /// Saves `user`'s draft of `page`, replacing the text of an open one.
  ///
  /// An autosave that changes nothing (same base, same text) appends nothing.
  ///
  /// - Parameters:
  ///   - page: `<wikiId>:<Page Name>`.
  ///   - baseRev: the revision the user started editing, nil for a new page. It must be a
  ///     revision of the page with a body that is not a deletion.
  ///   - autosave: recorded as `draft.autosave` rather than `draft.save`.
  ///   - summary: the edit summary so far (trimmed; "" for none), which publishing writes as
  ///     the page's `edit_summary`.
  /// - Returns: the draft as stored.
  /// - Throws: ``StoreError`` `bad_request` for an empty user, a page id that is not
  ///   `<wiki>:<title>`, an unknown or deleted base revision.
  @discardableResult
  public func save(
    user: String, page: String, baseRev: String?, markdown: String, autosave: Bool = false,
    summary: String = ""
  ) throws -> Draft {
    try Self.check(user: user, page: page)
    let summary = Self.summary(summary)
    return try store.writeDocuments { txn in
      // A draft is a page write to come: the signed-in user (``WriteAccess``) must be one who
      // may write the page, as of this transaction.
      try store.checkWriteAccess(
        AccessWrite(
          docID: page,
          body: JSONObject(["type": .string("page"), "wiki_id": .string(WikiID.of(page))]),
          replicated: false), txn: txn)
      var basePosition: UInt64 = 0
      if let baseRev {
        let rev: RevID
        do { rev = try RevID(baseRev) } catch {
          throw StoreError.badRequest("Invalid rev format: \(baseRev)")
        }
        guard
          let revision = try store.record(page, txn: txn)?.tree.revision(rev),
          revision.status == .available, let body = revision.body
        else {
          throw StoreError.badRequest(
            "\(baseRev) is not a live revision of '\(page)'; a draft starts from one")
        }
        basePosition = body
      }
      if autosave, let old = try draft(of: user, page: page, using: txn), old.baseRev == baseRev,
        old.markdown.utf8.elementsEqual(markdown.utf8), old.summary == summary
      {
        return old
      }
      let e = DraftEvent(
        kind: autosave ? .autosave : .save, pageID: page, baseRev: baseRev,
        basePosition: basePosition, markdown: markdown, summary: summary)
      try store.appendEvent(draftEvent(e, user: user), txn: txn)
      guard let saved = try draft(of: user, page: page, using: txn) else {
        throw StoreError.internalError("the saved draft is missing")
      }
      return saved
    }
  }

  /// Throws `user`'s draft of `page` away.
  ///
  /// - Throws: ``StoreError`` `not_found` when there is no such draft.
  public func discard(user: String, page: String) throws {
    try Self.check(user: user, page: page)
    try store.writeDocuments { txn in
      guard let old = try draft(of: user, page: page, using: txn) else {
        throw StoreError.notFound("no draft of '\(page)' by '\(user)'")
      }
      try store.appendEvent(
        draftEvent(
          DraftEvent(
            kind: .discard, pageID: page, baseRev: old.baseRev, basePosition: old.basePosition),
          user: user), txn: txn)
    }
  }

  /// Publishes `user`'s draft of `page` as a page revision and closes the draft (see the type's
  /// discussion for how a changed page is merged).
  ///
  /// - Throws: ``StoreError`` `not_found` when there is no such draft; `conflict` (409) with a
  ///   ``DraftConflict`` when the edits overlap or the page was deleted since the base, in which
  ///   case nothing is written; validation errors of the page revision.
  @discardableResult
  public func publish(user: String, page: String) throws -> DraftPublishResult {
    try Self.check(user: user, page: page)
    let now = Timestamp.iso8601()
    return try store.writeDocuments { txn in
      guard let d = try draft(of: user, page: page, using: txn) else {
        throw StoreError.notFound("no draft of '\(page)' by '\(user)'")
      }
      let record = try store.record(page, txn: txn)
      let tree = record?.tree ?? RevisionTree()

      // Where to write, on which body, with which text.
      var parent: RevisionTree.Revision? = nil
      var text = d.markdown
      var merged = false
      if let baseRev = d.baseRev, let rev = try? RevID(baseRev),
        let base = tree.revision(rev), base.isLeaf, base.status == .available
      {
        parent = base
      } else if d.baseRev == nil && (tree.isEmpty || tree.isDeleted) {
        parent = nil  // a new page, or one deleted since: created again
      } else {
        guard let winner = tree.winner else {
          throw StoreError.internalError("the page '\(page)' has no winner")
        }
        let baseText =
          d.basePosition == 0
          ? "" : Self.markdown(try store.body(at: d.basePosition, txn: txn))
        guard winner.status == .available, let at = winner.body else {
          throw StoreError.draftConflict(
            DraftConflict(
              pageID: page, baseRev: d.baseRev, base: baseText, draft: d.markdown,
              currentRev: winner.rev.description, current: "", currentDeleted: true,
              markedText: nil))
        }
        let current = Self.markdown(try store.body(at: at, txn: txn))
        switch ThreeWayMerge.merge(base: baseText, ours: d.markdown, theirs: current) {
        case .merged(let result):
          text = result
          merged = true
          parent = winner
        case .conflict(let conflict):
          throw StoreError.draftConflict(
            DraftConflict(
              pageID: page, baseRev: d.baseRev, base: baseText, draft: d.markdown,
              currentRev: winner.rev.description, current: current, currentDeleted: false,
              markedText: conflict.markedText(
                oursLabel: "draft", baseLabel: d.baseRev ?? "base",
                theirsLabel: winner.rev.description)))
        }
      }

      var body: JSONObject
      if let parent, let at = parent.body {
        body = try store.body(at: at, txn: txn)
      } else {
        body = JSONObject([
          .init(key: "type", value: .string("page")),
          .init(key: "wiki_id", value: .string(d.wikiID)),
          .init(key: "created_at", value: .string(now)),
        ])
      }
      body["markdown"] = .string(text)
      body["updated_at"] = .string(now)
      body["updated_by"] = .string(user)
      EditSummary.set(d.summary, on: parent?.rev.description, in: &body)
      var input = try DocumentInput(.object(body))
      // The page keeps its attachments (stubs of the parent's, resolved by the writer).
      if let parent, let at = parent.body {
        let attachments = try store.attachments(at: at, txn: txn)
        if !attachments.isEmpty {
          input.attachments = attachments.map { .stub(name: $0.name, revpos: $0.revpos) }
        }
      }
      let rev = try store.edit(
        input, id: page, rev: parent?.rev.description, actor: user, within: txn)
      try store.appendEvent(
        draftEvent(
          DraftEvent(
            kind: .publish, pageID: page, baseRev: d.baseRev, basePosition: d.basePosition,
            publishedRev: rev, merged: merged, markdown: text, summary: d.summary), user: user),
        txn: txn)
      return DraftPublishResult(
        id: page, rev: rev, parentRev: parent?.rev.description, merged: merged, markdown: text)
    }
  }

  // MARK: Helpers

  /// A summary as kept: one line, trimmed, at most ``EditSummary/maxBytes`` bytes.
  static func summary(_ text: String) -> String { EditSummary.clean(text) }

  func draftEvent(_ e: DraftEvent, user: String) -> NewEvent {
    NewEvent(
      type: e.kind.eventType, stream: DraftEvent.stream(user: user, page: e.pageID), actor: user,
      payload: e.encoded())
  }

  static func markdown(_ body: JSONObject) -> String { body["markdown"]?.stringValue ?? "" }

  func run<T>(_ txn: ReadTransaction?, _ body: (ReadTransaction) throws -> T) throws -> T {
    if let txn { return try body(txn) }
    return try store.read(body)
  }

  static func plain(_ s: String) -> Bool { !s.isEmpty && !s.utf8.contains(0) }

  /// The longest title, in UTF-8 bytes, a page of `wiki` may have for `user` to keep a draft
  /// of it (the user and the page id together make the draft's key): what an editor says
  /// before anything is typed.
  public static func maxTitleBytes(user: String, wiki: String) -> Int {
    max(0, DraftProjection.maxKeyBytes - DraftProjection.key(user: user, page: wiki + ":").count)
  }

  /// Checks a user and a page id: non-empty, no NUL byte, the page `<wiki>:<title>` with both
  /// parts non-empty, and the pair short enough for an LMDB key.
  static func check(user: String, page: String) throws(StoreError) {
    guard plain(user) else {
      throw StoreError.badRequest("a draft needs a user (non-empty, without NUL characters)")
    }
    guard plain(page), let (wiki, title) = WikiID.split(page), !wiki.isEmpty, !title.isEmpty
    else {
      throw StoreError.badRequest("a draft's page id must be <wikiId>:<Page Name>, not '\(page)'")
    }
    guard DraftProjection.isValidKey(DraftProjection.key(user: user, page: page)) else {
      throw StoreError.badRequest(
        "the user and page id of a draft may be at most \(DraftProjection.maxKeyBytes - 1) bytes together"
      )
    }
  }
}
