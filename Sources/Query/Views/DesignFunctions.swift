public import JSON
import Log
public import Projections
import Synchronization

/// The design documents' functions that run around writes, on a store's public seams:
/// `validate_doc_update` on every revision written (an `UpdateValidator`: each design
/// document's function in id order, the first refusal wins), and the compilation of a design
/// document's view functions when it is saved (400 `compilation_error`, as CouchDB refuses it).
///
/// ```swift
/// dataDirectory.useUpdateValidator(DesignFunctions())
/// ```
public final class DesignFunctions: UpdateValidator {
  struct Loaded: Sendable {
    /// The store they were read from.
    weak var store: DocumentStore?
    /// The log position they were read at: until the log moves, nothing changed.
    var position: UInt64 = 0
    var revisions: [String: String] = [:]
    /// The design documents with a `validate_doc_update`, by id: revision, body, language.
    var validators: [(id: String, rev: String, doc: JSONValue, language: String)] = []
  }
  /// By store: the entry holds the store weakly, so that another store at the same address
  /// (after this one is gone) is never taken for it.
  private let cache = Mutex<[ObjectIdentifier: Loaded]>([:])

  public init() {}

  /// The design documents of `store` that have a `validate_doc_update`, read again when any
  /// design document's revision changed.
  func validators(in store: DocumentStore) -> [(
    id: String, rev: String, doc: JSONValue, language: String
  )] {
    let key = ObjectIdentifier(store)
    // Asked before every write (each document of a `_bulk_docs`): the design documents are
    // listed again only when the log has moved since.
    let position = (try? store.log.committedPosition.rawValue) ?? 0
    if let loaded = cache.withLock({ $0[key] }), loaded.store === store,
      loaded.position == position, position > 0
    {
      return loaded.validators
    }
    var options = AllDocsOptions()
    options.startKey = "_design/"
    options.endKey = "_design0"
    guard let all = try? store.allDocs(options) else { return [] }
    var revisions: [String: String] = [:]
    for row in all.rows {
      guard let id = row.objectValue?["id"]?.stringValue,
        let rev = row.objectValue?["value"]?.objectValue?["rev"]?.stringValue
      else { continue }
      revisions[id] = rev
    }
    if var loaded = cache.withLock({ $0[key] }), loaded.store === store,
      loaded.revisions == revisions
    {
      loaded.position = position
      cache.withLock { $0[key] = loaded }
      return loaded.validators
    }
    var loaded = Loaded(store: store, position: position, revisions: revisions)
    for (id, rev) in revisions.sorted(by: { $0.key < $1.key }) {
      guard let doc = try? store.get(id), case .string = doc.objectValue?["validate_doc_update"]
      else { continue }
      let language = doc.objectValue?["language"]?.stringValue ?? "javascript"
      loaded.validators.append((id, rev, doc, language))
    }
    cache.withLock { $0[key] = loaded }
    return loaded.validators
  }

  public func isActive(in store: DocumentStore) -> Bool {
    !validators(in: store).isEmpty
  }

  public func validate(_ update: ProposedUpdate, in store: DocumentStore) throws(StoreError) {
    for ddoc in validators(in: store) {
      let answer: JSONValue
      do {
        answer = try store.state.queryServers.with(language: ddoc.language) {
          server throws(QueryServerError) in
          try server.callDesignFunction(
            ddoc: ddoc.doc, id: ddoc.id, rev: ddoc.rev, scope: store.log.path,
            path: ["validate_doc_update"],
            arguments: [
              update.newDocument, update.oldDocument ?? .null, update.userContext,
              update.securityObject,
            ])
        }
      } catch {
        let (name, reason) = error.couchError
        throw StoreError(name, reason, code: .internalError)
      }
      if case .object(let refusal) = answer {
        if let message = refusal["forbidden"] {
          throw StoreError("forbidden", Self.text(message), code: .forbidden)
        }
        if let message = refusal["unauthorized"] {
          throw StoreError("unauthorized", Self.text(message), code: .unauthorized)
        }
      }
    }
  }

  static func text(_ value: JSONValue) -> String {
    value.stringValue ?? String(decoding: value.serialized(), as: UTF8.self)
  }

  /// Compiles the view functions of a design document about to be saved (JavaScript ones,
  /// when the query server can be started; CouchDB's message when one does not compile).
  public func checkDesignDocument(_ id: String, body: JSONObject, in store: DocumentStore)
    throws(StoreError)
  {
    // (`options.partitioned`, a boolean true only in a partitioned database, is the store's
    // own check of every design document: `DesignDocumentCheck`.)
    let language = body["language"]?.stringValue ?? "javascript"
    guard language != "query", case .object(let views)? = body["views"] else { return }
    // Refused here as it would be when the views are built.
    _ = try DesignViews(id: id, rev: "", body: .object(body))
    var functions: [(view: String, kind: String, source: String)] = []
    for member in views.members where member.key != "lib" {
      guard case .object(let view) = member.value else { continue }
      if let map = view["map"]?.stringValue { functions.append((member.key, "map", map)) }
      if let reduce = view["reduce"]?.stringValue, !reduce.hasPrefix("_") {
        functions.append((member.key, "reduce", reduce))
      }
    }
    guard !functions.isEmpty, QueryServerCommand.forLanguage(language) != nil else { return }
    // A process that timed out or ended (a loaded machine, limits changed meanwhile) is not a
    // verdict on the functions: a second, new process is asked before they are let through.
    for attempt in 0..<2 {
      do {
        try compile(functions, language: language, servers: store.state.queryServers)
        return
      } catch QueryServerError.failed(let error, let reason) where error == "compilation_error" {
        throw StoreError("compilation_error", reason, code: .badRequest)
      } catch QueryServerError.timeout where attempt == 0 {
        continue
      } catch QueryServerError.processFailed(let reason)
        where attempt == 0 && !reason.contains("not found")
      {
        continue
      } catch {
        // The query server cannot run (not installed): the functions are compiled when the
        // view is built, and fail then.
        return
      }
    }
  }

  /// Compiles `functions` in a new realm of a query server for `language`.
  func compile(
    _ functions: [(view: String, kind: String, source: String)], language: String,
    servers: QueryServerPool
  ) throws(QueryServerError) {
    try servers.with(language: language) { server throws(QueryServerError) in
      _ = try server.call(.array([.string("reset"), .object(JSONObject())]))
      for f in functions {
        do throws(QueryServerError) {
          _ = try server.call(.array([.string("add_fun"), .string(f.source)]))
        } catch {
          guard case .failed("compilation_error", let reason) = error else { throw error }
          throw .failed(
            error: "compilation_error",
            reason:
              "Compilation of the \(f.kind) function in the '\(f.view)' view failed: \(reason)")
        }
      }
    }
  }
}
