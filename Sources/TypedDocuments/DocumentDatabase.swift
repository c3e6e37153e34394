import Foundation
import JSON
import Log
public import Projections
import Query
import RevTree

/// One database of the store, read and written as Swift values (``StoredDocument``).
///
/// Every save is one event in the database's log, through the store's writer queue with group
/// commit (concurrent saves share one flushed transaction; each returns once its write is
/// durable). The database is a CouchDB database like any other: `wikilog serve` can serve the
/// same directory, and ``sync(with:credentials:options:)`` keeps it in step with a server.
///
/// ```swift
/// let db = try DocumentDatabase(path: appSupport + "/notes")
/// var note = Note(id: "n1", revision: nil, title: "Groceries")
/// note = try await db.save(note)                 // note.revision == "1-..."
/// let notes = try db.all(Note.self)
/// try await db.delete(note)
/// ```
public final class DocumentDatabase: Sendable {
  /// The data directory the database lives in.
  public let data: DataDirectory
  /// The database's name in it.
  public let name: String
  /// The store underneath, for what the typed API does not cover (its JSON API).
  public let store: DocumentStore
  /// Who the events of this database's writes name as their actor.
  public let actor: String

  /// A data directory at `path` the way a ``DocumentDatabase`` wants it: group commit, and
  /// Mango indexes in every database (``find(_:where:sort:limit:skip:)`` uses them).
  public static func dataDirectory(path: String) -> DataDirectory {
    var options = EventLog.Options()
    options.durability = .groupCommit
    let state = DirectoryState()
    let directory = DataDirectory(
      path: path, options: options,
      everyDatabase: { [MangoProjection(database: $0, tasks: state.indexTasks)] }, state: state)
    directory.useUpdateValidator(DesignFunctions())
    return directory
  }

  /// Opens (creating) database `name` in the data directory at `path` (created too).
  ///
  /// - Parameters:
  ///   - path: the data directory (`wikilog serve --db path` can serve it).
  ///   - name: the database's name in it.
  ///   - actor: the name the events of this process's writes carry.
  public convenience init(path: String, name: String = "app", actor: String = "app") throws {
    do {
      try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    } catch {
      throw StoreError.internalError("cannot create \(path): \(error.localizedDescription)")
    }
    try self.init(data: Self.dataDirectory(path: path), name: name, actor: actor)
  }

  /// Opens (creating) database `name` of `data`, which another user of the directory (a
  /// server in the same process) may share.
  public init(data: DataDirectory, name: String, actor: String = "app") throws {
    self.data = data
    self.name = name
    self.actor = actor
    store = try data.open(name, create: true)
  }

  /// Closes the database's store (and every other store the data directory has open). Stop its
  /// sync sessions first: a running one would open the database again.
  public func close() { data.closeAll() }

  // MARK: Documents as values

  /// The document `object` (a stored body) as a `D`, with its id and revision.
  func value<D: StoredDocument>(_ type: D.Type, _ object: JSONObject, use: KeyUse = KeyUse()) throws
    -> D
  {
    let id = object["_id"]?.stringValue ?? ""
    let found = object[D.typeField]?.stringValue
    guard found == D.documentType else {
      throw TypedDocumentError.wrongType(id: id, expected: D.documentType, found: found)
    }
    var view = object
    view["id"] = .string(id)
    view["revision"] = object["_rev"] ?? .null
    return try DocumentDecoder().decode(type, from: .object(view), use: use)
  }

  /// The body that saves `doc`: its fields, `_id`, `_rev` and the type field, with the members
  /// of `parent` (the revision it was read at) that the type does not know, and its attachments.
  ///
  /// `exact` is false when the body lost something of `doc` (a date's sub-millisecond
  /// fraction): the saved value is then read back from the body.
  func body<D: StoredDocument>(_ doc: D, parent: JSONObject?) throws -> (
    body: JSONObject, exact: Bool
  ) {
    let (json, lossy) = try DocumentEncoder().encodeNoting(doc)
    guard case .object(let encoded) = json else {
      throw EncodingError.invalidValue(
        doc,
        .init(codingPath: [], debugDescription: "\(D.self) does not encode as a JSON object"))
    }
    var fields = encoded
    for key in ["id", "revision", "_id", "_rev", D.typeField] { fields[key] = nil }
    if let parent, !Self.covers(fields, parent, typeField: D.typeField) {
      let use = KeyUse()
      _ = try? value(D.self, parent, use: use)
      use.members["id"] = nil
      use.members["revision"] = nil
      var old = parent
      old.members.removeAll { $0.key.hasPrefix("_") || $0.key == D.typeField }
      fields = use.keepingUnknown(of: old, in: fields)
    }
    var body = JSONObject()
    body["_id"] = .string(doc.id)
    if let rev = doc.revision { body["_rev"] = .string(rev) }
    body[D.typeField] = .string(D.documentType)
    body.members.append(contentsOf: fields.members)
    if let attachments = parent?["_attachments"] { body["_attachments"] = attachments }
    return (body, !lossy)
  }

