// A child process for LogTests: appends until killed, or follows a log, printing what it sees.
//
//   LogTestWorker append DIR synced|group|unsynced
//       appends one event at a time (group: 8 concurrent appenders) and prints
//       "ack POSITION N" once each append has returned, i.e. is durable.
//   LogTestWorker appendN DIR COUNT
//       appends COUNT events, one transaction each, prints "done POSITION" and exits.
//   LogTestWorker follow DIR COUNT
//       subscribes from the start and prints "event POSITION" for each event, "caughtup
//       POSITION" when live, and exits after COUNT events.
//   LogTestWorker readAll DIR
//       opens the log and reads it every way a damaged file could be read: every event forwards
//       and backwards, streams s0...s9, verify, then one append. Prints "refused REASON" when
//       the open refuses the file as damaged, else "verify ok" or "verify N problem(s): FIRST";
//       exits 0 either way (a damaged file must not make it die of a signal).
import Foundation
import Log
import Synchronization

/// The payload of the n-th event: its number, then a pattern derived from it, so that a reader
/// can tell a whole payload from a torn one.
func payload(_ n: Int) -> [UInt8] {
  var bytes = Array("n=\(n);".utf8)
  for i in 0..<(64 + n % 200) { bytes.append(UInt8(truncatingIfNeeded: n &* 31 &+ i)) }
  return bytes
}

let output = Mutex<Void>(())
func emit(_ line: String) {
  output.withLock { _ in
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
  }
}

func fail(_ message: String) -> Never {
  FileHandle.standardError.write(Data(("LogTestWorker: " + message + "\n").utf8))
  exit(1)
}

final class Counter: Sendable {
  let value: Mutex<Int>
  init(_ start: Int) { value = Mutex(start) }
  func next() -> Int {
    value.withLock {
      $0 += 1
      return $0
    }
  }
}

/// Eight tasks appending at once, so that group commit combines them.
func appendConcurrently(_ log: EventLog, from start: Int) async {
  let counter = Counter(start)
  await withTaskGroup(of: Void.self) { group in
    for writer in 0..<8 {
      group.addTask {
        while true {
          let n = counter.next()
          let event = NewEvent(
            type: "test.appended", stream: "writer-\(writer)", actor: "worker", payload: payload(n))
          do {
            let recorded = try await log.append([event])
            emit("ack \(recorded[0].position) \(n)")
          } catch {
            fail("append failed: \(error)")
          }
        }
      }
    }
  }
}

let args = CommandLine.arguments
guard args.count >= 3 else { fail("usage: LogTestWorker append|follow DIR ...") }
let directory = args[2]

switch args[1] {
case "append":
  let mode = args.count > 3 ? args[3] : "synced"
  var options = EventLog.Options()
  options.mapSize = 1 << 20  // small, so that crashes also land during map growth
  options.durability = mode == "group" ? .groupCommit : mode == "unsynced" ? .unsynced : .synced
  let log: EventLog
  do { log = try EventLog(directory: directory, options: options) } catch { fail("\(error)") }
  let start = Int((try? log.committedPosition.rawValue) ?? 0)
  if mode == "group" {
    await appendConcurrently(log, from: start)
  } else {
    var n = start
    while true {
      n += 1
      let batch = (0..<(1 + n % 3)).map { i in
        NewEvent(
          type: "test.appended", stream: "stream-\((n + i) % 5)", actor: "worker",
          payload: payload(n * 10 + i))
      }
      do {
        let recorded = try log.append(batch)
        for (i, event) in recorded.enumerated() { emit("ack \(event.position) \(n * 10 + i)") }
      } catch {
        fail("append failed: \(error)")
      }
    }
  }

case "appendN":
  guard args.count >= 4, let count = Int(args[3]) else {
    fail("usage: LogTestWorker appendN DIR COUNT")
  }
  let log: EventLog
  do { log = try EventLog(directory: directory) } catch { fail("\(error)") }
  var last = LogPosition.start
  for n in 0..<count {
    do {
      last = try log.append([
        NewEvent(type: "test.appended", stream: "other", actor: "worker", payload: payload(n))
      ])[0].position
    } catch {
      fail("append failed: \(error)")
    }
  }
  emit("done \(last)")
  exit(0)

case "follow":
  guard args.count >= 4, let count = Int(args[3]) else {
    fail("usage: LogTestWorker follow DIR COUNT")
  }
  var options = EventLog.Options()
  options.pollInterval = .milliseconds(20)
  let log: EventLog
  do { log = try EventLog(directory: directory, options: options) } catch { fail("\(error)") }
  var seen = 0
  do {
    for try await item in log.subscribe(after: .start) {
      switch item {
      case .event(let event):
        emit("event \(event.position)")
        seen += 1
        if seen >= count { exit(0) }
      case .caughtUp(let position):
        emit("caughtup \(position)")
      }
    }
  } catch {
    fail("subscription failed: \(error)")
  }

case "readAll":
  let log: EventLog
  do {
    log = try EventLog(directory: directory)
  } catch LogError.damaged(_, let reason) {
    emit("refused \(reason)")
    exit(0)
  } catch {
    fail("\(error)")
  }
  // A damaged record is an error here; what matters is that reading it is one.
  _ = try? log.read(from: 1)
  _ = try? log.read(from: (try? log.committedPosition) ?? .start, direction: .backward)
  for stream in 0..<10 { _ = try? log.read(stream: "s\(stream)") }
  do {
    let report = try log.verify()
    emit(
      report.isValid
        ? "verify ok" : "verify \(report.problems.count) problem(s): \(report.problems[0])")
  } catch {
    emit("verify failed: \(error)")
  }
  _ = try? log.append([
    NewEvent(type: "test.appended", stream: "s1", actor: "worker", payload: payload(0))
  ])
  log.close()
  exit(0)

default:
  fail("unknown command \(args[1])")
}
