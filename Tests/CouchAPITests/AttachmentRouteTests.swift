import CouchQuery
import CouchTestSupport
import Formats
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import JSON
import NIOCore
import Projections
import Query
import RevTree
import Testing

@testable import CouchAPI
@testable import Replication

/// A response with its raw body.
struct RawResponse {
  let status: HTTPResponse.Status
  let headers: HTTPFields
  let bytes: [UInt8]
  var code: Int { status.code }
  var json: JSONValue? { try? JSONValue(parsing: bytes) }
}

extension TestClientProtocol {
  func raw(
    _ method: HTTPRequest.Method, _ uri: String, _ body: [UInt8]? = nil,
    headers: HTTPFields = [:]
  ) async throws -> RawResponse {
    try await execute(
      uri: uri, method: method, headers: headers, body: body.map { ByteBuffer(bytes: $0) }
    ) { response in
      RawResponse(
        status: response.status, headers: response.headers,
        bytes: Array(response.body.readableBytesView))
    }
  }
}

/// The standalone attachment API and attachments in every read, over HTTP.
@Suite struct AttachmentRouteTests {
  static let allBytes = [UInt8]((0...255).map { UInt8($0) })

  static func type(_ t: String, _ extra: HTTPFields = [:]) -> HTTPFields {
    var h = extra
    h[.contentType] = t
    return h
  }

