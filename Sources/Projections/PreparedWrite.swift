import Dispatch
import JSON
import Log
import RevTree
import Synchronization

/// The part of one document write that depends on the request alone and not on the store:
/// the checks that need no tree, the body as stored, and — for the parent the request names —
/// the new revision, its event's payload and the change projections' shares of it
/// (``DocumentChangeProjection/prepare(_:rev:body:)``).
///
/// A `_bulk_docs` call works these out on a helper thread while its transaction writes the
/// documents before (``Lookahead``), so the writer is left with what needs the store: the
/// tree, the merge and the writes. A single write (`put`, `delete`, `putAsync`) works them out
/// on the caller's thread before it waits for the writer; either way the same function does it.
///
/// Errors found here are kept rather than thrown, and the writer throws them where it always
/// has: a local edit with a stale `_rev` and an invalid body is refused as a conflict, as in
/// CouchDB, because the `_rev` check comes first.
///
/// A class, so that handing one to the writer copies a reference rather than its dozen fields.
final class PreparedWrite: Sendable {
  let input: DocumentInput
  let id: String
  /// The first error met before the store is needed: the id, the `_rev`'s format and, for a
  /// replicated write, everything else but its validation (``schema``).
  let early: StoreError?
  /// A local edit's `_rev`, parsed.
  let requested: RevID?
  /// A local edit's validation: what it needs of the store (checked in the transaction), or
  /// why the body is refused. For a replicated write, why it is refused if its revision is
  /// new to the store (the writer decides).
  let schema: Result<[DocumentRequirement], StoreError>
  /// The body as stored, or why it is refused (too large).
  let body: Result<[UInt8], StoreError>
  /// The event, when nothing above failed. For a local edit it is the one for `guessedParent`
  /// (the `_rev` named, or none for a new document), which the writer uses when the tree
  /// agrees and otherwise builds again.
  let event: DocumentEvent?
  let guessedParent: RevID?
  /// `event` encoded, as the log stores it.
  let payload: [UInt8]?
  /// The change projections' shares of `event`'s revision.
  let shares: Shares
  /// The document's attachments, their new data already in the blob store; nil when it has
  /// none (the write path of a document without attachments goes no further than this check).
  let pending: [PendingAttachment]?
  /// Where the write came from (a client's address), recorded in its event.
  let origin: String
  /// The signed-in user the write is made for (``WriteAccess/user`` where it was prepared):
  /// the store's access rules are checked for them in the write transaction.
  let user: UserContext?

  init(
    input: DocumentInput, id: String, early: StoreError?, requested: RevID?,
    schema: Result<[DocumentRequirement], StoreError>, body: Result<[UInt8], StoreError>,
    event: DocumentEvent?, guessedParent: RevID?, payload: [UInt8]?, shares: Shares,
    pending: [PendingAttachment]? = nil, origin: String = "", user: UserContext? = nil
  ) {
    self.user = user
    self.pending = pending
    self.origin = origin
    self.input = input
    self.id = id
    self.early = early
    self.requested = requested
    self.schema = schema
    self.body = body
    self.event = event
    self.guessedParent = guessedParent
    self.payload = payload
    self.shares = shares
  }

  /// A write refused before the store is needed: `error` is thrown first thing.
  convenience init(refusing error: StoreError, input: DocumentInput, id: String) {
    self.init(
      input: input, id: id, early: error, requested: nil, schema: .success([]),
      body: .failure(error), event: nil, guessedParent: nil, payload: nil, shares: .none,
      user: nil)
  }
}

