/// Settings of a ``CouchServer``.
public struct CouchServerOptions: Sendable {
  /// Who writes, in the log's events, for every write made over HTTP. Users and authentication
  /// come later; until then every HTTP write is made by this one actor.
  public var actor = "anonymous"
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

  public init() {}
}