  @Test("PUT/GET/HEAD/DELETE /db/doc/att: binary, empty, names with / and unicode")
  func standalone() async throws {
    try await withServer { client, _ in
      try await client.call(.put, "/db")
      // No rev: a new document holding the attachment.
      let put = try await client.raw(
        .put, "/db/doc/dir/%C3%BCn%C3%AF.bin", Self.allBytes, headers: Self.type("image/png"))
      #expect(put.code == 201)
      let rev1 = try #require(put.json?["rev"]?.stringValue)
      #expect(put.json?["id"] == .string("doc") && put.json?["ok"] == .bool(true))
      #expect(put.headers[.location] == "http://localhost/db/doc/dir%2F%C3%BCn%C3%AF.bin")
      // The same revision id as an inline upload of the same attachment.
      let expected = RevisionDigest.revision(
        parent: nil, deleted: false, body: .object(JSONObject()),
        attachments: [
          .init(
            name: "dir/ünï.bin", contentType: .string("image/png"),
            md5: MD5.hash(Self.allBytes).bytes)
        ])
      #expect(rev1 == expected.description)

      let get = try await client.raw(.get, "/db/doc/dir/%C3%BCn%C3%AF.bin")
      #expect(get.code == 200 && get.bytes == Self.allBytes)
      #expect(get.headers[.contentType] == "image/png")
      #expect(get.headers[.eTag] == "\"\(Base64.encode(MD5.hash(Self.allBytes).bytes))\"")
      #expect(get.headers[.acceptRanges] == "bytes")
      let head = try await client.raw(.head, "/db/doc/dir%2F%C3%BCn%C3%AF.bin")
      #expect(head.code == 200 && head.bytes.isEmpty && head.headers[.contentLength] == "256")
      var ifNoneMatch = HTTPFields()
      ifNoneMatch[.ifNoneMatch] = get.headers[.eTag]!
      #expect(
        try await client.raw(.get, "/db/doc/dir/%C3%BCn%C3%AF.bin", headers: ifNoneMatch).code
          == 304)

      // Without rev on an existing document: a conflict. With it: a second, empty attachment.
      #expect(try await client.raw(.put, "/db/doc/e", []).code == 409)
      let put2 = try await client.raw(.put, "/db/doc/e?rev=\(rev1)", [])
      #expect(put2.code == 201)
      let rev2 = try #require(put2.json?["rev"]?.stringValue)
      let empty = try await client.raw(.get, "/db/doc/e")
      #expect(empty.code == 200 && empty.bytes.isEmpty)
      #expect(empty.headers[.contentType] == "application/octet-stream")
      let doc = try await client.call(.get, "/db/doc")
      #expect(doc["_attachments"]?.objectValue?.keys == ["e", "dir/ünï.bin"])
      #expect(doc["_attachments"]?["dir/ünï.bin"]?["revpos"] == .number(1))
      #expect(doc["_attachments"]?["e"]?["revpos"] == .number(2))

      // DELETE: 200, gone; the old revision still has it.
      let del = try await client.call(.delete, "/db/doc/dir/%C3%BCn%C3%AF.bin?rev=\(rev2)")
      #expect(del.code == 200 && del["ok"] == .bool(true))
      let gone = try await client.call(.get, "/db/doc/dir/%C3%BCn%C3%AF.bin")
      #expect(gone.code == 404 && gone["reason"] == .string("Document is missing attachment"))
      let old = try await client.raw(.get, "/db/doc/dir/%C3%BCn%C3%AF.bin?rev=\(rev1)")
      #expect(old.code == 200 && old.bytes == Self.allBytes)
      let rev3 = try #require(del["rev"]?.stringValue)
      #expect(try await client.call(.delete, "/db/doc/nothing?rev=\(rev3)").code == 404)
      #expect(try await client.call(.get, "/nodb/doc/x").code == 404)
      #expect(try await client.call(.post, "/db/doc/e", "{}").code == 405)
      // A revision that does not exist: 409 not_found missing_rev, as CouchDB.
      let stale = try await client.raw(
        .put, "/db/doc/x?rev=9-\(String(repeating: "a", count: 32))", [1])
      #expect(stale.code == 409 && stale.json?["reason"] == .string("missing_rev"))
      #expect(try await client.raw(.put, "/db/doc/_x?rev=\(rev3)", [1]).code == 400)
    }
  }

  @Test("text is stored gzip with CouchDB's digest and sent decoded unless gzip is accepted")
  func gzip() async throws {
    try await withServer { client, _ in
      try await client.call(.put, "/db")
      let text = Array("hello".utf8)
      let put = try await client.raw(.put, "/db/t/a.txt", text, headers: Self.type("text/plain"))
      #expect(put.code == 201)
      let gz = AttachmentEncoding.gzip(text)
      let doc = try await client.call(.get, "/db/t?att_encoding_info=true")
      let stub = try #require(doc["_attachments"]?["a.txt"])
      #expect(
        stub.serialized()
          == Array(
            #"{"content_type":"text/plain","revpos":1,"digest":"md5-\#(Base64.encode(MD5.hash(gz).bytes))","length":5,"stub":true,"encoding":"gzip","encoded_length":25}"#
              .utf8))
      let plain = try await client.raw(.get, "/db/t/a.txt")
      #expect(plain.bytes == text && plain.headers[.contentEncoding] == nil)
      #expect(plain.headers[.acceptRanges] == "none")
      var accept = HTTPFields()
      accept[.acceptEncoding] = "deflate, gzip;q=0.8"
      let encoded = try await client.raw(.get, "/db/t/a.txt", headers: accept)
      #expect(encoded.bytes == gz && encoded.headers[.contentEncoding] == "gzip")
      accept[.acceptEncoding] = "gzip;q=0"
      #expect(try await client.raw(.get, "/db/t/a.txt", headers: accept).bytes == text)
      let inline = try await client.call(.get, "/db/t?attachments=true")
      #expect(inline["_attachments"]?["a.txt"]?["data"] == .string(Base64.encode(text)))

      // Sent gzip: stored as sent, CouchDB's lengths (the gzip length twice), served either way.
      var encodedHeaders = Self.type("text/plain")
      encodedHeaders[.contentEncoding] = "gzip"
      let rev = try #require(try await client.call(.get, "/db/t")["_rev"]?.stringValue)
      let sent = AttachmentEncoding.gzip(Array("sent gzip".utf8), level: 1)
      #expect(
        try await client.raw(.put, "/db/t/g.txt?rev=\(rev)", sent, headers: encodedHeaders).code
          == 201)
      let g = try await client.call(.get, "/db/t?att_encoding_info=true")["_attachments"]?["g.txt"]
      #expect(g?["length"] == .number(JSONNumber(Int64(sent.count))))
      #expect(g?["encoding"] == .string("gzip"))
      #expect(g?["digest"] == .string("md5-" + Base64.encode(MD5.hash(sent).bytes)))
      #expect(try await client.raw(.get, "/db/t/g.txt").bytes == Array("sent gzip".utf8))
      accept[.acceptEncoding] = "gzip"
      #expect(try await client.raw(.get, "/db/t/g.txt", headers: accept).bytes == sent)
      encodedHeaders[.contentEncoding] = "br"
      let refused = try await client.raw(.put, "/db/t/b.txt", sent, headers: encodedHeaders)
      #expect(refused.code == 415 && refused.json?["error"] == .string("bad_content_type"))
    }
  }

  @Test("a document with many attachments goes out whole as multipart, each part in order")
  func manyAttachmentsMultipart() async throws {
    try await withServer { client, _ in
      try await client.call(.put, "/db")
      let count = 500
      let boundary = "b0undary"
      var stubs: [String] = []
      for i in 0..<count {
        stubs.append(#""a\#(i)":{"follows":true,"content_type":"text/plain","length":1}"#)
      }
      var body = Array(
        "--\(boundary)\r\nContent-Type: application/json\r\n\r\n{\"_attachments\":{\(stubs.joined(separator: ","))}}"
          .utf8)
      for i in 0..<count {
        body += Array("\r\n--\(boundary)\r\n\r\n".utf8) + [UInt8(ascii: "a") + UInt8(i % 26)]
      }
      body += Array("\r\n--\(boundary)--".utf8)
      let put = try await client.raw(
        .put, "/db/many", body, headers: Self.type("multipart/related; boundary=\"\(boundary)\""))
      #expect(put.code == 201)
      var accept = HTTPFields()
      accept[.accept] = "multipart/related"
      let got = try await client.raw(.get, "/db/many?attachments=true", headers: accept)
      #expect(got.code == 200)
      let text = String(decoding: got.bytes, as: UTF8.self)
      // Every attachment's part, named and in the order of the JSON.
      var at = text.startIndex
      for i in 0..<count {
        guard let found = text[at...].range(of: #"filename="a\#(i)""#) else {
          Issue.record("part a\(i) missing or out of order")
          break
        }
        at = found.upperBound
      }
      var mixed = HTTPFields()
      mixed[.accept] = "multipart/mixed"
      let all = try await client.raw(.get, "/db/many?open_revs=all", headers: mixed)
      #expect(all.code == 200)
      #expect(String(decoding: all.bytes, as: UTF8.self).contains(#"filename="a\#(count - 1)""#))
    }
  }

  @Test("a gzip attachment that inflates past 64 MiB is not inlined in JSON: 413, the server lives")
  func gzipBombInline() async throws {
    try await withServer { client, _ in
      try await client.call(.put, "/db")
      var headers = Self.type("text/plain")
      headers[.contentEncoding] = "gzip"
      let bomb = AttachmentEncoding.gzip([UInt8](repeating: 0, count: (64 << 20) + 1), level: 9)
      #expect(bomb.count < 1 << 20)
      #expect(try await client.raw(.put, "/db/b/b.txt", bomb, headers: headers).code == 201)
      let inline = try await client.call(.get, "/db/b?attachments=true")
      #expect(inline.code == 413 && inline.error == "too_large", "\(inline.text.prefix(200))")
      // As multipart, and alone, it is streamed as stored.
      var multipart = HTTPFields()
      multipart[.accept] = "multipart/related"
      let parts = try await client.raw(.get, "/db/b?attachments=true", headers: multipart)
      #expect(parts.code == 200)
      #expect(try await client.call(.get, "/_up").code == 200)
    }
  }

  @Test("Range on identity attachments; Content-MD5 checked")
  func rangeAndMD5() async throws {
    try await withServer { client, _ in
      try await client.call(.put, "/db")
      var md5 = HTTPFields()
      md5[Self.contentMD5] = Base64.encode(MD5.hash([1, 2, 3]).bytes)
      let bad = try await client.raw(.put, "/db/r/a.bin", Self.allBytes, headers: md5)
      #expect(bad.code == 400 && bad.json?["error"] == .string("content_md5_mismatch"))
      md5[Self.contentMD5] = Base64.encode(MD5.hash(Self.allBytes).bytes)
      #expect(try await client.raw(.put, "/db/r/a.bin", Self.allBytes, headers: md5).code == 201)
      for (range, slice) in [
        ("bytes=10-19", 10...19), ("bytes=-5", 251...255), ("bytes=250-", 250...255),
        ("bytes=250-999", 250...255),
      ] {
        var h = HTTPFields()
        h[.range] = range
        let r = try await client.raw(.get, "/db/r/a.bin", headers: h)
        #expect(r.code == 206, "\(range)")
        #expect(r.bytes == Array(Self.allBytes[slice]), "\(range)")
        #expect(r.headers[.contentRange] == "bytes \(slice.lowerBound)-\(slice.upperBound)/256")
      }
      var h = HTTPFields()
      h[.range] = "bytes=300-"
      #expect(try await client.raw(.get, "/db/r/a.bin", headers: h).code == 416)
      h[.range] = "bytes=0-"
      #expect(try await client.raw(.get, "/db/r/a.bin", headers: h).code == 200)

      // Several ranges: multipart/byteranges, in the order asked (chttpd_db:send_ranges_multipart).
      h[.range] = "bytes=250-,0-1,-3"
      let multi = try await client.raw(.get, "/db/r/a.bin", headers: h)
      #expect(multi.code == 206)
      let type = try #require(multi.headers[.contentType])
      #expect(type.hasPrefix("multipart/byteranges; boundary=\""))
      let boundary = try #require(Multipart.boundary(of: type))
      let parts = try #require(Multipart.parse(multi.bytes, boundary: boundary))
      #expect(parts.map(\.body) == [Array(Self.allBytes[250...]), [0, 1], [253, 254, 255]])
      #expect(
        parts.map { $0.headers["content-range"] ?? "" } == [
          "bytes 250-255/256", "bytes 0-1/256", "bytes 253-255/256",
        ])
      #expect(parts.allSatisfy { $0.headers["content-type"] == "application/octet-stream" })
      #expect(multi.headers[.contentLength] == String(multi.bytes.count))
      // Ten or more: the whole attachment; one ending before it starts: 416; `0-` among them:
      // the whole attachment.
      h[.range] = "bytes=" + (0..<10).map { "\($0)-\($0)" }.joined(separator: ",")
      let ten = try await client.raw(.get, "/db/r/a.bin", headers: h)
      #expect(ten.code == 200 && ten.bytes == Self.allBytes)
      h[.range] = "bytes=1-2,5-3"
      #expect(try await client.raw(.get, "/db/r/a.bin", headers: h).code == 416)
      h[.range] = "bytes=1-2,0-"
      #expect(try await client.raw(.get, "/db/r/a.bin", headers: h).code == 200)
    }
  }

  static let contentMD5 = HTTPField.Name("Content-MD5")!

  @Test(
    "attachments in open_revs, _bulk_get, _all_docs, _changes; inline PUT; compaction keeps blobs")
  func reads() async throws {
    try await withServer { client, dir in
      try await client.call(.put, "/db")
      let put = try await client.call(
        .put, "/db/d",
        #"{"x":1,"_attachments":{"a":{"content_type":"image/png","data":"\#(Base64.encode(Self.allBytes))"}}}"#
      )
      let rev1 = try #require(put["rev"]?.stringValue)
      let put2 = try await client.call(
        .put, "/db/d",
        #"{"_rev":"\#(rev1)","x":2,"_attachments":{"a":{"stub":true},"b":{"data":"AQID"}}}"#)
      let rev2 = try #require(put2["rev"]?.stringValue)

      let open = try await client.call(.get, "/db/d?open_revs=all&attachments=true")
      #expect(
        open.json?[0]?["ok"]?["_attachments"]?["a"]?["data"]
          == .string(Base64.encode(Self.allBytes)))
      let since = try await client.call(.get, "/db/d?atts_since=%5B%22\(rev1)%22%5D")
      #expect(since["_attachments"]?["a"]?["stub"] == .bool(true))
      #expect(since["_attachments"]?["b"]?["data"] == .string("AQID"))

      let bulk = try await client.call(
        .post, "/db/_bulk_get", #"{"docs":[{"id":"d","rev":"\#(rev2)","atts_since":["\#(rev1)"]}]}"#
      )
      let bdoc = bulk["results"]?[0]?["docs"]?[0]?["ok"]
      #expect(bdoc?["_attachments"]?["a"]?["stub"] == .bool(true))
      #expect(bdoc?["_attachments"]?["b"]?["data"] == .string("AQID"))

      let all = try await client.call(.get, "/db/_all_docs?include_docs=true")
      #expect(all["rows"]?[0]?["doc"]?["_attachments"]?["b"]?["stub"] == .bool(true))
      let changes = try await client.call(.get, "/db/_changes?include_docs=true")
      #expect(changes["results"]?[0]?["doc"]?["_attachments"]?["b"]?["length"] == .number(3))
      let withData = try await client.call(.get, "/db/_changes?include_docs=true&attachments=true")
      #expect(withData["results"]?[0]?["doc"]?["_attachments"]?["b"]?["data"] == .string("AQID"))

      // COPY carries the attachments.
      var dest = HTTPFields()
      dest[HTTPField.Name("Destination")!] = "copy"
      #expect(
        try await client.call(HTTPRequest.Method("COPY")!, "/db/d", headers: dest).code == 201)
      #expect(try await client.raw(.get, "/db/copy/b").bytes == [1, 2, 3])
      // ... keeping their revpos (CouchDB's copy keeps attachments already on disk), so the
      // copy's revision id is the one an edit with the same stubs would have.
      let original = try await client.call(.get, "/db/d")
      let copied = try await client.call(.get, "/db/copy")
      #expect(copied["_attachments"] == original["_attachments"])
      #expect(copied["_attachments"]?["a"]?["revpos"] == .number(1))
      #expect(copied["_rev"]?.stringValue?.hasPrefix("1-") == true)

      // Compaction rewrites data.mdb; the blobs stay and every revision still reads.
      _ = try dir.data.compact("db")
      #expect(try await client.raw(.get, "/db/d/a?rev=\(rev1)").bytes == Self.allBytes)
      #expect(try await client.raw(.get, "/db/d/b").bytes == [1, 2, 3])

      // Deleting the database removes its blobs with it.
      let blobs = dir.data.directory(of: "db") + "/attachments"
      #expect(FileManager.default.fileExists(atPath: blobs))
      #expect(try await client.call(.delete, "/db").code == 200)
      #expect(!FileManager.default.fileExists(atPath: blobs))
    }
  }

  @Test("an attachment larger than the server accepts is 413, nothing written")
  func tooLarge() async throws {
    var options = CouchServerOptions.standard
    options.maxAttachmentBytes = 1000
    try await withServer(options: options) { client, dir in
      try await client.call(.put, "/db")
      let big = try await client.raw(.put, "/db/big/a.bin", [UInt8](repeating: 7, count: 2000))
      #expect(big.code == 413 && big.json?["error"] == .string("attachment_too_large"))
      #expect(big.json?["reason"] == .string("a.bin"))
      #expect(try await client.call(.get, "/db/big").code == 404)
      #expect(
        !FileManager.default.fileExists(atPath: dir.data.directory(of: "db") + "/attachments"))
    }
  }
}
