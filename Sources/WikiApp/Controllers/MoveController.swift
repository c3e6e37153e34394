import Auth
import CouchAPI
import Foundation
import HTTPTypes
import Hummingbird
import JSON
import Projections
import RevTree
import Wiki

/// Renaming a page: `?action=rename` (the form: a new name, and the wiki, of those the user
/// may write), its post (``PageMove``: the new page, the old one a redirect, both checked in one
/// write transaction), then an offer to update the `[[links]]` to the old name in the pages the
/// backlinks index finds (`?action=relink` on the new page: the chosen ones in one
/// transaction, each an edit of the user's with the summary "link to renamed page"). Actions of
/// ``PagesController``'s table.
struct MoveController: WikiController {
  let site: WikiSite

  struct RenameForm: PostedForm {
    var csrf: String?
    var rev: String?
    var name: String?
    var wiki: String?
  }

  struct RelinkForm: PostedForm {
    var csrf: String?
    /// The old page's title (in this page's wiki).
    var from: String?
    var pages: [String]?
  }

  var actions: [PageAction] {
    [
      PageAction(name: "rename", verb: .get) { r in .page(try renameForm(r)) },
      PageAction(name: "rename", verb: .post) { r in try await rename(r) },
      PageAction(name: "relink", verb: .post) { r in try await relink(r) },
    ]
  }

  /// The wikis `session`'s user may see (and so write pages of), by title.
  func writableWikis(_ session: Session, _ store: DocumentStore) throws -> [(
    id: String, title: String
  )] {
    try WikiQueries(store).wikis().compactMap { w in
      guard try wiki(w.id, for: session, store) != nil else { return nil }
      return (w.id, w.title.isEmpty ? w.id : w.title)
    }.sorted { $0.title.lowercased() < $1.title.lowercased() }
  }

  /// `?action=rename`: the form.
  func renameForm(_ r: PageRequest, name: String? = nil, error: String? = nil) throws -> Page {
    guard r.session.user.name != nil else {
      throw Failure(status: .forbidden, message: "Sign in as a user to rename pages.")
    }
    guard let record = try r.store.record(r.id), let winner = record.tree.winner,
      !winner.isDeleted
    else { return missing(r.wiki, r.title) }
    var object = r.base
    object["rev"] = winner.rev.description
    object["name"] = name ?? r.title
    object["wikis"] = try writableWikis(r.session, r.store).map {
      ["id": $0.id, "title": $0.title, "selected": $0.id == r.wiki]
    }
    if let error { object["error"] = error }
    let backlinks = try WikiQueries(r.store).backlinks(to: r.title, in: r.wiki)
    if !backlinks.isEmpty {
      object["backlinkText"] =
        WikiSite.count(backlinks.count, "page links", "pages link")
        + " here: after the rename you can update their links to the new name."
    }
    return Page(title: "Rename \(r.title)", body: Templates.render("page-rename", object))
  }

