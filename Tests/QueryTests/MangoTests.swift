import Foundation
import JSON
import Log
import Projections
import Query
import RevTree
import StoreTestSupport
import TestSupport
import Testing

/// Mango selectors, collation, JSON indexes as a projection, and `_find`, written from
/// CouchDB 3's documentation of `/db/_find`.
@Suite struct MangoTests {
  func mangoStore(_ name: String = #function) throws -> TestStore {
    try TestStore(name, projections: [MangoProjection()], validation: .couchDB)
  }

  func sel(_ text: String) throws -> Selector { try Selector(json(text)) }

  func matches(_ selector: String, _ doc: String) throws -> Bool {
    try sel(selector).matches(json(doc))
  }

  /// Creates an index through its design document, as `POST /db/_index` does.
  @discardableResult
  func createIndex(_ store: DocumentStore, _ body: String) throws -> MangoIndex {
    let index = try MangoIndex.parseRequest(json(body))
    let existing = try? store.get(index.ddoc)
    let (doc, exists) = try MangoQueries.designDocument(adding: index, to: existing)
    if !exists {
      try store.put(
        doc.serialized(), id: index.ddoc, rev: existing?["_rev"]?.stringValue, actor: "admin")
    }
    return index
  }

  /// Makes `t`'s store look like one of an earlier layout (database `old` present, the
  /// current layout's `emptying` empty), reopens it and expects it rebuilt (`old` gone).
  func ids(_ result: FindResult) -> [String] { result.docs.compactMap { $0["_id"]?.stringValue } }

  func find(_ store: DocumentStore, _ body: String) throws -> FindResult {
    try MangoQueries(store).find(FindQuery(json(body)))
  }

  // MARK: Collation

  @Test("values collate as CouchDB: null, false, true, numbers, strings, arrays, objects")
  func collationOrder() throws {
    let ordered = [
      "null", "false", "true", "-1e10", "-2", "0", "1", "1.5", "2", "1e10", #""""#, #""a""#,
      #""A""#, #""aa""#, #""aB""#, #""Ab""#, #""b""#, #""B""#, "[]", "[1]", "[1,2]", "[2]",
      #"["a"]"#, "{}", #"{"a":1}"#, #"{"a":2}"#, #"{"b":1}"#,
    ].map(json)
    var rng = SplitMix64(seed: 7)
    for _ in 0..<5 {
      let shuffled = ordered.shuffled(using: &rng)
      let sorted = shuffled.sorted { Collation.compare($0, $1) < 0 }
      #expect(sorted == ordered)
      let byBytes = shuffled.sorted {
        Collation.encode($0).lexicographicallyPrecedes(Collation.encode($1))
      }
      #expect(byBytes == ordered)
    }
    #expect(Collation.compare(json("1"), json("1.0")) == 0)
    #expect(Collation.compare(json("0"), json("-0")) == 0)
    #expect(Collation.compare(json(#""a""#), json(#""A""#)) < 0)
  }

  // MARK: Selector operators

