import CouchAPI
import CouchQuery
import CouchTestSupport
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import JSON
import Testing

/// Partitioned databases end to end, with the answers CouchDB 3.4.3 gave to the same requests
/// (`PUT /{db}?partitioned=true`, `partition:id` ids, `/{db}/_partition/{p}` and its
/// `_all_docs`, `_find` and views).
@Suite struct PartitionTests {
  @Test("ids, partition info, _all_docs, _find and views of a partitioned database")
  func partitioned() async throws {
    try await withServer { client, _ in
      #expect(try await client.call(.put, "/pdb?partitioned=true").code == 201)
      #expect(try await client.call(.get, "/pdb")["props"]?["partitioned"] == .bool(true))
      #expect(try await client.call(.put, "/_users?partitioned=true").code == 400)
      // Ids must name a partition.
      let bare = try await client.call(.put, "/pdb/nocolon", "{}")
      #expect(bare.code == 400 && bare.error == "illegal_docid")
      #expect(bare["reason"]?.stringValue == "Doc id must be of form partition:id")
      let empty = try await client.call(.put, "/pdb/:x", "{}")
      #expect(empty.code == 400 && empty.error == "illegal_partition")
      #expect(try await client.call(.put, "/pdb/_x:y", "{}").error == "illegal_docid")
      for (id, v) in [("a:1", 1), ("a:2", 2), ("b:1", 3), ("a:3", 4)] {
        #expect(try await client.call(.put, "/pdb/\(id)", #"{"v":\#(v)}"#).code == 201)
      }
      let rev = try await client.call(.get, "/pdb/a:3")["_rev"]!.stringValue!
      #expect(try await client.call(.delete, "/pdb/a:3?rev=\(rev)").code == 200)
      // _bulk_docs refuses the whole request for one bad id, writing nothing.
      let bulk = try await client.call(
        .post, "/pdb/_bulk_docs", #"{"docs":[{"_id":"x"},{"_id":"c:1"}]}"#)
      #expect(bulk.code == 400 && bulk.error == "illegal_docid")
      #expect(try await client.call(.get, "/pdb/c:1").code == 404)
      #expect(try await client.call(.post, "/pdb", #"{"v":1}"#).error == "illegal_docid")
      // A partition's counts.
      let info = try await client.call(.get, "/pdb/_partition/a")
      #expect(info["partition"]?.stringValue == "a")
      #expect(info["doc_count"]?.int == 2 && info["doc_del_count"]?.int == 1)
      #expect(try await client.call(.get, "/pdb/_partition/_a").error == "illegal_partition")
      #expect(try await client.call(.post, "/pdb/_partition/a", "{}").code == 405)
      // _all_docs within the partition, counted among its own documents.
      let all = try await client.call(.get, "/pdb/_partition/a/_all_docs?skip=1")
      #expect(all["total_rows"]?.int == 2 && all["offset"]?.int == 1)
      #expect(all["rows"]?.arrayValue?.compactMap { $0["id"]?.stringValue } == ["a:2"])
      let down = try await client.call(.get, "/pdb/_partition/a/_all_docs?descending=true")
      #expect(down["rows"]?.arrayValue?.compactMap { $0["id"]?.stringValue } == ["a:2", "a:1"])
      #expect(
        try await client.call(.get, "/pdb/_partition/a/_all_docs?partition=b").code == 400)
      #expect(try await client.call(.get, "/pdb/_partition/a/_changes").code == 404)
      // _find within the partition.
      let found = try await client.call(
        .post, "/pdb/_partition/a/_find", #"{"selector":{"v":{"$gt":0}}}"#)
      #expect(found["docs"]?.arrayValue?.compactMap { $0["_id"]?.stringValue } == ["a:1", "a:2"])
      // Views: a partitioned design document needs a partition; a global one refuses it.
      #expect(
        try await client.call(
          .put, "/pdb/_design/d",
          #"{"views":{"v":{"map":"function(doc){emit(doc.v, 1)}","reduce":"_count"}}}"#
        ).code == 201)
      #expect(
        try await client.call(
          .put, "/pdb/_design/g",
          #"{"options":{"partitioned":false},"views":{"v":{"map":"function(doc){emit(doc.v, 1)}"}}}"#
        ).code == 201)
      let mandatory = try await client.call(.get, "/pdb/_design/d/_view/v")
      #expect(mandatory.code == 400 && mandatory.error == "query_parse_error")
      let counted = try await client.call(.get, "/pdb/_partition/a/_design/d/_view/v")
      #expect(counted["rows"]?[0]?["value"]?.int == 2)
      let mapped = try await client.call(.get, "/pdb/_partition/b/_design/d/_view/v?reduce=false")
      #expect(mapped["rows"]?.arrayValue?.compactMap { $0["id"]?.stringValue } == ["b:1"])
      #expect(try await client.call(.get, "/pdb/_design/g/_view/v")["total_rows"]?.int == 3)
      // Saying so (`options.partitioned: true`, as CouchDB's suite writes them) is the same.
      #expect(
        try await client.call(
          .put, "/pdb/_design/e",
          #"{"options":{"partitioned":true},"views":{"v":{"map":"function(doc){emit(doc.v, 1)}"}}}"#
        ).code == 201)
      let explicit = try await client.call(.get, "/pdb/_partition/a/_design/e/_view/v")
      #expect(explicit["rows"]?.arrayValue?.count == 2)
      #expect(try await client.call(.get, "/pdb/_partition/a/_design/g/_view/v").code == 400)
      // A database that is not partitioned.
      #expect(try await client.call(.put, "/npdb").code == 201)
      let notPartitioned = try await client.call(
        .put, "/npdb/_design/p", #"{"options":{"partitioned":true},"views":{}}"#)
      #expect(notPartitioned.code == 400 && notPartitioned.error == "invalid_design_doc")
      #expect(
        try await client.call(.get, "/npdb/_partition/a")["reason"]?.stringValue
          == "database is not partitioned")
      #expect(try await client.call(.get, "/npdb/_all_docs?partition=a").code == 400)
      #expect(try await client.call(.put, "/npdb/plain", "{}").code == 201)
    }
  }

  @Test(
    "couchdb/max_partition_size: a full partition refuses growing local edits (403 partition_overflow) and takes deletions, shrinking edits, design documents and replicated revisions; other partitions and a raised limit write"
  )
  func partitionSizeLimit() async throws {
    try await withServer { client, _ in
      #expect(
        try await client.call(.get, "/_node/_local/_config/couchdb/max_partition_size").json
          == .string("10737418240"))
      #expect(try await client.call(.put, "/pdb?partitioned=true").code == 201)
      #expect(
        try await client.call(
          .put, "/_node/_local/_config/couchdb/max_partition_size", #""10240""#
        ).code == 200)
      // _bulk_get and _purge check ids as every write does (CouchDB's partition_crud_test).
      let get = try await client.call(
        .post, "/pdb/_bulk_get", #"{"docs":[{"id":"my-partition-post"}]}"#)
      #expect(
        get.json
          == json(
            #"{"results":[{"id":"my-partition-post","docs":[{"error":{"id":"my-partition-post","rev":null,"error":"illegal_docid","reason":"Doc id must be of form partition:id"}}]}]}"#
          ))
      let purge = try await client.call(
        .post, "/pdb/_purge", #"{"no_partition":["1-967a00dff5e02add41819138abb3284d"]}"#)
      #expect(purge.code == 400 && purge.error == "illegal_docid")
      let padding = String(repeating: " ", count: 1023) + "0"
      let docs = (1...15).map {
        #"{"_id":"foo:\#(String(10000 + $0).dropFirst())","value":"\#(padding)"}"#
      }
      let filled = try await client.call(
        .post, "/pdb/_bulk_docs", #"{"docs":[\#(docs.joined(separator: ","))]}"#)
      #expect(filled.code == 201)
      #expect(
        (try await client.call(.get, "/pdb/_partition/foo")["sizes"]?["external"]?.int ?? 0)
          >= 10240)
      let post = try await client.call(.post, "/pdb", #"{"_id":"foo:bar","value":"stuff"}"#)
      #expect(post.code == 403 && post.error == "partition_overflow")
      #expect(post["reason"] == .string("Partition limit exceeded due to update on 'foo:bar'"))
      #expect(try await client.call(.put, "/pdb/foo:bar", #"{"value":"stuff"}"#).code == 403)
      let mixed = try await client.call(
        .post, "/pdb/_bulk_docs", #"{"docs":[{"_id":"foo:bar"},{"_id":"baz:bang"}]}"#)
      #expect(mixed.code == 201)
      #expect(mixed.json?[0]?["error"] == .string("partition_overflow"))
      #expect(mixed.json?[1]?["ok"] == .bool(true))
      // Still readable; a shrinking edit and a deletion pass.
      let one = try await client.call(.get, "/pdb/foo:0001")
      #expect(one.code == 200)
      let shrunk = try await client.call(
        .put, "/pdb/foo:0001", #"{"_rev":"\#(one["_rev"]?.stringValue ?? "")","value":""}"#)
      #expect(shrunk.code == 201)
      let two = try await client.call(.get, "/pdb/foo:0002")
      #expect(
        try await client.call(.delete, "/pdb/foo:0002?rev=\(two["_rev"]?.stringValue ?? "")").code
          == 200)
      // Other partitions, design documents and replicated revisions are not limited.
      #expect(
        try await client.call(.post, "/pdb", #"{"_id":"bar:foo","value":"stuff"}"#).code == 201)
      #expect(try await client.call(.put, "/pdb/_design/foo", #"{"value":"stuff"}"#).code == 201)
      let replicated = try await client.call(
        .put, "/pdb/foo:bar?new_edits=false",
        #"{"_rev":"1-23202479633c2b380f79507a776743d5","value":"stuff"}"#)
      #expect(replicated.code == 201)
      // A higher limit lets the partition grow; back to the default (DELETE), too.
      #expect(
        try await client.call(
          .put, "/_node/_local/_config/couchdb/max_partition_size", #""10240000""#
        ).code == 200)
      #expect(try await client.call(.post, "/pdb", #"{"_id":"foo:more","value":"x"}"#).code == 201)
      #expect(
        try await client.call(
          .put, "/_node/_local/_config/couchdb/max_partition_size", #""10240""#
        ).code == 200)
      #expect(try await client.call(.post, "/pdb", #"{"_id":"foo:baz","value":"x"}"#).code == 403)
      #expect(
        try await client.call(.delete, "/_node/_local/_config/couchdb/max_partition_size").code
          == 200)
      #expect(try await client.call(.post, "/pdb", #"{"_id":"foo:baz","value":"x"}"#).code == 201)
    }
  }
}
