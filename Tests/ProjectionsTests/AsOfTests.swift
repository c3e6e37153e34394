import Foundation
import JSON
import Log
import Projections
import Query
import RevTree
import StoreTestSupport
import TestSupport
import Testing
import Wiki

/// The reads an as-of view and a store share, so that one description covers both.
protocol StoreReading {
  func get(_ id: String, options: GetOptions) throws -> JSONValue
  func openRevs(_ id: String, _ which: OpenRevs, options: GetOptions) throws -> [JSONValue]
  func allDocs(_ options: AllDocsOptions) throws -> AllDocsResult
  var info: DatabaseInfo { get throws }
  func changes(_ options: ChangesOptions) throws -> ChangesResult
  func getLocal(_ id: String) throws -> JSONValue
  func revsDiff(_ request: [(id: String, revs: [String])]) throws -> [(id: String, diff: RevsDiff)]
  func history(of id: String) throws -> [RevisionHistoryEntry]
}

extension DocumentStore: StoreReading {}
extension AsOfView: StoreReading {}

private let users = ["ann", "bob", "cy"]
private let wikiIDs = ["w0", "w1", "w2"]
private let titles = ["Home", "Set up", "Über"]
private let plainIDs = (0..<12).map { "doc\($0)" }
private let localIDs = ["cp0", "cp1"]
private var pageIDs: [String] { wikiIDs.flatMap { w in titles.map { "\(w):\($0)" } } }
private var allIDs: [String] { wikiIDs + pageIDs + plainIDs + ["missing"] }

private func text(_ v: JSONValue) -> String { String(decoding: v.serialized(), as: UTF8.self) }

/// Everything a reader answers about the workload's documents, as lines; `times` false blanks
/// commit times (a copied log has new ones).
private func describe(
  _ r: some StoreReading, wiki: WikiQueries, drafts: (String) throws -> [Draft], times: Bool
) throws -> [String] {
  var out: [String] = []
  let info = try r.info
  out.append("info \(info.docCount) \(info.deletedDocCount) \(info.updateSeq) \(info.revsLimit)")
  let full = GetOptions(
    revs: true, revsInfo: true, conflicts: true, deletedConflicts: true, localSeq: true)
  for id in allIDs {
    do { out.append("get \(id) " + text(try r.get(id, options: full))) } catch {
      out.append("get \(id) \(error)")
    }
    out.append(
      "open \(id) " + (try r.openRevs(id, .all, options: GetOptions(revs: true))).map(text).joined()
    )
    out.append("history \(id) \(try r.history(of: id).map { "\($0.seq) \($0.rev) \($0.actor)" })")
  }
  let diff = try r.revsDiff(allIDs.map { ($0, ["1-0000000000000000000000000000000a", "3-b"]) })
  out.append("revsDiff \(diff.map { "\($0.id) \($0.diff)" })")
  var all = AllDocsOptions()
  all.includeDocs = true
  all.conflicts = true
  out.append("allDocs " + text(try r.allDocs(all).json))
  all = AllDocsOptions()
  all.descending = true
  all.limit = 5
  all.startKey = "w1"
  out.append("allDocs desc " + text(try r.allDocs(all).json))
  var o = ChangesOptions()
  out.append("changes \(try r.changes(o))")
  o.style = .allDocs
  o.includeDocs = true
  o.conflicts = true
  out.append("changes all_docs \(try r.changes(o))")
  o = ChangesOptions()
  o.filter = .wiki("w1")
  o.since = 100
  out.append("changes wiki \(try r.changes(o))")
  o = ChangesOptions()
  o.history = true
  o.includeDocs = true
  var history = try r.changes(o)
  if !times {
    history.results = history.results.map {
      var row = $0
      row.timestampMicroseconds = nil
      return row
    }
  }
  out.append("history \(history)")
  for id in localIDs {
    do { out.append("local \(id) " + text(try r.getLocal(id))) } catch {
      out.append("local \(id) \(error)")
    }
  }
  // The wiki projection.
  out.append(
    "wikis \(try wiki.wikis().map { "\($0.id) \($0.rev) \($0.title) \($0.owner ?? "-") \($0.members) \($0.pageCount) \($0.lastUpdate) \(times ? $0.lastUpdateMicroseconds : 0)" })"
  )
  for w in wikiIDs {
    out.append("pages \(w) \(try wiki.pages(in: w))")
    out.append(
      "members \(w) \(try wiki.membershipHistory(of: w).map { "\($0.position) \($0.owner ?? "-") \($0.members) \(times ? $0.timestampMicroseconds : 0)" })"
    )
    for t in titles {
      out.append(
        "links \(w) \(t) \(try wiki.links(from: t, in: w)) \(try wiki.backlinks(to: t, in: w))")
    }
    for u in users { out.append("edit \(w) \(u) \(try wiki.canEdit(u, wiki: w))") }
  }
  for u in users {
    out.append(
      "drafts \(u) \(try drafts(u).map { "\($0.pageID) \($0.baseRev ?? "-") \($0.markdown) \($0.seq) \($0.autosaved) \(times ? $0.updatedMicroseconds : 0) \(times ? $0.createdMicroseconds : 0)" })"
    )
  }
  return out
}