  @Test(
    "each operator, as CouchDB's documentation describes it",
    arguments: [
      // implicit $eq and $and
      (#"{"a": 1}"#, #"{"a": 1}"#, true), (#"{"a": 1}"#, #"{"a": 1.0}"#, true),
      (#"{"a": 1}"#, #"{"a": "1"}"#, false), (#"{"a": 1, "b": 2}"#, #"{"a": 1, "b": 3}"#, false),
      (#"{"a": [1, 2]}"#, #"{"a": [1, 2]}"#, true), (#"{"a": 1}"#, #"{"a": [1]}"#, false),
      // $eq $ne $gt $gte $lt $lte, by collation across types
      (#"{"a": {"$eq": "x"}}"#, #"{"a": "x"}"#, true),
      (#"{"a": {"$ne": "x"}}"#, #"{"a": "y"}"#, true),
      (#"{"a": {"$ne": "x"}}"#, #"{}"#, false),
      (#"{"a": {"$gt": null}}"#, #"{"a": false}"#, true),
      (#"{"a": {"$gt": null}}"#, #"{"a": null}"#, false),
      (#"{"a": {"$gt": 5}}"#, #"{"a": "1"}"#, true),
      (#"{"a": {"$lt": 5}}"#, #"{"a": true}"#, true),
      (#"{"a": {"$gte": 5}}"#, #"{"a": 5}"#, true), (#"{"a": {"$lte": 5}}"#, #"{"a": 6}"#, false),
      (#"{"a": {"$gt": 2, "$lt": 4}}"#, #"{"a": 3}"#, true),
      (#"{"a": {"$gt": 2, "$lt": 4}}"#, #"{"a": 4}"#, false),
      (#"{"a": {"$lt": "b"}}"#, #"{"a": "B"}"#, false),
      (#"{"a": {"$lt": "b"}}"#, #"{"a": "A"}"#, true),
      // $exists
      (#"{"a": {"$exists": true}}"#, #"{"a": null}"#, true),
      (#"{"a": {"$exists": false}}"#, #"{"b": 1}"#, true),
      (#"{"a": {"$exists": false}}"#, #"{"a": 1}"#, false),
      // $type
      (#"{"a": {"$type": "null"}}"#, #"{"a": null}"#, true),
      (#"{"a": {"$type": "boolean"}}"#, #"{"a": false}"#, true),
      (#"{"a": {"$type": "number"}}"#, #"{"a": "1"}"#, false),
      (#"{"a": {"$type": "array"}}"#, #"{"a": []}"#, true),
      (#"{"a": {"$type": "object"}}"#, #"{"a": {}}"#, true),
      // $in $nin, with arrays matching on an element
      (#"{"a": {"$in": [1, 2]}}"#, #"{"a": 2}"#, true),
      (#"{"a": {"$in": [1, 2]}}"#, #"{"a": [5, 2]}"#, true),
      (#"{"a": {"$in": [1, 2]}}"#, #"{"a": 3}"#, false),
      (#"{"a": {"$nin": [1, 2]}}"#, #"{"a": 3}"#, true),
      (#"{"a": {"$nin": [1, 2]}}"#, #"{"a": [3, 1]}"#, false),
      (#"{"a": {"$nin": [1, 2]}}"#, #"{}"#, false),
      // $size
      (#"{"a": {"$size": 2}}"#, #"{"a": [1, 2]}"#, true),
      (#"{"a": {"$size": 2}}"#, #"{"a": "ab"}"#, false),
      // $mod: integers only, Erlang's rem
      (#"{"a": {"$mod": [3, 1]}}"#, #"{"a": 7}"#, true),
      (#"{"a": {"$mod": [3, -1]}}"#, #"{"a": -7}"#, true),
      (#"{"a": {"$mod": [3, 1]}}"#, #"{"a": 7.5}"#, false),
      // $regex: a search
      (#"{"a": {"$regex": "^A.c"}}"#, #"{"a": "Abc"}"#, true),
      (#"{"a": {"$regex": "b"}}"#, #"{"a": "abc"}"#, true),
      (#"{"a": {"$regex": "^b"}}"#, #"{"a": "abc"}"#, false),
      (#"{"a": {"$regex": "1"}}"#, #"{"a": 1}"#, false),
      // PCRE, as CouchDB's: inline options, and `.` is one code point (e + U+0301 is two)
      (#"{"a": {"$regex": "(?i)^abc$"}}"#, #"{"a": "ABC"}"#, true),
      (#"{"a": {"$regex": "^\\d+(?=px)"}}"#, #"{"a": "12px"}"#, true),
      (#"{"a": {"$regex": "^.$"}}"#, #"{"a": "e\u0301"}"#, false),
      (#"{"a": {"$regex": "^..$"}}"#, #"{"a": "e\u0301"}"#, true),
      // $all $elemMatch $allMatch $keyMapMatch
      (#"{"a": {"$all": ["x", "y"]}}"#, #"{"a": ["y", "z", "x"]}"#, true),
      (#"{"a": {"$all": ["x", "y"]}}"#, #"{"a": ["x"]}"#, false),
      (#"{"a": {"$elemMatch": {"$gt": 5}}}"#, #"{"a": [1, 7]}"#, true),
      (#"{"a": {"$elemMatch": {"b": 1}}}"#, #"{"a": [{"b": 2}, {"b": 1}]}"#, true),
      (#"{"a": {"$elemMatch": {"$gt": 5}}}"#, #"{"a": [1, 2]}"#, false),
      (#"{"a": {"$allMatch": {"$gt": 0}}}"#, #"{"a": [1, 2]}"#, true),
      (#"{"a": {"$allMatch": {"$gt": 1}}}"#, #"{"a": [1, 2]}"#, false),
      (#"{"a": {"$allMatch": {"$gt": 1}}}"#, #"{"a": []}"#, false),
      (#"{"a": {"$keyMapMatch": {"$eq": "k"}}}"#, #"{"a": {"k": 1}}"#, true),
      (#"{"a": {"$keyMapMatch": {"$eq": "k"}}}"#, #"{"a": {"j": 1}}"#, false),
      // $beginsWith
      (#"{"a": {"$beginsWith": "ab"}}"#, #"{"a": "abc"}"#, true),
      (#"{"a": {"$beginsWith": "ab"}}"#, #"{"a": "Abc"}"#, false),
      // $and $or $nor $not
      (#"{"$and": [{"a": 1}, {"b": 2}]}"#, #"{"a": 1, "b": 2}"#, true),
      (#"{"$or": [{"a": 1}, {"b": 2}]}"#, #"{"b": 2}"#, true),
      (#"{"$or": [{"a": 1}, {"b": 2}]}"#, #"{"b": 3}"#, false),
      (#"{"$nor": [{"a": 1}, {"b": 2}]}"#, #"{"b": 3}"#, true),
      (#"{"$not": {"a": 1}}"#, #"{"a": 2}"#, true),
      (#"{"a": {"$not": {"$eq": 1}}}"#, #"{}"#, true),
      (#"{"a": {"$or": [{"$eq": 1}, {"$eq": 2}]}}"#, #"{"a": 2}"#, true),
      // dotted paths, nested objects, escaping
      (#"{"a.b": 1}"#, #"{"a": {"b": 1}}"#, true),
      (#"{"a": {"b": 1}}"#, #"{"a": {"b": 1, "c": 2}}"#, true),
      (#"{"a\\.b": 1}"#, #"{"a.b": 1}"#, true),
      (#"{"a\\.b": 1}"#, #"{"a": {"b": 1}}"#, false),
      (#"{"a.b": {"$exists": false}}"#, #"{"a": 5}"#, false),
      (#"{"a.0": 1}"#, #"{"a": [1]}"#, true), (#"{"a.1": 1}"#, #"{"a": [1]}"#, false),
    ])
  func operators(selector: String, doc: String, expected: Bool) throws {
    #expect(try matches(selector, doc) == expected, "\(selector) on \(doc)")
  }

  @Test("a pattern that backtracks exponentially stops at the match limit and does not match")
  func regexMatchLimit() throws {
    // (x+x+)+ over 40 x's and a '!' has about 2^40 ways to fail: without a limit, hours.
    let doc = try json(#"{"a": "\#(String(repeating: "x", count: 40))!"}"#)
    let hostile = try sel(#"{"a": {"$regex": "^(x+x+)+$"}}"#)
    let clock = ContinuousClock()
    let start = clock.now
    #expect(try !hostile.matches(doc))
    #expect(clock.now - start < .seconds(10))
    // The same pattern still matches where it should.
    #expect(try matches(#"{"a": {"$regex": "^(x+x+)+$"}}"#, #"{"a": "xxxx"}"#))
  }

  @Test("unknown operators and bad arguments are CouchDB's 400s")
  func selectorErrors() throws {
    for (text, error) in [
      (#"{"a": {"$foo": 1}}"#, "invalid_operator"), (#"{"a": {"$in": 1}}"#, "bad_arg"),
      (#"{"a": {"$exists": 1}}"#, "bad_arg"), (#"{"a": {"$type": "int"}}"#, "bad_arg"),
      (#"{"a": {"$size": -1}}"#, "bad_arg"), (#"{"a": {"$mod": [0, 1]}}"#, "bad_arg"),
      (#"{"a": {"$regex": "("}}"#, "bad_arg"), (#"{"a": {"$regex": "\\C"}}"#, "bad_arg"),
      (#"{"$or": {"a": 1}}"#, "bad_arg"),
      (#"{"a": {"$elemMatch": 1}}"#, "bad_arg"),
    ] {
      do {
        _ = try sel(text)
        Issue.record("\(text) was accepted")
      } catch let e as StoreError {
        #expect(e.error == error, "\(text)")
        #expect(e.code == .badRequest)
      }
    }
  }

  // MARK: _find

  /// A database of people, the same for several tests.
  func people(_ store: DocumentStore, count: Int = 60) throws {
    for i in 0..<count {
      var members: [JSONObject.Member] = [
        .init(key: "_id", value: .string(String(format: "p%03d", i))),
        .init(key: "age", value: .number(JSONNumber(Int64(i % 17)))),
        .init(key: "name", value: .string(["ann", "Bob", "carl", "Dora", "eve"][i % 5])),
        .init(key: "type", value: .string(i % 3 == 0 ? "admin" : "user")),
      ]
      if i % 4 == 0 { members.removeAll { $0.key == "age" } }
      if i % 7 == 0 {
        members.append(.init(key: "age", value: .string("unknown")))
      }
      try store.put(JSONValue.object(JSONObject(members)).serialized(), actor: "t")
    }
  }

  @Test("the same query with and without an index gives the same rows")
  func indexAgreesWithScan() throws {
    let t = try mangoStore()
    let store = t.store!
    try people(store)
    let queries = [
      #"{"age": 5}"#, #"{"age": {"$gt": 10}}"#, #"{"age": {"$gte": 3, "$lt": 8}}"#,
      #"{"age": {"$gt": null}}"#, #"{"age": {"$lte": 4}, "type": "admin"}"#,
      #"{"age": {"$gt": 2}, "name": {"$regex": "^[a-c]"}}"#, #"{"age": {"$in": [1, 2, 3]}}"#,
      #"{"age": {"$type": "string"}}"#, #"{"age": {"$ne": 3}}"#,
      #"{"name": {"$beginsWith": "D"}, "age": {"$exists": true}}"#,
    ]
    var unindexed: [[String]] = []
    for q in queries {
      let r = try find(store, #"{"selector": \#(q), "limit": 1000}"#)
      #expect(r.warning != nil, "\(q) uses no index yet")
      unindexed.append(ids(r).sorted())
    }
    try createIndex(store, #"{"index": {"fields": ["age"]}, "ddoc": "by-age", "name": "age"}"#)
    try createIndex(
      store, #"{"index": {"fields": ["name", "age"]}, "ddoc": "by-name", "name": "name-age"}"#)
    for (q, expected) in zip(queries, unindexed) {
      let r = try find(store, #"{"selector": \#(q), "limit": 1000}"#)
      #expect(r.warning == nil, "\(q) is served by an index")
      #expect(ids(r).sorted() == expected, "\(q)")
    }
    // Writes after the index exists keep it in step.
    let p5 = try store.get("p005")
    try store.put(
      #"{"_id":"p005","_rev":"\#(p5["_rev"]!.stringValue!)","age":99,"name":"zed"}"#, actor: "t")
    let p6 = try store.get("p006")
    _ = try store.delete("p006", rev: p6["_rev"]!.stringValue!, actor: "t")
    #expect(ids(try find(store, #"{"selector": {"age": 99}}"#)) == ["p005"])
    #expect(
      !ids(try find(store, #"{"selector": {"age": {"$gt": null}}, "limit": 999}"#)).contains("p006")
    )
    #expect(try store.verify("mango") == [])
  }

  @Test(
    "sort ascending and descending by index, limit, skip, fields; sort without an index is refused")
  func sortAndOptions() throws {
    let t = try mangoStore()
    let store = t.store!
    try people(store, count: 30)
    #expect(throws: StoreError.self) {
      try find(store, #"{"selector": {"age": {"$gt": 0}}, "sort": ["age"]}"#)
    }
    try createIndex(store, #"{"index": {"fields": ["age"]}, "ddoc": "a", "name": "age"}"#)
    let asc = try find(
      store, #"{"selector": {"age": {"$gt": 0}}, "sort": [{"age": "asc"}], "limit": 100}"#)
    let ages = asc.docs.map { $0["age"]! }
    #expect(ages == ages.sorted { Collation.compare($0, $1) < 0 })
    #expect(ages.last == .string("unknown"), "strings sort after numbers")
    let desc = try find(
      store, #"{"selector": {"age": {"$gt": 0}}, "sort": [{"age": "desc"}], "limit": 100}"#)
    #expect(desc.docs.map { $0["age"]! } == ages.reversed())
    let page = try find(
      store,
      #"{"selector": {"age": {"$gt": 0}}, "sort": ["age"], "skip": 2, "limit": 3, "fields": ["_id", "age"]}"#
    )
    #expect(page.docs.map { $0["age"]! } == Array(ages[2..<5]))
    #expect(page.docs.allSatisfy { $0.objectValue!.keys.sorted() == ["_id", "age"] })
    // _id sorts on _all_docs without an index when the selector looks _id up
    // (`mango_idx_special:is_usable`); without that, no index serves the sort.
    let byID = try find(
      store, #"{"selector": {"_id": {"$gt": null}}, "sort": [{"_id": "desc"}], "limit": 3}"#)
    #expect(ids(byID) == ["p029", "p028", "p027"])
    #expect(byID.warning == "No matching index found, create an index to optimize query time.")
    #expect(throws: StoreError.self) {
      try find(store, #"{"selector": {}, "sort": [{"_id": "desc"}], "limit": 3}"#)
    }
    #expect(
      throws: StoreError.self,
      "mixed directions"
    ) { try find(store, #"{"selector": {"age": 1}, "sort": [{"age": "asc"}, {"name": "desc"}]}"#) }
  }

  @Test(
    "an index serves a sort on its fields without the selector requiring them, and past leading fields held equal (mango_idx_view:is_usable)"
  )
  func sortFieldsAndConstantPrefix() throws {
    let t = try mangoStore()
    let store = t.store!
    try people(store, count: 30)
    try createIndex(
      store, #"{"index": {"fields": ["type", "name"]}, "ddoc": "foo", "name": "bar"}"#)
    // couchdb-python's test_find: the selector names `type` only, the sort both fields.
    let both = try find(
      store,
      #"{"selector": {"type": "admin"}, "fields": ["_id", "name"], "sort": [{"type": "asc"}, {"name": "asc"}]}"#
    )
    #expect(both.warning == nil)
    #expect(both.docs.count == 10)
    let names = both.docs.map { $0["name"]!.stringValue! }
    #expect(names == names.sorted { Collation.compare(.string($0), .string($1)) < 0 })
    // `type` held equal: a sort on `name` alone is served by the same index, both ways.
    let byName = try find(
      store, #"{"selector": {"type": "admin"}, "sort": [{"name": "desc"}], "fields": ["name"]}"#)
    #expect(byName.docs.map { $0["name"]!.stringValue! } == names.reversed())
    // Not held equal (a range): the index cannot serve a sort on `name`.
    #expect(throws: StoreError.self) {
      try find(store, #"{"selector": {"type": {"$gt": "a"}}, "sort": ["name"]}"#)
    }
    // Without the sort, an index whose `name` the selector does not require is not used.
    let unsorted = try find(store, #"{"selector": {"type": "admin"}}"#)
    #expect(unsorted.warning != nil)
    #expect(Set(ids(unsorted)) == Set(ids(both)))
  }

  @Test("_explain shows the selector as CouchDB normalizes it")
  func normalizedSelector() throws {
    let cases: [(String, String)] = [
      (#"{"type": "Person"}"#, #"{"type":{"$eq":"Person"}}"#),
      (
        #"{"type": "page", "year": {"$gt": 2000}}"#,
        #"{"$and":[{"type":{"$eq":"page"}},{"year":{"$gt":2000}}]}"#
      ),
      (#"{"a": {"b": {"c": 1}}}"#, #"{"a.b.c":{"$eq":1}}"#),
      (
        #"{"a": {"$gt": 1, "$lt": 5}}"#, #"{"$and":[{"a":{"$gt":1}},{"a":{"$lt":5}}]}"#
      ),
      (#"{"$not": {"a": {"$gt": 10}}}"#, #"{"a":{"$lte":10}}"#),
      (
        #"{"$nor": [{"a": 1}, {"b": {"$in": [1, 2]}}]}"#,
        #"{"$and":[{"a":{"$ne":1}},{"b":{"$nin":[1,2]}}]}"#
      ),
      (
        #"{"$not": {"$and": [{"a": {"$exists": true}}, {"b": {"$regex": "x"}}]}}"#,
        #"{"$or":[{"a":{"$exists":false}},{"b":{"$not":{"$regex":"x"}}}]}"#
      ),
      (
        #"{"tags": {"$elemMatch": {"name": "x"}}}"#,
        #"{"tags":{"$elemMatch":{"name":{"$eq":"x"}}}}"#
      ),
      (#"{"$or": [{"a": 1}, {"a": {}}]}"#, #"{"$or":[{"a":{"$eq":1}},{"a":{"$eq":{}}}]}"#),
      ("{}", "{}"),
    ]
    for (given, expected) in cases {
      #expect(try sel(given).normalizedJSON == json(expected), "\(given)")
    }
  }

  @Test(
    "request options as mango_opts reads them: null use_index and bookmark, ddoc/name, stale, CouchDB's error names"
  )
  func requestOptions() throws {
    // CouchDB's own mango test client sends `"use_index": null` with every query.
    let q = try FindQuery(
      json(#"{"selector": {}, "use_index": null, "bookmark": null, "stale": false, "fields": []}"#))
    #expect(q.useIndex.isEmpty && q.bookmark == nil && q.fields == nil && q.update)
    #expect(try FindQuery(json(#"{"selector": {}, "bookmark": ""}"#)).bookmark == nil)
    #expect(try FindQuery(json(#"{"selector": {}, "stale": "false"}"#)).update)
    #expect(try FindQuery(json(#"{"selector": {}, "stale": "ok"}"#)).update == false)
    for (value, expected) in [
      (#""d""#, ["d"]), (#""_design/d""#, ["d"]), (#""d/n""#, ["d", "n"]),
      (#""_design/d/n""#, ["d", "n"]), (#"["_design/d", "n"]"#, ["_design/d", "n"]), ("[]", []),
    ] {
      let q = try FindQuery(json(#"{"selector": {}, "use_index": \#(value)}"#))
      #expect(q.useIndex == expected, "\(value)")
    }
    for (option, expected) in [
      (#""use_index": "a/b/c""#, "invalid_index_name"), (#""use_index": 1"#, "invalid_index_name"),
      (#""use_index": ["a", "b", "c"]"#, "invalid_index_name"),
      (#""bookmark": 1"#, "invalid_bookmark"), (#""limit": -1"#, "invalid_non_neg_integer"),
      (#""limit": 2.5"#, "invalid_non_neg_integer"), (#""skip": "1""#, "invalid_non_neg_integer"),
      (#""r": 0"#, "invalid_pos_integer"), (#""conflicts": 1"#, "invalid_boolean"),
      (#""stale": true"#, "invalid_ok_or_false_value"), (#""fields": "a""#, "invalid_fields_json"),
      (#""fields": [1]"#, "invalid_field"), (#""sort": {}"#, "invalid_sort_json"),
      (#""sort": [{"a": "up"}]"#, "invalid_sort_dir"), (#""sort": [1]"#, "invalid_sort_field"),
      (#""colour": 1"#, "invalid_key"),
    ] {
      do {
        _ = try FindQuery(json(#"{"selector": {}, \#(option)}"#))
        Issue.record("\(option) was accepted")
      } catch {
        #expect(error.error == expected, "\(option)")
        #expect(error.code == .badRequest)
      }
    }
  }

  @Test(
    "empty $or, $and and $nor match anything, but _find runs no query for a selector of one alone (mango_cursor:maybe_noop_range)"
  )
  func emptyCombinations() throws {
    for op in ["$or", "$and", "$nor"] {
      #expect(try matches(#"{"\#(op)": []}"#, #"{"a": 1}"#), "\(op)")
      #expect(try matches(#"{"a": {"$not": {"\#(op)": []}}}"#, #"{"a": 1}"#), "\(op)")
    }
    #expect(try matches(#"{"a": {"$in": []}}"#, #"{"a": 1}"#) == false)
    #expect(try matches(#"{"a": {"$all": []}}"#, #"{"a": [1]}"#) == false)
    #expect(try matches(#"{"a": {"$nin": []}}"#, #"{"a": 1}"#))
    let t = try mangoStore()
    let store = t.store!
    try people(store, count: 20)
    for op in ["$or", "$and", "$nor"] {
      #expect(ids(try find(store, #"{"selector": {"\#(op)": []}}"#)).isEmpty, "\(op)")
    }
    let age5 = ids(try find(store, #"{"selector": {"age": 5}}"#))
    #expect(!age5.isEmpty)
    #expect(ids(try find(store, #"{"selector": {"age": 5, "$or": []}}"#)) == age5)
    #expect(ids(try find(store, #"{"selector": {"age": 5, "$and": []}}"#)) == age5)
    #expect(ids(try find(store, #"{"selector": {}, "limit": 99}"#)).count == 20)
    // The planner sees through `$or` as `has_required_fields` does: a field every branch
    // requires may be indexed, and an empty `$or` leaves every index usable.
    try createIndex(store, #"{"index": {"fields": ["name"]}, "ddoc": "n", "name": "name"}"#)
    let either = try find(
      store, #"{"selector": {"$or": [{"name": "ann"}, {"name": {"$gt": "d"}}]}, "limit": 99}"#)
    #expect(either.warning == nil)
    #expect(
      Set(ids(either))
        == Set(
          ids(try find(store, #"{"selector": {"name": {"$in": ["ann", "eve"]}}, "limit": 99}"#))
            + ids(try find(store, #"{"selector": {"name": "Dora"}, "limit": 99}"#))))
    #expect(
      try find(store, #"{"selector": {"$or": [{"name": "ann"}, {"age": 1}]}}"#).warning != nil)
    #expect(
      try MangoQueries(store).plan(FindQuery(json(#"{"selector": {"$or": []}}"#))).index?.name
        == "name")
    // Text indexes need a service wikilog does not have: 503, as CouchDB without one.
    #expect(throws: StoreError("required index service unavailable", "text", code: .unavailable)) {
      try MangoIndex.parseRequest(json(#"{"index": {}, "type": "text"}"#))
    }
    // An index definition holds `fields` and `partial_filter_selector` only.
    #expect(throws: StoreError.self) {
      try MangoIndex.parseRequest(json(#"{"index": {"fields": ["a"], "selector": {"a": 1}}}"#))
    }
  }

  @Test(
    "_explain's index_candidates and selector_hints as CouchDB 3.4 gives them (mango_cursor:extract_candidate_indexes)"
  )
  func explainCandidates() throws {
    let t = try mangoStore()
    let store = t.store!
    try people(store, count: 10)
    try createIndex(store, #"{"index": {"fields": ["age"]}, "ddoc": "age", "name": "age"}"#)
    try createIndex(
      store, #"{"index": {"fields": ["age", "name"]}, "ddoc": "age-name", "name": "age-name"}"#)
    try createIndex(store, #"{"index": {"fields": ["name"]}, "ddoc": "name", "name": "name"}"#)
    try createIndex(
      store,
      #"{"index": {"fields": ["type"], "partial_filter_selector": {"type": "admin"}}, "ddoc": "adm", "name": "adm"}"#
    )
    func explain(_ body: String) throws -> JSONValue {
      try MangoQueries(store).explain(FindQuery(json(body)), databaseName: "db")
    }
    func summary(_ e: JSONValue) -> [String] {
      (e["index_candidates"]?.arrayValue ?? []).map { c in
        let a = c["analysis"]!
        return [
          c["index"]!["name"]!.stringValue!, a["usable"]!.boolValue! ? "usable" : "unusable",
          a["reasons"]![0]!["name"]!.stringValue!,
          String(decoding: a["ranking"]!.serialized(), as: UTF8.self),
          String(decoding: a["covering"]!.serialized(), as: UTF8.self),
        ].joined(separator: " ")
      }
    }
    let e = try explain(#"{"selector": {"age": {"$gt": 3}}, "fields": ["_id", "age"]}"#)
    #expect(e["index"]?["name"]?.stringValue == "age")
    // Reverse order of design documents, `_all_docs` last; the winner left out. An index
    // needs every one of its fields required (`age-name` would cover the fields asked for).
    #expect(
      summary(e) == [
        "name unusable field_mismatch 2 false", "age-name unusable field_mismatch 2 true",
        "adm unusable is_partial 3 false", "_all_docs usable unfavored_type 1 null",
      ])
    #expect(
      e["selector_hints"]
        == json(#"[{"type": "json", "indexable_fields": ["age"], "unindexable_fields": []}]"#))
    #expect(e["fields"] == json(#"["_id", "age"]"#))
    #expect(try explain(#"{"selector": {}}"#)["fields"] == json("[]"))
    let hints = try explain(#"{"selector": {"age": {"$gt": 3}, "name": {"$regex": "a"}}}"#)
    #expect(
      hints["selector_hints"]
        == json(
          #"[{"type": "json", "indexable_fields": ["age"], "unindexable_fields": ["name"]}]"#))
    // Named, the other usable indexes are excluded by the user.
    let named = try explain(
      #"{"selector": {"age": {"$gt": 3}, "name": "ann"}, "use_index": "age"}"#)
    #expect(named["index"]?["name"]?.stringValue == "age")
    #expect(summary(named).contains("age-name usable excluded_by_user 1 false"))
    // A sort no index serves: `_find` refuses it, `_explain` answers with a null index.
    let unserved = try explain(#"{"selector": {"age": 3}, "sort": ["type"]}"#)
    #expect(unserved["index"] == .null && unserved["mrargs"] == nil)
    #expect(summary(unserved).contains("_all_docs unusable field_mismatch 1 null"))
    #expect(throws: StoreError.self) {
      try find(store, #"{"selector": {"age": 3}, "sort": ["type"]}"#)
    }
    // The planner prefers the index whose leading fields the selector looks up most.
    let both = try explain(#"{"selector": {"age": {"$gt": 3}, "name": "ann"}}"#)
    #expect(both["index"]?["name"]?.stringValue == "age-name")
    #expect(
      summary(both) == [
        "name usable less_overlap 2 false", "age usable less_overlap 1 false",
        "adm unusable is_partial 4 false", "_all_docs usable unfavored_type 3 null",
      ])
  }

  @Test(
    "selectors as mango_selector and mango_doc read them: array positions in paths, the last of duplicate keys, conditions need a field"
  )
  func selectorDetails() throws {
    #expect(try matches(#"{"favorites.1": "C"}"#, #"{"favorites": ["A", "C"]}"#))
    #expect(
      try matches(#"{"favorites.2": {"$exists": false}}"#, #"{"favorites": ["A", "C"]}"#) == false)
    #expect(try matches(#"{"a.0.b": 1}"#, #"{"a": [{"b": 1}]}"#))
    // A key given twice: the last counts (`$exists` here, not the `$regex`).
    #expect(
      try matches(#"{"city": {"$regex": "^L"}, "city": {"$exists": true}}"#, #"{"city": "Paris"}"#))
    for (text, name) in [
      (#"{"$gt": 2}"#, "invalid_selector"), (#"{"_id": {"": null}}"#, "invalid_field_name"),
      (#"{"a..b": 1}"#, "invalid_field_name"), (#"{"a": {"$beginsWith": 1}}"#, "invalid_operator"),
    ] {
      do {
        _ = try sel(text)
        Issue.record("\(text) was accepted")
      } catch {
        #expect((error as? StoreError)?.error == name, "\(text)")
      }
    }
    #expect(throws: StoreError.self) {
      try MangoIndex.parseRequest(json(#"{"index": {"fields": [""]}}"#))
    }
    // `_explain`'s keys: the end closes with "<MAX>", `$beginsWith` ends at U+FFFF.
    let t = try mangoStore()
    let store = t.store!
    try people(store, count: 5)
    try createIndex(store, #"{"index": {"fields": ["name"]}, "ddoc": "n", "name": "n"}"#)
    let e = try MangoQueries(store).explain(
      FindQuery(json(#"{"selector": {"name": {"$beginsWith": "A"}}}"#)), databaseName: "db")
    #expect(e["mrargs"]?["start_key"] == json(#"["A"]"#))
    #expect(e["mrargs"]?["end_key"] == .array([.string("A\u{FFFF}"), .string("<MAX>")]))
    let eq = try MangoQueries(store).explain(
      FindQuery(json(#"{"selector": {"name": "ann"}}"#)), databaseName: "db")
    #expect(eq["mrargs"]?["end_key"] == json(#"["ann", "<MAX>"]"#))
    let ids = try MangoQueries(store).explain(
      FindQuery(json(#"{"selector": {"_id": {"$beginsWith": "p"}}}"#)), databaseName: "db")
    #expect(ids["mrargs"]?["end_key"] == .string("p\u{FFFF}"))
  }

  @Test(
    "an index on _conflicts sees each document's conflicts, whether it was made before or after them"
  )
  func conflictsIndex() throws {
    let t = try mangoStore()
    let store = t.store!
    try people(store, count: 6)
    // A conflict before the index exists, and one after.
    func conflict(_ id: String) throws {
      try store.bulkDocs(
        [json(#"{"_id":"\#(id)","_rev":"1-ffffffffffffffffffffffffffffffff","name":"x"}"#)],
        newEdits: false, actor: "t")
    }
    try conflict("p001")
    try createIndex(store, #"{"index": {"fields": ["_conflicts"]}, "ddoc": "c", "name": "c"}"#)
    try conflict("p004")
    let query = #"{"selector": {"_conflicts": {"$exists": true}}, "conflicts": true}"#
    let found = try find(store, query)
    #expect(found.warning == nil, "served by the index")
    #expect(ids(found).sorted() == ["p001", "p004"])
    #expect(found.docs.first?["_conflicts"]?.arrayValue?.count == 1)
    // Resolving a conflict (deleting the losing leaf) takes the document out of the index.
    _ = try store.delete("p004", rev: "1-ffffffffffffffffffffffffffffffff", actor: "t")
    #expect(ids(try find(store, query)) == ["p001"])
    #expect(try store.verify("mango") == [])
  }

  @Test(
    "a covering index answers from its values (CouchDB 3.4): the same results, no document read, access kept, values updated"
  )
  func coveringIndex() throws {
    let t = try mangoStore()
    let store = t.store!
    for i in 0..<30 {
      var doc =
        #"{"_id":"c\#(String(format: "%02d", i))","team":"\#(["red", "blue", "Green"][i % 3])","#
      doc += #""info":{"level":\#(i % 4),"city":"\#(["Oslo", "Bern"][i % 2])"},"note":"n\#(i)"}"#
      try store.put(doc, actor: "t")
    }
    // An index is usable when the selector requires each of its fields (CouchDB's rule).
    let queries = [
      #"{"selector": {"team": "red", "info.level": {"$gte": 0}}, "fields": ["_id"]}"#,
      #"{"selector": {"team": {"$gt": "a"}, "info.level": {"$gte": 2}}, "fields": ["_id", "info.level"]}"#,
      #"{"selector": {"team": {"$in": ["blue", "Green"]}, "info.level": {"$exists": true}}, "fields": ["team", "_id"]}"#,
      #"{"selector": {"$or": [{"team": "red"}, {"info.level": 3}], "team": {"$exists": true}, "info.level": {"$lt": 9}}, "fields": ["_id", "team"]}"#,
    ]
    func sortedByID(_ r: FindResult) -> [JSONValue] {
      r.docs.sorted { ($0["_id"]?.stringValue ?? "") < ($1["_id"]?.stringValue ?? "") }
    }
    // Without the index (skip and limit need one order: ids, as _all_docs reads them).
    var scanned: [[JSONValue]] = []
    for q in queries { scanned.append(sortedByID(try find(store, q))) }
    try createIndex(
      store, #"{"index": {"fields": ["team", "info.level"]}, "ddoc": "c", "name": "team-level"}"#)
    for (q, expected) in zip(queries, scanned) {
      let query = try FindQuery(json(q))
      let explain = try MangoQueries(store).explain(query, databaseName: "db")
      #expect(explain["covering"] == .bool(true), "\(q)")
      #expect(explain["mrargs"]?["include_docs"] == .bool(false))
      var stats = query
      stats.executionStats = true
      let r = try MangoQueries(store).find(stats)
      #expect(r.warning == nil)
      #expect(sortedByID(r) == expected, "\(q)")
      #expect(r.stats?.docsExamined == 0 && r.stats?.keysExamined ?? 0 > 0)
    }
    // A field the index does not hold, or whole documents: the documents are read.
    for q in [
      #"{"selector": {"team": "red", "info.level": 1}, "fields": ["_id", "note"]}"#,
      #"{"selector": {"team": "red", "info.level": 1, "note": {"$gt": "n"}}, "fields": ["_id"]}"#,
      #"{"selector": {"team": "red", "info.level": 1}}"#,
      #"{"selector": {"team": "red", "info.level": 1}, "fields": ["_rev"]}"#,
    ] {
      let explain = try MangoQueries(store).explain(FindQuery(json(q)), databaseName: "db")
      #expect(explain["covering"] == .bool(false), "\(q)")
      #expect(explain["mrargs"]?["include_docs"] == .bool(true))
    }
    // Nested fields come back nested, from the index's values.
    let nested = try find(
      store, #"{"selector": {"team": "blue", "info.level": 1}, "fields": ["info.level", "team"]}"#)
    #expect(nested.docs.first == json(#"{"info":{"level":1},"team":"blue"}"#))
    // An edit that keeps the key (1 and 1.0 collate equal) still changes the values.
    let c01 = try store.get("c01")
    try store.put(
      #"{"_id":"c01","_rev":"\#(c01["_rev"]!.stringValue!)","team":"blue","info":{"level":1.0}}"#,
      actor: "t")
    let after = try find(
      store,
      #"{"selector": {"_id": "c01", "team": "blue", "info.level": 1}, "fields": ["info.level"]}"#)
    #expect(
      after.docs.first?["info"]?["level"].map { String(decoding: $0.serialized(), as: UTF8.self) }
        == "1.0")
    // The caller's filter holds on the covered path too.
    let onlyEven = DocumentFilter(
      name: "even", parameters: [:], wakeKeys: [], keys: { _ in [] },
      includes: { Int($0.dropFirst())! % 2 == 0 })
    let visible = try MangoQueries(store).find(
      FindQuery(
        json(
          #"{"selector": {"team": {"$gt": null}, "info.level": {"$gt": null}}, "fields": ["_id"], "limit": 100}"#
        )),
      visible: onlyEven)
    #expect(visible.docs.count == 15)
    #expect(visible.docs.allSatisfy { Int($0["_id"]!.stringValue!.dropFirst())! % 2 == 0 })
    #expect(try store.verify("mango") == [])
  }

  @Test("an index is not added to a design document of another language (invalid_ddoc_lang)")
  func indexInJavaScriptDesignDocument() throws {
    let t = try mangoStore()
    try t.store.put(
      #"{"_id":"_design/js","views":{"v":{"map":"function(doc){emit(doc._id)}"}}}"#, actor: "t")
    let error = #expect(throws: StoreError.self) {
      try createIndex(t.store, #"{"index": {"fields": ["a"]}, "ddoc": "js", "name": "a"}"#)
    }
    #expect(error?.error == "invalid_ddoc_lang" && error?.code == .badRequest)
    #expect(error?.reason == "Existing design doc has an invalid language: false")
    #expect(try t.store.get("_design/js")["views"]?["a"] == nil)
  }

  @Test("use_index, partial filters, execution stats, conflicts and _explain")
  func plannerAndExplain() throws {
    let t = try mangoStore()
    let store = t.store!
    try people(store, count: 20)
    try createIndex(
      store,
      #"{"index": {"fields": ["age"], "partial_filter_selector": {"type": "admin"}}, "ddoc": "adm", "name": "admins"}"#
    )
    try createIndex(store, #"{"index": {"fields": ["name"]}, "ddoc": "n", "name": "name"}"#)
    // A partial index is used only when named, and then holds only its documents.
    let plain = try find(store, #"{"selector": {"age": {"$gt": 0}}, "limit": 99}"#)
    #expect(plain.warning != nil)
    let named = try find(
      store,
      #"{"selector": {"age": {"$gt": 0}, "type": "admin"}, "use_index": ["adm", "admins"], "limit": 99}"#
    )
    #expect(named.warning == nil)
    #expect(
      Set(ids(named))
        == Set(
          ids(plain).filter { id in
            (try? store.get(id)["type"]) == .string("admin")
          }))
    let unusable = try find(store, #"{"selector": {"type": "user"}, "use_index": "n"}"#)
    #expect(unusable.warning?.contains("_design/n was not used") == true)
    #expect(throws: StoreError.self) {
      try find(store, #"{"selector": {"type": "user"}, "use_index": "n", "allow_fallback": false}"#)
    }
    let stats = try find(
      store, #"{"selector": {"name": "ann"}, "execution_stats": true}"#)
    #expect(stats.stats?.resultsReturned == 4)
    #expect(stats.stats?.docsExamined == 4)
    #expect(stats.json["execution_stats"]?["total_keys_examined"] == .number(4))
    let explain = try MangoQueries(store).explain(
      FindQuery(json(#"{"selector": {"name": "ann"}}"#)), databaseName: "db")
    #expect(explain["index"]?["name"] == .string("name"))
    #expect(explain["mrargs"]?["start_key"] == json(#"["ann"]"#))
    let scan = try MangoQueries(store).explain(
      FindQuery(json(#"{"selector": {"x": 1}}"#)), databaseName: "db")
    #expect(scan["index"]?["name"] == .string("_all_docs"))
    #expect(scan["index"]?["type"] == .string("special"))
    // conflicts: true adds _conflicts.
    try store.bulkDocs(
      [json(#"{"_id":"p001","_rev":"1-ffffffffffffffffffffffffffffffff","name":"ann","age":1}"#)],
      newEdits: false, actor: "t")
    let conflicted = try find(
      store, #"{"selector": {"_id": "p001"}, "conflicts": true}"#)
    #expect(conflicted.docs.first?["_conflicts"]?.arrayValue?.count == 1)
    let listing = try MangoQueries(store).indexListing()
    #expect(listing["total_rows"] == .number(3))
    #expect(listing["indexes"]?[0]?["name"] == .string("_all_docs"))
    #expect(
      listing["indexes"]?[1]?["def"]
        == json(
          #"{"fields":[{"age":"asc"}],"partial_filter_selector":{"type":"admin"}}"#))
  }

  @Test("bookmarks page through a database that changes between pages")
  func bookmarkPaging() throws {
    let t = try mangoStore()
    let store = t.store!
    try createIndex(store, #"{"index": {"fields": ["n"]}, "ddoc": "n", "name": "n"}"#)
    for i in stride(from: 0, to: 40, by: 2) {
      try store.put(#"{"_id":"d\#(i)","n":\#(i)}"#, actor: "t")
    }
    for indexed in [true, false] {
      let q = indexed ? #"{"n": {"$gte": 0}}"# : #"{"n": {"$gte": 0}, "_id": {"$gt": ""}}"#
      let sort = indexed ? #", "sort": ["n"]"# : ""
      var seen: [String] = []
      var bookmark = "nil"
      var round = 0
      while true {
        let r = try find(
          store,
          #"{"selector": \#(q), "limit": 7, "bookmark": "\#(bookmark)"\#(sort), "use_index": \#(indexed ? "\"n\"" : "[]")}"#
            .replacingOccurrences(of: #", "use_index": []"#, with: ""))
        if r.docs.isEmpty { break }
        seen += ids(r)
        bookmark = r.bookmark
        round += 1
        if round == 1 {
          // Between pages: one document before the bookmark, one after, one deleted after.
          try store.put(#"{"_id":"x\#(indexed)a","n":1}"#, actor: "t")
          try store.put(#"{"_id":"x\#(indexed)b","n":1001}"#, actor: "t")
          if indexed {
            let d = try store.get("d30")
            _ = try store.delete("d30", rev: d["_rev"]!.stringValue!, actor: "t")
          }
        }
      }
      #expect(Set(seen).count == seen.count, "no row twice")
      #expect(seen.contains("x\(indexed)b"), "a document after the bookmark is found")
      #expect(!seen.contains("x\(indexed)a") || !indexed, "one before it is not")
      if indexed { #expect(!seen.contains("d30")) }
    }
    #expect(throws: StoreError.self) {
      try find(store, #"{"selector": {"n": 1}, "bookmark": "!!!"}"#)
    }
  }

  @Test(
    "an index rebuilt by replay equals the live one; verify covers it; dropping removes its rows")
  func replayEqualsLive() throws {
    let t = try mangoStore()
    let store = t.store!
    var rng = SplitMix64(seed: 42)
    try createIndex(store, #"{"index": {"fields": ["k", "v"]}, "ddoc": "kv", "name": "kv"}"#)
    var revs: [String: String] = [:]
    for step in 0..<300 {
      let id = "doc\(Int.random(in: 0..<60, using: &rng))"
      if step == 150 {
        try createIndex(store, #"{"index": {"fields": ["v"]}, "ddoc": "v", "name": "v"}"#)
      }
      if let rev = revs[id], Int.random(in: 0..<5, using: &rng) == 0 {
        _ = try store.delete(id, rev: rev, actor: "t")
        revs[id] = nil
        continue
      }
      let k = Int.random(in: 0..<4, using: &rng)
      let v = [
        "\"s\(Int.random(in: 0..<9, using: &rng))\"", "\(Int.random(in: 0..<9, using: &rng))",
        "null", "[1]",
      ][k]
      let body = k == 3 ? #"{"k":\#(k)}"# : #"{"k":\#(k),"v":\#(v)}"#
      let r = try store.put(Array(body.utf8), id: id, rev: revs[id], actor: "t")
      revs[id] = r.rev
    }
    #expect(try store.verify("mango") == [])
    let before = try find(
      store, #"{"selector": {"v": {"$gt": null}}, "limit": 999, "use_index": "v"}"#)
    try store.rebuild("mango")
    let after = try find(
      store, #"{"selector": {"v": {"$gt": null}}, "limit": 999, "use_index": "v"}"#)
    #expect(ids(before) == ids(after))
    #expect(before.warning == nil && !before.docs.isEmpty)
    // Dropping the design document removes both its definition and its rows.
    let ddoc = try store.get("_design/v")
    _ = try store.delete("_design/v", rev: ddoc["_rev"]!.stringValue!, actor: "t")
    #expect(try MangoQueries(store).indexes().map(\.name) == ["kv"])
    let storage = try #require(store.storage(of: "mango"))
    let rows = try store.read { txn in try txn.count(of: storage["entries"]) }
    let kvRows = try find(
      store, #"{"selector": {"k": {"$gt": null}, "v": {"$exists": true}}, "limit": 999}"#)
    #expect(rows == kvRows.docs.count, "only the kv index has rows")
    #expect(try store.verify("mango") == [])
  }
}
