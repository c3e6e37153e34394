import Crypto
import Formats
public import JSON
public import Log
import Synchronization

extension DocumentStore {
  /// What names this database in its sequence strings: 12 characters, the base64url of the
  /// first 9 bytes of the SHA-256 of its log's public key (``Log/EventLog/publicKey(create:)``),
  /// which a database keeps through compactions, backups and restores and which a database
  /// made again under the same name does not share.
  public var sequenceTag: String {
    if let tag = sequenceTagCache.withLock({ $0 }) { return tag }
    let key = (try? log.publicKey(create: false).key) ?? Array(log.path.utf8)
    let tag = Base64.encodeURL(Array(SHA256.hash(data: key).prefix(9)))
    sequenceTagCache.withLock { $0 = tag }
    return tag
  }

  /// CouchDB's opaque sequence string of `position` for the HTTP API: `"N-TAG"`, N the log
  /// position and TAG this database's ``sequenceTag`` (CouchDB's are `"N-g1AAAA…"`, the
  /// count then the shards' encoded positions). Clients treat it as opaque; the number before
  /// the `-` is the position.
  public func sequenceString(_ position: LogPosition) -> String {
    String(position.rawValue) + "-" + sequenceTag
  }

  /// The position a `since` names for this database: `N`, `"N"` or `"N-TAG"`; a TAG of
  /// another database (a checkpoint taken before this one was deleted and made again) is
  /// position 0, as CouchDB starts a shard whose uuid it does not know from its beginning:
  /// everything is sent again rather than anything skipped. Nil when the text is no sequence.
  public func position(ofSequence text: String) -> LogPosition? {
    var text = Substring(text)
    if text.count >= 2, text.first == "\"", text.last == "\"" { text = text.dropFirst().dropLast() }
    var tag: Substring?
    if let dash = text.firstIndex(of: "-"), dash != text.startIndex {
      tag = text[text.index(after: dash)...]
      text = text[..<dash]
    }
    guard let n = UInt64(text) else { return nil }
    if let tag, tag != sequenceTag[...] { return LogPosition(0) }
    return LogPosition(n)
  }
}

extension DocumentStore {
  /// `answer` with its `update_seq` number, if any, as this database's sequence string
  /// (``sequenceString(_:)``): `_all_docs` and views asked `update_seq=true`.
  public func withSequenceString(_ answer: JSONValue) -> JSONValue {
    guard var object = answer.objectValue,
      let seq = object["update_seq"]?.numberValue?.int64Value, seq >= 0
    else { return answer }
    object["update_seq"] = .string(sequenceString(LogPosition(UInt64(seq))))
    return .object(object)
  }
}

extension DocumentStore {
  /// The position of `text` when it is a number or this database's own sequence string
  /// (`"N-TAG"`), else nil: for parameters that also take other forms (`as_of`'s times, whose
  /// dashes a sequence string must not be read in).
  public func position(ofOwnSequence text: String) -> LogPosition? {
    if let n = UInt64(text) { return LogPosition(n) }
    let suffix = "-" + sequenceTag
    guard text.hasSuffix(suffix), let n = UInt64(text.dropLast(suffix.count)) else { return nil }
    return LogPosition(n)
  }
}
