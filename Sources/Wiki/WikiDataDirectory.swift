public import Log
public import Projections

extension DataDirectory {
  /// A data directory of TouchWiki databases: each has the wiki and draft projections, checks
  /// the TouchWiki schema (``DocumentValidation/touchWiki``) and offers the `wiki` filter
  /// (``DocumentFilter/wiki(_:)``). What `wikilog` and `wikilog serve` open.
  ///
  /// ```swift
  /// let data = DataDirectory.wiki(path: "/var/lib/wikilog")
  /// let store = try data.open("wiki", create: true)
  /// ```
  public static func wiki(path: String, options: EventLog.Options = EventLog.Options())
    -> DataDirectory
  {
    DataDirectory(
      path: path, options: options, projections: { [WikiProjection(), DraftProjection()] },
      validation: .touchWiki, filters: .wiki)
  }
}

extension DocumentFilters {
  /// The wiki's filters: `wiki` (`filter=wiki&wiki=ID`).
  public static var wiki: DocumentFilters {
    var filters = DocumentFilters()
    filters.register("wiki") { parameter throws(StoreError) in
      guard let id = parameter("wiki"), !id.isEmpty else {
        throw StoreError.badRequest("filter=wiki requires wiki=<wiki id>")
      }
      return .wiki(id)
    }
    return filters
  }
}

extension DocumentFilter {
  /// A wiki's documents: the wiki document `id` and its pages (`<id>:<Page Name>`).
  public static func wiki(_ id: String) -> DocumentFilter {
    DocumentFilter(
      name: "wiki", parameters: ["wiki": id], wakeKeys: [id],
      keys: { docID in [WikiID.of(docID)] }, includes: { WikiID.of($0) == id })
  }
}

/// The wiki a document id belongs to.
public enum WikiID {
  /// The wiki of document `docID`: the part before its first `:` for a page
  /// (`<wikiId>:<Page Name>`), the id itself for a wiki document.
  public static func of(_ docID: String) -> String {
    // Split at the first colon byte: a colon followed by a combining mark is one Character,
    // which `String.firstIndex(of:)` would step over.
    let utf8 = docID.utf8
    guard let colon = utf8.firstIndex(of: UInt8(ascii: ":")) else { return docID }
    return String(docID[..<colon])
  }

  /// Whether `docID` is the wiki document `wiki` or one of its pages.
  public static func contains(_ wiki: String, _ docID: String) -> Bool {
    of(docID) == wiki
  }
}
