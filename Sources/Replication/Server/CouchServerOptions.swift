public import Auth

/// Settings of a ``CouchServer``.
public struct CouchServerOptions: Sendable {
  /// Signs requests in (`_users`, cookies, tokens, JWT) and answers `/_session`. With one, every
  /// request is checked against the database's security object and access rules, and every
  /// write is recorded as made by the signed-in user. Without one (nil, the default: a server
  /// embedded in a program that checks for itself), every request is a server administrator's
  /// and writes are made by ``actor``.
  public var authenticator: Authenticator?
  /// The actor of every write when there is no ``authenticator``.
  public var actor = "anonymous"
  /// Whether the server is reached over HTTPS (session cookies are then `Secure`).
  public var secure = false
  /// Which browser origins may call the server.
  public var cors = CORSPolicy.anyOrigin
  /// The largest request body accepted (`413 too_large` beyond).
  public var maxRequestBytes = 64 << 20
  /// The largest attachment body `PUT /db/doc/att` accepts, streamed to disk
  /// (`413 attachment_too_large` beyond); nil for no limit. CouchDB's `max_attachment_size`,
  /// whose default is 1 GiB (`couch_att:max_attachment_size/0`). Not bounded by
  /// ``maxRequestBytes``, which still bounds inline and multipart attachments.
  public var maxAttachmentBytes: Int? = 1 << 30
  /// The longest a `longpoll` or `continuous` feed waits for a change, in milliseconds (CouchDB's
  /// `changes_timeout`); a request's `timeout` can only shorten it.
  public var maxChangesTimeoutMilliseconds = 60_000
  /// The most uuids one `GET /_uuids` returns (CouchDB's `max_count`).
  public var maxUUIDCount = 1000
  /// The scheduler of the `_replicator` database's jobs.
  public var replicator = ReplicatorSchedulerOptions()

  public init() {}
}

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
