public import JSON
public import Projections
public import Query

extension TextSearchSchema {
  /// TouchWiki pages: the group is the page's wiki, the title its name (the id after the
  /// colon), the text its Markdown. Wikis and other documents are not searched.
  public static var wikiPages: TextSearchSchema {
    TextSearchSchema(
      mayIndex: { docID in WikiID.split(docID).map { !$0.wiki.isEmpty } ?? false }
    ) { docID, body in
      guard body["type"]?.stringValue == "page", let parts = WikiID.split(docID),
        !parts.wiki.isEmpty
      else { return nil }
      return .init(
        group: parts.wiki, title: parts.title, text: body["markdown"]?.stringValue ?? "")
    }
  }
}