extension DocumentStore {
  /// Works out a local edit (`new_edits=true`) of document `id` naming leaf `rev`, short of
  /// the store.
  ///
  /// With `readParent`, stubs are resolved here against the revision `rev` names, in a read
  /// transaction of its own (never on the writer's thread inside its transaction); otherwise
  /// the writer resolves them.
  func prepareEdit(
    _ input: DocumentInput, id: String, rev: String?, readParent: Bool = false,
    origin: String = "", user: UserContext? = WriteAccess.user
  ) -> PreparedWrite {
    func refused(_ error: StoreError) -> PreparedWrite {
      PreparedWrite(refusing: error, input: input, id: id)
    }
    do {
      try DocumentKey.validate(id)
      if isPartitioned { try Partitions.validate(documentID: id) }
    } catch {
      return refused(StoreError.from(error))
    }
    let requested: RevID?
    do {
      requested = try rev.map { try RevID($0) }
    } catch {
      // A revision CouchDB's `couch_doc:parse_rev` reads (`N-anything`) that no tree here
      // can hold (generation 0 or past 2^53, an empty or odd signature) names no leaf: a
      // conflict, as CouchDB answers it; anything else is no revision at all.
      return refused(
        rev.map(DocumentInput.isCouchRevision) == true
          ? StoreError.conflict : StoreError.badRequest("Invalid rev format"))
    }
    let schema = schemaCheck(input, id: id)
    if case .success = schema,
      let refusal = updateCheck(
        input, id: id, newRev: nil, parent: requested, path: nil, user: user)
    {
      return refused(refusal)
    }
    let body = Result { () throws(StoreError) in try Self.checkedBody(input) }
    guard case .success = schema, case .success(let bytes) = body,
      (requested?.generation ?? 0) < RevID.maxGeneration
    else {
      return PreparedWrite(
        input: input, id: id, early: nil, requested: requested, schema: schema, body: body,
        event: nil, guessedParent: requested, payload: nil, shares: .none, origin: origin,
        user: user)
    }
    var pending: [PendingAttachment]? = nil
    var attachments: [StoredAttachment]? = nil
    if let list = input.attachments {
      do {
        let stored = try storeAttachments(list)
        pending = stored
        // New data gets the new generation (`couch_db:set_new_att_revpos/1`); stubs are the
        // parent's attachments, read now when the parent is there (a revision never changes),
        // else by the writer, after it has checked `_rev`.
        attachments = try? resolve(
          stored, id: id,
          parent: try requested.flatMap { rev in
            guard readParent else { return nil }
            return try read { txn in
              try documents.record(id, storage: documentStorage, txn: txn).flatMap {
                try parentAttachments($0, rev, txn: txn)
              }
            }
          }, revpos: (requested?.generation ?? 0) + 1)
      } catch {
        return refused(StoreError.from(error))
      }
      guard attachments != nil else {
        return PreparedWrite(
          input: input, id: id, early: nil, requested: requested, schema: schema, body: body,
          event: nil, guessedParent: requested, payload: nil, shares: .none, pending: pending,
          origin: origin, user: user)
      }
    }
    // The parent is the `_rev` named; a new document has none (unless it recreates a deleted
    // one, which the writer finds in the tree).
    let event = Self.editEvent(
      input, id: id, parent: requested, body: bytes, attachments: attachments, origin: origin)
    return PreparedWrite(
      input: input, id: id, early: nil, requested: requested, schema: schema, body: body,
      event: event.event, guessedParent: requested, payload: event.event.encoded(),
      shares: shares(input, id: id, rev: event.rev), pending: pending, origin: origin, user: user)
  }

  /// The event of a local edit on `parent`, and its new revision.
  static func editEvent(
    _ input: DocumentInput, id: String, parent: RevID?, body: [UInt8],
    attachments: [StoredAttachment]? = nil, origin: String = ""
  ) -> (event: DocumentEvent, rev: RevID) {
    let newRev =
      attachments.map {
        RevisionDigest.revision(
          parent: parent, deleted: input.deleted, body: input.full,
          attachments: $0.map(\.digestInput))
      } ?? RevisionDigest.revision(parent: parent, deleted: input.deleted, body: input.full)
    // Cannot throw: the generations line up and there are one or two ids.
    let path = try! RevisionPath(
      start: newRev.generation, ids: [newRev.hash] + (parent.map { [$0.hash] } ?? []))
    return (
      DocumentEvent(
        kind: .edit, docID: id, rev: newRev.text, path: path, deleted: input.deleted,
        origin: origin, body: body, attachments: attachments),
      newRev
    )
  }

