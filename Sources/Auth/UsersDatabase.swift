import Formats
public import JSON
public import Projections

extension SystemDatabase {
  /// `_users`: CouchDB's users database. Its documents are checked by ``UsersValidator``, so no
  /// document with a clear `password` (or of another shape) is ever appended to its log, even
  /// when written through the generic store (`wikilog put -d _users`, a replication): passwords
  /// are hashed by ``UserStore`` before the write.
  public static var users: SystemDatabase {
    SystemDatabase(
      name: UserStore.databaseName, validation: DocumentValidation([UsersValidator()]),
      documents: [(UsersValidator.designID, UsersValidator.designDocument)])
  }

  /// A database `chttpd_auth/authentication_db` names (``UserStore/useAuthenticationDatabase(_:)``):
  /// `_users`' role, its passwords hashed and never stored in clear; the shape of its
  /// documents is its `_design/_auth`'s to check, as in CouchDB, which writes that design
  /// document once the database is first read for a sign-in.
  public static var authenticationDatabase: SystemDatabase {
    SystemDatabase(
      name: UserStore.databaseName,
      validation: DocumentValidation([UsersValidator(checksShape: false)]))
  }
}

extension UsersValidator {
  /// The design document every users database is made with, as CouchDB makes its own.
  public static let designID = "_design/_auth"

  /// `_design/_auth`: the shape of a user document as a `validate_doc_update` function that
  /// any CouchDB tool can read and run, checked on every write by the query server beside
  /// ``UsersValidator`` (whose rules it states: it refuses nothing the validator accepts).
  /// Who may write which user is the server's `_users` policy, checked in the write
  /// transaction.
  public static let designDocument: [UInt8] = JSONValue.object(
    JSONObject([
      "language": .string("javascript"),
      "validate_doc_update": .string(
        """
        function(newDoc, oldDoc, userCtx, secObj) {
          if (newDoc._deleted === true || newDoc._id.indexOf('_design/') === 0) return;
          if (newDoc.type !== 'user') throw({forbidden: 'doc.type must be user'});
          if (typeof newDoc.name !== 'string' || newDoc.name === '') {
            throw({forbidden: 'doc.name is required'});
          }
          if (!Array.isArray(newDoc.roles)) throw({forbidden: 'doc.roles must be an array'});
          for (var i = 0; i < newDoc.roles.length; i++) {
            var role = newDoc.roles[i];
            if (typeof role !== 'string') throw({forbidden: 'doc.roles can only contain strings'});
            if (role[0] === '_' && role !== '_admin' && role !== '_metrics') {
              throw({forbidden:
                'No system roles (starting with underscore) in users db, except _admin and _metrics.'});
            }
          }
          if (newDoc._id !== 'org.couchdb.user:' + newDoc.name) {
            throw({forbidden: 'Doc ID must be of the form org.couchdb.user:name'});
          }
          if (newDoc.name[0] === '_') throw({forbidden: 'Username may not start with underscore.'});
          if (newDoc.name.indexOf(':') !== -1) {
            throw({forbidden: 'Character `:` is not allowed in usernames.'});
          }
        }
        """),
    ])
  ).serialized()
}

/// The rules of `_users` documents, CouchDB's (the `_design/_auth` validate function of
/// couch_js_functions.hrl and couch_users_db's hashing) with these differences, which make the
/// log safe to keep: a `password` field is refused (``UserStore`` replaces it by its hash before
/// anything is written), only the `pbkdf2` scheme is accepted, and `_admin` is allowed as a role
/// (wikilog's administrators are `_users` documents with that role; CouchDB keeps its server
/// admins in its configuration instead). Deletions are accepted as CouchDB accepts them, but a
/// deletion carrying a clear password is refused too.
public struct UsersValidator: DocumentValidator {
  /// The id prefix of user documents.
  public static let idPrefix = "org.couchdb.user:"
  /// The system roles a user document may carry.
  public static let allowedSystemRoles: Set<String> = [UserContext.adminRole, "_metrics"]

  /// Whether the shape of a user document is checked (`_users`), or only its password's
  /// (a database `chttpd_auth/authentication_db` names, where CouchDB checks the shape with
  /// `_design/_auth` alone).
  public let checksShape: Bool

  public init(checksShape: Bool = true) {
    self.checksShape = checksShape
  }

  public func validate(_ docID: String, body: JSONObject, deleted: Bool) throws(StoreError)
    -> DocumentRequirement?
  {
    if let password = body["password"], password != .null {
      throw .validation(
        "A clear password is never stored: set passwords with `wikilog user add` or `wikilog user passwd` (UserStore), which store a PBKDF2 derived_key instead."
      )
    }
    // Design documents (a Mango index on `_users`, say) are an administrator's, as in CouchDB,
    // where they are checked as design documents and not by `_auth`'s validate function.
    if deleted || docID.hasPrefix("_design/") { return nil }
    if checksShape { try checkShape(docID, body: body) }
    if body["password_sha"] != nil {
      throw .validation("Password scheme `simple` not supported: use pbkdf2.")
    }
    let hashFields = ["derived_key", "salt", "iterations", "pbkdf2_prf"]
    if let scheme = body["password_scheme"] {
      guard scheme.stringValue == "pbkdf2" else {
        throw .validation("Password scheme `\(scheme.stringValue ?? "?")` not supported.")
      }
      guard let iterations = body["iterations"]?.numberValue?.int64Value, iterations > 0 else {
        throw .validation("iterations must be a number.")
      }
      _ = iterations
      guard let key = body["derived_key"]?.stringValue, Hex.decode(key) != nil, !key.isEmpty
      else {
        throw .validation("derived_key must be a string.")
      }
      guard let salt = body["salt"]?.stringValue, !salt.isEmpty else {
        throw .validation("Users with a derived_key must have a salt.")
      }
      if let prf = body["pbkdf2_prf"], !Password.prfs.contains(prf.stringValue ?? "") {
        throw .validation("PRF is invalid")
      }
    } else if hashFields.contains(where: { body[$0] != nil }) {
      throw .validation("password_scheme is required with derived_key, salt and iterations.")
    }
    return nil
  }

  /// CouchDB's `_design/_auth` rules of a user document's shape.
  func checkShape(_ docID: String, body: JSONObject) throws(StoreError) {
    guard body["type"]?.stringValue == "user" else { throw .validation("doc.type must be user") }
    guard let name = body["name"]?.stringValue, !name.isEmpty else {
      throw .validation("doc.name is required")
    }
    guard let roles = body["roles"] else { throw .validation("doc.roles must exist") }
    guard let list = roles.arrayValue else { throw .validation("doc.roles must be an array") }
    var names: [String] = []
    for role in list {
      guard let role = role.stringValue else {
        throw .validation("doc.roles can only contain strings")
      }
      names.append(role)
    }
    guard docID == Self.idPrefix + name else {
      throw .validation("Doc ID must be of the form org.couchdb.user:name")
    }
    for role in names where role.hasPrefix("_") && !Self.allowedSystemRoles.contains(role) {
      throw .validation(
        "No system roles (starting with underscore) in users db, except _admin and _metrics.")
    }
    if name.hasPrefix("_") { throw .validation("Username may not start with underscore.") }
    if name.contains(":") { throw .validation("Character `:` is not allowed in usernames.") }
    // A name is printed in lists and audit lines: a newline in it would forge lines there.
    if name.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) {
      throw .validation("Usernames may not contain control characters (such as newlines).")
    }
    if let disabled = body["disabled"], disabled.boolValue == nil {
      throw .validation("doc.disabled must be true or false.")
    }
  }
}
