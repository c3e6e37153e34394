import CouchAPI
import Hummingbird

/// `/_wiki/_sync`: the Sync page.
struct SyncController: RoutedController {
  let site: WikiSite

  func routes() -> RouteCollection<CouchRequestContext> {
    let routes = RouteCollection(context: CouchRequestContext.self)
    routes.get("_sync") { request, context in try await sync(request, context) }
    routes.head("_sync") { request, context in try await sync(request, context) }
    return routes
  }

  func sync(_ request: Request, _ context: Context) async throws -> Response {
    try await site.signedInPage(request, context) { _, _ in
      Page(title: "Sync", body: Templates.render("sync", [:]))
    }
  }
}
