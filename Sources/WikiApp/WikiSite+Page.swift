import CouchAPI
import Foundation
import HTTPTypes
import Hummingbird
import JSON
import Log
import NIOCore
import Projections
import Query
import Replication
import RevTree
import Wiki
import WikiMarkdown

extension WikiSite {
  enum PageResult {
    case page(Page)
    case response(Response)
  }

  /// `/_wiki/{wiki}/{Page Name}` and its actions.
  func pageRequest(
    wiki: String, title: String, query: Query, form: Query?, _ session: Session,
    _ store: DocumentStore, method: HTTPRequest.Method
  ) async throws -> PageResult {
    guard let (summary, _) = try self.wiki(wiki, for: session, store) else {
      return .page(notFound("There is no wiki here, or it is not yours to see."))
    }
    if title == "_new" {
      let name = (query["title"] ?? "").trimmingCharacters(in: .whitespacesAndNewlines)
      guard !name.isEmpty else { throw Redirect(location: Self.wikiHref(wiki)) }
      throw Redirect(location: Self.pageHref(wiki, name) + "?action=edit")
    }
    let id = wiki + ":" + title
    let wikiTitle = summary.title.isEmpty ? wiki : summary.title
    var base: [String: Any] = [
      "title": title, "wikiTitle": wikiTitle, "wikiHref": Self.wikiHref(wiki),
      "pageHref": Self.pageHref(wiki, title), "csrf": session.csrf,
    ]
    if let form {
      return try await pageAction(
        wiki: wiki, title: title, id: id, action: query["action"] ?? "", form: form, session, store,
        base: base)
    }
    if let asOf = query["as_of"] {
      return .page(
        try await pageAsOf(wiki: wiki, title: title, id: id, asOf: asOf, store, base: base))
    }
    switch query["action"] {
    case "edit":
      return .page(try editPage(wiki: wiki, title: title, id: id, session, store, base: base))
    case "history":
      let entries = try store.history(of: id)
      guard !entries.isEmpty else { return .page(missing(wiki, title)) }
      base["revisions"] = entries.reversed().map { e -> [String: Any] in
        [
          "rev": e.rev, "actor": e.actor, "time": Self.time(e.timestampMicroseconds),
          "origin": e.origin.isEmpty ? "" : "from \(e.origin)", "deleted": e.deleted,
          "diff": e.markdownDiff, "pageHref": Self.pageHref(wiki, title),
        ]
      }
      return .page(Page(title: "History of \(title)", body: Templates.render("history", base)))
    case "blame":
      guard let lines = try blame(id, store) else { return .page(missing(wiki, title)) }
      base["lines"] = lines.map { line -> [String: Any] in
        [
          "rev": line.rev, "shortRev": String(line.rev.prefix(10)), "actor": line.actor,
          "time": Self.time(line.micros), "text": line.text,
          "pageHref": Self.pageHref(wiki, title),
        ]
      }
      return .page(Page(title: "Blame of \(title)", body: Templates.render("blame", base)))
    default:
      return .page(
        try viewPage(
          wiki: wiki, title: title, id: id, rev: query["rev"],
          version: summary.lastUpdate.rawValue, store, base: base))
    }
  }

  func missing(_ wiki: String, _ title: String) -> Page {
    notFound(
      "The page “\(title)” does not exist yet.",
      create: (Self.pageHref(wiki, title) + "?action=edit", title))
  }

  // MARK: Reading

  /// The HTML of a revision's Markdown, rendered once per revision and state of its wiki
  /// (`key` names both: a page created or deleted changes the wiki's last update, and with it
  /// which links are to missing pages).
  func rendered(_ markdown: String, wiki: String, key: String?, _ store: DocumentStore) throws
    -> String
  {
    if let key, let html = cache.get(key) { return html }
    let queries = try WikiQueries(store)
    func exists(_ title: String) -> Bool {
      (try? queries.page(title, in: wiki)) != nil
    }
    let html = renderer.render(markdown) { target in
      let found = exists(target)
      return WikiLinkTarget(
        href: Self.pageHref(wiki, target) + (found ? "" : "?action=edit"), exists: found)
    }
    if let key { cache.put(key, html) }
    return html
  }

