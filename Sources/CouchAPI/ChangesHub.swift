import JSON
import Log
import Projections
import Synchronization

/// One follower of a database's log for every feed waiting on it.
///
/// A waiting `longpoll`, `continuous` or `eventsource` feed registers here with the position it
/// has read up to and a cheap filter on document ids; one task per database follows the log's
/// subscription and wakes only the waiters a new document event concerns. A feed then reads its
/// rows with one `changes()` query. So 1,000 open feeds cost one log read per write plus an
/// in-memory check per waiter, not 1,000 reads; and no feed holds an LMDB read transaction
/// while it waits (the subscription waits on the log's notifier between batches).
///
/// The follower runs only while someone waits: it stops after the last waiter leaves and starts
/// again, from that waiter's position, with the next one.
final class ChangesHub: Sendable {
  /// Which document events wake a waiter. A `_selector` feed waits for `.any` and filters when
  /// it reads.
  enum Filter: Sendable {
    case any
    case docIDs(Set<String>)
    /// A registered filter (``DocumentFilter``): woken through its keys.
    case named(DocumentFilter)

    init(_ options: ChangesOptions) {
      if let ids = options.docIDs {
        self = .docIDs(ids)
      } else if let filter = options.filter {
        self = .named(filter)
      } else {
        self = .any
      }
    }
  }

  struct Waiter {
    let after: LogPosition
    let filter: Filter
    let continuation: CheckedContinuation<Bool, Never>
  }

  struct State {
    var waiters: [Int: Waiter] = [:]
    /// Waiters with no filter, and the others by the key that wakes them (`d` + document id,
    /// or a named filter's name, NUL and one of its wake keys), so an event costs a few lookups
    /// however many feeds wait.
    var unfiltered: Set<Int> = []
    var byKey: [String: Set<Int>] = [:]
    /// One filter of each name that waiters use, and how many use it: asked for the keys a
    /// document's change wakes.
    var named: [String: (filter: DocumentFilter, waiters: Int)] = [:]
    var nextID = 0
    /// The last position the follower has seen (valid while `following`).
    var last = LogPosition.start
    /// The follower's task, while one runs, and its number: a follower that was cancelled (its
    /// last waiter left) or replaced leaves the state alone.
    var follower: Task<Void, Never>?
    var followerNumber = 0
    var following: Bool { follower != nil }
    var closed = false

    static func keys(_ filter: Filter) -> [String] {
      switch filter {
      case .any: []
      case .docIDs(let ids): ids.map { "d" + $0 }
      case .named(let filter): filter.wakeKeys.map { "f" + filter.name + "\0" + $0 }
      }
    }

    mutating func add(_ waiter: Waiter, id: Int) {
      waiters[id] = waiter
      if case .any = waiter.filter { unfiltered.insert(id) }
      if case .named(let filter) = waiter.filter {
        named[filter.name, default: (filter, 0)].waiters += 1
      }
      for key in Self.keys(waiter.filter) { byKey[key, default: []].insert(id) }
    }

    mutating func remove(_ id: Int) -> Waiter? {
      guard let waiter = waiters.removeValue(forKey: id) else { return nil }
      unfiltered.remove(id)
      if case .named(let filter) = waiter.filter {
        named[filter.name]?.waiters -= 1
        if named[filter.name]?.waiters == 0 { named[filter.name] = nil }
      }
      for key in Self.keys(waiter.filter) {
        byKey[key]?.remove(id)
        if byKey[key]?.isEmpty == true { byKey[key] = nil }
      }
      return waiter
    }

    /// Removes and returns the waiters that a document event at `position` on `docID` wakes.
    mutating func wake(docID: String, at position: LogPosition) -> [Waiter] {
      var candidates = unfiltered
      if !byKey.isEmpty {
        candidates.formUnion(byKey["d" + docID] ?? [])
        for (name, entry) in named {
          for key in entry.filter.keys(of: docID) {
            candidates.formUnion(byKey["f" + name + "\0" + key] ?? [])
          }
        }
      }
      var woken: [Waiter] = []
      for id in candidates where waiters[id].map({ position > $0.after }) == true {
        if let waiter = remove(id) { woken.append(waiter) }
      }
      return woken
    }
  }

  let store: DocumentStore
  private let state = Mutex(State())
  private let onClose: @Sendable () -> Void

  init(store: DocumentStore, onClose: @escaping @Sendable () -> Void) {
    self.store = store
    self.onClose = onClose
  }

