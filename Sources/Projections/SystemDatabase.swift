/// A database of a ``DataDirectory`` whose name begins with `_` (CouchDB's system databases:
/// `_users`, later `_replicator`), which CouchDB's name rule otherwise refuses. It exists only
/// where it is registered: a data directory opens, lists and creates it only when it was given
/// it (``DataDirectory/init(path:options:projections:validation:filters:systemDatabases:)``),
/// and then with the projections and validation given here instead of the directory's own.
///
/// The module that owns the database's rules defines it (the Auth module's `SystemDatabase.users`
/// hashes passwords and refuses clear ones); this module knows nothing of them.
///
/// ```swift
/// let replicator = SystemDatabase(name: "_replicator", validation: DocumentValidation([MyRules()]))
/// let data = DataDirectory(path: dir, systemDatabases: [replicator])
/// let store = try data.open("_replicator", create: true)   // checked against MyRules only
/// ```
public struct SystemDatabase: Sendable {
  /// The database's name: `_` followed by what CouchDB's rule allows after the first character.
  public let name: String
  /// The inline projections it gets besides its documents.
  public let makeProjections: @Sendable () -> [any Projection]
  /// The rules its documents are checked against (replacing the directory's).
  public let validation: DocumentValidation
  /// The documents it is made with, by id (JSON bodies): written, by actor `wikilog`, when the
  /// database is created, and again when one is found missing at an open.
  public let documents: [(id: String, body: [UInt8])]

  public init(
    name: String, projections: @escaping @Sendable () -> [any Projection] = { [] },
    validation: DocumentValidation, documents: [(id: String, body: [UInt8])] = []
  ) {
    precondition(Self.isSystemName(name), "a system database's name begins with _: \(name)")
    self.name = name
    self.makeProjections = projections
    self.validation = validation
    self.documents = documents
  }

  /// Whether `name` is `_` followed by one or more of CouchDB's name characters.
  static func isSystemName(_ name: String) -> Bool {
    let allowed = Set("abcdefghijklmnopqrstuvwxyz0123456789_$()+-/")
    return name.first == "_" && name.count > 1 && name.count <= 238
      && name.allSatisfy { allowed.contains($0) }
  }
}