  /// `version`: the wiki's last update, which changes whenever a page of it is created,
  /// changed or deleted (and with it which links are to missing pages, and the backlinks).
  func viewPage(
    wiki: String, title: String, id: String, rev: String?, version: UInt64,
    _ store: DocumentStore, base: [String: Any]
  ) throws -> Page {
    // The current revision's page is the same for everyone who may see it until the page or
    // its wiki changes: it is kept whole, keyed by both (the tree alone says which revision
    // wins and whether it has conflicts; no body is read).
    var wholeKey: String? = nil
    if rev == nil {
      guard let record = try store.record(id), let winner = record.tree.winner,
        !winner.isDeleted
      else { return missing(wiki, title) }
      let live = record.tree.leaves.filter { !$0.isDeleted }.count
      let key = "page:\(id)@\(winner.rev.description)@\(version)@\(live)"
      if let body = cache.get(key) {
        return Page(title: title, body: body)
      }
      wholeKey = key
    }
    let doc: JSONObject
    do {
      doc =
        try store.get(id, options: GetOptions(rev: rev, conflicts: true)).objectValue
        ?? JSONObject()
    } catch let error as StoreError where error.code == .notFound {
      return missing(wiki, title)
    }
    if doc["_deleted"] == .bool(true) { return missing(wiki, title) }
    let currentRev = doc["_rev"]?.stringValue ?? ""
    let markdown = doc["markdown"]?.stringValue ?? ""
    var object = base
    object["html"] = try rendered(
      markdown, wiki: wiki, key: "\(id)@\(currentRev)@\(version)", store)
    object["rev"] = currentRev
    let (by, at) = Self.lastChange(doc, id: id, rev: currentRev, store)
    object["updatedBy"] = by
    object["updatedAt"] = at
    object["conflicted"] = !(doc["_conflicts"]?.arrayValue?.isEmpty ?? true)
    if let rev, let winner = try? store.get(id)["_rev"]?.stringValue, winner != rev {
      object["oldRev"] = rev
    }
    object["backlinks"] = try WikiQueries(store).backlinks(to: title, in: wiki).map {
      ["href": Self.pageHref(wiki, $0), "title": $0]
    }
    let body = Templates.render("page", object)
    if let wholeKey { cache.put(wholeKey, body) }
    return Page(title: title, body: body)
  }

  /// Who made revision `rev` of page `id`, and when, as the log recorded it: the body's
  /// `updated_by` and `updated_at` are what the writer claimed, and any member may claim
  /// anything there. A replicated revision was written elsewhere: its claim is shown with
  /// who brought it here.
  static func lastChange(_ doc: JSONObject, id: String, rev: String, _ store: DocumentStore)
    -> (by: String, at: String)
  {
    let claimedBy = doc["updated_by"]?.stringValue ?? ""
    let claimedAt = doc["updated_at"]?.stringValue ?? ""
    guard let parsed = try? RevID(rev), let record = try? store.record(id),
      let position = record.tree.revision(parsed)?.body,
      let event = try? store.log.event(at: LogPosition(position))
    else { return (claimedBy, claimedAt) }
    let at = time(event.timestampMicroseconds)
    if event.type == DocumentEvent.Kind.replicated.eventType {
      let by =
        claimedBy.isEmpty || claimedBy == event.actor
        ? event.actor : "\(claimedBy) (replicated by \(event.actor))"
      return (by, claimedAt.isEmpty ? at : claimedAt)
    }
    return (event.actor, at)
  }

  func pageAsOf(
    wiki: String, title: String, id: String, asOf: String, _ store: DocumentStore,
    base: [String: Any]
  ) async throws -> Page {
    let doc: JSONObject? = try await withAsOf(asOf, store) { view in
      do { return try view.get(id).objectValue } catch { return nil }
    }
    guard let doc, doc["_deleted"] != .bool(true) else {
      var page = notFound("The page “\(title)” did not exist then.")
      page.asOf = asOf
      page.asOfExit = Self.pageHref(wiki, title)
      return page
    }
    var object = base
    object["html"] = try rendered(
      doc["markdown"]?.stringValue ?? "", wiki: wiki, key: nil, store)
    object["rev"] = doc["_rev"]?.stringValue ?? ""
    let (by, at) = Self.lastChange(doc, id: id, rev: doc["_rev"]?.stringValue ?? "", store)
    object["updatedBy"] = by
    object["updatedAt"] = at
    object["readOnly"] = true
    var page = Page(title: "\(title) (as of \(asOf))", body: Templates.render("page", object))
    page.asOf = asOf
    page.asOfExit = Self.pageHref(wiki, title)
    return page
  }

  /// Each line of the page's current text with the revision that wrote it, walking the
  /// winner's ancestry in the log (stemmed revisions included) and diffing each revision
  /// against its parent.
  func blame(_ id: String, _ store: DocumentStore) throws
    -> [(rev: String, actor: String, micros: Int64, text: String)]?
  {
    let events = try store.revisionEvents(of: id)
    guard let winner = try? store.get(id)["_rev"]?.stringValue else { return nil }
    let byRev = Dictionary(events.map { ($0.rev, $0) }, uniquingKeysWith: { a, _ in a })
    var chain: [RevisionEvent] = []
    var next: String? = winner
    while let rev = next, let e = byRev[rev] {
      chain.append(e)
      next = e.parentRev
    }
    var lines: [(rev: String, actor: String, micros: Int64, text: String)] = []
    var text = ""
    for e in chain.reversed() {
      let markdown =
        (try? JSONValue(parsing: e.body))?.objectValue?["markdown"]?.stringValue ?? ""
      var updated: [(rev: String, actor: String, micros: Int64, text: String)] = []
      for edit in LineDiff(old: text, new: markdown).edits {
        switch edit.operation {
        case .equal: updated.append(contentsOf: lines[edit.oldRange])
        case .insert:
          for line in edit.lines {
            updated.append((e.rev, e.actor, e.timestampMicroseconds, line))
          }
        case .delete: break
        }
      }
      lines = updated
      text = markdown
    }
    return lines.map { ($0.rev, $0.actor, $0.micros, String($0.text.trimmingSuffix("\n"))) }
  }

