public import JSON
public import Projections
import RevTree

/// What ``PageMove/move(_:from:to:user:)`` wrote.
public struct PageMoveResult: Sendable, Hashable {
  /// The new page and its first revision there.
  public let newID: String
  public let newRev: String
  /// The old page, now a redirect, and its redirect revision.
  public let oldID: String
  public let oldRev: String
}

/// Renaming a page, within its wiki or to another: a page's id is `<wikiId>:<Page Name>`, so a
/// rename is a new document.
///
/// One transaction writes both documents, as the signed-in user (``WriteAccess``), whose
/// access to both wikis the store checks in it:
/// - the new page: the old page's body (its Markdown and other fields) with `wiki_id` of its
///   wiki, `renamed_from` (the old id), the summary "renamed from Old" and the old page's
///   attachments (copied: the same blobs);
/// - the old page: a redirect, `redirect_to` (the new id), Markdown saying where it went
///   ("Moved to [[New]]") and the summary "renamed to New", without attachments.
///
/// A target that exists (live) is refused with 409 `conflict`; one that was deleted is written
/// again on its deletion, as CouchDB recreates a document.
///
/// ```swift
/// let moved = try PageMove.move(store, from: "w1:Old", to: "w1:New", user: "ann")
/// try store.get("w1:Old")["redirect_to"]  // "w1:New"
/// ```
public enum PageMove {
  /// Moves page `from` to `to` (see the type's discussion).
  ///
  /// - Throws: ``StoreError`` `not_found` when `from` is not a live page, `conflict` when `to`
  ///   exists or `from` has conflicting revisions, `bad_request` for the same id or one that is
  ///   not a page id, `forbidden` when the user may not write either page.
  @discardableResult
  public static func move(_ store: DocumentStore, from: String, to: String, user: String) throws
    -> PageMoveResult
  {
    guard let (_, oldTitle) = WikiID.split(from), let (toWiki, newTitle) = WikiID.split(to),
      !toWiki.isEmpty, !newTitle.isEmpty, !oldTitle.isEmpty
    else { throw StoreError.badRequest("a page id is <wikiId>:<Page Name>") }
    guard from != to else { throw StoreError.badRequest("the page already has that name") }
    let now = Timestamp.iso8601()
    return try store.writeDocuments { txn in
      for (id, wiki) in [(from, WikiID.of(from)), (to, toWiki)] {
        try store.checkWriteAccess(
          AccessWrite(
            docID: id,
            body: JSONObject(["type": .string("page"), "wiki_id": .string(wiki)]),
            replicated: false), txn: txn)
      }
      guard let record = try store.record(from, txn: txn), let winner = record.tree.winner,
        !winner.isDeleted, winner.status == .available, let at = winner.body
      else { throw StoreError.notFound("the page '\(from)' does not exist") }
      guard record.tree.leaves.filter({ !$0.isDeleted }).count == 1 else {
        throw StoreError(
          "conflict", "the page '\(from)' has conflicting revisions", code: .conflict)
      }
      let target = try store.record(to, txn: txn)?.tree.winner
      if let target, !target.isDeleted {
        throw StoreError("conflict", "the page '\(to)' exists", code: .conflict)
      }
      let old = try store.body(at: at, txn: txn)
      let attachments = try store.attachments(at: at, txn: txn)

      var body = old
      body.members.removeAll {
        $0.key.hasPrefix("_") || $0.key == "redirect_to" || $0.key == "renamed_from"
      }
      body["wiki_id"] = .string(toWiki)
      body["renamed_from"] = .string(from)
      body["updated_at"] = .string(now)
      body["updated_by"] = .string(user)
      EditSummary.set(
        "renamed from \(label(from, in: toWiki))", on: target?.rev.description, in: &body)
      var input = try DocumentInput(.object(body))
      if !attachments.isEmpty { input.attachments = attachments.map { .copied($0) } }
      let newRev = try store.edit(input, id: to, rev: nil, actor: user, within: txn)

      var redirect = old
      redirect.members.removeAll { $0.key.hasPrefix("_") || $0.key == "renamed_from" }
      redirect["redirect_to"] = .string(to)
      redirect["markdown"] = .string(movedText(to: to, from: WikiID.of(from)))
      redirect["updated_at"] = .string(now)
      redirect["updated_by"] = .string(user)
      EditSummary.set(
        "renamed to \(label(to, in: WikiID.of(from)))", on: winner.rev.description,
        in: &redirect)
      let oldRev = try store.edit(
        try DocumentInput(.object(redirect)), id: from, rev: winner.rev.description,
        actor: user, within: txn)
      return PageMoveResult(newID: to, newRev: newRev, oldID: from, oldRev: oldRev)
    }
  }

