public import JSON
import Log
import RevTree
import Synchronization

/// Writes through the log's writer queue, for `async` callers (the HTTP server).
///
/// The synchronous ``DocumentStore/put(_:id:rev:actor:)`` runs its transaction on the calling
/// thread and, in the log's default ``EventLog/Durability/synced`` mode, pays one flush per
/// write. These go through `await log.write { ... }` instead: the log's one writer takes every
/// pending write and, when the log is opened with ``EventLog/Durability/groupCommit``, commits
/// them in one transaction with one flush, each write in a nested transaction of its own (a
/// conflict fails only its own write). Each caller resumes once its write is durable. A write
/// is the same work as the synchronous one: the `_rev` check, the event and every inline
/// projection, in the same transaction.
///
/// They have names of their own rather than being `async` overloads of `put` and `bulkDocs`:
/// Swift prefers an `async` overload inside any `async` function, so overloads would turn every
/// existing `try store.put(...)` in async code into a compile error ("expression is 'async'
/// but is not marked with 'await'").
///
/// ```swift
/// var options = EventLog.Options()
/// options.durability = .groupCommit
/// let store = try DocumentStore(directory: path, options: options)
/// let r = try await store.putAsync(#"{"_id":"w1:Home","markdown":"Hi"}"#, actor: "alice")
/// ```
extension DocumentStore {
  /// ``put(_:id:rev:actor:)`` through the writer queue: durable when it returns, and sharing
  /// one flushed commit with concurrent writers under ``EventLog/Durability/groupCommit``.
  ///
  /// - Parameter idWinsOverBody: when `id` is given, use it even if the body's `_id` differs
  ///   (CouchDB's `PUT /db/docid` uses the URL's id); by default that is a `bad_request`.
  /// - Throws: ``StoreError`` as ``put(_:id:rev:actor:)`` does; nothing is written then.
  @discardableResult
  ///   - origin: where the write came from (a client's address), kept in the event.
  public func putAsync(
    _ json: [UInt8], id: String? = nil, rev: String? = nil, actor: String, origin: String = "",
    idWinsOverBody: Bool = false
  ) async throws -> DocumentWriteResult {
    let (input, docID, rev) = try Self.putInput(json, id: id, rev: rev, idWins: idWinsOverBody)
    // Worked out on the caller's thread, so that the one writer is left with the transaction.
    let prepared = prepareEdit(input, id: docID, rev: rev, readParent: true, origin: origin)
    return try await writeDocumentsQueued { txn in
      DocumentWriteResult(id: docID, rev: try self.edit(prepared, actor: actor, txn: txn))
    }
  }

  /// ``putAsync(_:id:rev:actor:origin:idWinsOverBody:)`` for a document its caller parsed
  /// already (the HTTP server, which reads the body once for its own checks); the caller keeps
  /// it within ``DocumentInput/maxBytes``.
  @discardableResult
  public func putAsync(
    parsed document: JSONValue, id: String? = nil, rev: String? = nil, actor: String,
    origin: String = "", idWinsOverBody: Bool = false
  ) async throws -> DocumentWriteResult {
    let (input, docID, rev) = try Self.putInput(
      DocumentInput(document), id: id, rev: rev, idWins: idWinsOverBody)
    let prepared = prepareEdit(input, id: docID, rev: rev, readParent: true, origin: origin)
    return try await writeDocumentsQueued { txn in
      DocumentWriteResult(id: docID, rev: try self.edit(prepared, actor: actor, txn: txn))
    }
  }

  /// ``putAsync(_:id:rev:actor:)`` for a JSON string.
  @discardableResult
  public func putAsync(_ json: String, id: String? = nil, rev: String? = nil, actor: String)
    async throws -> DocumentWriteResult
  {
    try await putAsync(Array(json.utf8), id: id, rev: rev, actor: actor)
  }

  /// ``delete(_:rev:actor:)`` through the writer queue.
  @discardableResult
  public func deleteAsync(_ id: String, rev: String, actor: String, origin: String = "")
    async throws -> DocumentWriteResult
  {
    let input = try DocumentInput(.object(JSONObject([.init(key: "_deleted", value: .bool(true))])))
    let prepared = prepareEdit(input, id: id, rev: rev, readParent: true, origin: origin)
    return try await writeDocumentsQueued { txn in
      DocumentWriteResult(id: id, rev: try self.edit(prepared, actor: actor, txn: txn))
    }
  }

