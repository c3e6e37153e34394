import Foundation
import JSON
import Projections
import TestSupport
import Testing

@testable import Log

/// Another process grows the map (a server writing) while this one has the database open, as
/// `wikilog get` beside a busy `wikilog serve`: this process adopts the new size wherever LMDB
/// answers `MDB_MAP_RESIZED`, never failing with it.
@Suite struct MapResizeTests {
  @Test("a reader opened before another process grew the map adopts its size")
  func readerAdoptsGrownMap() throws {
    let path = NSTemporaryDirectory() + "wikilog-mapresize-\(UUID().uuidString)"
    defer { try? FileManager.default.removeItem(atPath: path) }
    var options = EventLog.Options()
    options.mapSize = 1 << 20
    do {
      let store = try DocumentStore(directory: path, options: options)
      try store.put(#"{"a":1}"#, id: "a", actor: "test")
      store.close()
    }
    var readOnly = EventLog.Options()
    readOnly.readOnly = true
    readOnly.mapSize = 1 << 20  // the size the file has now: the worker grows past it
    let log = try EventLog(directory: path, options: readOnly)
    defer { log.close() }
    let mapBefore = try FileManager.default.attributesOfItem(atPath: path + "/data.mdb")[.size]
    let worker = try ChildProcess(
      ChildProcess.besideTests("ProjectionsTestWorker"), ["grow", path, "6144"])
    #expect(worker.waitFor(timeout: 120) { $0.contains { $0.hasPrefix("grown") } })
    let mapAfter = try FileManager.default.attributesOfItem(atPath: path + "/data.mdb")[.size]
    #expect(mapAfter as? Int ?? 0 > mapBefore as? Int ?? 0)
    // The first look at a database after the growth: MDB_MAP_RESIZED, adopted.
    let handle = try log.database(named: "docs.byId")
    let count = try log.read { txn in try txn.count(of: handle) }
    #expect(count > 100)
  }
}

/// What a live writer in another process tells an open: the file is its own while it runs.
@Suite struct LiveWriterRecordTests {
  @Test(
    "an open beside a writer in another process walks nothing while it runs; after the writer is killed, the next open walks"
  )
  func besideALiveWriter() throws {
    let path = NSTemporaryDirectory() + "wikilog-livewriter-\(UUID().uuidString)"
    defer { try? FileManager.default.removeItem(atPath: path) }
    let worker = try ChildProcess(
      ChildProcess.besideTests("ProjectionsTestWorker"), ["write", path, "synced"])
    #expect(worker.waitFor(timeout: 30) { $0.filter { $0.hasPrefix("ack") }.count > 50 })
    var readOnly = EventLog.Options()
    readOnly.readOnly = true
    // The worker has written since its open: only the record naming it, running, spares the walk.
    let beside = try EventLog(directory: path, options: readOnly)
    #expect(!beside.walkedPagesAtOpen)
    beside.close()
    worker.kill()
    let after = try EventLog(directory: path, options: readOnly)
    #expect(after.walkedPagesAtOpen)
    after.close()
  }
}
