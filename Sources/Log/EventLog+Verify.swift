/// What ``EventLog/verify()`` found.
public struct VerificationReport: Sendable, Hashable, CustomStringConvertible {
  public var eventCount = 0
  public var streamCount = 0
  public var lastPosition = LogPosition.start
  /// Each problem found, in plain words; empty when the log is sound.
  public var problems: [String] = []
  /// The Merkle tree's size and root as recomputed from the events.
  public var tree: EventLog.TreeHead?

  public var isValid: Bool { problems.isEmpty }

  public var description: String {
    if isValid {
      return "ok: \(eventCount) events in \(streamCount) streams, last position \(lastPosition)"
    }
    return "\(problems.count) problem(s):\n" + problems.map { "- " + $0 }.joined(separator: "\n")
  }
}

extension EventLog {
  /// Walks the whole log in one snapshot and checks it: positions dense from 1, every record
  /// decodes and matches its checksum, timestamps never decrease, each stream's versions run from
  /// 1 with every record pointing back to the stream's previous event, stream heads and
  /// checkpoints match the events, and every idempotency entry points into the log.
  ///
  /// The data file's pages are checked first with plain file reads
  /// (``checkPages(directory:maxProblems:)``); when they are damaged the report lists that and
  /// the records are not read, since LMDB would follow the damaged pages.
  ///
  /// The Merkle tree is recomputed from the events and compared with the stored tree and, when
  /// given, with `head` (a head taken earlier; ``verifyTree(_:head:maxProblems:walk:)``): a rewritten,
  /// removed, reordered or inserted event is found even when its checksum was recomputed.
  public func verify(maxProblems: Int = 100, head: TreeHead? = nil) throws -> VerificationReport {
    // The snapshot walked is pinned by a read transaction (and a problem found in a newer one,
    // when writers moved on before the meta pages were read, looked for again).
    var damaged: [String] = []
    for _ in 0..<3 {
      let (problems, pinned) = try readLog { txn throws(LogError) in
        try Self.checkPages(
          file: path + "/data.mdb", snapshot: UInt64(UInt(bitPattern: txn.raw.id)),
          maxProblems: maxProblems)
      }
      damaged = problems
      if problems.isEmpty || pinned { break }
    }
    if !damaged.isEmpty {
      var report = VerificationReport()
      report.problems = damaged.map { "\(path)/data.mdb is damaged: \($0)" }
      return report
    }
    return try read { txn in
      var report = VerificationReport()
      func problem(_ text: String) {
        if report.problems.count < maxProblems { report.problems.append(text) }
      }
      var expected: UInt64 = 1
      var lastTimestamp = Int64.min
      var checkpoints = 0
      // Stream links are checked by sums of hashes first (StreamLinkHash); only when they
      // disagree does a second pass find the problems with a dictionary of every stream.
      var linkSums: (events: UInt64, references: UInt64) = (0, 0)
      var linksLookWrong = false
      // One pass over the records checks them and feeds the Merkle tree's check their leaves.
      let tree = try verifyTree(txn, head: head, maxProblems: maxProblems) { addLeaf in
        var feeding = true
        try txn.raw.forEachCheckedRecord(dbs.events, erased: dbs.erased, leafHashes: true) {
          position, outcome, leaf in
          guard let position else {
            if case .failure(let failure) = outcome { problem("\(failure.reason), not 8") }
            return
          }
          if feeding, let leaf { feeding = try addLeaf(position, leaf) }
          if position != expected {
            problem("position \(expected) is missing (next is \(position))")
          }
          expected = position + 1
          report.eventCount += 1
          report.lastPosition = LogPosition(position)
          switch outcome {
          case .failure(let failure):
            problem("event \(position) is corrupt: \(failure.reason)")
            linksLookWrong = true
          case .success(let event):
            if event.timestamp < lastTimestamp {
              problem("event \(position) is older than the one before")
            }
            lastTimestamp = event.timestamp
            guard !event.stream.isEmpty else {
              if event.streamVersion != 0 || event.previous != 0 {
                problem("event \(position) has no stream but stream links")
              }
              return
            }
            if event.streamVersion == 0 || (event.streamVersion == 1) != (event.previous == 0)
              || event.previous >= position
            {
              linksLookWrong = true
            }
            linkSums.events &+= event.linkHash
            linkSums.references &+= event.previousLinkHash
            if event.streamVersion % StreamKey.checkpointInterval == 0 {
              let key = StreamKey.key(
                prefix: StreamKey.prefix(event.stream), version: event.streamVersion)
              if try txn.raw.get(dbs.streamIndex, key) != position.bigEndianBytes {
                problem(
                  "the checkpoint of '\(event.stream)' v\(event.streamVersion) does not point to event \(position)"
                )
              } else {
                checkpoints += 1
              }
            }
          }
        }
      }
      var storedHeadCount = 0
      try txn.raw.forEachStreamHead(dbs.streams) { _, stored, linkHash in
        storedHeadCount += 1
        if stored == nil { linksLookWrong = true }
        linkSums.references &+= linkHash
      }
      if !linksLookWrong && linkSums.events == linkSums.references {
        // Each stored head is a stream's last event, and every stream has one.
        report.streamCount = storedHeadCount
      } else {
        report.streamCount = try checkStreamLinks(txn, problem: problem)
      }
      if storedHeadCount != report.streamCount {
        problem("there are \(storedHeadCount) stream heads for \(report.streamCount) streams")
      }
      let storedCheckpoints = try txn.raw.count(dbs.streamIndex)
      if storedCheckpoints != checkpoints {
        problem(
          "there are \(storedCheckpoints) stream checkpoints; the events call for \(checkpoints)")
      }
      let last = report.lastPosition.rawValue
      try txn.raw.scan(dbs.idempotency, from: nil, reverse: false) { key, value in
        if value.count != 16 {
          problem("an idempotency entry is \(value.count) bytes, not 16")
        } else if let first = UInt64(bigEndianBytes: value),
          let count = UInt64(bigEndianBytes: value[8...]),
          first < 1 || count < 1 || first + count - 1 > last
        {
          problem("an idempotency entry points to \(first)..<\(first + count), outside the log")
        }
        return true
      }
      for text in tree.problems { problem(text) }
      report.tree = tree.recomputed
      return report
    }
  }
}