  /// Works out a replicated write (`new_edits=false`) of document `id` from `origin`: all of
  /// it but the merge.
  ///
  /// `storedBody` is the body's bytes when the caller has them as a store wrote them (a
  /// revision read from another store, ``StoredRevision``); otherwise they are written out of
  /// `input`.
  func prepareReplicated(
    _ input: DocumentInput, id: String, origin: String, user: UserContext? = WriteAccess.user,
    storedBody: [UInt8]? = nil
  ) -> PreparedWrite {
    func refused(_ error: StoreError) -> PreparedWrite {
      PreparedWrite(refusing: error, input: input, id: id)
    }
    do {
      try DocumentKey.validate(id)
      if isPartitioned { try Partitions.validate(documentID: id) }
    } catch {
      return refused(StoreError.from(error))
    }
    guard let revString = input.rev else {
      return refused(StoreError.badRequest("new_edits=false requires _rev on every document"))
    }
    let rev: RevID
    if let leaf = input.revisions?.leaf {
      rev = leaf  // `_rev` was made from it (``DocumentInput``): no need to read it again
    } else {
      do {
        rev = try RevID(revString)
      } catch {
        return refused(StoreError.badRequest("Invalid rev format"))
      }
    }
    let path = input.revisions ?? RevisionPath(rev)
    guard path.leaf == rev else {
      return refused(
        StoreError.badRequest("_rev \(revString) is not the first revision of _revisions"))
    }
    let schema = schemaCheck(input, id: id)
    if case .failure = schema {
      // Refused by the writer if the revision is new: as CouchDB validates new leaves only, a
      // revision the store has already is passed over whatever its body. Nothing is stored
      // for it (no attachment data): the event serves the merge alone.
      let e = DocumentEvent(
        kind: .replicated, docID: id, rev: revString, path: path, deleted: input.deleted,
        origin: origin, body: [], attachments: nil)
      return PreparedWrite(
        input: input, id: id, early: nil, requested: nil, schema: schema, body: .success([]),
        event: e, guessedParent: nil, payload: nil, shares: .none, user: user)
    }
    if let refusal = updateCheck(
      input, id: id, newRev: revString, parent: nil, path: path, user: user)
    {
      return refused(refusal)
    }
    let bytes: [UInt8]
    do {
      if let storedBody {
        bytes = try Self.checkedBody(storedBody)
      } else {
        bytes = try Self.checkedBody(input)
      }
    } catch {
      return refused(error)
    }
    var pending: [PendingAttachment]? = nil
    var attachments: [StoredAttachment]? = nil
    if let list = input.attachments {
      do {
        let stored = try storeAttachments(list)
        pending = stored
        // Without stubs the attachments are known now; stubs are resolved by the writer
        // against the tree (the revision's nearest stored ancestor), when the revision is new.
        if !stored.contains(where: { if case .stub = $0 { true } else { false } }) {
          attachments = try resolve(stored, id: id, parent: nil, revpos: nil)
        }
      } catch {
        return refused(StoreError.from(error))
      }
    }
    let e = DocumentEvent(
      kind: .replicated, docID: id, rev: revString, path: path, deleted: input.deleted,
      origin: origin, body: bytes, attachments: attachments)
    return PreparedWrite(
      input: input, id: id, early: nil, requested: nil, schema: .success([]),
      body: .success(bytes), event: e, guessedParent: nil, payload: e.encoded(),
      shares: shares(input, id: id, rev: rev), pending: pending, origin: origin, user: user)
  }

  /// Writes the new data of `list` to the blob store (gzip for a compressible type, as
  /// CouchDB stores it) and returns what the revision will record of each.
  func storeAttachments(_ list: [AttachmentInput]) throws(StoreError) -> [PendingAttachment] {
    // Everything is checked before the first blob is written.
    for att in list {
      switch att {
      case .follows(let f):
        throw StoreError.badRequest(
          "Attachment \(f.name) says follows, but the request is not multipart/related")
      case .data(let name, _, let bytes, _) where bytes.count > Self.maxAttachmentBytes,
        .encoded(let name, _, let bytes, _, _) where bytes.count > Self.maxAttachmentBytes:
        throw StoreError("attachment_too_large", name, code: .tooLarge)
      default: continue
      }
    }
    var out: [PendingAttachment] = []
    out.reserveCapacity(list.count)
    for att in list {
      switch att {
      case .stub(let name, let revpos):
        out.append(.stub(name: name, revpos: revpos))
      case .follows: continue
      case .stored(let a):
        out.append(.stored(a))
      case .copied(let a):
        guard blobs.exists(a.md5) else {
          throw StoreError.internalError("the blob of attachment \(a.name) is missing")
        }
        out.append(.kept(a))
      case .encoded(let name, let contentType, let bytes, let length, let revpos):
        let md5 = AttachmentEncoding.md5(bytes)
        try blobs.write(bytes, md5: md5)
        out.append(
          .stored(
            StoredAttachment(
              name: name, contentType: contentType, length: length, storedLength: bytes.count,
              encoding: "gzip", md5: md5, revpos: revpos)))
      case .data(let name, let contentType, let bytes, let revpos):
        let stored = AttachmentEncoding.stored(bytes, contentType: contentType.stringValue ?? "")
        let md5 = AttachmentEncoding.md5(stored.bytes)
        try blobs.write(stored.bytes, md5: md5)
        out.append(
          .stored(
            StoredAttachment(
              name: name, contentType: contentType, length: bytes.count,
              storedLength: stored.bytes.count, encoding: stored.encoding, md5: md5,
              revpos: revpos)))
      }
    }
    return out
  }