  // MARK: Editing

  func editPage(
    wiki: String, title: String, id: String, _ session: Session, _ store: DocumentStore,
    base: [String: Any], conflict: String? = nil, text: String? = nil, baseRev: String? = nil
  ) throws -> Page {
    var object = base
    let current = try? store.get(id).objectValue
    let draft = try session.user.name.flatMap { try Drafts(store).draft(of: $0, page: id) }
    let markdown = text ?? draft?.markdown ?? current?["markdown"]?.stringValue ?? ""
    object["markdown"] = markdown
    // After a merge conflict the settled text goes onto the current revision.
    object["base"] = baseRev ?? draft?.baseRev ?? current?["_rev"]?.stringValue ?? ""
    object["preview"] = try rendered(markdown, wiki: wiki, key: nil, store)
    if let draft {
      object["draftStatus"] =
        "Your draft, saved \(Self.time(draft.updatedMicroseconds)); not published yet."
    } else {
      object["draftStatus"] = current == nil ? "A new page." : "Editing the current revision."
    }
    if let conflict { object["conflict"] = conflict }
    return Page(title: "Editing \(title)", body: Templates.render("edit", object))
  }

  func pageAction(
    wiki: String, title: String, id: String, action: String, form: Query, _ session: Session,
    _ store: DocumentStore, base: [String: Any]
  ) async throws -> PageResult {
    guard let user = session.user.name else {
      throw Failure(
        status: .forbidden, message: "Sign in as a user to edit: drafts are a user's own.")
    }
    let markdown = (form["markdown"] ?? "").replacingOccurrences(of: "\r\n", with: "\n")
    let baseRev = form["base"].flatMap { $0.isEmpty ? nil : $0 }
    switch action {
    case "preview":
      let html = try rendered(markdown, wiki: wiki, key: nil, store)
      var headers = HTTPFields()
      headers[.contentType] = "text/html; charset=utf-8"
      return .response(
        Response(
          status: .ok, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(string: html))))
    case "autosave":
      try checkWrite(
        session, id: id, body: JSONObject(["type": .string("page"), "wiki_id": .string(wiki)]),
        store)
      let draft = try await blocking {
        try Drafts(store).save(
          user: user, page: id, baseRev: baseRev, markdown: markdown, autosave: true)
      }
      var headers = HTTPFields()
      headers[.contentType] = "application/json"
      let body = JSONValue.object(
        JSONObject([
          "ok": .bool(true), "saved_at": .string(Self.time(draft.updatedMicroseconds)),
        ]))
      return .response(
        Response(
          status: .ok, headers: headers,
          body: ResponseBody(byteBuffer: ByteBuffer(bytes: body.serialized()))))
    case "publish":
      try checkWrite(
        session, id: id, body: JSONObject(["type": .string("page"), "wiki_id": .string(wiki)]),
        store)
      do {
        _ = try await blocking {
          let drafts = try Drafts(store)
          try drafts.save(user: user, page: id, baseRev: baseRev, markdown: markdown)
          return try drafts.publish(user: user, page: id)
        }
      } catch let error as StoreError {
        if let conflict = error.draftConflict {
          var page = try editPage(
            wiki: wiki, title: title, id: id, session, store, base: base,
            conflict: conflict.markedText ?? "The page was deleted since you started.",
            text: conflict.markedText ?? markdown,
            baseRev: conflict.currentDeleted ? "" : conflict.currentRev)
          page.status = .conflict
          return .page(page)
        }
        throw error
      }
      throw Redirect(location: Self.pageHref(wiki, title))
    case "discard":
      try? await blocking { try Drafts(store).discard(user: user, page: id) }
      let exists = (try? store.get(id)) != nil
      throw Redirect(location: exists ? Self.pageHref(wiki, title) : Self.wikiHref(wiki))
    case "restore":
      guard let rev = form["rev"] else {
        throw Failure(status: .badRequest, message: "Which revision?")
      }
      let old = try store.get(id, options: GetOptions(rev: rev)).objectValue ?? JSONObject()
      var current = try store.get(id).objectValue ?? JSONObject()
      let currentRev = current["_rev"]?.stringValue
      current.members.removeAll { $0.key == "_id" || $0.key == "_rev" || $0.key == "_attachments" }
      current["markdown"] = old["markdown"] ?? .string("")
      current["updated_by"] = .string(user)
      current["updated_at"] = .string(Timestamp.iso8601())
      try checkWrite(session, id: id, body: current, store)
      _ = try await store.putAsync(
        JSONValue.object(current).serialized(), id: id, rev: currentRev, actor: session.actor,
        origin: session.origin)
      throw Redirect(location: Self.pageHref(wiki, title))
    default:
      throw Failure(status: .badRequest, message: "Unknown action.")
    }
  }
}

extension String {
  func trimmingSuffix(_ suffix: String) -> Substring {
    hasSuffix(suffix) ? dropLast(suffix.count) : self[...]
  }
}