  /// ``bulkDocs(_:newEdits:actor:origin:)`` through the writer queue: every document of the
  /// call in one transaction (which group commit may share with other calls).
  public func bulkDocsAsync(
    _ docs: [JSONValue], newEdits: Bool = true, actor: String, origin: String = ""
  ) async throws -> [DocumentWriteResult] {
    try await writeBulkQueued(
      prepareBulk(docs, newEdits: newEdits, origin: origin), actor: actor)
  }

  /// The prepared documents of a bulk call through the writer queue, in one transaction: first
  /// without a savepoint per document, and again with them if a document failed after it had
  /// written (``writeBulk(_:actor:attempt:txn:)``). The prepared documents are let go after.
  func writeBulkQueued(_ prepared: BulkPrepared, actor: String) async throws
    -> [DocumentWriteResult]
  {
    defer { prepared.release() }
    let attempt = BulkAttempt()
    do {
      return try await writeDocumentsQueued { txn in
        try self.writeBulk(prepared, actor: actor, attempt: attempt, txn: txn)
      }
    } catch  where attempt.needsSavepoints {
      return try await writeDocumentsQueued { txn in
        try self.writeBulk(prepared, actor: actor, attempt: nil, txn: txn)
      }
    }
  }

  /// ``putLocal(_:_:rev:actor:)`` through the writer queue.
  @discardableResult
  public func putLocalAsync(_ id: String, _ json: [UInt8], rev: String? = nil, actor: String)
    async throws -> DocumentWriteResult
  {
    let write = try localPut(id, json, rev: rev, actor: actor)
    return try await writeDocumentsQueued { txn in try write(txn) }
  }

  /// Several `_local` writes, each as ``putLocal(_:_:rev:actor:)`` makes it (its revision from
  /// its own `_rev`), in one transaction through the writer queue: each document's result, or
  /// its error when it is refused. A storage failure fails them all (thrown).
  public func putLocalsAsync(_ docs: [(id: String, json: [UInt8])], actor: String) async throws
    -> [DocumentWriteResult]
  {
    var results: [DocumentWriteResult?] = []
    var writes: [(Int, @Sendable (WriteTransaction) throws -> DocumentWriteResult)] = []
    for (i, doc) in docs.enumerated() {
      do {
        writes.append((i, try localPut(doc.id, doc.json, actor: actor)))
        results.append(nil)
      } catch let error as StoreError {
        results.append(DocumentWriteResult(id: "_local/" + doc.id, rev: nil, error: error))
      }
    }
    if !writes.isEmpty {
      let toWrite = writes
      let written = try await writeDocumentsQueued { txn in
        try toWrite.map { ($0.0, try $0.1(txn)) }
      }
      for (i, result) in written { results[i] = result }
    }
    return results.map { $0! }
  }

  /// ``deleteLocal(_:rev:actor:)`` through the writer queue.
  @discardableResult
  public func deleteLocalAsync(_ id: String, rev: String?, actor: String) async throws
    -> DocumentWriteResult
  {
    try await writeDocumentsQueued { txn in
      try self.localDelete(id, rev: rev, actor: actor, txn: txn)
    }
  }

  /// ``setRevsLimit(_:actor:)`` through the writer queue.
  public func setRevsLimitAsync(_ limit: Int, actor: String) async throws {
    let write = try revsLimitWrite(limit, actor: actor)
    try await writeDocumentsQueued { txn in try write(txn) }
  }

  // MARK: Shared with the synchronous writes

  /// Parses a `put` and checks that the id and rev given beside the body agree with it; with
  /// `idWins`, an `id` given beside the body wins over a different `_id` in it instead.
  static func putInput(_ json: [UInt8], id: String?, rev: String?, idWins: Bool = false) throws
    -> (input: DocumentInput, id: String, rev: String?)
  {
    try putInput(DocumentInput(json: json), id: id, rev: rev, idWins: idWins)
  }

  static func putInput(_ input: DocumentInput, id: String?, rev: String?, idWins: Bool = false)
    throws -> (input: DocumentInput, id: String, rev: String?)
  {
    if !idWins, let id, let bodyID = input.id, bodyID != id {
      throw StoreError.badRequest("Document id in the body does not match the URL")
    }
    if let rev, let bodyRev = input.rev, bodyRev != rev {
      throw StoreError.badRequest(
        "Document rev from request body and query string have different values")
    }
    return (input, id ?? input.id ?? newID(), rev ?? input.rev)
  }