  /// The largest attachment accepted (CouchDB's default `max_attachment_size`: 1 GiB).
  public static let maxAttachmentBytes = 1 << 30

  /// The attachments of a revision: the new ones with `revpos` (nil: as given) and each stub
  /// replaced by `parent`'s attachment of its name (`couch_att:merge_stubs/2`); a stub with no
  /// such attachment, or with another `revpos`, is CouchDB's `412 missing_stub`.
  func resolve(
    _ pending: [PendingAttachment], id: String, parent: [StoredAttachment]?, revpos: Int?
  ) throws(StoreError) -> [StoredAttachment] {
    try pending.map { p throws(StoreError) in
      switch p {
      case .stored(var a):
        if let revpos { a.revpos = revpos }
        return a
      case .kept(let a):
        return a
      case .stub(let name, let pos):
        guard let found = parent?.first(where: { $0.name == name }),
          pos == nil || pos == found.revpos
        else {
          throw StoreError(
            "missing_stub", "Invalid attachment stub in \(id) for \(name)",
            code: .preconditionFailed)
        }
        return found
      }
    }
  }

  /// The attachments of revision `rev` of `record` ([] when it has none), or nil when the
  /// store has no body of it.
  func parentAttachments(_ record: DocumentRecord, _ rev: RevID, txn: ReadTransaction) throws
    -> [StoredAttachment]?
  {
    guard let found = record.tree.revision(rev), let position = found.body else { return nil }
    return try attachments(at: position, txn: txn)
  }

  /// The change projections' shares of revision `rev` of `input`.
  func shares(_ input: DocumentInput, id: String, rev: RevID) -> Shares {
    guard projections.prepares else { return .none }
    let body: JSONValue? = input.deleted ? nil : .object(input.body)
    return Shares.prepare(projections.preparers, id, rev, body)
  }

  /// Bulk calls with fewer documents than this are prepared inline: a hand-over to the helper
  /// costs more than it saves on a few documents.
  static let bulkHelperThreshold = 16

  /// The documents of a `_bulk_docs` call, split (``DocumentInput``) and prepared: on a helper
  /// thread a little ahead of the writer when there are enough of them to pay for the
  /// hand-over, else inline as the writer asks. A document without `_id` gets a new one for a
  /// local edit (and an error for a replicated write).
  func prepareBulk(_ docs: [JSONValue], newEdits: Bool, origin: String) -> BulkPrepared {
    prepareBulk(count: docs.count, newEdits: newEdits, origin: origin) { i in
      do {
        return .success((try DocumentInput(docs[i]), nil))
      } catch {
        // The id as given, when the document has one, for its error row.
        return .failure(
          BulkFailure(
            id: docs[i].objectValue?["_id"]?.stringValue ?? "", error: StoreError.from(error)))
      }
    }
  }

  /// ``prepareBulk(_:newEdits:origin:)`` of `count` documents that `input` splits (each with
  /// its body's stored bytes when it has them), on the helper thread.
  func prepareBulk(
    count: Int, newEdits: Bool, origin: String,
    input: @escaping @Sendable (Int) -> Result<(DocumentInput, [UInt8]?), BulkFailure>
  ) -> BulkPrepared {
    // Taken here, on the caller's task: the documents are worked out on a helper thread.
    let user = WriteAccess.user
    return BulkPrepared(
      newEdits: newEdits,
      documents: Lookahead(count: count, helper: count >= Self.bulkHelperThreshold) {
        [self] i -> Result<PreparedWrite, BulkFailure> in
        let (document, storedBody): (DocumentInput, [UInt8]?)
        switch input(i) {
        case .success(let split): (document, storedBody) = split
        case .failure(let failure): return .failure(failure)
        }
        let id = document.id ?? (newEdits ? Self.newID() : "")
        return .success(
          newEdits
            ? prepareEdit(document, id: id, rev: document.rev, origin: origin, user: user)
            : prepareReplicated(
              document, id: id, origin: origin, user: user, storedBody: storedBody))
      })
  }
}

