import Foundation
public import JSON
import Log
import RevTree
import Synchronization

/// CouchDB's partitioned databases (`PUT /{db}?partitioned=true`): every document id but
/// design and `_local` ones is `partition:id`, and a partition's documents can be read alone
/// (`/{db}/_partition/{partition}/...`). A wikilog database is one file either way; the flag is
/// kept in the database (a `_local` document of wikilog's own), set when it is made and never
/// changed, and the store checks every id written against it (``DocumentStore/isPartitioned``).
public enum Partitions {
  /// The `_local` document that marks a database partitioned (reserved: `org.wikilog.`).
  public static let localID = "org.wikilog.partitioned"

  /// The partition of `id` (`a` for `a:1`), nil when it has no `:`.
  public static func partition(of id: String) -> Substring? {
    guard let colon = id.firstIndex(of: ":") else { return nil }
    return id[..<colon]
  }

  /// Whether `id` is a document of `partition`.
  public static func isMember(_ id: String, of partition: String) -> Bool {
    id.utf8.count > partition.utf8.count && id.hasPrefix(partition)
      && id.utf8.dropFirst(partition.utf8.count).first == UInt8(ascii: ":")
  }

  /// The first id of `partition` (`partition:`) and the first past it (`partition;`), for
  /// range reads of its documents.
  public static func range(of partition: String) -> (start: String, end: String) {
    (partition + ":", partition + ";")
  }

  /// Checks a partition name as `couch_partition:validate_partition` does: not empty, no
  /// leading underscore, no colon (`400 illegal_partition`).
  public static func validate(partition: some StringProtocol) throws(StoreError) {
    guard !partition.isEmpty else {
      throw StoreError("illegal_partition", "Partition must not be empty", code: .badRequest)
    }
    if partition.hasPrefix("_") {
      throw StoreError(
        "illegal_partition", "Partition must not start with an underscore", code: .badRequest)
    }
    if partition.contains(":") {
      throw StoreError(
        "illegal_partition", "Partition must not contain a colon", code: .badRequest)
    }
  }

  /// Checks a document id of a partitioned database (`couch_partition:validate_docid`):
  /// design and `_local` ids pass; any other is `partition:id`, with a valid partition and an
  /// id after it that is itself valid.
  public static func validate(documentID id: String) throws(StoreError) {
    if id.hasPrefix("_design/") || id.hasPrefix("_local/") { return }
    guard let partition = partition(of: id) else {
      throw StoreError(
        "illegal_docid", "Doc id must be of form partition:id", code: .badRequest)
    }
    try validate(partition: partition)
    let rest = String(id[id.index(after: partition.endIndex)...])
    try DocumentKey.validate(rest)
  }
}

extension DocumentStore {
  /// Whether the database was made partitioned (``Partitions``).
  public var isPartitioned: Bool {
    if let known = partitionedFlag.withLock({ $0 }) { return known }
    let flag: Bool
    do {
      flag = try getLocal(Partitions.localID)["partitioned"] == .bool(true)
    } catch let error as StoreError where error.code == .notFound {
      flag = false
    } catch {
      return false  // not known: read again next time
    }
    partitionedFlag.withLock { $0 = flag }
    return flag
  }

  /// Marks a new, empty database partitioned: from now on every id written must be
  /// `partition:id`. Refused once it holds documents.
  public func makePartitioned(actor: String) throws {
    guard try info.docCount == 0 && info.deletedDocCount == 0 else {
      throw StoreError.badRequest("only an empty database can be made partitioned")
    }
    _ = try putLocal(
      Partitions.localID, JSONValue.object(JSONObject(["partitioned": .bool(true)])).serialized(),
      actor: actor)
    partitionedFlag.withLock { $0 = true }
  }

  /// The documents of `partition`: live and deleted, and the bytes of their winning bodies
  /// (`GET /{db}/_partition/{partition}`).
  public func partitionInfo(_ partition: String) throws -> (
    docCount: Int, deletedDocCount: Int, bodyBytes: Int
  ) {
    try read { txn in try partitionInfo(partition, txn: txn) }
  }

  /// ``partitionInfo(_:)`` in the caller's transaction (a write's sees what it wrote).
  func partitionInfo(_ partition: String, txn: ReadTransaction) throws -> (
    docCount: Int, deletedDocCount: Int, bodyBytes: Int
  ) {
    let (start, end) = Partitions.range(of: partition)
    let endKey = Array(end.utf8)
    var live = 0
    var deleted = 0
    var bytes = 0
    try scanRecords(from: DocumentKey.scanStart(start, descending: false), txn: txn) {
      key, value in
      if !key.lexicographicallyPrecedes(endKey)
        && !DocumentKey.sharesInlinePart(key, with: endKey)
      {
        return false
      }
      let record = try DocumentRecord(decoding: value)
      guard Partitions.isMember(record.docID, of: partition), let winner = record.tree.winner
      else { return true }
      if winner.isDeleted {
        deleted += 1
      } else {
        live += 1
        if let at = winner.body {
          bytes += (try? JSONValue.object(body(at: at, txn: txn)).serialized().count) ?? 0
        }
      }
      return true
    }
    return (live, deleted, bytes)
  }

  /// Refuses a local edit of a partitioned database's document `id` whose new body
  /// (`newBytes`) is larger than its winner's was, when its partition holds
  /// ``DirectoryState/maxPartitionBytes`` or more (`403 partition_overflow`, as `couch_db_updater` refuses
  /// it). Deletions, edits that shrink a document, design documents and replicated writes pass.
  ///
  /// A partition's bodies are all in the log, so a data file smaller than the limit holds no
  /// full partition and nothing is read; past it, the partition's documents are read once per
  /// write transaction.
  func checkPartitionSize(
    _ id: String, newBytes: Int, record: DocumentRecord, txn: WriteTransaction,
    context: WriteContext?
  ) throws {
    guard let limit = state.maxPartitionBytes, limit > 0, isPartitioned, !id.hasPrefix("_design/"),
      let partition = Partitions.partition(of: id).map(String.init)
    else { return }
    var oldBytes = 0
    if let winner = record.tree.winner, !winner.isDeleted, let at = winner.body {
      oldBytes = (try? DocumentChange.body(at: at, in: txn).count) ?? 0
    }
    guard newBytes > oldBytes else { return }
    let full: Bool
    if let known = context?.fullPartitions[partition] {
      full = known
    } else {
      let file =
        ((try? FileManager.default.attributesOfItem(atPath: log.path + "/data.mdb"))?[.size]
        as? NSNumber)?.intValue ?? Int.max
      full = try file >= limit && partitionInfo(partition, txn: txn).bodyBytes >= limit
      context?.fullPartitions[partition] = full
    }
    if full {
      throw StoreError(
        "partition_overflow", "Partition limit exceeded due to update on '\(id)'",
        code: .forbidden)
    }
  }
}
