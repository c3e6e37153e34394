import Foundation
import TestSupport
import Testing

@testable import Log

@Suite struct SubscriptionTests {
  @Test("a subscription catches up, signals it, then follows live appends")
  func catchUpThenLive() async throws {
    let dir = TemporaryDirectory()
    let log = try EventLog(directory: dir.path)
    try await log.append((1...100).map { event($0) })
    var iterator = log.subscribe(after: .start, batchSize: 7).makeAsyncIterator()
    for i in 1...100 {
      let item = try await iterator.next()
      guard case .event(let e) = item else {
        Issue.record("expected event \(i), got \(String(describing: item))")
        return
      }
      #expect(e.position == LogPosition(UInt64(i)))
    }
    #expect(try await iterator.next() == .caughtUp(100))
    let writer = Task {
      try await Task.sleep(for: .milliseconds(30))
      try await log.append([event(101), event(102)])
    }
    let live = try await iterator.next()
    guard case .event(let e) = live else {
      Issue.record("expected a live event")
      return
    }
    #expect(e.position == 101)
    guard case .event(let e2) = try await iterator.next() else {
      Issue.record("expected 102")
      return
    }
    #expect(e2.position == 102)
    try await writer.value
  }

  @Test(
    "headings: each event's position, type and stream as the events have them, erased ones too, then caught up, then live"
  )
  func headings() async throws {
    let dir = TemporaryDirectory()
    let log = try EventLog(directory: dir.path)
    try await log.append(
      (1...20).map { event($0, stream: "doc-\($0 % 3)", type: $0 % 2 == 0 ? "even" : "odd") })
    try await log.write { txn in
      let eraser = try txn.append(
        NewEvent(type: "erasure", stream: "", actor: "admin", payload: [])
      ).position
      try txn.erase(5, by: eraser)
    }
    let events = try log.read(after: .start)
    #expect(events.count == 21)
    #expect(
      try log.readHeadings(after: .start)
        == events.map { EventHeading(position: $0.position, type: $0.type, stream: $0.stream) })
    #expect(try log.readHeadings(after: 18, limit: 2).map(\.position) == [19, 20])
    var iterator = log.headings(after: 19, batchSize: 1).makeAsyncIterator()
    #expect(
      try await iterator.next()
        == .heading(EventHeading(position: 20, type: "even", stream: "doc-2")))
    #expect(
      try await iterator.next() == .heading(EventHeading(position: 21, type: "erasure", stream: ""))
    )
    #expect(try await iterator.next() == .caughtUp(21))
    let writer = Task { try await log.append([event(22, stream: "live")]) }
    #expect(
      try await iterator.next()
        == .heading(EventHeading(position: 22, type: "test", stream: "live")))
    try await writer.value
  }

  @Test("a subscription from a position skips what came before")
  func fromPosition() async throws {
    let dir = TemporaryDirectory()
    let log = try EventLog(directory: dir.path)
    try await log.append((1...10).map { event($0) })
    var positions: [LogPosition] = []
    for try await item in log.subscribe(after: 7) {
      if case .event(let e) = item { positions.append(e.position) } else { break }
    }
    #expect(positions == [8, 9, 10])
  }

  @Test("a cancelled subscription ends")
  func cancellation() async throws {
    let dir = TemporaryDirectory()
    let log = try EventLog(directory: dir.path)
    let (signals, signal) = AsyncStream.makeStream(of: Void.self)
    let task = Task {
      var count = 0
      for try await _ in log.subscribe() {
        count += 1
        signal.yield()
      }
      return count
    }
    // Cancelled once it has caught up and waits for appends.
    var waiting = signals.makeAsyncIterator()
    await waiting.next()
    task.cancel()
    #expect(try await task.value == 1)  // only the caught-up signal
  }

  @Test("many subscribers all see every event")
  func manySubscribers() async throws {
    let dir = TemporaryDirectory()
    let log = try EventLog(directory: dir.path)
    let tasks = (0..<20).map { _ in
      Task {
        var seen = 0
        for try await item in log.subscribe() {
          if case .event = item {
            seen += 1
            if seen == 50 { break }
          }
        }
        return seen
      }
    }
    for i in 0..<50 { _ = try await log.append([event(i)]) }
    for task in tasks { #expect(try await task.value == 50) }
  }

  @Test("a follower in another process sees appends within a second")
  func followerInAnotherProcess() throws {
    let dir = TemporaryDirectory()
    do {
      let log = try EventLog(directory: dir.path)
      try log.append([event(1)])
      log.close()
    }
    let follower = try startWorker(["follow", dir.path, "4"])
    defer { follower.kill() }
    #expect(follower.waitFor(timeout: 10) { $0.contains("caughtup 1") })
    let log = try EventLog(directory: dir.path)
    let start = Date()
    try log.append([event(2), event(3)])
    try log.append([event(4)])
    #expect(follower.waitFor(timeout: 5) { $0.contains("event 4") })
    #expect(Date().timeIntervalSince(start) < 1.0)
    follower.process.waitUntilExit()
    #expect(follower.process.terminationStatus == 0)
    #expect(
      follower.lines.filter { $0.hasPrefix("event") } == [
        "event 1", "event 2", "event 3", "event 4",
      ])
  }

  @Test(
    "another process's appends wake a waiter through the data file's watch, which goes once no one waits"
  )
  func watchedByTheKernel() async throws {
    let dir = TemporaryDirectory()
    let log = try EventLog(directory: dir.path)
    try await log.append([event(1)])
    var iterator = log.subscribe().makeAsyncIterator()
    _ = try await iterator.next()  // event 1
    #expect(try await iterator.next() == .caughtUp(1))
    let waiter = Task {
      var iterator = iterator
      return try await iterator.next()
    }
    // Waiting: the data file is watched; nothing polls.
    #expect(try await eventually(60) { log.notifier.isWatching })
    #expect(!log.notifier.isPollerRunning)
    let writer = try startWorker(["appendN", dir.path, "1"])
    #expect(writer.waitFor(timeout: 30) { $0.contains { $0.hasPrefix("done") } })
    guard case .event(let e) = try await waiter.value else {
      Issue.record("expected the other process's event")
      return
    }
    #expect(e.position == 2)
    // No one waits now: the next write drops the watch. (It may be gone already: one commit
    // writes the data file more than once, and a report after the waiter left drops it.)
    let second = try startWorker(["appendN", dir.path, "1"])
    #expect(second.waitFor(timeout: 30) { $0.contains { $0.hasPrefix("done") } })
    #expect(try await eventually(60) { !log.notifier.isWatching })
    #expect(!log.notifier.isPollerRunning)
    log.close()
  }
}
