public import JSON
import Log
public import Projections
import RevTree

/// TouchWiki's schema for wiki and page documents, as a ``DocumentValidator``
/// (``DocumentValidation/touchWiki``).
///
/// Only documents whose `type` is `"wiki"` or `"page"` are checked; every other document,
/// and every deletion, is an ordinary CouchDB document. A refusal is CouchDB's answer to a
/// `validate_doc_update` function that throws `{forbidden: reason}`: 403 `forbidden`, nothing
/// written.
///
/// | field | wiki | page |
/// | --- | --- | --- |
/// | `_id` | no `:`, at most 491 bytes | `<wikiId>:<Page Name>`, both parts non-empty, at most 500 bytes |
/// | `title` | string, required | — |
/// | `owner_id` | non-empty string, required | — |
/// | `members` | array of strings, required | — |
/// | `wiki_id` | — | string equal to the id's `<wikiId>`, required |
/// | `markdown` | string, optional | string, required |
/// | `created_at`, `updated_at` | ISO-8601 date-time string, optional | the same |
/// | `updated_by` | — | string, optional |
/// | `edit_summary`, `edit_summary_on` | — | strings, optional (``EditSummary``) |
/// | `redirect_to` | — | a page id (`<wikiId>:<Page Name>`), optional: the page moved there |
/// | `renamed_from` | — | a page id, optional: the page was moved here from there |
///
/// Timestamps and `updated_by` may be absent (older TouchWiki clients did not always write
/// them), but when present they must have these types. Other fields are free.
///
/// A local edit of a page (`new_edits=true`) also needs its wiki to exist: the wiki document's
/// winning revision must be live and of type `"wiki"`. A replicated write (`new_edits=false`)
/// does not: replication sends documents in changes-feed order, so a page can arrive before its
/// wiki. Replicated revisions are still checked against the field types (as CouchDB runs
/// `validate_doc_update` on replicated writes), and a refused one is reported in the
/// `_bulk_docs` answer like any failure.
///
/// ```swift
/// let store = try DocumentStore(directory: path, validation: .touchWiki)
/// try store.put(#"{"_id":"w1:Home","type":"page","wiki_id":"w1","markdown":"Hi"}"#, actor: "ann")
/// // 403 forbidden: the wiki 'w1' does not exist
/// ```
public struct TouchWikiValidator: DocumentValidator {
  public init() {}

  public func validate(_ docID: String, body: JSONObject, deleted: Bool) throws(StoreError)
    -> DocumentRequirement?
  {
    guard let wiki = try TouchWikiSchema.check(id: docID, body: body, deleted: deleted) else {
      return nil
    }
    return DocumentRequirement(
      documentID: wiki, type: "wiki",
      refusal: "the wiki '\(wiki)' of page '\(docID)' does not exist")
  }
}

extension DocumentValidation {
  /// CouchDB's rules and the TouchWiki schema for wiki and page documents
  /// (``TouchWikiValidator``).
  public static var touchWiki: DocumentValidation { DocumentValidation([TouchWikiValidator()]) }
}

/// The TouchWiki schema checks of ``TouchWikiValidator``.
enum TouchWikiSchema {
  /// Checks a revision's body; returns the wiki a page needs (nil when none is needed).
  static func check(id: String, body: JSONObject, deleted: Bool) throws(StoreError) -> String? {
    guard !deleted, let type = body["type"]?.stringValue else { return nil }
    // The wiki's indexes key by these ids (LMDB keys stop at 511 bytes).
    let wikiPart = type == "page" ? WikiID.split(id)?.wiki ?? id : id
    if type == "wiki" || type == "page",
      id.utf8.count > WikiProjection.maxKeyBytes
        || wikiPart.utf8.count > WikiProjection.maxWikiIDBytes
    {
      throw StoreError.validation(
        "a wiki's id may be at most \(WikiProjection.maxWikiIDBytes) bytes and a page's "
          + "\(WikiProjection.maxKeyBytes); this \(type)'s is \(id.utf8.count)")
    }
    switch type {
    case "wiki":
      guard !id.utf8.contains(UInt8(ascii: ":")) else {
        throw StoreError.validation("a wiki's id may not contain ':' (that makes it a page id)")
      }
      try string(body, "title", of: "wiki")
      try string(body, "owner_id", of: "wiki", nonEmpty: true)
      guard let members = body["members"] else {
        throw StoreError.validation("a wiki needs 'members', an array of user ids")
      }
      guard let list = members.arrayValue, list.allSatisfy({ $0.stringValue != nil }) else {
        throw StoreError.validation("a wiki's 'members' must be an array of strings")
      }
      try string(body, "markdown", of: "wiki", optional: true)
      try timestamps(body, of: "wiki")
      return nil
    case "page":
      guard let (wiki, title) = WikiID.split(id), !wiki.isEmpty, !title.isEmpty else {
        throw StoreError.validation("a page's id must be <wikiId>:<Page Name>, not '\(id)'")
      }
      guard let wikiID = body["wiki_id"] else {
        throw StoreError.validation("a page needs 'wiki_id', the id of its wiki")
      }
      guard let s = wikiID.stringValue, Array(s.utf8) == Array(wiki.utf8) else {
        throw StoreError.validation(
          "a page's 'wiki_id' must be the string '\(wiki)', the part of its id before ':'")
      }
      try string(body, "markdown", of: "page")
      try string(body, "updated_by", of: "page", optional: true)
      try string(body, "edit_summary", of: "page", optional: true)
      try string(body, "edit_summary_on", of: "page", optional: true)
      for key in ["redirect_to", "renamed_from"] {
        guard let value = body[key] else { continue }
        guard let target = value.stringValue, let parts = WikiID.split(target),
          !parts.wiki.isEmpty, !parts.title.isEmpty
        else {
          throw StoreError.validation(
            "a page's '\(key)' must be a page id, <wikiId>:<Page Name>")
        }
      }
      try timestamps(body, of: "page")
      return wiki
    default:
      return nil
    }
  }

  static func string(
    _ body: JSONObject, _ key: String, of type: String, optional: Bool = false,
    nonEmpty: Bool = false
  ) throws(StoreError) {
    guard let value = body[key] else {
      if optional { return }
      throw StoreError.validation("a \(type) needs '\(key)', a string")
    }
    guard let s = value.stringValue else {
      throw StoreError.validation("a \(type)'s '\(key)' must be a string")
    }
    if nonEmpty && s.isEmpty {
      throw StoreError.validation("a \(type)'s '\(key)' must not be empty")
    }
  }

  static func timestamps(_ body: JSONObject, of type: String) throws(StoreError) {
    for key in ["created_at", "updated_at"] {
      guard let value = body[key] else { continue }
      guard let s = value.stringValue, Timestamp.isISO8601(s) else {
        throw StoreError.validation(
          "a \(type)'s '\(key)' must be an ISO-8601 date-time string such as 2024-05-01T10:00:00.000Z"
        )
      }
    }
  }
}
