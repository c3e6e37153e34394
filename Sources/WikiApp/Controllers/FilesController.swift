import CouchAPI
import Foundation
import HTTPTypes
import Hummingbird
import JSON
import Projections
import RevTree
import Wiki

/// A page's files: `?action=remove-file&name=` (asks first) and its post, which writes the
/// page's next revision without the file (the history describes it: "removed picture.png").
/// Replacing a file is the page's script's: it streams the new file to the attachment API under
/// the same name ("replaced picture.png"). Actions of ``PagesController``'s table.
struct FilesController: WikiController {
  let site: WikiSite

  struct FileQuery: Decodable {
    var name: String?
  }

  struct RemoveForm: PostedForm {
    var csrf: String?
    var name: String?
    var rev: String?
  }

  var actions: [PageAction] {
    [
      PageAction(name: "remove-file", verb: .get) { r in .page(try confirmation(r)) },
      PageAction(name: "remove-file", verb: .post) { r in try await remove(r) },
    ]
  }

  /// The page's current revision and its file `name`, or the page saying why not.
  func current(_ r: PageRequest, name: String?) throws -> (rev: String, file: PageFile) {
    guard r.session.user.name != nil else {
      throw Failure(status: .forbidden, message: "Sign in as a user to change a page’s files.")
    }
    guard let name, !name.isEmpty else {
      throw Failure(
        status: .badRequest, message: "Which file? Remove it from the page’s list of files.",
        heading: "Which file?")
    }
    guard let doc = try? r.store.get(r.id).objectValue, doc["_deleted"] != .bool(true),
      let rev = doc["_rev"]?.stringValue
    else {
      throw Failure(
        status: .notFound, message: "The page “\(r.title)” does not exist: nothing was written.",
        heading: "No such page")
    }
    guard let file = files(of: doc, id: r.id, rev: nil).first(where: { $0.name == name }) else {
      throw Failure(
        status: .notFound,
        message: "The page “\(r.title)” has no file “\(name)” (any more): nothing was written.",
        heading: "No such file")
    }
    return (rev, file)
  }

  /// `?action=remove-file&name=`: asks first.
  func confirmation(_ r: PageRequest) throws -> Page {
    let q = try site.query(FileQuery.self, r.request)
    let (rev, file) = try current(r, name: q.name)
    var object = r.base
    object["rev"] = rev
    object["name"] = file.name
    object["fileHref"] = file.href
    object["size"] = file.size
    return Page(
      title: "Remove \(file.name) from \(r.title)?",
      body: Templates.render("file-remove", object))
  }

  /// The posted Remove: the page's next revision without the file, on the revision the
  /// confirmation showed, through the checked write path.
  func remove(_ r: PageRequest) async throws -> PageResult {
    let form = try await site.form(RemoveForm.self, r.request, session: r.session)
    let (rev, file) = try current(r, name: form.name)
    let changed = Failure(
      status: .conflict,
      message:
        "The page changed since you asked to remove the file: nothing was written. Look at it again, then remove the file if you still mean to.",
      heading: "The page changed")
    guard rev == form.rev else { throw changed }
    try checkWrite(
      r.session, id: r.id,
      body: JSONObject(["type": .string("page"), "wiki_id": .string(r.wiki)]), r.store)
    do {
      _ = try await r.store.deleteAttachmentAsync(
        r.id, name: file.name, rev: rev, actor: r.session.actor)
    } catch let error as StoreError where error.code == .conflict {
      throw changed
    }
    throw Redirect(location: Self.pageHref(r.wiki, r.title))
  }
}
