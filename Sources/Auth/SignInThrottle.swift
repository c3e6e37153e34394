import Synchronization

/// Slows repeated failed sign-ins, per user name and per client address: after
/// ``Policy/freeFailures`` failures in a row, each further attempt for that name or from that
/// address waits ``Policy/baseDelay`` doubled per further failure, up to ``Policy/maxDelay``,
/// before it is checked (the longer of the two waits applies). A success clears the name's and
/// the address's counts; a count not added to for ``Policy/forgetAfter`` is forgotten. At most
/// ``Policy/maxEntries`` names and addresses are tracked (the stalest are dropped), so the table
/// cannot grow without bound.
///
/// (CouchDB 3.4 locks an address out after 5 failures instead, `couch_auth_lockout`; a delay
/// slows guessing as much without letting anyone lock a user out.)
public final class SignInThrottle: Sendable {
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
