import Foundation
import JSON
import Log
import Projections
import Query
import StoreTestSupport
import Testing

/// CouchDB views on the store: JavaScript map and reduce functions run by the query server
/// (`wikilog query-server`, SpiderMonkey), kept behind the log, queried with CouchDB's options. Expected answers follow
/// CouchDB 3.4's documentation and what a CouchDB 3.4.3 answered for the same documents.
@Suite struct ViewTests {
  func store(_ name: String = #function) throws -> TestStore {
    try TestStore(name)
  }

  func put(_ store: DocumentStore, _ id: String, _ body: String) throws -> String {
    try store.put(body, id: id, actor: "test").rev ?? ""
  }

  func query(
    _ store: DocumentStore, _ view: String, _ parameters: [(String, String)] = [],
    ddoc: String = "_design/d"
  ) throws -> JSONValue {
    try ViewQueries(store).query(ddoc: ddoc, view: view, query: ViewQuery(parameters: parameters))
      .json
  }

  func rows(_ answer: JSONValue) -> [JSONValue] { answer["rows"]?.arrayValue ?? [] }
  func keys(_ answer: JSONValue) -> [JSONValue] { rows(answer).map { $0["key"] ?? .null } }
  func ids(_ answer: JSONValue) -> [String] {
    rows(answer).compactMap { $0["id"]?.stringValue }
  }
  func values(_ answer: JSONValue) -> [JSONValue] { rows(answer).map { $0["value"] ?? .null } }

