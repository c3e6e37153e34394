import Foundation
import JSON
import Log
import Projections
import TestSupport
import Testing

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