  /// The posted rename.
  func rename(_ r: PageRequest) async throws -> PageResult {
    let (wiki, title, id, session, store) = (r.wiki, r.title, r.id, r.session, r.store)
    let form = try await site.form(RenameForm.self, r.request, session: session)
    let name = (form.name ?? "").trimmingCharacters(in: .whitespacesAndNewlines)
    let target = (form.wiki ?? wiki).isEmpty ? wiki : form.wiki ?? wiki
    guard !name.isEmpty else {
      throw Failure(
        status: .badRequest, message: "Give the page a new name: nothing was written.",
        heading: "A name is needed")
    }
    guard !name.contains("\n"), !name.hasPrefix("_") else {
      throw Failure(
        status: .badRequest,
        message: "A page’s name may not start with “_” or hold a line break: nothing was written.",
        heading: "Not a page name")
    }
    guard let (summary, _) = try self.wiki(target, for: session, store) else {
      throw Failure(
        status: .notFound,
        message: "There is no such wiki, or it is not yours to write: nothing was written.",
        heading: "No such wiki")
    }
    let limit = max(0, WikiID.maxIDBytes - target.utf8.count - 1)
    guard name.utf8.count <= limit else {
      throw Failure(
        status: .badRequest,
        message:
          "This name is \(name.utf8.count) bytes long; page names in that wiki may be at most \(limit) bytes. Nothing was written.",
        heading: "Name too long")
    }
    let newID = target + ":" + name
    guard newID != id else {
      throw Failure(
        status: .badRequest,
        message: "The page already has that name: nothing was written.", heading: "Same name")
    }
    let targetTitle = summary.title.isEmpty ? target : summary.title
    if let winner = try store.record(newID)?.tree.winner, !winner.isDeleted {
      throw Failure(
        status: .conflict,
        message:
          "A page named “\(name)” exists in \(targetTitle) already: nothing was written. Choose another name, or rename or delete that page first.",
        heading: "That page exists")
    }
    let changed = Failure(
      status: .conflict,
      message:
        "The page changed since you opened the form: nothing was written. Look at it again, then rename it.",
      heading: "The page changed")
    try PagesController.checkCurrentRevision(
      of: id, title: title, in: store, rev: form.rev, action: "rename", changed: changed)
    let user = session.user.name ?? ""
    for (docID, w) in [(id, wiki), (newID, target)] {
      try checkWrite(
        session, id: docID,
        body: JSONObject(["type": .string("page"), "wiki_id": .string(w)]), store)
    }
    do {
      _ = try await blocking { try PageMove.move(store, from: id, to: newID, user: user) }
    } catch let error as StoreError where error.code == .conflict {
      throw Failure(
        status: .conflict,
        message:
          "The page, or the name you chose, changed meanwhile: nothing was written. (\(error.reason))",
        heading: "Not renamed")
    }
    let backlinks = try WikiQueries(store).backlinks(to: title, in: wiki).filter {
      $0 != title && !(target == wiki && $0 == name)
    }
    // Across wikis, a `[[link]]` cannot name the new page: the redirect sends readers on.
    guard !backlinks.isEmpty, target == wiki else {
      throw Redirect(location: Self.pageHref(target, name))
    }
    var object = r.base
    object["newTitle"] = name
    object["newHref"] = Self.pageHref(target, name)
    object["targetTitle"] = targetTitle
    object["backlinks"] = backlinks.map { ["title": $0, "href": Self.pageHref(wiki, $0)] }
    object["relinkAction"] = Self.pageHref(target, name) + "?action=relink"
    return .page(
      Page(title: "Renamed \(title)", body: Templates.render("page-renamed", object)))
  }

  /// The posted link updates, on the new page's address: the chosen pages' `[[from]]` links
  /// name this page.
  func relink(_ r: PageRequest) async throws -> PageResult {
    let (wiki, title, id, session, store) = (r.wiki, r.title, r.id, r.session, r.store)
    let form = try await site.form(RelinkForm.self, r.request, session: session)
    guard let from = form.from, !from.isEmpty,
      (try? store.get(wiki + ":" + from))?["redirect_to"]?.stringValue == id
    else {
      throw Failure(
        status: .badRequest,
        message: "That page was not renamed to this one: no links were changed.",
        heading: "Nothing to update")
    }
    let chosen = Set(form.pages ?? [])
    let linking = try WikiQueries(store).backlinks(to: from, in: wiki).filter {
      chosen.contains($0)
    }
    guard !linking.isEmpty else {
      throw Failure(
        status: .badRequest,
        message:
          "None of the pages chosen links to “\(from)”: no links were changed. Choose at least one.",
        heading: "No pages chosen")
    }
    let user = session.user.name ?? ""
    do {
      _ = try await blocking {
        try PageMove.updateLinks(
          store, in: wiki, pages: linking, from: from, to: title, user: user)
      }
    } catch let error as StoreError where error.code == .forbidden {
      throw Failure(
        status: .forbidden, message: "You may not change one of those pages: no links were changed."
      )
    }
    throw Redirect(location: Self.pageHref(wiki, title))
  }
}
