/// What ``EventLog/verify()`` found.
public struct VerificationReport: Sendable, Hashable, CustomStringConvertible {
  public var eventCount = 0
  public var streamCount = 0
  public var lastPosition = LogPosition.start
  /// Each problem found, in plain words; empty when the log is sound.
  public var problems: [String] = []

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
  /// decodes and matches its checksum, timestamps never decrease, every event with a stream has
  /// exactly its index entry with stream versions dense from 1, and every idempotency entry points
  /// into the log.
  public func verify(maxProblems: Int = 100) throws -> VerificationReport {
    try read { txn in
      var report = VerificationReport()
      func problem(_ text: String) {
        if report.problems.count < maxProblems { report.problems.append(text) }
      }
      var expected: UInt64 = 1
      var lastTimestamp = Int64.min
      var versions: [String: UInt64] = [:]
      var indexed = 0
      try txn.raw.forEachRecord(dbs.events) { key, outcome in
        guard key.count == 8, let position = UInt64(bigEndianBytes: key) else {
          problem("an event key is \(key.count) bytes, not 8")
          return
        }
        if position != expected { problem("position \(expected) is missing (next is \(position))") }
        expected = position + 1
        report.eventCount += 1
        report.lastPosition = LogPosition(position)
        switch outcome {
        case .failure(let failure):
          problem("event \(position) is corrupt: \(failure.reason)")
        case .success(let event):
          if event.timestampMicroseconds < lastTimestamp { problem("event \(position) is older than the one before") }
          lastTimestamp = event.timestampMicroseconds
          guard !event.stream.isEmpty else {
            if event.streamVersion != 0 { problem("event \(position) has no stream but version \(event.streamVersion)") }
            return
          }
          let version = (versions[event.stream] ?? 0) + 1
          versions[event.stream] = version
          if event.streamVersion != version {
            problem("event \(position) has version \(event.streamVersion) of '\(event.stream)', expected \(version)")
          }
          let indexKey = StreamKey.key(prefix: StreamKey.prefix(event.stream), version: event.streamVersion)
          if try txn.raw.get(dbs.streams, indexKey) != position.bigEndianBytes {
            problem("the stream index does not point to event \(position) for '\(event.stream)' v\(event.streamVersion)")
          } else {
            indexed += 1
          }
        }
      }
      report.streamCount = versions.count
      let entries = try txn.raw.count(dbs.streams)
      if entries != indexed { problem("the stream index has \(entries) entries for \(indexed) indexed events") }
      let last = report.lastPosition.rawValue
      try txn.raw.scan(dbs.idempotency, from: nil, reverse: false) { key, value in
        if value.count != 16 {
          problem("an idempotency entry is \(value.count) bytes, not 16")
        } else if let first = UInt64(bigEndianBytes: value), let count = UInt64(bigEndianBytes: value[8...]),
          first < 1 || count < 1 || first + count - 1 > last
        {
          problem("an idempotency entry points to \(first)..<\(first + count), outside the log")
        }
        return true
      }
      return report
    }
  }
}
