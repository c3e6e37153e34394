import CouchAPI
import HTTPTypes
import Hummingbird
import Projections
import RevTree
import Wiki

/// `/_wiki/_drafts`: the signed-in user's drafts (``Drafts``), each with its page and wiki, and
/// whether it is a new page or changes to a published one; a draft opens in the editor, and
/// Discard (the editor's, posted from here) comes back to the list. Only
/// drafts of wikis the user may read now are listed.
struct DraftsController: RoutedController {
  let site: WikiSite

  func routes() -> RouteCollection<CouchRequestContext> {
    let routes = RouteCollection(context: CouchRequestContext.self)
    routes.get("_drafts") { request, context in
      try await site.signedInPage(request, context) { session, store in
        try myDrafts(session, store)
      }
    }
    routes.head("_drafts") { request, context in
      try await site.signedInPage(request, context) { session, store in
        try myDrafts(session, store)
      }
    }
    return routes
  }

  func myDrafts(_ session: Session, _ store: DocumentStore) throws -> Page {
    guard let user = session.user.name else {
      throw Failure(status: .forbidden, message: "Sign in as a user to have drafts.")
    }
    var wikis: [String: WikiSummary?] = [:]
    var rows: [[String: Any]] = []
    let drafts = try Drafts(store).drafts(of: user).sorted {
      $0.updatedMicroseconds > $1.updatedMicroseconds
    }
    for draft in drafts {
      guard let (wiki, title) = WikiID.split(draft.pageID) else { continue }
      if wikis[wiki] == nil {
        wikis[wiki] = .some(try self.wiki(wiki, for: session, store)?.summary)
      }
      guard let summary = wikis[wiki] ?? nil else { continue }
      let live = try store.record(draft.pageID)?.tree.winner.map { !$0.isDeleted } ?? false
      rows.append([
        "title": title, "editHref": Self.pageHref(wiki, title) + "?action=edit",
        "discardHref": Self.pageHref(wiki, title) + "?action=discard",
        "wikiHref": Self.wikiHref(wiki), "wikiTitle": summary.title.isEmpty ? wiki : summary.title,
        "isNew": !live, "saved": Self.time(draft.updatedMicroseconds),
      ])
    }
    return Page(
      title: "My drafts",
      body: Templates.render("drafts", ["drafts": rows, "csrf": session.csrf]))
  }
}