  /// Whether every member of `old` (below the top, and at the top but for `_` members and the
  /// type field) has a member of the same name in `new`, objects recursively: then `new` keeps
  /// nothing of `old` and the revision need not be decoded to find what the type knows (the
  /// common case, a document the app itself wrote).
  static func covers(_ new: JSONObject, _ old: JSONObject, typeField: String? = nil) -> Bool {
    let top = typeField != nil
    for member in old.members {
      if top && (member.key.hasPrefix("_") || member.key == typeField) { continue }
      guard let value = new[member.key] else { return false }
      if case .object(let oldChild) = member.value, case .object(let newChild) = value,
        !covers(newChild, oldChild)
      {
        return false
      }
    }
    return true
  }

  /// The stored body of revision `rev` of `id`, nil when there is none.
  func storedBody(_ id: String, rev: String?) -> JSONObject? {
    guard let rev else { return nil }
    return (try? store.get(id, options: GetOptions(rev: rev)))?.objectValue
  }

  // MARK: Reading

  /// Document `id` as a `D`; nil when there is no such document or it is deleted.
  ///
  /// - Throws: ``TypedDocumentError/wrongType(id:expected:found:)`` for a document of another
  ///   type; a `DecodingError` when it does not fit `D`.
  public func get<D: StoredDocument>(_ type: D.Type, id: String) throws -> D? {
    let json: JSONValue
    do {
      json = try store.get(id)
    } catch let error as StoreError where error.code == .notFound {
      return nil
    }
    return try value(type, json.objectValue ?? JSONObject())
  }

  /// Revision `revision` of document `id` as a `D` (an earlier one too: the log keeps every
  /// revision); nil when there is no such revision or it is a deletion.
  public func get<D: StoredDocument>(_ type: D.Type, id: String, revision: String) throws -> D? {
    guard let body = storedBody(id, rev: revision), body["_deleted"] != .bool(true) else {
      return nil
    }
    return try value(type, body)
  }

  /// Every document of type `D`, by id.
  public func all<D: StoredDocument>(_ type: D.Type) throws -> [D] {
    try find(type, where: .all)
  }

  /// The documents of type `D` that `predicate` selects (a Mango selector underneath, served
  /// by an index when one fits, ``createIndex(_:on:)``), sorted by `sort` (by id when empty; in
  /// memory, in CouchDB's collation, when no index gives that order).
  public func find<D: StoredDocument>(
    _ type: D.Type, where predicate: Where, sort: [SortKey] = [], limit: Int? = nil, skip: Int = 0
  ) throws -> [D] {
    let typeClause = Where.field(D.typeField, equals: D.documentType)
    var query = FindQuery(selector: try Selector((typeClause && predicate).json))
    query.sort = sort.map { FindQuery.Sort(field: $0.field, descending: $0.descending) }
    query.limit = limit ?? Int(Int32.max)
    query.skip = skip
    var docs: [JSONValue]
    do {
      docs = try MangoQueries(store).find(query).docs
    } catch let error as StoreError where error.error == "no_usable_index" && !sort.isEmpty {
      // No index orders them (CouchDB answers so too): sorted here, in CouchDB's collation.
      query.sort = []
      query.limit = Int(Int32.max)
      query.skip = 0
      docs = try MangoQueries(store).find(query).docs
      docs.sort { a, b in
        for key in sort {
          let path = key.field.split(separator: ".").map(String.init)
          let order = Collation.compare(
            Selector.value(at: path, in: a) ?? .null, Selector.value(at: path, in: b) ?? .null)
          if order != 0 { return key.descending ? order > 0 : order < 0 }
        }
        return false
      }
      docs = Array(docs.dropFirst(skip).prefix(limit ?? Int.max))
    }
    return try docs.map { try value(type, $0.objectValue ?? JSONObject()) }
  }

  /// Makes a Mango index on `fields` of the documents of type `D` (a partial index: documents of
  /// other types are left out of it); nothing is done when it exists. A ``find(_:where:sort:limit:skip:)``
  /// sorting by these fields needs one.
  public func createIndex<D: StoredDocument>(_ type: D.Type, on fields: [String]) async throws {
    let name = "typed-\(D.documentType)-" + fields.joined(separator: "-")
    let request = JSONValue.object(
      JSONObject([
        "index": .object(
          JSONObject([
            "fields": .array(fields.map { .string($0) }),
            "partial_filter_selector": Where.field(D.typeField, equals: D.documentType).json,
          ])),
        "name": .string(name), "ddoc": .string("typed-\(D.documentType)"), "type": .string("json"),
      ]))
    let index = try MangoIndex.parseRequest(request)
    let existing = try? store.get(index.ddoc)
    let (body, exists) = try MangoQueries.designDocument(adding: index, to: existing)
    if !exists {
      try await store.putAsync(
        parsed: body, id: index.ddoc, rev: existing?["_rev"]?.stringValue, actor: actor)
    }
  }

  // MARK: Writing