/// A seeded mix of every kind of write: wikis, pages, plain documents, deletions, replicated
/// conflicts, `_local` documents, revs_limit changes and drafts.
private func runWorkload(_ s: DocumentStore, operations: Int, seed: UInt64) throws {
  var rng = SplitMix64(seed: seed)
  let drafts = try Drafts(s)
  func pick<T>(_ list: [T]) -> T { list[Int(rng.next() % UInt64(list.count))] }
  func rev(_ id: String) -> String? { (try? s.get(id))?[path: "_rev"]?.string }
  func markdown() -> String {
    (0..<Int(rng.next() % 4)).map { _ in "line \(rng.next() % 5) [[\(pick(titles))]]\n" }.joined()
  }
  func object(_ id: String, _ rev: String?, _ fields: KeyValuePairs<String, JSONValue>) -> String {
    var o = JSONObject([.init(key: "_id", value: .string(id))])
    if let rev { o["_rev"] = .string(rev) }
    for (k, v) in fields { o[k] = v }
    return text(.object(o))
  }
  for i in 0..<operations {
    switch rng.next() % 20 {
    case 0, 1:
      let id = pick(wikiIDs)
      let members = (0..<Int(rng.next() % 3)).map { _ in JSONValue.string(pick(users)) }
      _ = try? s.put(
        object(
          id, rev(id),
          [
            "type": .string("wiki"), "title": .string("Wiki \(i % 7)"),
            "owner_id": .string(pick(users)),
            "members": .array(members), "created_at": .string("2024-01-01T00:00:00Z"),
            "updated_at": .string("2024-01-02T00:00:00Z"),
          ]), actor: pick(users))
    case 2..<7:
      let id = pick(pageIDs)
      _ = try? s.put(
        object(
          id, rev(id),
          [
            "type": .string("page"), "wiki_id": .string(String(id.prefix { $0 != ":" })),
            "markdown": .string(markdown()), "updated_by": .string(pick(users)),
          ]), actor: pick(users))
    case 7..<10:
      let id = pick(plainIDs)
      _ = try? s.put(object(id, rev(id), ["n": .number(JSONNumber(Int64(i)))]), actor: "u")
    case 10:
      let id = pick(pageIDs + plainIDs + wikiIDs)
      if let r = rev(id) { _ = try? s.delete(id, rev: r, actor: pick(users)) }
    case 11, 12:
      let id = pick(pageIDs + plainIDs)
      let gen = 1 + Int(rng.next() % 4)
      let ids = (0..<gen).map { _ in String(format: "%032x", rng.next() % 3) }
      var doc = JSONObject([
        .init(key: "_id", value: .string(id)),
        .init(key: "_rev", value: .string("\(gen)-\(ids[0])")),
        .init(
          key: "_revisions",
          value: .object(
            JSONObject([
              "start": .number(JSONNumber(Int64(gen))), "ids": .array(ids.map { .string($0) }),
            ]))),
      ])
      if rng.next() % 5 == 0 { doc["_deleted"] = .bool(true) }
      if id.contains(":") {
        doc["type"] = .string("page")
        doc["wiki_id"] = .string(String(id.prefix { $0 != ":" }))
      }
      doc["markdown"] = .string(markdown())
      _ = try s.bulkDocs([.object(doc)], newEdits: false, actor: "peer", origin: "http://peer/db")
    case 13:
      let id = pick(localIDs)
      if rng.next() % 4 == 0 {
        _ = try? s.deleteLocal(id, rev: nil, actor: "replicator")
      } else {
        _ = try s.putLocal(id, Array(#"{"seq":\#(i)}"#.utf8), actor: "replicator")
      }
    case 14:
      try s.setRevsLimit(1 + Int(rng.next() % 5), actor: "admin")
    case 15, 16:
      let page = pick(pageIDs)
      _ = try? drafts.save(
        user: pick(users), page: page, baseRev: rev(page), markdown: markdown(),
        autosave: rng.next() % 2 == 0)
    case 17:
      let user = pick(users)
      if let d = try drafts.drafts(of: user).first {
        try drafts.discard(user: user, page: d.pageID)
      }
    default:
      let user = pick(users)
      if let d = try drafts.drafts(of: user).last {
        _ = try? drafts.publish(user: user, page: d.pageID)
      }
    }
  }
}

/// A store on a fresh log holding a copy of `source`'s events 1...n.
private func truncatedCopy(of source: DocumentStore, through n: LogPosition, at path: String)
  throws -> DocumentStore
{
  let log = try EventLog(directory: path, options: EventLog.Options(durability: .unsynced))
  let events = try source.log.read(from: 1, limit: Int(n.rawValue))
  if !events.isEmpty {
    try log.append(
      events.map {
        NewEvent(type: $0.type, stream: $0.stream, actor: $0.actor, payload: $0.payload)
      }
    )
  }
  return try DocumentStore(
    log: log, projections: [WikiProjection(), DraftProjection()], ownsLog: true,
    validation: .touchWiki)
}

@Suite struct AsOfTests {
  @Test(
    "as of every 500th seq, the view equals a store built from the log truncated there"
  )
  func matchesTruncatedLog() throws {
    let t = try TestStore(
      projections: [WikiProjection(), DraftProjection()], durability: .unsynced)
    let s = t.store!
    try runWorkload(s, operations: 2600, seed: 7)
    let last = s.position
    #expect(last.rawValue >= 2000)
    let liveBefore = try describe(
      s, wiki: WikiQueries(s), drafts: { try Drafts(s).drafts(of: $0) }, times: true)

    var n: UInt64 = 0
    while n <= last.rawValue {
      let view = try s.asOf(LogPosition(n))
      #expect(view.position.rawValue == n)
      let copyPath = t.path + "-copy\(n)"
      defer { try? FileManager.default.removeItem(atPath: copyPath) }
      let copy = try truncatedCopy(of: s, through: LogPosition(n), at: copyPath)
      let fromView = try describe(
        view, wiki: WikiQueries(view), drafts: view.drafts(of:), times: false)
      let fromCopy = try describe(
        copy, wiki: WikiQueries(copy), drafts: { try Drafts(copy).drafts(of: $0) }, times: false)
      #expect(fromView.count == fromCopy.count)
      for (a, b) in zip(fromView, fromCopy) where a != b {
        Issue.record("as of \(n):\n view: \(a)\n copy: \(b)")
        break
      }
      // Commit times are the original ones: history rows as the live log has them.
      var history = ChangesOptions()
      history.history = true
      let liveRows = try s.changes(history).results.filter { $0.seq.rawValue <= n }
      #expect(try view.changes(history).results == liveRows)
      for w in try WikiQueries(view).wikis() {
        #expect(
          w.lastUpdateMicroseconds == (try s.log.event(at: w.lastUpdate))?.timestampMicroseconds)
      }
      copy.close()
      view.close()
      n += 500
    }

    // As of the last position, the view is the live store, commit times included.
    let now = try s.asOf(last)
    #expect(
      try describe(now, wiki: WikiQueries(now), drafts: now.drafts(of:), times: true) == liveBefore)
    now.close()
    // Building views changed nothing live.
    #expect(s.position == last)
    for name in s.projectionNames { #expect(try s.verify(name).isEmpty) }
  }

  @Test("as of a time: every event committed at or before it")
  func asOfDate() throws {
    let t = try TestStore(projections: [WikiProjection()])
    let s = t.store!
    var times: [Date] = []
    for i in 0..<3 {
      try s.put(#"{"_id":"d\#(i)"}"#, actor: "u")
      times.append(try s.log.event(at: s.position)!.timestamp)
      Thread.sleep(forTimeInterval: 0.002)
    }
    let view = try s.asOf(times[1])
    #expect(view.position == 2)
    #expect(try view.info.docCount == 2)
    #expect(throws: StoreError.notFound("missing")) { _ = try view.get("d2") }
    view.close()
    #expect(try s.asOf(Date(timeIntervalSince1970: 0)).position == .start)
    #expect(try s.asOf(Date().addingTimeInterval(3600)).position == 3)
    let first = try s.asOf(times[0].addingTimeInterval(0.000_000_4))  // rounds to the same µs
    #expect(first.position == 1)
  }

  @Test("the empty view, a position past the end, and close removing the scratch directory")
  func edges() throws {
    let t = try TestStore(projections: [WikiProjection()])
    let s = t.store!
    let empty = try s.asOf(.start)
    #expect(try empty.info.docCount == 0 && empty.changes().results.isEmpty)
    #expect(try WikiQueries(empty).wikis().isEmpty)
    try s.put(#"{"_id":"a"}"#, actor: "u")
    #expect(try empty.info.docCount == 0)
    #expect(throws: StoreError.self) { try s.asOf(5) }

    let dir = t.path + "-views"
    try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(atPath: dir) }
    let view = try s.asOf(1, temporaryDirectory: dir)
    #expect(try FileManager.default.contentsOfDirectory(atPath: dir).count == 1)
    #expect(try view.get("a")[path: "_id"]?.string == "a")
    view.close()
    #expect(try FileManager.default.contentsOfDirectory(atPath: dir).isEmpty)
    let error = #expect(throws: StoreError.self) { _ = try view.get("a") }
    #expect(error?.code == .unavailable)
    // A view that is dropped removes its directory too.
    do { _ = try s.asOf(1, temporaryDirectory: dir) }
    #expect(try FileManager.default.contentsOfDirectory(atPath: dir).isEmpty)
  }
}
