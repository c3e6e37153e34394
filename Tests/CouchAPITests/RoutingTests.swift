import CouchTestSupport
import Formats
import HTTPTypes
import JSON
import Log
import Projections
import Query
import TestSupport
import Testing
import Wiki

@testable import CouchAPI
@testable import Replication

@Suite struct RoutingTests {
  @Test("every server and database endpoint the router knows has a rule in the dispatch tables")
  func everyEndpointHasARule() {
    for endpoint in CouchRoute.DatabaseEndpoint.allCases {
      #expect(CouchServer.databaseEndpoints[endpoint] != nil, "\(endpoint)")
    }
    #expect(CouchServer.databaseEndpoints[.compact]?.role == .databaseAdmin)
    #expect(CouchServer.databaseEndpoints[.bulkDocs]?.methods == [.post])
    for endpoint in CouchRoute.ServerEndpoint.allCases {
      #expect(CouchServer.serverEndpoints[endpoint] != nil, "\(endpoint)")
    }
    #expect(CouchServer.serverEndpoints[.activeTasks]?.role == .serverAdmin)
  }

  @Test("paths: segments decoded one by one; trailing slash ignored; _design ids span two")
  func routes() throws {
    #expect(try CouchRoute.parse("/") == .root)
    #expect(try CouchRoute.parse("/_all_dbs") == .allDatabases)
    #expect(try CouchRoute.parse("/wiki") == .database("wiki"))
    #expect(try CouchRoute.parse("/wiki/") == .database("wiki"))
    #expect(try CouchRoute.parse("/a%2Fb") == .database("a/b"))
    #expect(try CouchRoute.parse("/wiki/_changes") == .databaseEndpoint("wiki", .changes))
    #expect(
      try CouchRoute.parse("/wiki/w1%3AHome%2FSub") == .document(db: "wiki", id: "w1:Home/Sub"))
    #expect(try CouchRoute.parse("/wiki/_local/x%2Fy") == .local(db: "wiki", id: "x/y"))
    #expect(try CouchRoute.parse("/wiki/_design/app") == .document(db: "wiki", id: "_design/app"))
    #expect(try CouchRoute.parse("/wiki/_design%2Fapp") == .document(db: "wiki", id: "_design/app"))
    #expect(
      try CouchRoute.parse("/wiki/doc/att") == .attachment(db: "wiki", id: "doc", name: "att"))
    #expect(
      try CouchRoute.parse("/wiki/doc/a/b%2Fc/%C3%BC")
        == .attachment(db: "wiki", id: "doc", name: "a/b/c/ü"))
    #expect(
      try CouchRoute.parse("/wiki/_design/d/logo.png")
        == .attachment(db: "wiki", id: "_design/d", name: "logo.png"))
    #expect(try CouchRoute.parse("/wiki/_missing_revs") == .databaseEndpoint("wiki", .missingRevs))
    #expect(try CouchRoute.parse("/_dbs_info") == .databasesInfo)
    #expect(try CouchRoute.parse("/_node/_local") == .node("_local"))
    #expect(
      try CouchRoute.parse("/_node/_local/_stats/couchdb")
        == .nodeStats(node: "_local", path: ["couchdb"]))
    #expect(throws: CouchError.self) { try CouchRoute.parse("/wiki/%E2%28") }
    #expect(throws: CouchError.self) { try CouchRoute.parse("/wiki/%2") }
  }

  @Test("query strings: percent-decoding, plus as space, first value wins, typed readers")
  func query() throws {
    let q = try QueryParameters("a=1&b=x%20y+z&a=2&flag&since=%2212%22&n=-1&t=true")
    #expect(q["a"] == "1")
    #expect(q["b"] == "x y z")
    #expect(q["flag"] == "")
    #expect(try q.bool("t"))
    #expect(throws: CouchError.self) { try q.bool("a") }
    #expect(q.flag("t") && !q.flag("a") && !q.flag("missing"))
    let cased = try QueryParameters("x=True&y=FALSE&Since=3&since=4")
    #expect(try cased.bool("x") && !cased.bool("y"))
    #expect(!cased.flag("x"))
    #expect(cased.last(ofAny: ["since"]) == "4")
    #expect(throws: CouchError.self) { try q.int("n") }
    #expect(try q.seq("since") { .start } == LogPosition(12))
    #expect(QueryParameters.parseSeq("34-g1AAAA") == LogPosition(34))
    #expect(QueryParameters.parseSeq("x") == nil)
    #expect(PercentDecoding.encode("a b/c:d") == "a%20b%2Fc%3Ad")
  }
}

@Suite struct ChangesHubTests {
  @Test("a document event wakes the unfiltered waiters, and the filtered ones it concerns")
  func wakeIndex() async throws {
    let dir = TestDirectory()
    let store = try dir.data.create("db")
    let hub = ChangesHub(store: store) {}
    async let any = hub.wait(after: 0, filter: .any)
    async let doc = hub.wait(after: 0, filter: .docIDs(["w1:Home", "x"]))
    async let wiki = hub.wait(after: 0, filter: .named(.wiki("w1")))
    async let otherWiki = hub.wait(after: 0, filter: .named(.wiki("w10")))
    async let later = hub.wait(after: 5, filter: .any)
    #expect(try await eventually(60) { hub.waiterCount == 5 })
    try store.put(#"{"_id":"w1:Home"}"#, actor: "test")
    #expect(await any)
    #expect(await doc)
    #expect(await wiki)
    try store.put(#"{"_id":"w10"}"#, actor: "test")
    #expect(await otherWiki)
    hub.close()
    #expect(await later == false)
    #expect(await hub.wait(after: 0, filter: .any) == false)
  }
}
