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
  /// The most bytes of winning bodies a partition of a partitioned database holds before a
  /// local edit that grows one of its documents is refused with `403 partition_overflow`
  /// (CouchDB's `couchdb/max_partition_size`, default 10 GiB); 0 or less for no limit.
  /// Replicated writes, deletions and design documents are never refused for it.
  public var maxPartitionBytes = 10 << 30
  /// The longest a `longpoll` or `continuous` feed waits for a change, in milliseconds (CouchDB's
  /// `changes_timeout`); a request's `timeout` can only shorten it.
  public var maxChangesTimeoutMilliseconds = 60_000
  /// Whether a `?callback=NAME` wraps JSON answers as JSONP (`/* CouchDB */NAME(…);`,
  /// `application/javascript`): CouchDB's `chttpd/allow_jsonp`, off by default, since a page
  /// of any site could then read what a signed-in visitor may read.
  public var allowJSONP = false
  /// This node's name, as `/_membership` and `/_node/{node}` give it: CouchDB's default for a
  /// single node, `nonode@nohost`, unless named (CouchDB's `-name` in `vm.args`).
  public var nodeName = "nonode@nohost"
  /// Whether a `+` in a request's path is a space (CouchDB's `chttpd/decode_plus_to_space`,
  /// on by default; `%2B` is always `+`).
  public var decodePlusToSpace = true
  /// The most uuids one `GET /_uuids` returns (CouchDB's `max_count`).
  public var maxUUIDCount = 1000
  /// What other modules bring: endpoints under each database and at the root, `_changes`
  /// filters, system databases (``CouchFeature``). CouchQuery's `.query` serves Mango, views
  /// and design functions; CouchReplicator's `.replicator(_:)` serves `_replicate`,
  /// `_scheduler` and the `_replicator` database.
  public var features: [CouchFeature] = []

  public init() {}
}