extension EventLog {
  /// Finds what is wrong with the stream links, when the sums of ``StreamLinkHash`` say
  /// something is: each stream's versions run from 1 with every record pointing back to the
  /// stream's previous event, and its stored head is its last event. Returns the number of
  /// streams. A dictionary of every stream: slower than the sums, run only when they differ.
  func checkStreamLinks(_ txn: ReadTransaction, problem: (String) -> Void) throws -> Int {
    var heads: [String: StreamHead] = [:]
    heads.reserveCapacity(try txn.raw.count(dbs.streams))
    try txn.raw.forEachCheckedRecord(dbs.events, leafHashes: false) { position, outcome, _ in
      guard let position, case .success(let event) = outcome, !event.stream.isEmpty else {
        return
      }
      let head = heads[event.stream] ?? StreamHead(version: 0, last: 0)
      if event.streamVersion != head.version + 1 {
        problem(
          "event \(position) has version \(event.streamVersion) of '\(event.stream)', expected \(head.version + 1)"
        )
      }
      if event.previous != head.last {
        problem(
          "event \(position) points back to \(event.previous), but the previous event of '\(event.stream)' is \(head.last)"
        )
      }
      heads[event.stream] = StreamHead(version: head.version + 1, last: position)
    }
    let count = heads.count
    // The stored heads in key order, matched by name (a sequential walk, not a search per
    // stream); streams with hashed keys, and those without a stored head, are looked up.
    try txn.raw.forEachStreamHead(dbs.streams) { stream, stored, _ in
      guard let stream, let head = heads.removeValue(forKey: stream) else { return }
      if stored != head {
        problem(
          "the head of '\(stream)' is \(stored.map { "v\($0.version)@\($0.last)" } ?? "malformed"), the events say v\(head.version)@\(head.last)"
        )
      }
    }
    for (stream, head) in heads {
      let stored = try txn.raw.streamHead(dbs.streams, prefix: StreamKey.prefix(stream))
      if stored != head {
        problem(
          "the head of '\(stream)' is \(stored.map { "v\($0.version)@\($0.last)" } ?? "missing"), the events say v\(head.version)@\(head.last)"
        )
      }
    }
    return count
  }
}
