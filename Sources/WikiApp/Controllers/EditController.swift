import Auth
import CouchAPI
import Formats
import Foundation
import HTTPTypes
import Hummingbird
import JSON
import Log
import NIOCore
import NIOPosix
import Projections
import Query
import Replication
import RevTree
import Wiki
import WikiMarkdown

/// Editing a page and the user's drafts: `?action=edit` (the editor, with the user's draft or
/// the current text) and the posts `preview`, `autosave` (the script's, every few seconds),
/// `publish` (a draft becomes the page's next revision; a conflict shows the merge) and
/// `discard`. Actions of ``PagesController``'s table.
struct EditController: WikiController {
  let site: WikiSite

  struct EditForm: PostedForm {
    var csrf: String?
    var markdown: String?
    var base: String?
    /// The edit summary: a line about the change, written with the revision.
    var summary: String?
    /// `drafts`: a discard from My drafts goes back there.
    var back: String?
  }

  var actions: [PageAction] {
    [
      PageAction(name: "edit", verb: .get) { r in
        .page(
          try editPage(wiki: r.wiki, title: r.title, id: r.id, r.session, r.store, base: r.base))
      },
      PageAction(name: "preview", verb: .post) { r in try await post("preview", r) },
      PageAction(name: "autosave", verb: .post) { r in try await post("autosave", r) },
      PageAction(name: "publish", verb: .post) { r in try await post("publish", r) },
      PageAction(name: "discard", verb: .post) { r in try await post("discard", r) },
    ]
  }

  func editPage(
    wiki: String, title: String, id: String, _ session: Session, _ store: DocumentStore,
    base: [String: Any], conflict: String? = nil, text: String? = nil, baseRev: String? = nil,
    summary: String? = nil
  ) throws -> Page {
    var object = base
    let limit = Drafts.maxTitleBytes(user: session.user.name ?? "", wiki: wiki)
    if title.utf8.count > limit {
      throw Failure(
        status: .badRequest,
        message:
          "This title is \(title.utf8.count) bytes long; page titles in this wiki may be at most \(limit) bytes (about \(limit) letters, fewer with accents or other scripts). Choose a shorter title."
      )
    }
    let current = try? store.get(id).objectValue
    let draft = try session.user.name.flatMap { try Drafts(store).draft(of: $0, page: id) }
    let markdown = text ?? draft?.markdown ?? current?["markdown"]?.stringValue ?? ""
    object["markdown"] = markdown
    object["summary"] = summary ?? draft?.summary ?? ""
    // After a merge conflict the settled text goes onto the current revision.
    object["base"] = baseRev ?? draft?.baseRev ?? current?["_rev"]?.stringValue ?? ""
    let files = current.map { self.files(of: $0, id: id, rev: nil) } ?? []
    object["preview"] = try preview(markdown, wiki: wiki, store, files: files)
    object["files"] = files.map(\.template)
    if let rev = current?["_rev"]?.stringValue, current?["_deleted"] != .bool(true) {
      object["currentRev"] = rev
      object["uploadURL"] =
        "/" + PercentDecoding.encode(options.database) + "/" + PercentDecoding.encode(id)
    }
    if let draft {
      object["draftStatus"] =
        "Your draft, saved \(Self.time(draft.updatedMicroseconds)); not published yet."
    } else {
      let deleted = try current == nil && (store.record(id)?.tree.winner?.isDeleted ?? false)
      object["draftStatus"] =
        deleted
        ? "The page was deleted: publishing brings it back with this text."
        : current == nil ? "A new page." : "Editing the current revision."
    }
    if let conflict { object["conflict"] = conflict }
    return Page(title: "Editing \(title)", body: Templates.render("edit", object))
  }

