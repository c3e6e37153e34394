import Formats
public import JSON
public import Projections

extension SystemDatabase {
  /// `_users`: CouchDB's users database. Its documents are checked by ``UsersValidator``, so no
  /// document with a clear `password` (or of another shape) is ever appended to its log, even
  /// when written through the generic store (`wikilog put -d _users`, a replication): passwords
  /// are hashed by ``UserStore`` before the write.
  public static var users: SystemDatabase {
    SystemDatabase(name: UserStore.databaseName, validation: DocumentValidation([UsersValidator()]))
  }
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

  public init() {}

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
}