/// An attachment of a write, its data stored: new data (`revpos` as given), or a stub to
/// resolve against the parent revision.
enum PendingAttachment: Sendable {
  case stored(StoredAttachment)
  /// Another revision's attachment, `revpos` and all (``AttachmentInput/copied(_:)``).
  case kept(StoredAttachment)
  case stub(name: String, revpos: Int?)
}

/// A document of a `_bulk_docs` call that is not one at all, with its `_id` when it has one.
struct BulkFailure: Error {
  let id: String
  let error: StoreError
}

/// The documents of one `_bulk_docs` call, being prepared (``DocumentStore/prepareBulk(_:newEdits:origin:)``).
struct BulkPrepared: Sendable {
  let newEdits: Bool
  /// Each document prepared, or why it is not a document at all (not an object, say).
  let documents: Lookahead<Result<PreparedWrite, BulkFailure>>

  /// Lets the documents go on another thread: freeing a thousand parsed bodies, events and
  /// rows is work the caller (the writer, when it runs the call) need not wait for.
  func release() {
    guard documents.helper else { return }
    let documents = documents
    DispatchQueue.global(qos: .utility).async { documents.discard() }
  }
}

/// Values `0..<count` of a pure function, computed in order on a helper thread while the
/// caller takes them in the same order (``value(_:)`` waits when it gets ahead of the helper),
/// or by the caller itself when `helper` is false.
///
/// The helper publishes its values in runs of ``handOver`` under a lock, so what it wrote is
/// visible to the caller once the caller has seen the run's end under the same lock.
@safe final class Lookahead<Value: Sendable>: @unchecked Sendable {
  /// Values published at once.
  static var handOver: Int { 8 }

  private struct Progress {
    /// Values written so far.
    var published = 0
    /// Whether the caller is waiting for more.
    var waiting = false
  }

  let count: Int
  private let make: @Sendable (Int) -> Value
  /// Whether a helper thread computes the values.
  let helper: Bool
  // Slots written by the helper before it publishes them (or by the caller, inline), read by
  // the caller after.
  private let slots: UnsafeMutablePointer<Value>
  private let progress = Mutex(Progress())
  private let ready = DispatchSemaphore(value: 0)
  /// How many values the caller knows to be ready (touched by the caller only).
  private var known = 0

  init(count: Int, helper: Bool, make: @escaping @Sendable (Int) -> Value) {
    self.count = count
    self.make = make
    self.helper = helper && count > 0
    unsafe slots = .allocate(capacity: max(count, 1))
    if self.helper {
      // The closure keeps the instance alive until every slot is written.
      DispatchQueue.global(qos: .userInitiated).async { [self] in run() }
    }
  }

  /// Whether ``discard()`` has freed the values.
  private var discarded = false

  deinit {
    if !discarded { unsafe slots.deinitialize(count: helper ? count : known) }
    unsafe slots.deallocate()
  }

  /// Frees the values now, on the calling thread, rather than wherever the last reference
  /// goes: once the caller is done with them (after its last ``value(_:)``), on a thread that
  /// has time for it. Waits for the helper to finish.
  func discard() {
    guard !discarded else { return }
    if helper { _ = value(count - 1) }
    unsafe slots.deinitialize(count: helper ? count : known)
    discarded = true
  }

  private func run() {
    var i = 0
    while i < count {
      let end = min(count, i + Self.handOver)
      while i < end {
        unsafe (slots + i).initialize(to: make(i))
        i += 1
      }
      let wake = progress.withLock { p in
        p.published = end
        return p.waiting
      }
      if wake { ready.signal() }
    }
  }

  /// Value `i`. Values are asked for in order; one already passed can be asked for again.
  func value(_ i: Int) -> Value {
    precondition(i >= 0 && i < count)
    if i < known { return unsafe slots[i] }
    guard helper else {
      precondition(i == known, "values are asked for in order")
      unsafe (slots + i).initialize(to: make(i))
      known += 1
      return unsafe slots[i]
    }
    while true {
      let published = progress.withLock { p in
        p.waiting = p.published <= i
        return p.published
      }
      known = published
      if i < published { return unsafe slots[i] }
      // The helper signals every run it publishes while `waiting` is set; a signal left over
      // from an earlier wait only sends the loop round again.
      ready.wait()
    }
  }
}
