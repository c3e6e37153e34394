public import JSON
public import Log
public import RevTree
import Synchronization

#if canImport(FoundationEssentials)
  public import FoundationEssentials
#else
  public import Foundation
#endif

/// The whole store as it was at a position of its log: documents, changes, counts and every
/// inline projection (the Wiki module's wikis, pages and drafts), read-only.
///
/// ## How it is built
/// The events up to the position are replayed into a scratch store of their own: a temporary
/// LMDB directory (unsynced) that receives a copy of each event, at the same position, and the
/// store's projections applied to the original event, in large write transactions. The live
/// store is only read (one snapshot), never written or locked, so its projections are not
/// disturbed. The scratch directory is removed by ``close()``, or when the view and every
/// query made from it (the Wiki module's `WikiQueries`) are gone.
///
/// The view answers exactly as a store whose log ended at the position would, and more: rows
/// that record when something happened (``ChangeRow/timestampMicroseconds`` in history mode,
/// and the wiki's `WikiSummary.lastUpdateMicroseconds`, `WikiMembership.timestampMicroseconds`,
/// `Draft.updatedMicroseconds`) carry the original commit times.
///
/// ```swift
/// let then = try store.asOf(Date(timeIntervalSinceNow: -86_400))   // yesterday
/// defer { then.close() }
/// let home = try then.get("w1:Home")
/// let pages = try WikiQueries(then).pages(in: "w1")
/// ```
public final class AsOfView: Sendable {
  /// The last position the view includes (``LogPosition/start`` for the empty store).
  public let position: LogPosition
  /// The store the view was made from.
  public let live: DocumentStore
  /// The store of the events up to ``position``, with projections like the live store's: read
  /// it as the store was then (an index of the Query module is opened on it as on any store).
  public let scratch: DocumentStore
  let directory: ScratchDirectory

  init(
    live: DocumentStore, scratch: DocumentStore, position: LogPosition, directory: ScratchDirectory
  ) {
    self.live = live
    self.scratch = scratch
    self.position = position
    self.directory = directory
  }

  /// Closes the scratch store and removes its directory now; later reads (through the view or
  /// a query made from it) fail with `service_unavailable`.
  public func close() {
    scratch.close()
    directory.remove()
  }

  // MARK: Documents

  /// ``DocumentStore/info`` as of ``position``: `updateSeq` is the position.
  public var info: DatabaseInfo { get throws { try scratch.info } }

  /// ``DocumentStore/get(_:options:)`` as of ``position``.
  public func get(_ id: String, options: GetOptions = GetOptions()) throws -> JSONValue {
    try scratch.get(id, options: options)
  }

  /// ``DocumentStore/openRevs(_:_:options:)`` as of ``position``.
  public func openRevs(_ id: String, _ which: OpenRevs, options: GetOptions = GetOptions()) throws
    -> [JSONValue]
  {
    try scratch.openRevs(id, which, options: options)
  }

  /// ``DocumentStore/record(_:)`` as of ``position``.
  public func record(_ id: String) throws -> DocumentRecord? { try scratch.record(id) }

  /// ``DocumentStore/allDocs(_:)`` as of ``position``.
  public func allDocs(_ options: AllDocsOptions = AllDocsOptions()) throws -> AllDocsResult {
    try scratch.allDocs(options)
  }

  /// ``DocumentStore/revsDiff(_:)`` as of ``position``.
  public func revsDiff(_ request: [(id: String, revs: [String])]) throws -> [(
    id: String, diff: RevsDiff
  )] {
    try scratch.revsDiff(request)
  }

  /// ``DocumentStore/getLocal(_:)`` as of ``position``.
  public func getLocal(_ id: String) throws -> JSONValue { try scratch.getLocal(id) }

  /// ``DocumentStore/changes(_:)`` as of ``position``: the feed a store whose log ended there
  /// would give. History rows carry their original commit times.
  public func changes(_ options: ChangesOptions = ChangesOptions()) throws -> ChangesResult {
    if options.history {
      // The live log has the original timestamps; its events up to `position` never change.
      return try live.read { txn in
        try live.historyChanges(options, txn: txn, through: position)
      }
    }
    return try scratch.changes(options)
  }

  /// Runs `body` on one snapshot of the view.
  public func read<T>(_ body: (ReadTransaction) throws -> T) throws -> T {
    try scratch.read(body)
  }
}