  /// Creates or updates `doc` (an update when it has a revision), returning it as stored, with
  /// its new revision: the value ``get(_:id:)`` reads back (dates are kept to the millisecond,
  /// so a `Date()` with finer fractions comes back rounded down). Members of the stored revision
  /// that `D` does not know, and its attachments, are kept.
  ///
  /// - Throws: ``DocumentConflict`` when `doc.revision` is not the current revision (or the
  ///   document exists and `doc` has none); the store's `StoreError` for a refused write;
  ///   nothing is written then.
  @discardableResult
  public func save<D: StoredDocument>(_ doc: D) async throws -> D {
    let (body, exact) = try body(doc, parent: storedBody(doc.id, rev: doc.revision))
    do {
      let result = try await store.putAsync(
        parsed: .object(body), id: doc.id, rev: doc.revision, actor: actor)
      guard exact else { return try stored(body, revision: result.rev) }
      var saved = doc
      saved.revision = result.rev
      return saved
    } catch let error as StoreError where error.code == .conflict {
      throw conflict(doc)
    }
  }

  /// The value `body` holds once saved as `revision`: what ``get(_:id:)`` reads back (a date
  /// to the millisecond), so that a saved value compares equal to the same document read.
  func stored<D: StoredDocument>(_ body: JSONObject, revision: String?) throws -> D {
    var saved = body
    saved["_rev"] = revision.map { .string($0) }
    return try value(D.self, saved)
  }

  /// ``save(_:)`` that settles a conflict with `merge` (given the current value and `doc`) and
  /// tries again, up to `attempts` times.
  @discardableResult
  public func save<D: StoredDocument>(
    _ doc: D, attempts: Int = 10, merge: (_ current: D, _ mine: D) throws -> D
  ) async throws -> D {
    var next = doc
    for attempt in 1... {
      do {
        return try await save(next)
      } catch let conflict as DocumentConflict<D> where attempt < max(1, attempts) {
        next = try conflict.merged(merge)
      }
    }
    fatalError("unreachable")
  }

  /// Deletes `doc` (at its revision). The deletion keeps the type field, so that typed change
  /// streams and type-filtered syncs see it.
  ///
  /// - Throws: ``DocumentConflict`` when `doc.revision` is not current.
  public func delete<D: StoredDocument>(_ doc: D) async throws {
    guard let rev = doc.revision else { throw conflict(doc) }
    let tombstone = JSONObject([
      "_id": .string(doc.id), "_rev": .string(rev), "_deleted": .bool(true),
      D.typeField: .string(D.documentType),
    ])
    do {
      try await store.putAsync(parsed: .object(tombstone), id: doc.id, rev: rev, actor: actor)
    } catch let error as StoreError where error.code == .conflict {
      throw conflict(doc)
    }
  }

  /// The conflict `doc`'s save ran into, with the document as it is now.
  func conflict<D: StoredDocument>(_ doc: D) -> DocumentConflict<D> {
    let winner = (try? store.record(doc.id))??.tree.winner
    let current: D? = winner.flatMap { winner in
      winner.isDeleted ? nil : try? get(D.self, id: doc.id, revision: winner.rev.description)
    }
    return DocumentConflict(
      attempted: doc, current: current, currentRevision: winner?.rev.description)
  }

  // MARK: Conflicting revisions

  /// Every live leaf revision of document `id` as a `D`, the winner first: more than one when
  /// replicas edited it apart (CouchDB's `_conflicts`); empty when it is missing or deleted.
  public func conflicts<D: StoredDocument>(of type: D.Type, id: String) throws -> [D] {
    guard let record = try store.record(id) else { return [] }
    return try record.tree.leaves.filter { !$0.isDeleted }.compactMap { leaf in
      try get(type, id: id, revision: leaf.rev.description)
    }
  }

  /// Ends the conflict on `resolved.id`: `resolved` is saved on the current winner (its
  /// revision is set to the winner's) and every other live leaf is deleted, in one write.
  /// Returns `resolved` with its new revision.
  ///
  /// ```swift
  /// let versions = try db.conflicts(of: Note.self, id: "n1")
  /// var merged = versions[0]
  /// merged.tags = Array(Set(versions.flatMap(\.tags))).sorted()
  /// merged = try await db.resolveConflicts(merged)
  /// ```
  @discardableResult
  public func resolveConflicts<D: StoredDocument>(_ resolved: D) async throws -> D {
    guard let record = try store.record(resolved.id), let winner = record.tree.winner,
      !winner.isDeleted
    else { throw TypedDocumentError.notFound(id: resolved.id) }
    var doc = resolved
    doc.revision = winner.rev.description
    var writes: [JSONValue] = [
      .object(try body(doc, parent: storedBody(doc.id, rev: doc.revision)).body)
    ]
    for leaf in record.tree.leaves where !leaf.isDeleted && leaf.rev != winner.rev {
      writes.append(
        .object(
          JSONObject([
            "_id": .string(doc.id), "_rev": .string(leaf.rev.description),
            "_deleted": .bool(true), D.typeField: .string(D.documentType),
          ])))
    }
    let results = try await store.bulkDocsAsync(writes, actor: actor)
    if let failure = results.first(where: { $0.error != nil })?.error {
      if failure.code == .conflict { throw conflict(resolved) }
      throw failure
    }
    return try stored(writes[0].objectValue!, revision: results[0].rev)
  }
}