  /// A post of the editor's form: `markdown` (with the browser's line ends made `\n`) and
  /// `base`, the revision the text was started from.
  func post(_ action: String, _ r: PageRequest) async throws -> PageResult {
    let (wiki, title, id, session, store, base) = (
      r.wiki, r.title, r.id, r.session, r.store, r.base
    )
    let user = session.user.name ?? ""
    let form = try await site.form(EditForm.self, r.request, session: session)
    let markdown = (form.markdown ?? "").replacingOccurrences(of: "\r\n", with: "\n")
    let baseRev = form.base.flatMap { $0.isEmpty ? nil : $0 }
    let summary = EditSummary.clean(form.summary ?? "")
    switch action {
    case "preview":
      let current = try? store.get(id).objectValue
      let files = current.map { self.files(of: $0, id: id, rev: nil) } ?? []
      let html = try preview(markdown, wiki: wiki, store, files: files)
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
          user: user, page: id, baseRev: baseRev, markdown: markdown, autosave: true,
          summary: summary)
      }
      var headers = HTTPFields()
      headers[.contentType] = "application/json"
      let body = JSONValue.object(
        JSONObject([
          "ok": .bool(true),
          "saved_at": .string(
            ISO8601.format(microseconds: draft.updatedMicroseconds, fractionDigits: 0)),
        ]))
      return .response(
        Response(
          status: .ok, headers: headers,
          body: ResponseBody(byteBuffer: ByteBuffer(bytes: body.serialized()))))
    case "publish":
      try checkWrite(
        session, id: id, body: JSONObject(["type": .string("page"), "wiki_id": .string(wiki)]),
        store)
      if ConflictMarkers.remain(in: markdown) {
        // Kept as the draft, not published: marked lines are not the page's text.
        _ = try await blocking {
          try Drafts(store).save(
            user: user, page: id, baseRev: baseRev, markdown: markdown, summary: summary)
        }
        var page = try editPage(
          wiki: wiki, title: title, id: id, session, store, base: base,
          conflict: ConflictMarkers.unsettled, text: markdown, baseRev: baseRev ?? "",
          summary: summary)
        page.status = .conflict
        return .page(page)
      }
      do {
        _ = try await blocking {
          let drafts = try Drafts(store)
          try drafts.save(
            user: user, page: id, baseRev: baseRev, markdown: markdown, summary: summary)
          return try drafts.publish(user: user, page: id)
        }
      } catch let error as StoreError {
        if let conflict = error.draftConflict {
          var page = try editPage(
            wiki: wiki, title: title, id: id, session, store, base: base,
            conflict: conflict.markedText == nil
              ? "The page was deleted since you started." : ConflictMarkers.overlap,
            text: conflict.markedText ?? markdown,
            baseRev: conflict.currentDeleted ? "" : conflict.currentRev, summary: summary)
          page.status = .conflict
          return .page(page)
        }
        throw error
      }
      // The fragment tells the page's script that the text is published: the copy the
      // browser kept can go.
      throw Redirect(location: Self.pageHref(wiki, title) + "#published")
    default:
      try? await blocking { try Drafts(store).discard(user: user, page: id) }
      if form.back == "drafts" { throw Redirect(location: "/_wiki/_drafts") }
      let exists = (try? store.get(id)) != nil
      throw Redirect(location: exists ? Self.pageHref(wiki, title) : Self.wikiHref(wiki))
    }
  }

  /// The editor's preview: the rendered Markdown, or, while the text has conflict markers,
  /// each change to settle with its versions side by side (never the markers as Markdown).
  func preview(_ markdown: String, wiki: String, _ store: DocumentStore, files: [PageFile])
    throws -> String
  {
    // Under the editor's own h1: the Markdown's headings one level down.
    guard let conflicts = ConflictMarkers(markdown) else {
      return PageHeadings.shifted(try rendered(markdown, wiki: wiki, key: nil, store, files: files))
    }
    return PageHeadings.shifted(
      try conflicts.html { try rendered($0, wiki: wiki, key: nil, store, files: files) })
  }
}

extension ConflictMarkers {
  static let overlap =
    "The page changed while you edited it, and some of the same lines changed. For each change below, keep your version, the page's, or edit the text by hand; then publish."
  static let unsettled =
    "Some changes are not settled yet: the text still has conflict markers (<<<<<<<, =======, >>>>>>>). Keep one version of each change below, or remove the markers by hand, then publish."
}
