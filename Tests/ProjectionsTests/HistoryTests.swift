import Foundation
import JSON
import Log
import Projections
import Query
import RevTree
import StoreTestSupport
import Testing
import Wiki

@Suite struct HistoryTests {
  @Test("history lists every revision with author, origin and the Markdown diff against its parent")
  func pageHistory() throws {
    let t = try TestStore()
    let s = t.store!
    let r1 = try s.put(#"{"_id":"w1:Home","markdown":"line one\nline two\n"}"#, actor: "alice")
    let r2 = try s.put(
      #"{"_id":"w1:Home","_rev":"\#(r1.rev!)","markdown":"line one\nline 2\nline three\n"}"#,
      actor: "bob")
    try s.setRevsLimit(1, actor: "admin")
    let r3 = try s.delete("w1:Home", rev: r2.rev!, actor: "carol")
    let history = try s.history(of: "w1:Home")
    #expect(history.map(\.actor) == ["alice", "bob", "carol"])
    #expect(history.map(\.rev) == [r1.rev!, r2.rev!, r3.rev!])
    #expect(history.map(\.parentRev) == [nil, r1.rev, r2.rev])
    #expect(history[1].insertions == 2 && history[1].deletions == 1)
    #expect(history[1].markdownDiff.contains("-line two\n+line 2\n+line three\n"))
    #expect(history[0].markdownDiff.hasPrefix("--- /dev/null\n+++ \(r1.rev!)\n"))
    // A deletion is a tombstone: listed, with no text and so no diff of its own.
    #expect(history[2].deleted && history[2].markdownDiff.isEmpty && history[2].deletions == 0)
    #expect(history.map(\.seq.rawValue) == history.map(\.seq.rawValue).sorted())
    #expect(try s.history(of: "nothing").isEmpty)
  }

  @Test("audit filters by wiki, user and time range")
  func audit() throws {
    let t = try TestStore()
    let s = t.store!
    try s.put(
      #"{"_id":"w1","type":"wiki","title":"One","owner_id":"alice","members":[]}"#, actor: "alice")
    try s.put(#"{"_id":"w1:A","markdown":"a"}"#, actor: "bob")
    Thread.sleep(forTimeInterval: 0.02)
    let middle = Date()
    Thread.sleep(forTimeInterval: 0.02)
    try s.put(#"{"_id":"w2:B","markdown":"b"}"#, actor: "bob")
    try s.putLocal("cp", Array("{}".utf8), actor: "replicator")
    #expect(try s.audit(AuditQuery(filter: .wiki("w1"))).map(\.docID) == ["w1", "w1:A"])
    #expect(try s.audit(AuditQuery(actor: "bob")).map(\.docID) == ["w1:A", "w2:B"])
    #expect(try s.audit(AuditQuery(from: middle)).map(\.docID) == ["w2:B", "_local/cp"])
    #expect(try s.audit(AuditQuery(until: middle)).map(\.docID) == ["w1", "w1:A"])
    #expect(try s.audit(AuditQuery(limit: 1)).count == 1)
    #expect(try s.audit(AuditQuery(from: Date().addingTimeInterval(60))).isEmpty)
  }
}
