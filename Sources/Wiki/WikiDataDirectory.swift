public import Log
public import Projections
import Query

extension DataDirectory {
  /// A data directory of TouchWiki databases: each has the wiki, draft and access projections
  /// (``WikiAccessProjection``), wiki membership as its access rules (``WikiAccess``), checks
  /// the TouchWiki schema (``DocumentValidation/touchWiki``) and offers the `wiki` filter
  /// (``DocumentFilter/wiki(_:)``). What `wikilog` and `wikilog serve` open.
  /// `systemDatabases` are the `_`-databases it also opens, with their own rules (the command
  /// line passes the Auth module's `_users`).
  ///
  /// ```swift
  /// let data = DataDirectory.wiki(path: "/var/lib/wikilog")
  /// let store = try data.open("wiki", create: true)
  /// ```
  public static func wiki(
    path: String, options: EventLog.Options = EventLog.Options(),
    systemDatabases: [SystemDatabase] = []
  ) -> DataDirectory {
    let state = DirectoryState()
    let directory = DataDirectory(
      path: path, options: options,
      projections: {
        [WikiProjection(), DraftProjection(), WikiAccessProjection(), HeldRevisionsProjection()]
      },
      // Full-text search of the pages, kept behind the log; Mango indexes in every database.
      indexes: { _ in [TextSearchProjection(schema: .wikiPages)] },
      everyDatabase: { [MangoProjection(database: $0, tasks: state.indexTasks)] },
      validation: .touchWiki, filters: .wiki, systemDatabases: systemDatabases,
      access: WikiAccess(), state: state)
    // Design documents' `validate_doc_update` and the compilation of their views.
    directory.useUpdateValidator(DesignFunctions())
    return directory
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

/// Document ids of wikis and pages: a page is `<wikiId>:<Page Name>`, a wiki document has no
/// colon.
public enum WikiID {
  /// The longest id, in UTF-8 bytes, a wiki or page document may have: TouchWiki validation
  /// refuses longer ones, so no page has a longer title than this less its wiki id and colon.
  public static var maxIDBytes: Int { WikiProjection.maxKeyBytes }

  /// The parts of `docID` around its first colon; nil when it has none. The split is at the
  /// first colon *byte*: a colon followed by a combining mark is one Character, which
  /// `String.firstIndex(of:)` would step over. Either part may be empty.
  public static func split(_ docID: String) -> (wiki: String, title: String)? {
    let bytes = Array(docID.utf8)
    guard let colon = bytes.firstIndex(of: UInt8(ascii: ":")) else { return nil }
    return (
      String(decoding: bytes[..<colon], as: UTF8.self),
      String(decoding: bytes[(colon + 1)...], as: UTF8.self)
    )
  }

  /// The wiki of document `docID`: the part before its first `:` for a page
  /// (`<wikiId>:<Page Name>`), the id itself for a wiki document.
  public static func of(_ docID: String) -> String {
    split(docID)?.wiki ?? docID
  }

  /// Whether `docID` is the wiki document `wiki` or one of its pages.
  public static func contains(_ wiki: String, _ docID: String) -> Bool {
    of(docID) == wiki
  }
}
