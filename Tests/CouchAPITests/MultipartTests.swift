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

/// `multipart/related` document bodies and `multipart/mixed` `open_revs` answers, as CouchDB's
/// replicator exchanges documents with attachments.
@Suite struct MultipartTests {
  static let allBytes = [UInt8]((0...255).map { UInt8($0) })

  static func related(_ json: String, _ parts: [[UInt8]], boundary: String = "abc123")
    -> (HTTPFields, [UInt8])
  {
    var body = Array("--\(boundary)\r\nContent-Type: application/json\r\n\r\n\(json)".utf8)
    for part in parts {
      body += Array("\r\n--\(boundary)\r\nContent-Disposition: attachment\r\n\r\n".utf8) + part
    }
    body += Array("\r\n--\(boundary)--".utf8)
    var headers = HTTPFields()
    headers[.contentType] = "multipart/related; boundary=\"\(boundary)\""
    return (headers, body)
  }

  @Test("PUT multipart/related: follows attachments take the parts in order")
  func putRelated() async throws {
    try await withServer { client, _ in
      try await client.call(.put, "/db")
      let (headers, body) = Self.related(
        #"{"x":1,"_attachments":{"a.bin":{"follows":true,"content_type":"image/png","length":256},"b.txt":{"follows":true,"content_type":"text/plain","length":5}}}"#,
        [Self.allBytes, Array("hello".utf8)])
      let put = try await client.raw(.put, "/db/m", body, headers: headers)
      #expect(put.code == 201, "\(String(decoding: put.bytes, as: UTF8.self))")
      // The same revision as the same attachments sent inline.
      let inline = try await client.call(
        .put, "/db/i",
        #"{"x":1,"_attachments":{"a.bin":{"content_type":"image/png","data":"\#(Base64.encode(Self.allBytes))"},"b.txt":{"content_type":"text/plain","data":"aGVsbG8="}}}"#
      )
      #expect(put.json?["rev"] == inline["rev"])
      #expect(try await client.raw(.get, "/db/m/a.bin").bytes == Self.allBytes)
      #expect(try await client.raw(.get, "/db/m/b.txt").bytes == Array("hello".utf8))
      // A part of another length than the entry says, or too few parts: 400, nothing written.
      let (h2, short) = Self.related(
        #"{"_attachments":{"a":{"follows":true,"length":3}}}"#, [[1, 2]])
      let r2 = try await client.raw(.put, "/db/n", short, headers: h2)
      #expect(r2.code == 400 && r2.json?["reason"] == .string("attachment shorter than expected"))
      let (h3, none) = Self.related(#"{"_attachments":{"a":{"follows":true}}}"#, [])
      #expect(try await client.raw(.put, "/db/n", none, headers: h3).code == 400)
      #expect(try await client.call(.get, "/db/n").code == 404)
    }
  }

  @Test("open_revs as multipart/mixed, written back with new_edits=false: the same document")
  func mixedRoundTrip() async throws {
    try await withServer { client, _ in
      try await client.call(.put, "/db")
      try await client.call(.put, "/copy")
      let r1 = try await client.raw(
        .put, "/db/d/a.bin", Self.allBytes, headers: AttachmentRouteTests.type("image/png"))
      let rev1 = try #require(r1.json?["rev"]?.stringValue)
      let r2 = try await client.raw(
        .put, "/db/d/t.txt?rev=\(rev1)", Array(String(repeating: "text ", count: 50).utf8),
        headers: AttachmentRouteTests.type("text/plain"))
      let rev2 = try #require(r2.json?["rev"]?.stringValue)

      var accept = HTTPFields()
      accept[.accept] = "multipart/mixed"
      let mixed = try await client.raw(
        .get,
        "/db/d?open_revs=%5B%22\(rev2)%22,%222-\(String(repeating: "0", count: 32))%22%5D&revs=true",
        headers: accept)
      #expect(mixed.code == 200)
      let type = try #require(mixed.headers[.contentType])
      #expect(type.hasPrefix("multipart/mixed; boundary=\""))
      let outer = try #require(Multipart.boundary(of: type))
      let parts = try #require(Multipart.parse(mixed.bytes, boundary: outer))
      #expect(parts.count == 2)
      #expect(parts[1].headers["content-type"] == "application/json; error=\"true\"")
      let relatedType = try #require(parts[0].headers["content-type"])
      let innerBoundary = try #require(Multipart.boundary(of: relatedType))
      let inner = try #require(Multipart.parse(parts[0].body, boundary: innerBoundary))
      #expect(inner.count == 3)
      let doc = try JSONValue(parsing: inner[0].body)
      #expect(doc["_attachments"]?["a.bin"]?["follows"] == .bool(true))
      #expect(doc["_attachments"]?["t.txt"]?["encoding"] == .string("gzip"))
      // In the document's order (the attachment PUT last comes first), gzip sent as stored.
      #expect(doc["_attachments"]?.objectValue?.keys == ["t.txt", "a.bin"])
      #expect(inner[1].headers["content-disposition"] == "attachment; filename=\"t.txt\"")
      #expect(inner[1].headers["content-encoding"] == "gzip")
      #expect(inner[2].body == Self.allBytes && inner[2].headers["content-encoding"] == nil)

      // Written to another database as CouchDB's replicator writes it.
      var headers = HTTPFields()
      headers[.contentType] = relatedType
      let put = try await client.raw(
        .put, "/copy/d?new_edits=false", parts[0].body, headers: headers)
      #expect(put.code == 201, "\(String(decoding: put.bytes, as: UTF8.self))")
      let original = try await client.call(
        .get, "/db/d?attachments=true&att_encoding_info=true&revs=true")
      let copy = try await client.call(
        .get, "/copy/d?attachments=true&att_encoding_info=true&revs=true")
      #expect(copy.json == original.json)
      #expect(
        try await client.raw(.get, "/copy/d/t.txt").bytes
          == Array(String(repeating: "text ", count: 50).utf8))
    }
  }

  @Test(
    "Accept as mochiweb reads it",
    arguments: [
      (nil, "multipart/mixed", true), ("*/*", "multipart/related", true),
      ("application/json", "multipart/mixed", false),
      ("application/json, multipart/mixed", "multipart/mixed", true),
      ("multipart/*;q=0.5", "multipart/related", true),
      ("multipart/mixed;q=0", "multipart/mixed", false),
      ("Multipart/Mixed", "multipart/mixed", true),
      ("multipart/mixed;q=x", "multipart/mixed", false),
      ("text/html", "application/json", false),
    ] as [(String?, String, Bool)])
  func acceptHeader(header: String?, type: String, expected: Bool) {
    #expect(AcceptHeader.accepts(header, type) == expected)
  }

  /// A document with a binary and a gzip-stored text attachment; its revision.
  static func twoAttachments(_ client: any TestClientProtocol) async throws -> String {
    try await client.call(.put, "/db")
    let r1 = try await client.raw(
      .put, "/db/d/a.bin", Self.allBytes, headers: AttachmentRouteTests.type("image/png"))
    let rev1 = try #require(r1.json?["rev"]?.stringValue)
    let r2 = try await client.raw(
      .put, "/db/d/t.txt?rev=\(rev1)", Array("hello".utf8),
      headers: AttachmentRouteTests.type("text/plain"))
    return try #require(r2.json?["rev"]?.stringValue)
  }

  @Test("without Accept, open_revs and attachments=true answer multipart, as CouchDB's do")
  func absentAcceptIsMultipart() async throws {
    try await withServer { client, _ in
      let rev = try await Self.twoAttachments(client)
      let open = try await client.raw(.get, "/db/d?open_revs=all")
      #expect(open.headers[.contentType]?.hasPrefix("multipart/mixed; boundary=") == true)
      let outer = try #require(open.headers[.contentType].flatMap(Multipart.boundary(of:)))
      #expect(try #require(Multipart.parse(open.bytes, boundary: outer)).count == 1)
      #expect(open.headers[.contentLength] == String(open.bytes.count))
      // A document with no attachments is a JSON part.
      try await client.call(.put, "/db/plain", #"{"x":1}"#)
      let plain = try await client.raw(.get, "/db/plain?open_revs=all")
      let plainBoundary = try #require(plain.headers[.contentType].flatMap(Multipart.boundary(of:)))
      let plainParts = try #require(Multipart.parse(plain.bytes, boundary: plainBoundary))
      #expect(plainParts.first?.headers["content-type"] == "application/json")
      #expect(try JSONValue(parsing: plainParts[0].body)["x"]?.int == 1)

      // GET ?attachments=true: multipart/related, the JSON first, then the bytes as stored.
      let doc = try await client.raw(.get, "/db/d?attachments=true")
      let type = try #require(doc.headers[.contentType])
      #expect(type.hasPrefix("multipart/related; boundary="))
      #expect(doc.headers[.eTag] == "\"\(rev)\"")
      let docBoundary = try #require(Multipart.boundary(of: type))
      let parts = try #require(Multipart.parse(doc.bytes, boundary: docBoundary))
      #expect(parts.count == 3)
      let json = try JSONValue(parsing: parts[0].body)
      #expect(json["_attachments"]?["a.bin"]?["follows"] == .bool(true))
      #expect(json["_attachments"]?["t.txt"]?["encoding"] == .string("gzip"))
      #expect(parts[1].headers["content-encoding"] == "gzip")
      #expect(Gunzip.decode(parts[1].body) == Array("hello".utf8))
      #expect(parts[2].body == Self.allBytes)
      // With Accept: application/json, or without attachments=true: JSON.
      let inline = try await client.call(.get, "/db/d?attachments=true")
      #expect(inline["_attachments"]?["a.bin"]?["data"] == .string(Base64.encode(Self.allBytes)))
      let stubs = try await client.raw(.get, "/db/d")
      #expect(stubs.headers[.contentType] == "application/json")
      // Every attachment older than atts_since: the JSON alone, with stubs.
      let since = try await client.raw(
        .get, "/db/d?attachments=true&atts_since=%5B%22\(rev)%22%5D")
      #expect(since.headers[.contentType] == "application/json")
      #expect(try JSONValue(parsing: since.bytes)["_attachments"]?["a.bin"]?["stub"] == .bool(true))
      let head = try await client.raw(.head, "/db/d?attachments=true")
      #expect(head.code == 200 && head.bytes.isEmpty)
      #expect(head.headers[.contentLength] == String(doc.bytes.count))
    }
  }

  @Test("_bulk_get with Accept: multipart/mixed, as chttpd_db:bulk_get_ret_multipart")
  func bulkGetMultipart() async throws {
    try await withServer { client, _ in
      let rev = try await Self.twoAttachments(client)
      try await client.call(.put, "/db/plain", #"{"x":1}"#)
      var accept = HTTPFields()
      accept[.accept] = "multipart/mixed"
      accept[.contentType] = "application/json"
      let body = Array(
        #"{"docs":[{"id":"d","rev":"\#(rev)"},{"id":"plain"},{"id":"nope"},{"id":"d","rev":"9-00000000000000000000000000000000"}]}"#
          .utf8)
      let r = try await client.raw(.post, "/db/_bulk_get", body, headers: accept)
      #expect(r.code == 200)
      let type = try #require(r.headers[.contentType])
      #expect(type.hasPrefix("multipart/mixed; boundary=\"--"))
      let outer = try #require(Multipart.boundary(of: type))
      let parts = try #require(Multipart.parse(r.bytes, boundary: outer))
      #expect(parts.count == 4)
      #expect(parts[0].headers["x-doc-id"] == "d" && parts[0].headers["x-rev-id"] == rev)
      let innerType = try #require(parts[0].headers["content-type"])
      #expect(innerType.hasPrefix("multipart/related; boundary=--"))
      let innerBoundary = try #require(Multipart.boundary(of: innerType))
      let inner = try #require(Multipart.parse(parts[0].body, boundary: innerBoundary))
      #expect(inner.count == 3 && inner[2].body == Self.allBytes)
      #expect(parts[1].headers["content-type"] == "application/json")
      #expect(try JSONValue(parsing: parts[1].body)["_id"]?.stringValue == "plain")
      #expect(parts[2].headers["content-type"] == "application/json; error=\"true\"")
      #expect(try JSONValue(parsing: parts[2].body)["error"]?.stringValue == "not_found")
      #expect(parts[3].headers["content-type"] == "application/json; error=\"true\"")
      // Without Accept (taken as */*, which takes JSON): JSON, as CouchDB answers.
      var json = HTTPFields()
      json[.contentType] = "application/json"
      let plain = try await client.raw(.post, "/db/_bulk_get", body, headers: json)
      #expect(plain.headers[.contentType] == "application/json")
      #expect(plain.json?["results"]?.arrayValue?.count == 4)
    }
  }
}