  /// Waits until a document event after `after` that passes `filter` commits. Returns true
  /// then (or at once when the follower is already past `after`: the caller re-reads and waits
  /// again from where it got), false when the database closes, the server shuts down, or the
  /// task is cancelled.
  func wait(after: LogPosition, filter: Filter) async -> Bool {
    let id = state.withLock { s in
      s.nextID += 1
      return s.nextID
    }
    return await withTaskCancellationHandler {
      await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
        let immediate = state.withLock { s -> Bool? in
          if s.closed || Task.isCancelled { return false }
          if s.following && s.last > after { return true }
          s.add(Waiter(after: after, filter: filter, continuation: continuation), id: id)
          guard !s.following else { return nil }
          // No follower: start one from this waiter's position.
          s.last = after
          s.followerNumber += 1
          let number = s.followerNumber
          s.follower = Task.detached { [self] in await follow(after: after, number: number) }
          return nil
        }
        if let immediate { continuation.resume(returning: immediate) }
      }
    } onCancel: {
      // A waiter that leaves (its feed timed out, or its client went away) and was the last
      // one stops the follower, so that no task keeps the log's poller running for nobody.
      let (waiter, follower) = state.withLock { s -> (Waiter?, Task<Void, Never>?) in
        let waiter = s.remove(id)
        guard s.waiters.isEmpty, let follower = s.follower else { return (waiter, nil) }
        s.follower = nil
        return (waiter, follower)
      }
      waiter?.continuation.resume(returning: false)
      follower?.cancel()
    }
  }

  /// Whether a follower task runs (it stops once no one waits).
  var isFollowing: Bool { state.withLock { $0.following } }

  /// How many feeds wait here now.
  var waiterCount: Int { state.withLock { $0.waiters.count } }

  /// Wakes every waiter with false and refuses new waits.
  func close() {
    let waiters = state.withLock { s in
      s.closed = true
      defer {
        s.waiters.removeAll()
        s.unfiltered.removeAll()
        s.byKey.removeAll()
      }
      return Array(s.waiters.values)
    }
    for waiter in waiters { waiter.continuation.resume(returning: false) }
    onClose()
  }

  private func follow(after start: LogPosition, number: Int) async {
    do {
      for try await notice in store.changeNotices(after: start) {
        let (woken, stop) = state.withLock {
          s -> ([CheckedContinuation<Bool, Never>], Bool) in
          guard s.following, s.followerNumber == number else { return ([], true) }
          s.last = notice.position
          let woken =
            notice.docID.map { s.wake(docID: $0, at: notice.position).map(\.continuation) }
            ?? []
          if s.waiters.isEmpty || s.closed {
            s.follower = nil
            return (woken, true)
          }
          return (woken, false)
        }
        for continuation in woken { continuation.resume(returning: true) }
        if stop { return }
      }
    } catch {}
    // Stopped because its last waiter left, or replaced: nothing closed.
    let current = state.withLock { $0.following && $0.followerNumber == number }
    guard current, !Task.isCancelled else { return }
    // The log closed (the database was deleted or the server stopped).
    close()
  }
}

/// The ``ChangesHub`` of each open database, and the server-wide end of every feed at graceful
/// shutdown.
final class ChangesHubs: Sendable {
  private struct State {
    var hubs: [ObjectIdentifier: ChangesHub] = [:]
    var shutDown = false
  }
  private let state = Mutex(State())

  /// The hub of `store`.
  func hub(for store: DocumentStore) -> ChangesHub {
    let key = ObjectIdentifier(store)
    let (hub, closeNow) = state.withLock { s -> (ChangesHub, Bool) in
      if let hub = s.hubs[key] { return (hub, false) }
      let hub = ChangesHub(store: store) { [weak self] in self?.remove(key) }
      if !s.shutDown { s.hubs[key] = hub }
      return (hub, s.shutDown)
    }
    if closeNow { hub.close() }
    return hub
  }

  private func remove(_ key: ObjectIdentifier) {
    _ = state.withLock { $0.hubs.removeValue(forKey: key) }
  }

  /// The feeds waiting for a change now, and the databases whose log a follower task follows
  /// for them (`_node/_local/_stats/wikilog`: both are 0 on an idle server).
  var counts: (waiting: Int, following: Int) {
    let hubs = state.withLock { Array($0.hubs.values) }
    return (
      hubs.reduce(0) { $0 + $1.waiterCount }, hubs.reduce(0) { $0 + ($1.isFollowing ? 1 : 0) }
    )
  }

  /// Ends every wait, now and later (the server is shutting down).
  func shutDown() {
    let hubs = state.withLock { s in
      s.shutDown = true
      defer { s.hubs.removeAll() }
      return Array(s.hubs.values)
    }
    for hub in hubs { hub.close() }
  }
}