  /// `_bulk_docs` on the calling thread: first without a savepoint per document (see
  /// ``writeBulk(_:actor:attempt:txn:)``), and again with them if a document failed after it
  /// had written.
  func bulkWrite(_ prepared: BulkPrepared, actor: String) throws -> [DocumentWriteResult] {
    let attempt = BulkAttempt()
    do {
      return try writeDocuments { txn in
        try writeBulk(prepared, actor: actor, attempt: attempt, txn: txn)
      }
    } catch  where attempt.needsSavepoints {
      return try writeDocuments { txn in
        try writeBulk(prepared, actor: actor, attempt: nil, txn: txn)
      }
    }
  }

  /// The documents of one `_bulk_docs` call inside a transaction; a refused document leaves the
  /// others.
  ///
  /// With an `attempt`, documents run without a savepoint of their own, which LMDB makes costly
  /// (a nested transaction copies every page it touches). That is safe because a local edit
  /// and a replicated write refuse a document before they write anything: they read the tree,
  /// check and merge a copy, and only then append the event and apply the projections. A
  /// document that fails after its event was appended (the position moved) sets
  /// `attempt.needsSavepoints` and fails the transaction; the caller then runs the call again
  /// with `attempt: nil`, a savepoint per document.
  func writeBulk(
    _ prepared: BulkPrepared, actor: String, attempt: BulkAttempt?, txn: WriteTransaction
  ) throws -> [DocumentWriteResult] {
    let documents = prepared.documents
    var results: [DocumentWriteResult] = []
    results.reserveCapacity(documents.count)
    let context = WriteContext()
    // Results of revisions held (refused for now); a wiki written later in the body may have
    // admitted them, and then they are no failure.
    var held: [(index: Int, id: String, rev: String)] = []
    for i in 0..<documents.count {
      switch documents.value(i) {
      case .failure(let failure):
        results.append(DocumentWriteResult(id: failure.id, rev: nil, error: failure.error))
      case .success(let p):
        func write(_ txn: WriteTransaction) throws {
          if prepared.newEdits {
            results.append(
              DocumentWriteResult(
                id: p.id, rev: try edit(p, actor: actor, txn: txn, context: context)))
          } else if let refusal = try replicate(p, actor: actor, txn: txn, context: context) {
            held.append((results.count, p.id, p.event?.rev ?? p.input.rev ?? ""))
            results.append(DocumentWriteResult(id: p.id, rev: p.input.rev, error: refusal))
          }
        }
        do {
          if let attempt {
            let before = txn.nextPosition
            do {
              try write(txn)
            } catch let error as LogError {
              throw error
            } catch {
              // Written something: only a whole new attempt can take it back.
              if txn.nextPosition != before { attempt.needsSavepoints = true }
              throw error
            }
          } else {
            try txn.savepoint { txn in try write(txn) }
          }
        } catch let error as LogError {
          throw error
        } catch {
          if attempt?.needsSavepoints == true { throw error }
          results.append(
            DocumentWriteResult(id: p.id, rev: p.input.rev, error: StoreError.from(error)))
        }
      }
    }
    if !held.isEmpty {
      var admitted: Set<Int> = []
      for h in held where try !isHeld(h.id, rev: h.rev, writer: actor, txn: txn) {
        admitted.insert(h.index)
      }
      if !admitted.isEmpty {
        results = results.enumerated().filter { !admitted.contains($0.offset) }.map(\.element)
      }
    }
    return results
  }

  /// ``writeDocuments(_:)`` on the log's writer queue: the body's document events, then every
  /// inline projection's checkpoint, in one transaction (or one savepoint of a group commit).
  func writeDocumentsQueued<T: Sendable>(
    _ body: @escaping @Sendable (WriteTransaction) throws -> T
  ) async throws -> T {
    do {
      // Local edits and replicated writes check everything before their first write.
      return try await log.write(failsOnlyBeforeWriting: true) { txn in
        try self.projections.checkpointed(txn, body)
      }
    } catch {
      throw StoreError.from(error)
    }
  }
}

/// Whether a bulk write has to run again with a savepoint per document. Set on the writer's
/// thread during the write, read by the caller after it failed.
final class BulkAttempt: Sendable {
  private let flag = Mutex(false)

  var needsSavepoints: Bool {
    get { flag.withLock { $0 } }
    set { flag.withLock { $0 = newValue } }
  }
}
