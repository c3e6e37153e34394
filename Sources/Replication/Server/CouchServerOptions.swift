/// Settings of a ``CouchServer``.
public struct CouchServerOptions: Sendable {
  /// Who writes, in the log's events, for every write made over HTTP. Users and authentication
  /// come later; until then every HTTP write is made by this one actor.
  public var actor = "anonymous"
  /// Which browser origins may call the server.
  public var cors = CORSPolicy.anyOrigin
  /// The largest request body accepted (`413 too_large` beyond).
  public var maxRequestBytes = 64 << 20
  /// The longest a `longpoll` or `continuous` feed waits for a change, in milliseconds (CouchDB's
  /// `changes_timeout`); a request's `timeout` can only shorten it.
  public var maxChangesTimeoutMilliseconds = 60_000
  /// The most uuids one `GET /_uuids` returns (CouchDB's `max_count`).
  public var maxUUIDCount = 1000

  public init() {}
}
