/// A Swift type whose values are documents of the store: `Codable`, with the document's id, its
/// revision, and a type discriminator the store writes into each document it saves.
///
/// The synthesized `Codable` conformance is all a type needs: the store maps the properties
/// `id` and `revision` to the document's `_id` and `_rev` (they are never written as fields of
/// their own), and adds ``typeField`` (`"type"`, as TouchWiki's documents have) with
/// ``documentType``.
///
/// ```swift
/// struct Note: StoredDocument {
///   static let documentType = "note"
///   var id: String
///   var revision: String?
///   var title: String
///   var tags: [String] = []
///   var due: Date?
/// }
/// ```
///
/// Arrays, dictionaries, optionals (a `nil` optional is left out of the document), nested
/// `Codable` types, `Date` (ISO-8601 with milliseconds, as the wiki stores times), `Data`
/// (Base64) and `URL` all work. Members of a stored document that the type does not know (a
/// field another client added) are kept when the type saves it again.
public protocol StoredDocument: Codable, Sendable, Identifiable where ID == String {
  /// The value of ``typeField`` in this type's documents (PingPong's `docType`).
  static var documentType: String { get }
  /// The member that tells the types apart: `"type"` unless a type says otherwise.
  static var typeField: String { get }
  /// The document's id (`_id`).
  var id: String { get set }
  /// The revision this value was read at or saved as (`_rev`); nil for a document not saved
  /// yet.
  var revision: String? { get set }
}

extension StoredDocument {
  public static var typeField: String { "type" }
}