  /// The redirect's Markdown: "Moved to [[New]]." in the same wiki; across wikis, the page and
  /// its wiki by name (a `[[link]]` names a page of its own wiki).
  public static func movedText(to: String, from wiki: String) -> String {
    guard let (toWiki, title) = WikiID.split(to) else { return "Moved." }
    if toWiki == wiki { return "Moved to [[\(title)]].\n" }
    return "Moved to “\(title)” in the wiki “\(toWiki)”.\n"
  }

  /// A page's name as the other page's summary says it: its title in the same wiki, else
  /// `wiki:title`.
  static func label(_ id: String, in wiki: String) -> String {
    guard let (w, title) = WikiID.split(id) else { return id }
    return w == wiki ? title : id
  }

  /// `markdown` with every `[[old]]` and `[[old|label]]` naming `new` instead (a link's target
  /// is compared trimmed, as ``WikiProjection`` reads it); the labels stay.
  ///
  /// ```swift
  /// PageMove.relink("See [[Old]] and [[Old|the old one]].", from: "Old", to: "New")
  /// // "See [[New]] and [[New|the old one]]."
  /// ```
  public static func relink(_ markdown: String, from old: String, to new: String) -> String {
    let bytes = Array(markdown.utf8)
    let oldBytes = Array(old.utf8)
    let open = UInt8(ascii: "[")
    let close = UInt8(ascii: "]")
    let bar = UInt8(ascii: "|")
    let newline = UInt8(ascii: "\n")
    func isSpace(_ b: UInt8) -> Bool { b == UInt8(ascii: " ") || b == UInt8(ascii: "\t") }
    var out: [UInt8] = []
    out.reserveCapacity(bytes.count)
    var i = 0
    scanning: while i < bytes.count {
      guard i + 1 < bytes.count, bytes[i] == open, bytes[i + 1] == open else {
        out.append(bytes[i])
        i += 1
        continue
      }
      // `[[[`: the link opens at the last two brackets of the run, as WikiLinks reads it.
      while i + 2 < bytes.count, bytes[i + 2] == open {
        out.append(bytes[i])
        i += 1
      }
      var j = i + 2
      while j + 1 < bytes.count {
        if bytes[j] == newline || (bytes[j] == open && bytes[j + 1] == open) { break }
        if bytes[j] == close, bytes[j + 1] == close {
          let inside = bytes[(i + 2)..<j]
          let cut = inside.firstIndex(of: bar) ?? inside.endIndex
          var target = inside[inside.startIndex..<cut]
          while let f = target.first, isSpace(f) { target = target.dropFirst() }
          while let l = target.last, isSpace(l) { target = target.dropLast() }
          if Array(target) == oldBytes {
            out += [open, open] + Array(new.utf8) + Array(inside[cut...]) + [close, close]
          } else {
            out += bytes[i..<(j + 2)]
          }
          i = j + 2
          continue scanning
        }
        j += 1
      }
      // No link here: the brackets stay as they are.
      out += [open, open]
      i += 2
    }
    return String(decoding: out, as: UTF8.self)
  }

  /// Rewrites the `[[links]]` to `oldTitle` in the pages `titles` of `wiki` to name `newTitle`,
  /// each as an edit of `user`'s with the summary "link to renamed page", in one transaction
  /// (the user's access checked in it for each). Pages that no longer exist or no longer
  /// link there are passed over. Returns the titles of the pages changed.
  ///
  /// - Throws: ``StoreError`` `forbidden` when the user may not write one of them (nothing is
  ///   written), `conflict` for a page with conflicting revisions.
  public static func updateLinks(
    _ store: DocumentStore, in wiki: String, pages titles: [String], from oldTitle: String,
    to newTitle: String, user: String
  ) throws -> [String] {
    let now = Timestamp.iso8601()
    return try store.writeDocuments { txn in
      var changed: [String] = []
      for title in titles {
        let id = wiki + ":" + title
        guard let record = try store.record(id, txn: txn), let winner = record.tree.winner,
          !winner.isDeleted, winner.status == .available, let at = winner.body
        else { continue }
        var body = try store.body(at: at, txn: txn)
        guard let markdown = body["markdown"]?.stringValue else { continue }
        let relinked = relink(markdown, from: oldTitle, to: newTitle)
        guard relinked != markdown else { continue }
        body.members.removeAll { $0.key.hasPrefix("_") }
        body["markdown"] = .string(relinked)
        body["updated_at"] = .string(now)
        body["updated_by"] = .string(user)
        EditSummary.set("link to renamed page", on: winner.rev.description, in: &body)
        var input = try DocumentInput(.object(body))
        let attachments = try store.attachments(at: at, txn: txn)
        if !attachments.isEmpty {
          input.attachments = attachments.map { .stub(name: $0.name, revpos: $0.revpos) }
        }
        _ = try store.edit(
          input, id: id, rev: winner.rev.description, actor: user, within: txn)
        changed.append(title)
      }
      return changed
    }
  }
}
