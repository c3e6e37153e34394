import CouchAPI
import Foundation
import Hummingbird
import JSON
import Projections
import Query
import Wiki
import WikiMarkdown

/// `/_wiki/_search?q=…[&wiki=…]`: full-text search of the pages of the wikis the user may
/// read (all of them, or one), ranked by the index's BM25 score, each result with its title,
/// a snippet with the matched words marked, and who changed it last and when. The access
/// rules apply before ranking: a hidden wiki's words never match. The index holds the
/// present: a search from a page shown as of an earlier moment says so.
struct SearchController: RoutedController {
  let site: WikiSite

  func routes() -> RouteCollection<CouchRequestContext> {
    let routes = RouteCollection(context: CouchRequestContext.self)
    routes.get("_search") { request, context in try await search(request, context) }
    routes.head("_search") { request, context in try await search(request, context) }
    return routes
  }

  struct SearchParameters: Decodable {
    var q: String?
    var wiki: String?
    var as_of: String?
    var skip: Int?
  }

  static let pageSize = 25

  func search(_ request: Request, _ context: Context) async throws -> Response {
    let parameters = try site.query(SearchParameters.self, request)
    return try await site.signedInPage(request, context) { session, store in
      let q = (parameters.q ?? "").trimmingCharacters(in: .whitespacesAndNewlines)
      var object: [String: Any] = ["q": q]
      var wiki: String? = nil
      if let asked = parameters.wiki, !asked.isEmpty {
        // A wiki one may not see is searched as one that does not exist: not at all.
        guard let (summary, _) = try self.wiki(asked, for: session, store) else {
          return notFound("There is no wiki here, or it is not yours to see.")
        }
        wiki = asked
        object["wiki"] = asked
        object["wikiTitle"] = summary.title.isEmpty ? asked : summary.title
      }
      if let asOf = parameters.as_of, !asOf.isEmpty {
        object["present"] = true
        object["asOf"] = asOf
      }
      var page = Page(title: q.isEmpty ? "Search" : "Search: \(q)", body: "")
      page.wiki = wiki
      guard !q.isEmpty else {
        page.body = Templates.render("search", object)
        return page
      }
      guard TextSearch(store).isAvailable else {
        object["error"] = "This database has no full-text index."
        page.body = Templates.render("search", object)
        return page
      }
      var query: SearchQuery
      do {
        query = try SearchQuery(q)
      } catch {
        object["error"] = "Type some words to search for."
        page.body = Templates.render("search", object)
        return page
      }
      query.limit = Self.pageSize
      query.skip = max(0, parameters.skip ?? 0)
      let view = try self.view(session, store)
      let (asked, only) = (query, wiki)
      let result = try await blocking { () throws -> SearchResult in
        var groups = try only.map { [$0] } ?? TextSearch(store).groups()
        if let view { groups = groups.filter { view.includes($0) } }
        var result = try TextSearch(store).search(asked, groups: groups)
        if let view { result.hits = result.hits.filter { view.includes($0.docID) } }
        return result
      }
      let queries = try WikiQueries(store)
      var wikiTitles: [String: String] = [:]
      var hits: [[String: Any]] = []
      for hit in result.hits {
        guard let parts = WikiID.split(hit.docID), let doc = try? store.get(hit.docID).objectValue
        else { continue }
        if wikiTitles[parts.wiki] == nil {
          let title = try queries.wiki(parts.wiki)?.title ?? ""
          wikiTitles[parts.wiki] = title.isEmpty ? parts.wiki : title
        }
        let searchable = try TextSearch(store).searchable(hit.docID)
        let (by, at) = Self.lastChange(
          doc, id: hit.docID, rev: doc["_rev"]?.stringValue ?? "", store)
        hits.append([
          "href": Self.pageHref(parts.wiki, parts.title), "title": parts.title,
          "wikiHref": Self.wikiHref(parts.wiki), "wikiTitle": wikiTitles[parts.wiki] ?? parts.wiki,
          "snippet": TextSearch.snippet(
            MarkdownRenderer().plainText(searchable?.text ?? ""), matched: hit.matched),
          "updatedBy": by, "updatedAt": at,
        ])
      }
      object["searched"] = true
      object["hits"] = hits
      object["count"] = WikiSite.count(result.total, "page")
      page.body = Templates.render("search", object)
      return page
    }
  }
}
