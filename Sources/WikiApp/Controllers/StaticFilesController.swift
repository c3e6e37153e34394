import CouchAPI
import HTTPTypes
import Hummingbird
import NIOCore

/// `/_wiki/_static/{file}`: the UI's style sheet and script (``StaticFiles``), cached for an
/// hour; no session needed.
struct StaticFilesController: RoutedController {
  let site: WikiSite

  func routes() -> RouteCollection<CouchRequestContext> {
    let routes = RouteCollection(context: CouchRequestContext.self)
    routes.get("_static/**") { request, context in try file(context) }
    routes.head("_static/**") { request, context in try file(context) }
    return routes
  }

  func file(_ context: CouchRequestContext) throws -> Response {
    let name = try context.parameters.getCatchAll().map { try WikiSite.parameter($0) }
      .joined(separator: "/")
    guard let (type, text) = StaticFiles.files[name] else {
      return WikiSite.plainError(404, "Not found")
    }
    var headers = HTTPFields()
    headers[.contentType] = type
    headers[.cacheControl] = "public, max-age=3600"
    headers[HTTPField.Name("X-Content-Type-Options")!] = "nosniff"
    return Response(
      status: .ok, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(string: text)))
  }
}
