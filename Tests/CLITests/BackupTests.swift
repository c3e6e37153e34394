import Foundation
import TestSupport
import Testing

/// `wikilog backup` and `restore`: a consistent copy taken while a server writes, checked with
/// `verify`, brought back with its attachments.
@Suite struct BackupTests {
  @Test("backup beside a running server, verify the copy, restore it after a loss")
  func backupAndRestore() throws {
    let cli = try CLI()
    try cli.put(#"{"_id":"a","n":1}"#)
    let file = cli.path + "/note.txt"
    try "attached bytes\n".write(toFile: file, atomically: true, encoding: .utf8)
    try cli.ok(["attach", "b", "note.txt", file, "--type", "text/plain"])
    let (server, base) = try ChildProcess.serve(cli.path)
    defer { server.kill() }
    _ = base
    let destination = cli.path + "-backup"
    defer { try? FileManager.default.removeItem(atPath: destination) }
    let backedUp = try cli.ok(["backup", destination])
    #expect(backedUp.stdout.contains("backed up wiki into \(destination)"))
    // A second backup into the same place is refused, nothing changed.
    try cli.fails(["backup", destination], "exists already")
    #expect(
      try cli.ok(["verify", "--db", destination, "-d", "wiki"]).stdout.contains("attachments: ok"))
    server.kill()

    // The database is lost; the backup brings it back, attachments included.
    try FileManager.default.removeItem(atPath: cli.path + "/wiki")
    try cli.ok(["restore", destination])
    #expect(try cli.ok(["get", "a"]).object()["n"] as? Int == 1)
    let bytes = try cli.ok(["get", "b", "--attachment", "note.txt"]).stdout
    #expect(bytes == "attached bytes\n")
    #expect(try cli.ok(["verify"]).stdout.contains("attachments: ok"))
    // Restoring over an existing database is refused.
    try cli.fails(["restore", destination], "exists here")
    // A damaged backup is refused before anything is copied.
    let copy = destination + "/wiki/data.mdb"
    let handle = try #require(FileHandle(forUpdatingAtPath: copy))
    let size = try handle.seekToEnd()
    try handle.truncate(atOffset: size / 2)
    try handle.close()
    try FileManager.default.removeItem(atPath: cli.path + "/wiki")
    try cli.fails(["restore", destination], "damaged")
    #expect(!FileManager.default.fileExists(atPath: cli.path + "/wiki"))
  }
}
