import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import JSON
import NIOCore
import Projections
import RevTree
import Testing

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
}
