/// Erasing an event's payload on purpose, with the log's proofs intact.
///
/// An event's payload can be replaced (by nothing, or by what may stay: a document revision's
/// id without its body) when the law or decency requires its bytes gone: a password pasted into
/// a page, a court order. The event keeps its position, time, stream, stream version, type and
/// actor, and names the later event that erased it (``RecordedEvent/erasedBy``). The Merkle
/// tree keeps the leaf hash of the original record (in `log.erased`), so the tree's root does
/// not change: signed heads taken before still verify, consistency proofs across the erasure
/// hold, inclusion proofs of every other event still check, and ``EventLog/verify(maxProblems:head:)``
/// is clean. An inclusion proof of the erased event carries the kept leaf hash instead of the
/// leaf (``EventLog/InclusionProof/erasedLeafHash``).
///
/// The bytes of the original record leave the log's current pages at once, but LMDB keeps
/// freed pages in the file until it reuses them: a compacting copy of the environment
/// (``EventLog/copy(to:compact:)``) is what leaves none of them in any file.
///
/// ```swift
/// try log.write { txn in
///   let redaction = try txn.append(NewEvent(type: "redacted", stream: "", payload: reason))
///   try txn.erase(secretPosition, by: redaction.position)
/// }
/// ```
extension WriteTransaction {
  /// Replaces the payload of the event at `position` with `payload`, recording that the event
  /// at `eraser` (a later one: usually appended in this same transaction, saying who erased
  /// what and why) erased it. Erasing an erased event again replaces its payload again and
  /// names the new eraser; the leaf hash kept is still the original's.
  ///
  /// - Throws: ``LogError/invalidArgument(_:)`` when there is no event at `position`, or
  ///   `eraser` is not a later event of the log (or of this transaction).
  public func erase(_ position: LogPosition, payload: [UInt8] = [], by eraser: LogPosition)
    throws(LogError)
  {
    ensureLive()
    guard position.rawValue >= 1, position.rawValue < writer.nextPosition else {
      throw LogError.invalidArgument("there is no event at position \(position)")
    }
    guard eraser.rawValue > position.rawValue, eraser.rawValue < writer.nextPosition else {
      throw LogError.invalidArgument(
        "event \(position) can only be erased by a later event of the log, not \(eraser)")
    }
    let dbs = log.dbs
    let path = log.path
    try performWrite {
      let key = position.rawValue.bigEndianBytes
      guard let old = try raw.get(dbs.events, key) else {
        throw LogError.corruptDatabase(path: path, reason: "event \(position) is missing")
      }
      let leaf = try raw.leaf(erased: dbs.erased, position: position.rawValue, record: old)
      let record: [UInt8]
      do {
        record = try EventRecord.erased(
          position: position.rawValue, old: old, erasedBy: eraser.rawValue, payload: payload)
      } catch let error as EventRecord.DecodingError {
        throw LogError.corruptDatabase(
          path: path, reason: "event \(position) is corrupt: \(error.reason)")
      }
      try raw.put(dbs.erased, key, leaf.bytes)
      try raw.put(dbs.events, key, record)
    }
  }
}

extension EventLog {
  /// The positions of the erased events and the events that erased them, in position order.
  public func erasedEvents() throws(LogError) -> [(position: LogPosition, erasedBy: LogPosition)] {
    try readLog { txn throws(LogError) in
      guard dbs.erased != UInt32.max else { return [] }
      return try perform {
        var found: [(position: LogPosition, erasedBy: LogPosition)] = []
        try txn.raw.scan(dbs.erased, from: nil, reverse: false) { key, _ in
          if let position = UInt64(bigEndianBytes: key),
            let event = try txn.event(at: LogPosition(position)), let by = event.erasedBy
          {
            found.append((LogPosition(position), by))
          }
          return true
        }
        return found
      }
    }
  }
}