  /// Ten documents `d0`…`d9` with `n` = i and `g` = i % 3, and a design document of views.
  func sample(_ t: TestStore) throws {
    for i in 0..<10 {
      _ = try put(t.store, "d\(i)", #"{"n":\#(i),"g":\#(i % 3),"tags":["t\#(i % 2)","all"]}"#)
    }
    _ = try put(
      t.store, "_design/d",
      #"""
      {"views": {
        "n": {"map": "function(doc) { emit(doc.n, doc.g) }", "reduce": "_sum"},
        "g": {"map": "(doc) => { emit([doc.g, doc.n], 1) }", "reduce": "_count"},
        "st": {"map": "function(doc) { emit(doc.g, doc.n) }", "reduce": "_stats"},
        "js": {"map": "function(doc) { emit(doc.g, doc.n) }",
               "reduce": "function(keys, values, rereduce) { return sum(values) }"},
        "tags": {"map": "function(doc) { for (const t of doc.tags || []) emit(t, null) }"},
        "link": {"map": "function(doc) { if (doc.n === 3) emit('linked', {_id: 'd7'}) }"}
      }}
      """#)
  }

  @Test("key ranges, inclusive_end, descending, limit, skip, keys and doc-id bounds")
  func mapOptions() throws {
    let t = try store()
    try sample(t)
    let s = t.store!
    let all = try query(s, "n", [("reduce", "false")])
    #expect(all["total_rows"] == .int(10) && all["offset"] == .int(0))
    #expect(keys(all) == (0..<10).map { .int($0) })
    let range = try query(s, "n", [("reduce", "false"), ("startkey", "3"), ("endkey", "6")])
    #expect(keys(range) == [3, 4, 5, 6].map { .int($0) })
    #expect(range["offset"] == .int(3))
    let open = try query(
      s, "n", [("reduce", "false"), ("startkey", "3"), ("endkey", "6"), ("inclusive_end", "false")])
    #expect(keys(open) == [3, 4, 5].map { .int($0) })
    let down = try query(
      s, "n",
      [
        ("reduce", "false"), ("descending", "true"), ("startkey", "6"), ("endkey", "3"),
        ("limit", "2"), ("skip", "1"),
      ])
    #expect(keys(down) == [5, 4].map { .int($0) })
    #expect(down["offset"] == .int(4))
    let picked = try query(s, "n", [("reduce", "false"), ("keys", "[7,1,42]")])
    #expect(ids(picked) == ["d7", "d1"])
    let tags = try query(
      s, "tags", [("key", #""all""#), ("startkey_docid", "d3"), ("endkey_docid", "d5")])
    #expect(ids(tags) == ["d3", "d4", "d5"])
    let none = try query(s, "n", [("reduce", "false"), ("limit", "0")])
    #expect(rows(none).isEmpty && none["total_rows"] == .int(10))
    // A range that cannot match, as CouchDB refuses it.
    #expect(throws: StoreError.self) {
      try query(s, "n", [("reduce", "false"), ("startkey", "6"), ("endkey", "3")])
    }
  }

  @Test("include_docs with linked documents and conflicts")
  func includeDocs() throws {
    let t = try store()
    try sample(t)
    let s = t.store!
    let linked = try query(s, "link", [("include_docs", "true")])
    #expect(rows(linked).first?["id"] == .string("d3"))
    #expect(rows(linked).first?["doc"]?["_id"] == .string("d7"))
    _ = try s.bulkDocs(
      [json(#"{"_id":"d1","_rev":"1-0000000000000000000000000000000a","n":100,"g":0}"#)],
      newEdits: false, actor: "peer")
    let one = try query(
      s, "n", [("reduce", "false"), ("key", "1"), ("include_docs", "true"), ("conflicts", "true")])
    #expect(rows(one).first?["doc"]?["_conflicts"]?.arrayValue?.count == 1)
  }

  @Test("group_level: a key exactly as long as the level is in its group, not a group of its own")
  func groupLevelWithShortKeys() throws {
    let t = try store()
    let s = t.store!
    // CouchDB 3.4.3 answers group_level=2 over these keys with one row, [1,2] → 4.
    for (i, key) in ["[1,2]", "[1,2]", "[1,2,3]", "[1,2,4]", "[1]", "[1,3,1]"].enumerated() {
      _ = try put(s, "k\(i)", #"{"key":\#(key)}"#)
    }
    _ = try put(
      s, "_design/g",
      #"{"views":{"k":{"map":"function (doc) { if (doc.key) emit(doc.key, 1) }","reduce":"_count"}}}"#
    )
    let two = try query(s, "k", [("group_level", "2")], ddoc: "_design/g")
    #expect(keys(two) == [json("[1]"), json("[1,2]"), json("[1,3]")])
    #expect(values(two) == [.int(1), .int(4), .int(1)])
    let one = try query(s, "k", [("group_level", "1")], ddoc: "_design/g")
    #expect(keys(one) == [json("[1]")] && values(one) == [.int(6)])
    let backwards = try query(
      s, "k", [("group_level", "2"), ("descending", "true")], ddoc: "_design/g")
    #expect(values(backwards) == [.int(1), .int(4), .int(1)])
  }

  @Test("a built-in reduce's name with text after it is that built-in, as in CouchDB")
  func builtInReducePrefix() throws {
    let t = try store()
    let s = t.store!
    for i in 1...4 { _ = try put(s, "n\(i)", #"{"n":\#(i)}"#) }
    _ = try put(
      s, "_design/p",
      #"{"views":{"s":{"map":"function (doc) { emit(null, doc.n) }","reduce":"_sumorama"},"c":{"map":"function (doc) { emit(null, doc.n) }","reduce":"_count_them"}}}"#
    )
    #expect(values(try query(s, "s", ddoc: "_design/p")) == [.int(10)])
    #expect(values(try query(s, "c", ddoc: "_design/p")) == [.int(4)])
  }

  @Test("built-in reduces, grouping, and a JavaScript reduce over several chunks")
  func reduces() throws {
    let t = try store()
    try sample(t)
    let s = t.store!
    #expect(values(try query(s, "n")) == [.int(9)])  // sum of n % 3 over 0…9
    #expect(values(try query(s, "g")) == [.int(10)])
    let levels = try query(s, "g", [("group_level", "1")])
    #expect(keys(levels) == [json("[0]"), json("[1]"), json("[2]")])
    #expect(values(levels) == [.int(4), .int(3), .int(3)])
    let exact = try query(s, "g", [("group", "true"), ("limit", "2")])
    #expect(keys(exact) == [json("[0,0]"), json("[0,3]")])
    let stats = try query(s, "st", [("group", "true")])
    #expect(
      rows(stats).first?["value"]
        == json(#"{"sum":18,"count":4,"min":0,"max":9,"sumsqr":126}"#))
    #expect(values(try query(s, "js", [("group", "true")])) == [.int(18), .int(12), .int(15)])
    // More rows than one reduce call takes: reduced in chunks, then rereduced.
    for i in 10..<1_200 { _ = try put(s, "d\(i)", #"{"n":\#(i),"g":\#(i % 3)}"#) }
    let total = (0..<1_200).reduce(0, +)
    #expect(values(try query(s, "js")) == [.int(total)])
    #expect(values(try query(s, "st"))[0]["sum"] == .int(total))
    #expect(throws: StoreError.self) { try query(s, "tags", [("reduce", "true")]) }
    #expect(throws: StoreError.self) { try query(s, "n", [("include_docs", "true")]) }
    #expect(throws: StoreError.self) { try query(s, "n", [("keys", "[1,2]")]) }
  }

  @Test("JavaScript reductions kept per bucket hold only for the rows they were made from")
  func keptReductions() throws {
    let t = try store()
    let s = t.store!
    var docs: [JSONValue] = []
    for i in 0..<4_000 { docs.append(json(#"{"_id":"r\#(i)","g":\#(i % 4),"v":\#(i)}"#)) }
    _ = try s.bulkDocs(docs, actor: "test")
    _ = try put(
      s, "_design/d",
      #"{"views":{"js":{"map":"function(doc){ emit([doc.g, doc.v], doc.v) }","reduce":"function(k, v, re) { return sum(v) }"}}}"#
    )
    func expected(_ numbers: [Int]) -> [JSONValue] {
      (0..<4).map { g -> JSONValue in
        .int(numbers.enumerated().filter { $0.offset % 4 == g }.map(\.element).reduce(0, +))
      }
    }
    var numbers = Array(0..<4_000)
    #expect(values(try query(s, "js", [("group_level", "1")])) == expected(numbers))
    let group = try ViewQueries(s).designViews("_design/d")
    let follower = try ViewQueries(s).index(group).follower
    let kept = try follower.read { try $0.count(of: follower.storage["reductions"]) }
    #expect(kept > 0)
    // Edits change some buckets: their kept reductions no longer count.
    var changes: [JSONValue] = []
    for i in stride(from: 0, to: 4_000, by: 97) {
      let rev = try s.get("r\(i)")["_rev"]!.stringValue!
      changes.append(json(#"{"_id":"r\#(i)","_rev":"\#(rev)","g":\#(i % 4),"v":\#(i * 3)}"#))
      numbers[i] = i * 3
    }
    _ = try s.bulkDocs(changes, actor: "test")
    #expect(values(try query(s, "js", [("group_level", "1")])) == expected(numbers))
    #expect(values(try query(s, "js")) == [.int(numbers.reduce(0, +))])
    #expect(try s.verify(group.indexName).isEmpty)
  }

  @Test("the index follows edits, deletions and replicated revisions, winners only")
  func incremental() throws {
    let t = try store()
    try sample(t)
    let s = t.store!
    #expect(ids(try query(s, "n", [("reduce", "false"), ("key", "4")])) == ["d4"])
    let rev4 = try s.get("d4")["_rev"]!.stringValue!
    _ = try s.put(#"{"n":40,"g":1}"#, id: "d4", rev: rev4, actor: "test")
    #expect(ids(try query(s, "n", [("reduce", "false"), ("key", "4")])).isEmpty)
    #expect(ids(try query(s, "n", [("reduce", "false"), ("key", "40")])) == ["d4"])
    let rev5 = try s.get("d5")["_rev"]!.stringValue!
    _ = try s.delete("d5", rev: rev5, actor: "test")
    let after = try query(s, "n", [("reduce", "false")])
    #expect(after["total_rows"] == .int(9) && !ids(after).contains("d5"))
    // A replicated branch that loses changes nothing; one that wins replaces the rows.
    _ = try s.bulkDocs(
      [json(#"{"_id":"d6","_rev":"1-00000000000000000000000000000001","n":600,"g":0}"#)],
      newEdits: false, actor: "peer")
    #expect(ids(try query(s, "n", [("reduce", "false"), ("key", "6")])) == ["d6"])
    _ = try s.bulkDocs(
      [json(#"{"_id":"d6","_rev":"9-ffffffffffffffffffffffffffffffff","n":6000,"g":0}"#)],
      newEdits: false, actor: "peer")
    #expect(ids(try query(s, "n", [("reduce", "false"), ("key", "6")])).isEmpty)
    #expect(ids(try query(s, "n", [("reduce", "false"), ("key", "6000")])) == ["d6"])
    // The sum of `g`: 9, less d5's 2 (deleted); d4 and d6 kept theirs.
    #expect(values(try query(s, "n")) == [.int(7)])
    // The index rebuilt from the documents agrees with the one kept up.
    let group = try ViewQueries(s).designViews("_design/d")
    #expect(try s.verify(group.indexName).isEmpty)
  }

  @Test("keys collate as CouchDB: null, booleans, numbers, strings by ICU, arrays, objects")
  func collation() throws {
    let t = try store()
    let s = t.store!
    // CouchDB's documented order ("Views Collation"), and ICU's for strings.
    let ordered = [
      "null", "false", "true", "1", "2", "3", "4", #""a""#, #""A""#, #""aa""#, #""b""#,
      #""B""#, #""ba""#, #""bb""#, #"["a"]"#, #"["b"]"#, #"["b","c"]"#, #"["b","c","a"]"#,
      #"["b","d"]"#, #"["b","d","e"]"#, #"{"a":1}"#, #"{"a":2}"#, #"{"b":1}"#, #"{"b":2}"#,
      #"{"b":2,"a":1}"#, #"{"b":2,"c":2}"#,
    ]
    let strings = [
      #""_""#, #""-""#, #"",""#, #"";""#, #"":""#, #""!""#, #""?""#, #"".""#, #""'""#,
      #""(""#, #"")""#, #""[""#, #""]""#, #""{""#, #""}""#, #""@""#, #""*""#, #""/""#,
      #""&""#, ##""#""##, #""%""#, #""`""#, #""^""#, #""+""#, #""<""#, #""=""#, #"">""#,
      #""|""#, #""~""#, #""$""#, #""0""#, #""1""#, #""9""#, #""a""#, #""A""#, #""á""#,
      #""b""#, #""B""#, #""é""#, #""z""#, #""Z""#,
    ]
    for (i, key) in (ordered + strings).enumerated().reversed() {
      _ = try put(s, "k\(1000 + i)", #"{"k":\#(key)}"#)
    }
    _ = try put(s, "_design/d", #"{"views":{"k":{"map":"function(doc){ emit(doc.k, null) }"}}}"#)
    let got = keys(try query(s, "k", [("endkey", #""""#), ("inclusive_end", "false")]))
    #expect(got == ordered.prefix(7).map(json))
    let strs = keys(
      try query(s, "k", [("startkey", #""""#), ("endkey", "[]"), ("inclusive_end", "false")]))
    // What CouchDB 3.4.3 answered for the same keys.
    let couch = [
      "_", "-", ",", ";", ":", "!", "?", ".", "'", "(", ")", "[", "]", "{", "}", "@", "*", "/",
      "&", "#", "%", "`", "^", "+", "<", "=", ">", "|", "~", "$", "0", "1", "9", "a", "a", "A",
      "A", "á", "aa", "b", "b", "B", "B", "ba", "bb", "é", "z", "Z",
    ]
    #expect(strs.compactMap(\.stringValue) == couch)
    let tail = keys(try query(s, "k", [("startkey", "[]")]))
    #expect(tail == ordered[14...].map(json))
  }

  @Test(
    "rows of equal keys are ordered by their doc ids' bytes, as CouchDB orders them, not by collation; doc-id bounds too"
  )
  func equalKeysByRawDocID() throws {
    let t = try store()
    let s = t.store!
    for id in ["alpha:1", "ALPHA:1", "coll-~", "coll-072", "b", "é"] {
      _ = try put(s, id, #"{"k":1}"#)
    }
    _ = try put(
      s, "_design/eq", #"{"views":{"v":{"map":"function(doc) { if (doc.k) emit(doc.k, null) }"}}}"#)
    // CouchDB 3.4.3's order of the same ids under one key (raw bytes: upper case first, "~"
    // after digits, non-ASCII last).
    let all = try query(s, "v", [], ddoc: "_design/eq")
    #expect(ids(all) == ["ALPHA:1", "alpha:1", "b", "coll-072", "coll-~", "é"])
    let from = try query(s, "v", [("startkey", "1"), ("startkey_docid", "b")], ddoc: "_design/eq")
    #expect(ids(from) == ["b", "coll-072", "coll-~", "é"])
    let between = try query(
      s, "v", [("key", "1"), ("startkey_docid", "a"), ("endkey_docid", "coll-z")],
      ddoc: "_design/eq")
    #expect(ids(between) == ["alpha:1", "b", "coll-072"])
  }

  @Test(
    "_sum over a value it cannot add answers that group's error inline, caused_by the value, as CouchDB 3.4.3 does; the other groups sum"
  )
  func sumErrorInline() throws {
    let t = try store()
    let s = t.store!
    _ = try put(s, "a", #"{"o":{"x":1}}"#)
    _ = try put(s, "b", #"{"o":{"x":2}}"#)
    _ = try put(s, "bad", #"{"o":"x"}"#)
    _ = try put(
      s, "_design/sum",
      #"{"views":{"o":{"map":"function(doc) { emit(doc._id, doc.o) }","reduce":"_sum"}}}"#)
    let all = try query(s, "o", [], ddoc: "_design/sum")
    let value = try #require(rows(all).first?["value"])
    #expect(value["error"] == .string("builtin_reduce_error"))
    #expect(value["caused_by"] == .string("x"))
    let grouped = try query(s, "o", [("group", "true")], ddoc: "_design/sum")
    #expect(keys(grouped) == [.string("a"), .string("b"), .string("bad")])
    #expect(values(grouped)[0] == json(#"{"x":1}"#))
    #expect(values(grouped)[2]["caused_by"] == .string("x"))
    let good = try query(s, "o", [("endkey", #""b""#)], ddoc: "_design/sum")
    #expect(values(good) == [json(#"{"x":3}"#)])
  }

  @Test("a map function sees the document's _conflicts, as CouchDB gives it the document")
  func mapSeesConflicts() throws {
    let t = try store()
    let s = t.store!
    _ = try put(s, "c", #"{"v":1}"#)
    _ = try s.bulkDocs(
      [try JSONValue(parsing: Array(#"{"_id":"c","_rev":"1-ffff","v":2}"#.utf8))],
      newEdits: false, actor: "test")
    _ = try put(s, "plain", #"{"v":3}"#)
    _ = try put(
      s, "_design/conf",
      #"{"views":{"v":{"map":"function(doc) { if (doc._conflicts) emit(doc._id, doc._conflicts.length) }"}}}"#
    )
    let answer = try query(s, "v", [], ddoc: "_design/conf")
    #expect(ids(answer) == ["c"])
    #expect(rows(answer).first?["value"] == .int(1))
  }

  @Test("a map function that throws skips the document for that view")
  func throwingMap() throws {
    let t = try store()
    try sample(t)
    let s = t.store!
    _ = try put(
      s, "_design/t",
      #"{"views":{"v":{"map":"function(doc) { if (doc.n % 2) throw new Error('odd'); emit(doc.n, 1) }"}}}"#
    )
    let answer = try query(s, "v", [], ddoc: "_design/t")
    #expect(keys(answer) == [0, 2, 4, 6, 8].map { .int($0) })
  }

  @Test("a map function that never ends is stopped, its view says so, the next query works")
  func loopingMap() throws {
    let t = try store()
    try sample(t)
    let s = t.store!
    _ = try put(
      s, "_design/loop",
      #"{"views":{"v":{"map":"function(doc) { if (doc.n === 3) for (;;) {} emit(doc.n, 1) }"}}}"#)
    // This store's query servers only: no other test's are touched.
    let servers = s.state.queryServers
    servers.limits = QueryServerLimits(timeout: 1.5, memoryMiB: servers.limits.memoryMiB)
    do {
      _ = try query(s, "v", [], ddoc: "_design/loop")
      Issue.record("a looping map function answered")
    } catch let error as StoreError {
      #expect(error.error == "os_process_error")
      #expect(error.code == .internalError)
    }
    // The store goes on; fixing the function builds a new index.
    let rev = try s.get("_design/loop")["_rev"]!.stringValue!
    _ = try s.put(
      #"{"views":{"v":{"map":"function(doc) { emit(doc.n, 1) }"}}}"#, id: "_design/loop",
      rev: rev, actor: "test")
    #expect(rows(try query(s, "v", [], ddoc: "_design/loop")).count == 10)
  }

  @Test("buckets: reduces and offsets from summaries agree with counting every row")
  func bucketsAgree() throws {
    let t = try store()
    let s = t.store!
    var docs: [JSONValue] = []
    for i in 0..<3_000 {
      docs.append(json(#"{"_id":"r\#(i)","k":[\#(i % 7), \#(i % 11)],"v":\#(i % 13)}"#))
    }
    _ = try s.bulkDocs(docs, actor: "test")
    _ = try put(
      s, "_design/d",
      #"{"views":{"s":{"map":"function(doc){ emit(doc.k, doc.v) }","reduce":"_sum"},"st":{"map":"function(doc){ emit(doc.k, doc.v) }","reduce":"_stats"}}}"#
    )
    // Delete a third, change another third.
    var changes: [JSONValue] = []
    for i in stride(from: 0, to: 3_000, by: 3) {
      let rev = try s.get("r\(i)")["_rev"]!.stringValue!
      changes.append(json(#"{"_id":"r\#(i)","_rev":"\#(rev)","_deleted":true}"#))
      let rev2 = try s.get("r\(i + 1)")["_rev"]!.stringValue!
      changes.append(json(#"{"_id":"r\#(i + 1)","_rev":"\#(rev2)","k":[3,3],"v":\#(i % 5)}"#))
    }
    _ = try query(s, "s")
    _ = try s.bulkDocs(changes, actor: "test")
    var expected: [Int: (count: Int, sum: Int)] = [:]
    for i in 0..<3_000 where i % 3 != 0 {
      let (k, v) = i % 3 == 1 ? (3, (i - 1) % 5) : (i % 7, i % 13)
      expected[k, default: (0, 0)].count += 1
      expected[k, default: (0, 0)].sum += v
    }
    let byLevel = try query(s, "s", [("group_level", "1")])
    #expect(keys(byLevel) == expected.keys.sorted().map { json("[\($0)]") })
    #expect(values(byLevel) == expected.keys.sorted().map { .int(expected[$0]!.sum) })
    let stats = try query(s, "st", [("group_level", "1"), ("startkey", "[2]"), ("endkey", "[5]")])
    #expect(
      values(stats).map { $0["count"] }
        == [2, 3, 4].map { JSONValue.int(expected[$0]!.count) })
    let page = try query(s, "s", [("reduce", "false"), ("startkey", "[4]"), ("limit", "1")])
    #expect(page["offset"] == .int((0..<4).reduce(0) { $0 + expected[$1]!.count }))
    #expect(page["total_rows"] == .int(2_000))
    let group = try ViewQueries(s).designViews("_design/d")
    #expect(try s.verify(group.indexName).isEmpty)
  }

  @Test("as of a moment: the view as it was, from the log")
  func asOf() throws {
    let t = try store()
    try sample(t)
    let s = t.store!
    let then = s.position
    let rev = try s.get("d2")["_rev"]!.stringValue!
    _ = try s.put(#"{"n":200,"g":2}"#, id: "d2", rev: rev, actor: "test")
    let view = try s.asOf(then)
    defer { view.close() }
    let old = try view.queryView(
      ddoc: "_design/d", view: "n", query: ViewQuery(parameters: [("reduce", "false")])
    ).json
    #expect(keys(old) == (0..<10).map { .int($0) })
    let now = try query(s, "n", [("reduce", "false"), ("startkey", "100")])
    #expect(ids(now) == ["d2"])
  }

  @Test("validate_doc_update refuses local and replicated writes, with the user and old doc")
  func validateDocUpdate() throws {
    let t = try store()
    let s = t.store!
    s.useUpdateValidator(DesignFunctions())
    _ = try put(
      s, "_design/v",
      #"{"validate_doc_update":"function(n, o, u, sec) { if (n.bad) throw({forbidden: 'bad'}); if (n.owner && n.owner !== u.name) throw({unauthorized: 'owner only'}); if (o && o.frozen) throw({forbidden: 'frozen ' + o._rev}) }"}"#
    )
    #expect(throws: StoreError("forbidden", "bad", code: .forbidden)) {
      try s.put(#"{"bad":true}"#, id: "x", actor: "test")
    }
    let user = UserContext(name: "bob", roles: [])
    try WriteAccess.$user.withValue(user) {
      #expect(throws: StoreError("unauthorized", "owner only", code: .unauthorized)) {
        try s.put(#"{"owner":"ann"}"#, id: "y", actor: "bob")
      }
      _ = try s.put(#"{"owner":"bob"}"#, id: "y", actor: "bob")
    }
    let frozen = try put(s, "z", #"{"frozen":true}"#)
    #expect(throws: StoreError("forbidden", "frozen \(frozen)", code: .forbidden)) {
      try s.put(#"{"x":1}"#, id: "z", rev: frozen, actor: "test")
    }
    let replicated = try s.bulkDocs(
      [json(#"{"_id":"r","_rev":"1-abc","bad":true}"#)], newEdits: false, actor: "peer")
    #expect(replicated.first?.error?.error == "forbidden")
    #expect(throws: StoreError.self) { try s.get("r") }
    // A design document whose view does not compile is refused.
    #expect(throws: StoreError.self) {
      try s.put(#"{"views":{"v":{"map":"function(doc) {"}}}"#, id: "_design/broken", actor: "t")
    }
  }
}
