public import JSON

/// The edit summary of a page revision: a line its author wrote about the change ("fixed the
/// dates", "added picture.png"), kept in the page document so it replicates with the revision.
///
/// | field | type | meaning |
/// | --- | --- | --- |
/// | `edit_summary` | string | the summary |
/// | `edit_summary_on` | string | the revision the summary's edit was made on ("" for a new page) |
///
/// CouchDB and TouchWiki clients that do not know them keep or drop them as they keep any field
/// they do not know. A client that copies a body (an attachment `PUT`, an app that writes every
/// field back) copies the summary too; its revision's parent is then not `edit_summary_on`, so
/// ``summary(of:parentRev:)`` does not give the old summary to the new revision.
///
/// ```swift
/// var body = JSONObject(["markdown": .string("# Home\n")])
/// EditSummary.set("fixed the title", on: "3-abc", in: &body)
/// EditSummary.summary(of: body, parentRev: "3-abc")  // "fixed the title"
/// EditSummary.summary(of: body, parentRev: "4-def")  // nil: copied, not written
/// ```
public enum EditSummary {
  /// The longest summary kept, in UTF-8 bytes (longer ones are cut at a character).
  public static let maxBytes = 500

  /// `text` on one line, trimmed and at most ``maxBytes`` bytes.
  public static func clean(_ text: String) -> String {
    var line = ""
    for c in text {
      line.append(c.isNewline ? " " : c)
    }
    line = String(
      line.drop(while: \.isWhitespace).reversed().drop(while: \.isWhitespace).reversed())
    while line.utf8.count > maxBytes { line.removeLast() }
    return line
  }

  /// Writes `summary` (cleaned) as the summary of an edit made on `parentRev` (nil for a new
  /// page) into `body`; an empty one removes both fields.
  public static func set(_ summary: String, on parentRev: String?, in body: inout JSONObject) {
    let summary = clean(summary)
    guard !summary.isEmpty else {
      body.members.removeAll { $0.key == "edit_summary" || $0.key == "edit_summary_on" }
      return
    }
    body["edit_summary"] = .string(summary)
    body["edit_summary_on"] = .string(parentRev ?? "")
  }

  /// The summary the revision with `body`, made on `parentRev`, was written with: nil when it
  /// has none or carries one copied from the revision it was made on.
  public static func summary(of body: JSONObject, parentRev: String?) -> String? {
    guard let text = body["edit_summary"]?.stringValue, !text.isEmpty else { return nil }
    guard let on = body["edit_summary_on"]?.stringValue else { return nil }
    return on == (parentRev ?? "") ? text : nil
  }
}
