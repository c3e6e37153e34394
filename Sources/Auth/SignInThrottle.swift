import Synchronization

/// Slows repeated failed sign-ins, per user name and per client address: after
/// ``Policy/freeFailures`` failures in a row, each further attempt for that name or from that
/// address waits ``Policy/baseDelay`` doubled per further failure, up to ``Policy/maxDelay``,
/// before it is checked (the longer of the two waits applies). A success clears the name's and
/// the address's counts; a count not added to for ``Policy/forgetAfter`` is forgotten. At most
/// ``Policy/maxEntries`` names and addresses are tracked (the stalest are dropped), so the table
/// cannot grow without bound.
///
/// CouchDB 3.4 locks a client address out of one user's account after 5 failures instead
/// (`couch_auth_lockout`, `[chttpd_auth_lockout] mode = enforce`). wikilog slows by default,
/// which hinders guessing as much without refusing the right password, and locks out as CouchDB
/// does when ``lockoutMode`` says so (`_config`'s `chttpd_auth_lockout/mode`): after
/// ``lockoutThreshold`` failures of a name from an address, counted for
/// ``lockoutLifetime`` from the first, that pair is refused (`403`) until the time is up,
/// whatever the password.
public final class SignInThrottle: Sendable {
  /// `chttpd_auth_lockout/mode`.
  public enum LockoutMode: String, Sendable {
    /// Failures are not counted for lockout.
    case off
    /// Counted; a pair past the threshold is let through (CouchDB logs a warning).
    case warn
    /// Counted; a pair past the threshold is refused.
    case enforce
  }

  /// Whether failures lock a client out of a user's account (`off` unless set).
  public var lockoutMode: LockoutMode {
    get { lockout.withLock { $0.mode } }
    set { lockout.withLock { $0.mode = newValue } }
  }
  /// The failures of a name from an address after which the pair is locked out (CouchDB's
  /// `threshold`, 5).
  public let lockoutThreshold = 5
  /// How long failures are counted, from the first (CouchDB's `max_lifetime`, 300 s).
  public let lockoutLifetime: Duration = .seconds(300)
  private struct Lockout {
    var mode = LockoutMode.off
    var pairs: [String: (failures: Int, first: ContinuousClock.Instant)] = [:]
  }
  private let lockout = Mutex(Lockout())

  /// CouchDB's refusal of a locked-out pair.
  public static let lockedOut = AuthError(
    status: 403, error: "forbidden",
    reason: "Account is temporarily locked due to multiple authentication failures")

  private static func pair(_ user: String, _ client: String) -> String { client + "\u{0}" + user }

  /// Whether `client` is locked out of `user`'s account now (``lockoutMode`` `enforce`).
  public func isLockedOut(user: String, client: String?, now: ContinuousClock.Instant = .now)
    -> Bool
  {
    guard let client else { return false }
    return lockout.withLock { state in
      guard state.mode == .enforce, let entry = state.pairs[Self.pair(user, client)],
        now - entry.first < lockoutLifetime
      else { return false }
      return entry.failures >= lockoutThreshold
    }
  }

  private func countForLockout(user: String?, client: String?, now: ContinuousClock.Instant) {
    guard let user, let client else { return }
    lockout.withLock { state in
      guard state.mode != .off else { return }
      let key = Self.pair(user, client)
      var entry = state.pairs[key] ?? (0, now)
      if now - entry.first >= lockoutLifetime { entry = (0, now) }
      entry.failures += 1
      state.pairs[key] = entry
      if state.pairs.count > policy.maxEntries {
        let stalest = state.pairs.sorted { $0.value.first < $1.value.first }
          .prefix(state.pairs.count - policy.maxEntries)
        for (key, _) in stalest { state.pairs.removeValue(forKey: key) }
      }
    }
  }

  public struct Policy: Sendable {
    public var freeFailures = 3
    public var baseDelay: Duration = .milliseconds(500)
    public var maxDelay: Duration = .seconds(30)
    public var forgetAfter: Duration = .seconds(15 * 60)
    public var maxEntries = 10_000

    public init(
      freeFailures: Int = 3, baseDelay: Duration = .milliseconds(500),
      maxDelay: Duration = .seconds(30), forgetAfter: Duration = .seconds(15 * 60),
      maxEntries: Int = 10_000
    ) {
      self.freeFailures = freeFailures
      self.baseDelay = baseDelay
      self.maxDelay = maxDelay
      self.forgetAfter = forgetAfter
      self.maxEntries = maxEntries
    }
  }

  public let policy: Policy
  private struct Entry {
    var failures: Int
    var last: ContinuousClock.Instant
  }
  private let entries = Mutex<[String: Entry]>([:])

  public init(policy: Policy = Policy()) {
    self.policy = policy
  }

  private static func keys(user: String?, client: String?) -> [String] {
    [user.map { "user:" + $0 }, client.map { "client:" + $0 }].compactMap { $0 }
  }

  /// How long an attempt for `user` from `client` waits before it is checked.
  public func delay(user: String?, client: String?, now: ContinuousClock.Instant = .now)
    -> Duration
  {
    let failures = entries.withLock { table in
      Self.keys(user: user, client: client).map { key -> Int in
        guard let e = table[key], now - e.last < policy.forgetAfter else { return 0 }
        return e.failures
      }.max() ?? 0
    }
    return delay(afterFailures: failures)
  }

  /// The wait after `failures` failures in a row.
  public func delay(afterFailures failures: Int) -> Duration {
    let over = failures - policy.freeFailures
    guard over > 0 else { return .zero }
    var d = policy.baseDelay
    for _ in 1..<min(over, 32) {
      d = d * 2
      if d >= policy.maxDelay { return policy.maxDelay }
    }
    return min(d, policy.maxDelay)
  }

  /// Records a failed attempt.
  public func recordFailure(user: String?, client: String?, now: ContinuousClock.Instant = .now) {
    countForLockout(user: user, client: client, now: now)
    entries.withLock { table in
      for key in Self.keys(user: user, client: client) {
        var e = table[key] ?? Entry(failures: 0, last: now)
        if now - e.last >= policy.forgetAfter { e.failures = 0 }
        e.failures += 1
        e.last = now
        table[key] = e
      }
      if table.count > policy.maxEntries {
        let stalest = table.sorted { $0.value.last < $1.value.last }
          .prefix(table.count - policy.maxEntries)
        for (key, _) in stalest { table.removeValue(forKey: key) }
      }
    }
  }

  /// Records a success: the counts of `user` and `client` start again.
  public func recordSuccess(user: String?, client: String?) {
    entries.withLock { table in
      for key in Self.keys(user: user, client: client) { table.removeValue(forKey: key) }
    }
  }
}