extension DocumentStore {
  /// A read-only view of the whole store as of `position` (inclusive). See ``AsOfView``.
  ///
  /// - Parameters:
  ///   - position: the last event included; ``LogPosition/start`` for the empty store.
  ///   - temporaryDirectory: where the scratch directory goes (the system's temporary
  ///     directory by default).
  /// - Throws: ``StoreError`` `bad_request` when `position` is past the end of the log.
  public func asOf(_ position: LogPosition, temporaryDirectory: String? = nil) throws -> AsOfView {
    let last = try read { try $0.lastPosition }
    guard position <= last else {
      throw StoreError.badRequest("position \(position) is past the end of the log (\(last))")
    }
    return try buildView(through: position, temporaryDirectory: temporaryDirectory)
  }

  /// A read-only view of the whole store as of `date`: every event committed at or before it
  /// (timestamps compared in whole microseconds, `date` rounded to the nearest). A date before
  /// the first event gives the empty store, one after the last event the store as it is.
  public func asOf(_ date: Date, temporaryDirectory: String? = nil) throws -> AsOfView {
    let micros = Int64((date.timeIntervalSince1970 * 1_000_000).rounded())
    let position = try read { txn in
      if micros == .max { return try txn.lastPosition }
      guard let first = try txn.firstPosition(atOrAfterMicroseconds: micros + 1) else {
        return try txn.lastPosition
      }
      return LogPosition(first.rawValue - 1)
    }
    return try buildView(through: position, temporaryDirectory: temporaryDirectory)
  }

  /// Events replayed per write transaction of a view's scratch store.
  static let viewBatch = 100_000

  func buildView(through position: LogPosition, temporaryDirectory: String?) throws -> AsOfView {
    let base = temporaryDirectory ?? FileManager.default.temporaryDirectory.path
    let directory = ScratchDirectory(
      path: base + "/wikilog-asof-" + UUID().uuidString.lowercased())
    var options = EventLog.Options(durability: .unsynced)
    options.maxMapSize = log.options.maxMapSize
    // The copy holds the events up to `position` and projections like the live ones: start
    // near the live file's size so that the map rarely has to grow (each growth replays a
    // batch again).
    let liveSize =
      (try? FileManager.default.attributesOfItem(atPath: log.path + "/data.mdb")[.size] as? Int)
      ?? nil
    options.mapSize = min(options.maxMapSize, max(64 << 20, (liveSize ?? 0) + (liveSize ?? 0) / 2))
    let scratchLog: EventLog
    do {
      scratchLog = try EventLog(directory: directory.path, options: options)
    } catch {
      directory.remove()
      throw StoreError.storage(error)
    }
    let store: DocumentStore
    do {
      store = try DocumentStore(
        log: scratchLog, projections: others.map(\.projection), ownsLog: true,
        validation: validation, scratch: directory, blobs: blobs, state: state)
    } catch {
      scratchLog.close()
      directory.remove()
      throw error
    }
    try store.importEvents(from: self, through: position)
    return AsOfView(live: self, scratch: store, position: position, directory: directory)
  }

  /// Copies `source`'s events up to `position` into this (empty, scratch) store at the same
  /// positions and applies the projections to the original events, so that what they record
  /// of an event's time is the original.
  func importEvents(from source: DocumentStore, through position: LogPosition) throws {
    try source.read { sourceTxn in
      var done = false
      while !done {
        done = try projections.write { txn -> Bool in
          let first = txn.nextPosition
          guard first <= position else { return true }
          var count = 0
          var pending: [RecordedEvent] = []
          pending.reserveCapacity(256)
          func flush() throws {
            let copies = try txn.append(
              contentsOf: pending.map {
                NewEvent(type: $0.type, stream: $0.stream, actor: $0.actor, payload: $0.payload)
              }
            ).events
            for (original, copy) in zip(pending, copies) {
              guard original.position == copy.position else {
                throw StoreError.internalError(
                  "the as-of copy of event \(original.position) landed at \(copy.position)")
              }
              try projections.applyAll(original, txn: txn)
            }
            pending.removeAll(keepingCapacity: true)
          }
          try sourceTxn.forEachEvent(from: first) { event in
            guard event.position <= position else { return false }
            pending.append(event)
            count += 1
            if pending.count == 256 { try flush() }
            return count < Self.viewBatch
          }
          try flush()
          let last = txn.nextPosition.rawValue - 1
          if last > 0 {
            try projections.setCheckpoints(last, txn: txn)
          }
          return last >= position.rawValue || count < Self.viewBatch
        }
      }
    }
  }
}

/// A temporary directory removed once nothing uses it (or when asked).
final class ScratchDirectory: Sendable {
  let path: String
  let removed = Mutex(false)

  init(path: String) { self.path = path }

  func remove() {
    let first = removed.withLock { done in
      defer { done = true }
      return !done
    }
    if first { try? FileManager.default.removeItem(atPath: path) }
  }

  deinit { remove() }
}
