import CouchAPI
import HTTPTypes
import Hummingbird
import NIOCore
import Projections

/// The UI's error rendering, the middleware of every route under `/_wiki`: a controller's
/// ``WikiSite/Redirect`` becomes a `303 See Other`, a ``WikiSite/Failure``, a ``CouchError``
/// or a store's error an HTML error page with its status (the API would answer JSON), and the
/// failure is noted for ``CouchAPI/RequestLog``'s line.
struct PageErrors: RouterMiddleware {
  typealias Context = CouchRequestContext
  let site: WikiSite

  func handle(
    _ request: Request, context: Context,
    next: (Request, Context) async throws -> Response
  ) async throws -> Response {
    do {
      return try await next(request, context)
    } catch let redirect as WikiSite.Redirect {
      var headers = HTTPFields()
      headers[.location] = redirect.location
      if let cookie = redirect.setCookie { headers[.setCookie] = cookie }
      headers[.cacheControl] = "no-store"
      return Response(status: .seeOther, headers: headers)
    } catch {
      let (status, heading, message) = Self.describe(error)
      if status.code >= 500 || !(error is WikiSite.Failure) {
        context.notes.failure = CouchError(heading, message, status: status.code)
      }
      return site.html(
        WikiSite.Page(
          status: status, title: "Error",
          body: Templates.render("error", ["heading": heading, "message": message])),
        session: nil, head: request.method == .head)
    }
  }

  /// The status, heading and message of an error page.
  static func describe(_ error: any Error) -> (HTTPResponse.Status, String, String) {
    switch error {
    case let failure as WikiSite.Failure:
      return (failure.status, failure.heading ?? failure.status.reasonPhrase, failure.message)
    case is NIOTooManyBytesError:
      return (.contentTooLarge, "Content Too Large", "The form is larger than this site takes.")
    case let error as CouchError:
      return (.init(code: error.statusCode), error.error, error.reason)
    case let error as StoreError:
      let e = CouchError(error)
      return (.init(code: e.statusCode), e.error, e.reason)
    case let error as HTTPError where error.status == .notFound:
      return (.notFound, "Not Found", "There is no such page.")
    default:
      return (.internalServerError, "Error", "\(error)")
    }
  }
}
