/// How the jobs of the `_replicator` database are run: CouchDB's `[replicator]` settings.
public struct ReplicatorSchedulerOptions: Sendable {
  /// Jobs that replicate at once (`max_jobs`); the others wait as `pending`.
  public var maxJobs = 500
  /// Running continuous jobs stopped at most, each ``interval``, so that pending ones run
  /// (`max_churn`).
  public var maxChurn = 20
  /// How often the scheduler rotates running jobs out for pending ones when more are defined
  /// than ``maxJobs`` (`interval`, 60 s).
  public var interval: Duration = .seconds(60)
  /// History entries kept per job (`max_history`).
  public var maxHistory = 20
  /// The wait after a job's first crash, doubled after each consecutive one up to 2^10 times
  /// (CouchDB's 30 s `BACKOFF_INTERVAL`).
  public var backoff: Duration = .seconds(30)
  /// How long a job must run without a crash before its crashes stop counting
  /// (`health_threshold`).
  public var healthThreshold: Duration = .seconds(120)
  /// Retries of one failing request before a job crashes (`retries_per_request`), and the
  /// first wait between them (doubled after each).
  public var retriesPerRequest = 5
  public var retryDelay: Duration = .milliseconds(250)

  public init() {}
}
